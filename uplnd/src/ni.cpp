// The UP NI's life: the bridge socket, its thread, accepting proxies (root and the
// configured group only) and closing them, which fails what they held.
#include <grp.h>
#include <pwd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <lnet/log.hpp>

#include "up_ni.hpp"

namespace lnet::up {

namespace {

constexpr unsigned kMaxBad = 16;  // refused messages before a proxy's connection is closed

// Whether `uid` (primary group `gid`) is a member of `group`.
bool in_group(uid_t uid, gid_t gid, gid_t group) {
  if (gid == group) return true;
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || !found) return false;
  int n = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(n));
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<std::size_t>(n));
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) return false;
  }
  for (int i = 0; i < n; ++i)
    if (groups[static_cast<std::size_t>(i)] == group) return true;
  return false;
}

}  // namespace

UpNi::UpNi(NetInterface& ni, Region& region, const UpOptions& opts)
    : ni_(ni), host_(*ni.host), region_(region), opts_(opts) {}

UpNi::~UpNi() { stop(); }

Status UpNi::start() {
  const std::string& path = opts_.bridge;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    return Failure{-ENAMETOOLONG, "bridge socket path '" + path + "' is empty or longer than 107 bytes"};
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) return Failure{-errno, "bridge socket: " + errno_string(errno)};
  // A socket left by an lnetd that died is replaced; a live one is not.
  if (connect(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0)
    return Failure{-EADDRINUSE, "bridge socket " + path + " is served by a running lnetd"};
  ::unlink(path.c_str());
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return Failure{-errno, "cannot bind the bridge socket " + path + ": " + errno_string(errno)};
  if (opts_.group) {
    if (chown(path.c_str(), 0, *opts_.group) != 0 || chmod(path.c_str(), 0660) != 0)
      return Failure{-errno, "cannot give the bridge socket " + path + " to its group: " + errno_string(errno)};
  } else if (chmod(path.c_str(), 0600) != 0) {
    return Failure{-errno, "chmod of the bridge socket " + path + ": " + errno_string(errno)};
  }
  if (listen(listen_fd_, 64) != 0) return Failure{-errno, "listen on " + path + ": " + errno_string(errno)};
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || stop_fd_ < 0) return Failure{-errno, "epoll/eventfd: " + errno_string(errno)};
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the listening socket
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev) != 0)
    return Failure{-errno, "epoll_ctl: " + errno_string(errno)};
  ev.data.ptr = &stop_fd_;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &ev) != 0)
    return Failure{-errno, "epoll_ctl: " + errno_string(errno)};
  thread_ = std::thread([this] { run(); });
  LNET_LOG(Info, kLogLnd, "%s: bridge for proxies on %s (shared region %zu MiB)", ni_.nid.to_string().c_str(),
           path.c_str(), region_.size() >> 20);
  return {};
}

void UpNi::stop() {
  if (thread_.joinable()) {
    std::uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  std::vector<Conn*> all;
  {
    MutexLock g(mu_);
    for (auto& [fd, c] : conns_) all.push_back(c.get());
  }
  for (Conn* c : all) close_conn(*c, "lnetd stops");
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(opts_.bridge.c_str());
    listen_fd_ = -1;
  }
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
  epoll_fd_ = stop_fd_ = -1;
}

void UpNi::run() {
  epoll_event evs[32];
  for (;;) {
    int n = epoll_wait(epoll_fd_, evs, 32, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      LNET_LOG(Error, kLogLnd, "%s: epoll_wait: %s", ni_.nid.to_string().c_str(), errno_string(errno).c_str());
      return;
    }
    for (int i = 0; i < n; ++i) {
      void* p = evs[i].data.ptr;
      if (p == &stop_fd_) return;
      if (!p) {
        accept_ready();
        continue;
      }
      Conn& c = *static_cast<Conn*>(p);
      if (evs[i].events & EPOLLOUT) {
        MutexLock g(mu_);
        arm_out_locked(c, false);
        flush_locked(c);
      }
      if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
        if (!read_ready(c)) continue;  // closed: c is gone
      }
      bool broken;
      {
        MutexLock g(mu_);
        broken = c.broken;
      }
      if (broken) close_conn(c, "a write to it failed");
    }
  }
}

bool UpNi::permitted(int fd, Conn& c, std::string* why) const {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    *why = "SO_PEERCRED: " + errno_string(errno);
    return false;
  }
  c.uid = cred.uid;
  c.os_pid = cred.pid;
  if (cred.uid == 0) return true;
  if (opts_.group && in_group(cred.uid, cred.gid, *opts_.group)) return true;
  *why = "uid " + std::to_string(cred.uid) + " (pid " + std::to_string(cred.pid) + ") is neither root nor " +
         (opts_.group ? "in group " + std::to_string(*opts_.group) : std::string("allowed (no group configured)"));
  return false;
}

void UpNi::accept_ready() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EINTR)
        LNET_LOG(Warn, kLogLnd, "%s: accept on the bridge: %s", ni_.nid.to_string().c_str(),
                 errno_string(errno).c_str());
      return;
    }
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    std::string why;
    if (!permitted(fd, *c, &why)) {
      LNET_LOG(Warn, kLogLnd, "%s: bridge connection refused: %s", ni_.nid.to_string().c_str(), why.c_str());
      {
        MutexLock g(mu_);
        ++stats_.refused;  // counted before the close the refused side sees
      }
      ::close(fd);
      continue;
    }
    c->name = "proxy (pid " + std::to_string(c->os_pid) + ")";
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = c.get();
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      LNET_LOG(Warn, kLogLnd, "%s: epoll_ctl for a proxy: %s", ni_.nid.to_string().c_str(),
               errno_string(errno).c_str());
      ::close(fd);
      continue;
    }
    {
      MutexLock g(mu_);
      ++stats_.connections;
      conns_.emplace(fd, std::move(c));
    }
    host_.link_up(ni_);  // a proxy is the NI's link: a router reports it up now
  }
}

void UpNi::close_conn(Conn& c, const char* why) {
  DoneList done;
  std::vector<Pid> pids;
  {
    MutexLock g(mu_);
    pids.assign(c.pids.begin(), c.pids.end());
    fail_descs_locked(c, 0, done);
    stats_.failed += done.size();
  }
  (void)epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  std::string list;
  for (Pid p : pids) list += (list.empty() ? "" : ",") + std::to_string(p & ~kPidUserFlag);
  LNET_LOG(Info, kLogLnd, "%s: %s left the bridge (%s): %zu messages failed, pids [%s] released",
           ni_.nid.to_string().c_str(), c.name.c_str(), why, done.size(), list.c_str());
  {
    MutexLock g(mu_);
    int fd = c.fd;
    ::close(fd);
    conns_.erase(fd);  // c is gone
  }
  finalize_all(done);
}

void UpNi::finalize_all(DoneList& done) {
  for (Done& d : done) {
    d.msg->health = d.health;
    host_.finalize(d.msg, d.status);
  }
  done.clear();
}

bool UpNi::refuse(Conn& c, const std::string& why) {
  bool close_it;
  {
    MutexLock g(mu_);
    ++stats_.bad_messages;
    close_it = ++c.bad >= kMaxBad;
    reply_locked(c, Error{-EPROTO, why});
  }
  LNET_LOG(Warn, kLogLnd, "%s: from %s: %s", ni_.nid.to_string().c_str(), c.name.c_str(), why.c_str());
  if (!close_it) return true;
  close_conn(c, "too many bad messages");
  return false;
}

std::size_t UpNi::proxies() const {
  MutexLock g(mu_);
  return conns_.size();
}

UpStats UpNi::stats() const {
  MutexLock g(mu_);
  UpStats s = stats_;
  s.proxies = conns_.size();
  s.pids = apps_.size();
  return s;
}

void UpNi::set_nets(std::vector<NetId> nets) {
  MutexLock g(mu_);
  nets_ = std::move(nets);
}

}  // namespace lnet::up
