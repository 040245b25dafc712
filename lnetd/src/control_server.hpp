// lnetd's control socket: lnetctl's requests, one thread per connection, from root or
// members of the control group (every command), or of the read group (the commands that
// only show: `... show`, `peer list`, `export`, `cpt-of-nid`); configuration commands
// run one at a time.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>

#include <lnet/api.hpp>
#include <lnet/dlc.hpp>
#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

namespace lnetd {

class ControlServer {
 public:
  // Commands of the control socket that are not lnetctl's (lst's): nullopt when the
  // request is not one of them.
  using Extra = std::function<std::optional<lnet::dlc::Response>(const lnet::dlc::Request&)>;

  // `changed` runs after every command that may change the configuration.
  ControlServer(lnet::Instance& lnet, lnet::dlc::Hooks hooks, std::optional<gid_t> ctl_gid,
                std::function<void()> changed = {}, Extra extra = {})
      : lnet_(lnet),
        hooks_(std::move(hooks)),
        ctl_gid_(ctl_gid),
        changed_(std::move(changed)),
        extra_(std::move(extra)) {}
  ~ControlServer();

  // Members of `gid` may run the commands that only show (before listen()).
  void set_read_group(gid_t gid) { read_gid_ = gid; }
  // Listens on `path` (replacing a stale socket), mode 0600, or 0660 with the control
  // group, or 0666 with a read group (SO_PEERCRED decides who may do what).
  lnet::Status listen(const std::string& path);
  // What to poll: the listening socket, or -1 while it rests after accept() ran out of
  // descriptors; and the milliseconds until it listens again (-1: it listens).
  int poll_fd();
  int pause_ms() const;
  // Takes the connections that are waiting; each gets a thread of its own.
  void accept_ready();
  // Stops listening, wakes clients waiting to send a request, and waits for every
  // connection's thread (a command already running ends within its own timeout).
  void stop();

 private:
  enum class Access { None, Read, Admin };
  Access access(int fd, std::string* who) const;
  void serve(int fd);

  lnet::Instance& lnet_;
  lnet::dlc::Hooks hooks_;
  std::optional<gid_t> ctl_gid_;
  std::optional<gid_t> read_gid_;
  std::function<void()> changed_;
  Extra extra_;
  std::string path_;
  int listen_fd_ = -1;
  // The listener rests (the accepting thread's): until when, and for how long this time.
  std::chrono::steady_clock::time_point resume_{};
  std::chrono::milliseconds pause_{0};
  lnet::LogLimiter refuse_log_{std::chrono::seconds(10), 20};
  lnet::Mutex cmd_mutex_;  // configuration commands run one at a time
  std::atomic<int> clients_{0};
  lnet::Mutex fds_mutex_;
  std::set<int> client_fds_ LNET_GUARDED_BY(fds_mutex_);  // open connections (shut down when lnetd stops)
};

}  // namespace lnetd
