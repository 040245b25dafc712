// The node side of self-test (the kernel's "sfw"): the session a console makes on this
// node and the framework services that answer it — make and remove session, the
// session query (DEBUG) and the counters (STAT) — with the kernel's status codes
// (docs/design/selftest-wire.md §4.3). Batches and tests come next.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include <selftest/rpc.hpp>

namespace lnet::selftest {

class Framework {
 public:
  // A session ends `session_timeout` after the last framework RPC (the kernel's 100 s;
  // 0: never).
  explicit Framework(RpcNode& rpc, std::chrono::seconds session_timeout = std::chrono::seconds(100));
  // Serves the framework services on portal 51.
  Status start(unsigned buffers = 16);

  struct SessionInfo {
    SessionId sid;
    std::string name;
    std::uint32_t feats = 0;
  };
  std::optional<SessionInfo> session();
  FwCounters fw_counters();

  // What each framework service answers (public for tests; the RPC handlers call them).
  Message make_session(const Message& req);
  Message remove_session(const Message& req);
  Message query(const Message& req);  // DEBUG
  Message stat(const Message& req);

 private:
  using Clock = std::chrono::steady_clock;
  struct Session {
    SessionInfo info;
    unsigned refs = 1;
    Clock::time_point started, last;
  };
  // Ends the session when it has been idle too long (checked as each RPC arrives, which
  // then counts as activity when `touch`).
  void expire_locked(Clock::time_point now, bool touch);
  Message reply_to(const Message& req, const std::optional<Session>& s, std::uint32_t status);
  // The feature check every framework RPC but MKSN and DEBUG gets: EPROTO when the
  // request's features are not the session's.
  bool feats_differ_locked(const Message& req) const;

  RpcNode& rpc_;
  std::chrono::seconds timeout_;
  std::mutex mu_;
  std::optional<Session> session_;
  // Sessions ended with tests still running, errors of the test services, batches
  // running: all 0 until batches and tests exist (issue 15, next part).
  std::uint32_t zombies_ = 0, brw_errors_ = 0, ping_errors_ = 0, active_batches_ = 0;
};

}  // namespace lnet::selftest
