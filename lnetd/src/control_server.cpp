// lnetd's control socket server.
#include "control_server.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

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
  if (chmod(path.c_str(), ctl_gid_ ? 0660 : 0600) != 0 || (ctl_gid_ && chown(path.c_str(), 0, *ctl_gid_) != 0)) {
    int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return Failure{-err, "cannot set the owner and mode of " + path + ": " + std::strerror(err)};
  }
  listen_fd_ = fd;
  path_ = path;
  return {};
}

bool ControlServer::allowed(int fd, std::string* who) const {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  *who = "uid " + std::to_string(cred.uid) + " pid " + std::to_string(cred.pid);
  if (cred.uid == 0) return true;
  if (!ctl_gid_) return false;
  if (cred.gid == *ctl_gid_) return true;
  // Supplementary groups of the caller.
  if (passwd* pw = getpwuid(cred.uid)) {
    int n = 64;
    std::vector<gid_t> groups(64);
    if (getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) >= 0) {
      for (int i = 0; i < n; ++i)
        if (groups[static_cast<std::size_t>(i)] == *ctl_gid_) return true;
    }
  }
  return false;
}

void ControlServer::serve(int fd) {
  std::string who;
  if (!allowed(fd, &who)) {
    LNET_LOG(Warn, kLogDaemon, "refused a control connection from %s: not root nor in the control group", who.c_str());
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

void ControlServer::accept_ready() {
  for (;;) {
    // The listening socket does not block; the connection does (with timeouts).
    int cfd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (cfd < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        LNET_LOG(Warn, kLogDaemon, "accept on %s: %s", path_.c_str(), std::strerror(errno));
      return;
    }
    if (clients_.load() >= kMaxClients) {
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
