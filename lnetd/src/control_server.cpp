// lnetd's control socket server.
#include "control_server.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>
#include <lnet/peer_cred.hpp>

namespace lnetd {

using namespace lnet;

namespace {

constexpr int kMaxClients = 64;        // control connections served at once
constexpr int kClientTimeoutSec = 10;  // to send a request or take the answer

dlc::Response manage_error(int rc, const std::string& descr) {
  return dlc::Response{
      rc, "manage:\n    - command:\n          errno: " + std::to_string(rc) + "\n          descr: \"" + descr + "\"\n"};
}

}  // namespace

ControlServer::~ControlServer() { stop(); }

Status ControlServer::listen(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return Failure{-ENAMETOOLONG, "control socket path too long: " + path};
  std::strcpy(addr.sun_path, path.c_str());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Failure{-errno, std::string("socket: ") + std::strerror(errno)};
  ::unlink(path.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 16) != 0) {
    int err = errno;
    ::close(fd);
    return Failure{-err, "cannot listen on " + path + ": " + std::strerror(err)};
  }
  mode_t mode = read_gid_ ? 0666 : ctl_gid_ ? 0660 : 0600;
  if (chmod(path.c_str(), mode) != 0 || (ctl_gid_ && chown(path.c_str(), 0, *ctl_gid_) != 0)) {
    int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return Failure{-err, "cannot set the owner and mode of " + path + ": " + std::strerror(err)};
  }
  listen_fd_ = fd;
  path_ = path;
  return {};
}

namespace {

// The commands a member of the read group may run: those that only show.
bool shows_only(const std::string& command) {
  auto ends = [&](std::string_view tail) {
    return command.size() >= tail.size() && command.compare(command.size() - tail.size(), tail.size(), tail) == 0;
  };
  const dlc::CommandSpec* spec = dlc::find_command(command);
  return spec && !spec->changes &&
         (ends(" show") || command == "peer list" || command == "export" || command == "cpt-of-nid");
}

}  // namespace

ControlServer::Access ControlServer::access(int fd, std::string* who) const {
  auto cred = peer_cred(fd);
  if (!cred) return Access::None;
  *who = "uid " + std::to_string(cred->uid) + " pid " + std::to_string(cred->pid);
  if (cred->uid == 0 || (ctl_gid_ && peer_in_group(fd, *cred, *ctl_gid_))) return Access::Admin;
  if (read_gid_ && peer_in_group(fd, *cred, *read_gid_)) return Access::Read;
  return Access::None;
}

void ControlServer::serve(int fd) {
  std::string who;
  Access may = access(fd, &who);
  if (may == Access::None) {
    std::uint64_t held = 0;
    if (refuse_log_.allow(&held))
      LNET_LOG(Warn, kLogDaemon, "refused a control connection from %s: not root nor in the control group%s",
               who.c_str(), held ? (" (and " + std::to_string(held) + " more since the last line)").c_str() : "");
    (void)dlc::write_frame(fd, dlc::encode_response(manage_error(
                                   -EACCES, "permission denied: the control socket is for root (or the --ctl-group)")));
    return;
  }
  std::string frame;
  if (int rc = dlc::read_frame(fd, frame); rc != 0) {
    LNET_LOG(Warn, kLogDaemon, "bad control request from %s: %s", who.c_str(), errno_string(rc).c_str());
    return;
  }
  auto req = dlc::decode_request(frame);
  dlc::Response resp;
  if (!req) {
    resp = manage_error(req.code(), req.message());
  } else if (may == Access::Read && !shows_only(req->command)) {
    LNET_LOG(Info, kLogDaemon, "%s: %s refused: the read group may only show", who.c_str(), req->command.c_str());
    resp = manage_error(-EACCES, "permission denied: '" + req->command +
                                     "' is for root (or the --ctl-group); the --ctl-read-group may only show");
  } else {
    LNET_LOG(Info, kLogDaemon, "%s: %s", who.c_str(), req->command.c_str());
    const dlc::CommandSpec* spec = dlc::find_command(req->command);
    std::optional<dlc::Response> other = !spec && extra_ ? extra_(*req) : std::nullopt;
    if (other) {
      resp = std::move(*other);
    } else if (!spec || spec->changes) {
      MutexLock g(cmd_mutex_);
      resp = dlc::execute(lnet_, *req, hooks_);
      if (changed_) changed_();
    } else {
      resp = dlc::execute(lnet_, *req, hooks_);
    }
  }
  (void)dlc::write_frame(fd, dlc::encode_response(resp));
}

int ControlServer::poll_fd() {
  if (resume_ != std::chrono::steady_clock::time_point{} && std::chrono::steady_clock::now() >= resume_) resume_ = {};
  return resume_ == std::chrono::steady_clock::time_point{} ? listen_fd_ : -1;
}

int ControlServer::pause_ms() const {
  if (resume_ == std::chrono::steady_clock::time_point{}) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(resume_ - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<long long>(left.count(), 0)) + 1;
}

void ControlServer::accept_ready() {
  for (;;) {
    // The listening socket does not block; the connection does (with timeouts).
    int cfd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (cfd < 0) {
      int e = errno;
      if (e == EINTR || e == ECONNABORTED) continue;
      if (e == EAGAIN || e == EWOULDBLOCK) return;
      if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
        // The listener stays readable: rest it (from 100 ms, doubling, up to 5 s) rather than spin.
        pause_ = std::clamp(pause_ * 2, std::chrono::milliseconds(100), std::chrono::milliseconds(5000));
        resume_ = std::chrono::steady_clock::now() + pause_;
      }
      std::uint64_t held = 0;
      if (refuse_log_.allow(&held)) LNET_LOG(Warn, kLogDaemon, "accept on %s: %s", path_.c_str(), std::strerror(e));
      return;
    }
    pause_ = std::chrono::milliseconds(0);
    if (clients_.load() >= kMaxClients) {
      std::uint64_t held = 0;
      if (refuse_log_.allow(&held))
        LNET_LOG(Warn, kLogDaemon, "refused a control connection: %d commands already running", kMaxClients);
      ::close(cfd);
      continue;
    }
    // A client that stops sending or reading is dropped, so shutdown never waits on it.
    timeval tv{kClientTimeoutSec, 0};
    setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    // A command (a ping, say) may take seconds: each client gets its own thread.
    clients_.fetch_add(1);
    {
      MutexLock g(fds_mutex_);
      client_fds_.insert(cfd);
    }
    std::thread([this, cfd] {
      serve(cfd);
      {
        MutexLock g(fds_mutex_);
        client_fds_.erase(cfd);
      }
      ::close(cfd);
      clients_.fetch_sub(1);
    }).detach();
  }
}

void ControlServer::stop() {
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(path_.c_str());
    listen_fd_ = -1;
  }
  {
    MutexLock g(fds_mutex_);
    for (int fd : client_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  while (clients_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

}  // namespace lnetd
