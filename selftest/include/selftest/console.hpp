// The self-test console (the kernel's "lstcon"): the session of an `lst` user, its
// groups of nodes, batches and tests, and the transactions that drive the nodes'
// frameworks — MKSN / RMSN as nodes come and go, TEST to install a test on its servers
// and clients, BATCH to run, stop and query, STAT and DEBUG to watch them, and a
// keep-alive DEBUG to active nodes (docs/design/selftest-wire.md §5). Node states follow
// the kernel's rules: the session id in a reply says active, busy or unknown; a node
// that does not answer within the transaction's time is down.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <selftest/rpc.hpp>

namespace lnet::selftest {

enum class NodeState : std::uint32_t { Active = 1, Busy = 2, Down = 4, Unknown = 8 };  // the kernel's values
const char* node_state_name(NodeState s);  // "Active", "Busy", "Down", "Unknown"

inline constexpr std::chrono::seconds kTransTimeout{30};     // LST_TRANS_TIMEOUT
inline constexpr std::chrono::seconds kPingInterval{8};      // LST_PING_INTERVAL
inline constexpr std::chrono::seconds kConsoleTimeout{300};  // lst new_session's default

struct NodeStatus {
  ProcessId id;
  NodeState state = NodeState::Unknown;
  // What the command's own transaction got from the node, when it sent one: 0, or the
  // RPC's error (rc), or the reply's status (a positive errno: EBUSY, another session's).
  int rc = 0;
  std::uint32_t status = 0;
};

// What a transaction got from one node.
struct NodeReply {
  ProcessId id;
  int rc = 0;                // 0, or the RPC's error (-ETIMEDOUT, ...)
  std::uint32_t status = 0;  // the reply's status (a positive errno), when rc is 0
  Message msg;               // the reply, when rc is 0
};

struct TestSpec {
  Service service = Service::Ping;  // Ping or Brw
  std::uint32_t loop = kLoopForever;
  std::uint32_t concurrency = 1;
  unsigned dist = 1, span = 1;  // --distribute DIST:SPAN
  std::string from, to;         // group names
  // brw
  BrwOp op = BrwOp::Read;
  BrwCheck check = BrwCheck::None;
  std::uint32_t size = 4096, offset = 0;
};

class Console {
 public:
  // The console sends from `rpc`'s instance; its session id carries `self` (the NID
  // nodes see it as).
  Console(RpcNode& rpc, Nid self);
  ~Console();
  // Serves JOIN (service 6 on portal 51): nodes that ask to join a group of the session
  // are added to it, active (selftest-wire.md §4.8).
  Status serve_join(unsigned buffers = 8);
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  // ---- session ----
  struct SessionInfo {
    std::string name;
    SessionId sid;
    std::uint32_t key = 0;  // LST_SESSION of the lst that made it
    std::chrono::seconds timeout{0};
    bool force = false;
    std::uint32_t feats = kFeatsMask;
    std::size_t nodes = 0;
  };
  // Fails (-EEXIST) while a session exists, unless `force` ends it first.
  Status new_session(const std::string& name, std::uint32_t key, std::chrono::seconds timeout, bool force);
  // RMSN to the active nodes; -ESRCH without a session.
  Status end_session(std::uint32_t key);
  Result<SessionInfo> session(std::uint32_t key);
  // The session whoever asks (lst show_session: how a script finds the key to use).
  Result<SessionInfo> session_info();
  // Every command but new_session passes the caller's key: -EACCES when it is not the
  // session's, -ESRCH without a session. A command keeps the session from expiring.
  Status check_key(std::uint32_t key);

  // ---- groups ----
  // Adds nodes to the group (made if new; a node already in it is left as it is) and
  // makes the session on those not active; each node's state after.
  Result<std::vector<NodeStatus>> add_group(const std::string& name, const std::vector<ProcessId>& ids);
  bool has_group(const std::string& name);
  Status del_group(const std::string& name);  // -EBUSY while a test uses it
  // --refresh: MKSN again to the nodes not active; --clean STATE: removes nodes in that
  // state; --remove: removes these nodes.
  Result<std::vector<NodeStatus>> refresh_group(const std::string& name);
  Status clean_group(const std::string& name, NodeState state);
  Status remove_nodes(const std::string& name, const std::vector<ProcessId>& ids);
  std::vector<std::string> groups();  // in the order they were made
  Result<std::vector<NodeStatus>> group_nodes(const std::string& name);

  // ---- batches and tests ----
  Status add_batch(const std::string& name);
  // Installs the test on the servers (the --to group) and then the clients (--from);
  // every node of both must be active (-ENETDOWN). Returns the test's index (1-based).
  Result<unsigned> add_test(const std::string& batch, const TestSpec& t, std::vector<NodeReply>* failed);
  std::vector<std::string> batches();  // in the order they were made ("batch" first)
  struct TestInfo {
    unsigned index = 0;
    TestSpec spec;
    std::vector<ProcessId> clients, servers;
  };
  Result<std::vector<TestInfo>> batch_tests(const std::string& batch);
  // Whether the batch was run and not stopped since.
  Result<bool> batch_running(const std::string& batch);
  // BATCH RUN / STOP to the clients of the batch (of its test `test`, 0: all).
  Result<std::vector<NodeReply>> run_batch(const std::string& batch, std::chrono::seconds timeout);
  Result<std::vector<NodeReply>> stop_batch(const std::string& batch, bool force);
  // BATCH QUERY: per node, the active tests (test 0) or units of test `test`; `server`:
  // ask the servers instead of the clients.
  Result<std::vector<NodeReply>> query_batch(const std::string& batch, unsigned test, bool server,
                                             std::chrono::seconds timeout);

  // ---- watching ----
  // The nodes of these groups, or these ids, once each, in order.
  Result<std::vector<ProcessId>> resolve(const std::vector<std::string>& groups, const std::vector<ProcessId>& ids);
  // DEBUG (the session query); the nodes' states are updated.
  std::vector<NodeReply> ping(const std::vector<ProcessId>& nodes, std::chrono::seconds timeout);
  // STAT: each node's framework, RPC and LNet counters.
  std::vector<NodeReply> stat(const std::vector<ProcessId>& nodes, std::chrono::seconds timeout);
  NodeState state(const ProcessId& id);

 private:
  struct Node {
    ProcessId id;
    NodeState state = NodeState::Unknown;
    std::chrono::steady_clock::time_point last_reply{};
    std::chrono::seconds timeout{0};  // the node's session timeout (keep-alive at half of it)
  };
  struct Group {
    std::vector<std::shared_ptr<Node>> nodes;
    unsigned tests = 0;     // tests that use it
    std::uint64_t seq = 0;  // made after the groups of smaller seq (lst lists them so)
  };
  struct Test {
    TestSpec spec;
    std::vector<ProcessId> clients, servers;
  };
  struct Batch {
    BatchId bid;  // grows with each batch made (lst lists them in that order)
    std::vector<Test> tests;
    bool running = false;  // run and not stopped since (list_batch's State)
  };
  struct Session {
    SessionInfo info;
    std::chrono::steady_clock::time_point last_command;
  };
  // The clients (or servers) of a batch's tests (of test `test`, 0: all), once each.
  struct BatchNodes {
    std::vector<ProcessId> nodes;
    SessionInfo info;
    BatchId bid;
    std::size_t tests = 0;
  };
  Result<BatchNodes> batch_nodes(const std::string& batch, unsigned test, bool servers);
  void set_running(const std::string& batch, bool running);
  // add_test's nodes (checked active) and the session and batch its requests name.
  struct TestNodes {
    std::vector<ProcessId> clients, servers;  // --from's, --to's
    SessionInfo info;
    BatchId bid;
  };
  Result<TestNodes> test_nodes(const std::string& batch, const TestSpec& t);
  // The TEST requests, to the servers and then to the clients; -EIO when a node refuses.
  Status install_test(const TestNodes& n, const TestSpec& t, std::vector<NodeReply>* failed);
  Result<std::vector<NodeReply>> batch_op(const BatchNodes& bn, BatchOp op, std::uint32_t testidx, std::uint32_t arg,
                                          std::chrono::seconds timeout);
  using Build = std::function<Message(const ProcessId&, std::size_t idx)>;
  using BulkOf = std::function<std::optional<RpcNode::Bulk>(std::size_t idx)>;

  // Sends `build(node)` to each node, waits for the replies until `timeout`, aborts the
  // rest (their nodes go down) and updates each answering node's state from its reply.
  std::vector<NodeReply> transact(const std::vector<ProcessId>& nodes, Service s, const Build& build,
                                  std::chrono::seconds timeout, const BulkOf& bulk = {});
  void note_reply(const ProcessId& id, const NodeReply& r);
  Result<std::vector<NodeStatus>> refresh_group_unlocked(const std::string& name);  // cmd_ held
  std::shared_ptr<Node> node_locked(const ProcessId& id);
  Status check_key_locked(std::uint32_t key);
  void end_locked(std::vector<ProcessId>* active);
  std::vector<ProcessId> not_active(const std::vector<ProcessId>& ids);
  Message header(Body b) const;
  void keep_alive();
  template <typename Req>
  std::vector<NodeReply> ask_all(const std::vector<ProcessId>& nodes, Service s, std::chrono::seconds timeout);
  Message join(const RpcNode::Request& r);

  RpcNode& rpc_;
  Nid self_;
  std::mutex mu_;   // the console's state; never held across a transaction
  std::mutex cmd_;  // commands run one at a time
  std::optional<Session> session_;
  std::map<std::pair<std::uint64_t, Pid>, std::shared_ptr<Node>> nodes_;
  std::map<std::string, Group> groups_;
  std::map<std::string, Batch> batches_;
  std::uint64_t next_bid_ = 0;
  std::uint64_t next_group_ = 0;
  bool stopping_ = false;
  std::condition_variable wake_;
  std::thread pinger_;
  bool serving_join_ = false;
};

}  // namespace lnet::selftest
