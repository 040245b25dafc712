// A proxy rank's connection to its node's lnetd: the bridge client, the bridge thread,
// and the pid calls (PID_NEW, PID_REGISTER, PID_RELEASE) that wait for their PID_REPLY.
// The bridge thread reads lnetd's messages and hands RECVs and SENDs to the application
// they belong to; it also drives the applications' MPI LNDs (they run no progress thread
// of their own unless LNET_MPI_PROGRESS=thread), so a message between lnetd and MPI
// crosses the rank on one thread: no thread is woken for it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include <lnet/mutex.hpp>
#include <lnet/up/client.hpp>

#include "app_link.hpp"

namespace lnet::proxy {

class Uplink {
 public:
  // Connects to the bridge at `path` (waiting up to `timeout` for the WELCOME) and starts
  // reading it. When lnetd goes away, one byte is written to `wake_fd`.
  // `idle_us`: the longest nap of the bridge thread while applications are attached.
  static Result<std::unique_ptr<Uplink>> connect(const std::string& path, std::uint32_t rank,
                                                 std::chrono::milliseconds timeout, int wake_fd, int idle_us);
  ~Uplink();

  up::BridgeClient& bridge() { return *bridge_; }
  const up::Welcome& welcome() const { return bridge_->welcome(); }
  bool gone() const { return gone_.load(); }

  // PID_NEW / PID_REGISTER / PID_RELEASE and their reply, within `timeout`.
  Result<up::PidReply> call(up::Message m, std::chrono::milliseconds timeout);

  // lnetd's messages for the application go to `link` from now on (and the bridge
  // thread drives its driver) / no more.
  void attach(std::shared_ptr<AppLink> link);
  void detach(const AppLink& link);
  // Wakes the bridge thread from a nap (an attached application has started).
  void wake();

 private:
  Uplink() = default;
  void reader_main();
  // One message from lnetd, to its application or caller.
  void dispatch(const up::Message& m, const std::vector<std::shared_ptr<AppLink>>& links);
  std::shared_ptr<AppLink> by_serial(std::uint64_t serial);
  std::shared_ptr<AppLink> by_pid(Pid pid);
  void answer_orphan(const up::Message& m);

  std::unique_ptr<up::BridgeClient> bridge_;
  int wake_fd_ = -1;
  int idle_us_ = 1000;
  int nudge_fd_ = -1;                   // an eventfd: wakes the bridge thread
  std::atomic<unsigned> links_gen_{0};  // changes with links_
  std::thread reader_;
  std::atomic<bool> gone_{false};
  std::atomic<bool> closing_{false};  // the rank closes the bridge itself
  Mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint64_t, std::shared_ptr<AppLink>> links_ LNET_GUARDED_BY(mu_);  // by serial
  std::uint64_t next_cookie_ LNET_GUARDED_BY(mu_) = 1;
  std::map<std::uint64_t, std::optional<up::PidReply>> calls_ LNET_GUARDED_BY(mu_);  // by cookie
};

}  // namespace lnet::proxy
