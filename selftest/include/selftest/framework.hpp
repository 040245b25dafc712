// The node side of self-test (the kernel's "sfw"): the session a console makes on this
// node and the framework services that answer it — make and remove session, the
// session query (DEBUG), the counters (STAT), tests added to batches (TEST) and batches
// run, stopped and queried (BATCH) — with the kernel's status codes
// (docs/design/selftest-wire.md §4.3-4.7). A client test runs `concurrency` units per
// destination, each a sequence of `loop` ping or brw RPCs.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <selftest/rpc.hpp>

namespace lnet::selftest {

class Framework {
 public:
  // A session ends `session_timeout` after the last framework RPC (the kernel's 100 s;
  // 0: never).
  explicit Framework(RpcNode& rpc, std::chrono::seconds session_timeout = std::chrono::seconds(100));
  // Stops serving, stops every test (aborting its RPCs) and waits for them.
  ~Framework();
  Framework(const Framework&) = delete;
  Framework& operator=(const Framework&) = delete;

  // Serves the framework services on portal 51.
  Status start(unsigned buffers = 16);

  struct SessionInfo {
    SessionId sid;
    std::string name;
    std::uint32_t feats = 0;
  };
  std::optional<SessionInfo> session();
  // Framework requests answered with an error status (a stale or unknown session id, a
  // test or batch refused, other features), since the node started.
  std::uint64_t rejected() const { return rejected_.load(); }
  // Sessions that ended on this node (removed by the console, timed out, or replaced),
  // since it started: a node that serves one session sees it come and go by this, even
  // when both happened between two looks at session().
  std::uint64_t sessions_ended() const { return sessions_ended_.load(); }
  // Asks the console at `console` to add this node to its group `group` (JOIN); on
  // success the node is in the console's session at once, as if the console had made
  // it. Fails with the console's status as -errno (-ESRCH: it has no session, -EEXIST:
  // already in the group, -EBUSY: the group is in use by a test, or this node in
  // another session) or the RPC's error.
  Status join(ProcessId console, const std::string& group);
  FwCounters fw_counters();

  // What each framework service answers (public for tests; the RPC handlers call them).
  Message make_session(const Message& req);
  Message remove_session(const Message& req);
  Message query(const Message& req);  // DEBUG
  Message stat(const Message& req);
  std::optional<Message> batch(const Message& req);  // nullopt: dropped (an unknown opcode)
  // TEST: a client test first fetches its destination list from the console.
  void add_test(const RpcNode::Request& r, const std::shared_ptr<RpcNode::Responder>& resp);

 private:
  using Clock = std::chrono::steady_clock;
  struct Test;
  struct Unit;
  struct Tally {  // a session's client-side test errors
    std::atomic<std::uint32_t> brw_errors{0}, ping_errors{0};
  };
  struct Batch {
    BatchId bid;
    std::vector<std::shared_ptr<Test>> tests;  // in the order added
  };
  struct Session {
    SessionInfo info;
    unsigned refs = 1;
    Clock::time_point started, last;
    std::shared_ptr<Tally> tally = std::make_shared<Tally>();
    std::map<std::uint64_t, Batch> batches;  // by batch id
  };
  // Sessions that ended here; their tests are stopped once the lock is released (stopping
  // completes aborted RPCs, whose callbacks take the lock).
  struct Ended {
    std::vector<std::shared_ptr<Session>> sessions;
    ~Ended();
  };

  // Ends the session when it has been idle too long (checked as each RPC arrives, which
  // then counts as activity when `touch`).
  void expire_locked(Clock::time_point now, bool touch, Ended& ended);
  void end_locked(Ended& ended);
  Message reply_to(const Message& req, const std::shared_ptr<Session>& s, std::uint32_t status);
  // The feature check every framework RPC but MKSN and DEBUG gets: EPROTO when the
  // request's features are not the session's.
  bool feats_differ_locked(const Message& req) const;
  // Builds a test from a TEST request (its destinations still empty); a positive status
  // when the parameters are refused.
  std::uint32_t make_test(const Message& req, std::shared_ptr<Test>& out);
  std::uint32_t install_locked(const Message& req, std::shared_ptr<Test> t);
  // A TEST request checked, its test made (a server's installed): 0 or the refusing status.
  std::uint32_t admit_test(const Message& req, std::shared_ptr<Test>& t);
  // A client test's destinations came (status 0) or not: its units made, the test
  // installed and the request answered, or the request dropped.
  void dests_arrived(int status, std::span<const std::uint8_t> ids, const Message& req, const std::shared_ptr<Test>& t,
                     RpcNode::Responder& resp);
  // The test's units, `q.concur` per destination in `ids`: 0 or the refusing status.
  static std::uint32_t make_units(Test& t, std::span<const std::uint8_t> ids, const TestReq& q, bool swapped);
  static bool batch_active(const Batch& b);
  FwCounters fw_counters_locked();  // also forgets zombies whose tests have ended
  void unit_finished(Test& t);      // the last unit of a test ends: wakes the destructor
  // The runner: a thread that sends the first RPC of each unit of a batch that starts
  // and the next RPC of a unit whose RPC completed inside its own send. Every other
  // RPC is sent by the thread its predecessor completed on.
  void post(std::shared_ptr<Test> t, Unit& u);
  void run_units();

  RpcNode& rpc_;
  std::chrono::seconds timeout_;
  std::mutex mu_;
  std::condition_variable idle_;
  std::shared_ptr<Session> session_;
  std::vector<std::shared_ptr<Session>> zombies_;  // ended with tests still running
  unsigned adding_ = 0;                            // TEST requests fetching their destinations
  std::atomic<std::uint32_t> ping_seq_{0};         // shared by the ping units of a node
  std::atomic<std::uint64_t> rejected_{0};
  std::atomic<std::uint64_t> sessions_ended_{0};
  std::vector<Service> served_;
  std::mutex run_mu_;
  std::condition_variable run_cv_;
  std::deque<std::pair<std::shared_ptr<Test>, Unit*>> runq_;
  bool run_stop_ = false;
  std::thread runner_;
};

}  // namespace lnet::selftest
