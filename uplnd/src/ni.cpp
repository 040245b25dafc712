// The UP NI's life: the bridge socket, its thread, accepting proxies (root and the
// configured group only) and closing them, which fails what they held.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <lnet/log.hpp>
#include <lnet/peer_cred.hpp>

#include "up_ni.hpp"

namespace lnet::up {

namespace {

constexpr unsigned kMaxBad = 16;  // refused messages before a proxy's connection is closed

// A descriptor that becomes readable when the process exits (Linux 5.3); glibc 2.36's
// declaration is not usable from C++, so the system call is made directly.
int pidfd_of(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

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
  // Nothing of the driver's is used once it stops: what proxies' processes held goes back.
  std::vector<Grave*> graves;
  {
    MutexLock g(mu_);
    for (auto& gr : graves_) graves.push_back(gr.get());
  }
  for (Grave* gr : graves) bury(gr);
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
    int n = epoll_wait(epoll_fd_, evs, 32, timers());
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
      if (Grave* g = grave_of(p)) {
        bury(g);  // its process has exited
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
  auto cred = peer_cred(fd);
  if (!cred) {
    *why = "SO_PEERCRED: " + errno_string(errno);
    return false;
  }
  c.uid = cred->uid;
  c.os_pid = cred->pid;
  if (cred->uid == 0) return true;
  if (opts_.group && peer_in_group(fd, *cred, *opts_.group)) return true;
  *why = "uid " + std::to_string(cred->uid) + " (pid " + std::to_string(cred->pid) + ") is neither root nor " +
         (opts_.group ? "in group " + std::to_string(*opts_.group) : std::string("allowed (no group configured)"));
  return false;
}

int UpNi::timers() {
  using namespace std::chrono;
  auto now = steady_clock::now();
  steady_clock::time_point next = steady_clock::time_point::max();
  if (listen_paused_ && now >= listen_resume_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev) == 0) listen_paused_ = false;
  }
  if (listen_paused_) next = listen_resume_;
  std::vector<Conn*> overdue;
  {
    MutexLock g(mu_);
    for (auto& [fd, c] : conns_) {
      if (c->hello) continue;
      auto due = c->accepted + opts_.hello_timeout;
      if (due <= now) {
        overdue.push_back(c.get());
        ++stats_.hello_timeouts;
      } else {
        next = std::min(next, due);
      }
    }
  }
  for (Conn* c : overdue) close_conn(*c, "no HELLO in time");
  if (next == steady_clock::time_point::max()) return -1;
  return static_cast<int>(duration_cast<milliseconds>(next - now).count()) + 1;
}

void UpNi::pause_listening() {
  using namespace std::chrono;
  // From 100 ms, doubling while it lasts, up to 5 s; a good accept starts it over.
  listen_pause_ = std::clamp(listen_pause_ * 2, milliseconds(100), milliseconds(5000));
  listen_resume_ = steady_clock::now() + listen_pause_;
  epoll_event ev{};
  ev.data.ptr = nullptr;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev) == 0) listen_paused_ = true;
}

void UpNi::accept_ready() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      int e = errno;
      if (e == EAGAIN || e == EINTR || e == ECONNABORTED) return;
      if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) pause_listening();
      std::uint64_t held_back = 0;
      if (refuse_log_.allow(&held_back))
        LNET_LOG(Warn, kLogLnd, "%s: accept on the bridge: %s%s", ni_.nid.to_string().c_str(), errno_string(e).c_str(),
                 listen_paused_ ? " (not listening for a while)" : "");
      return;
    }
    listen_pause_ = std::chrono::milliseconds(0);
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->accepted = std::chrono::steady_clock::now();
    std::string why;
    std::size_t connected;
    {
      MutexLock g(mu_);
      connected = conns_.size();
    }
    bool ok = permitted(fd, *c, &why), over = false;
    if (ok && connected >= opts_.max_proxies) {
      ok = false;
      over = true;
      why = std::to_string(connected) + " proxies are connected (at most " + std::to_string(opts_.max_proxies) + ")";
    }
    if (!ok) {
      std::uint64_t held_back = 0;
      if (refuse_log_.allow(&held_back))
        LNET_LOG(Warn, kLogLnd, "%s: bridge connection refused: %s%s", ni_.nid.to_string().c_str(), why.c_str(),
                 held_back ? (" (and " + std::to_string(held_back) + " refused since the last line)").c_str() : "");
      {
        MutexLock g(mu_);
        ++(over ? stats_.over_limit : stats_.refused);  // counted before the close the peer sees
      }
      ::close(fd);
      continue;
    }
    adopt(std::move(c));
  }
}

void UpNi::adopt(std::unique_ptr<Conn> c) {
  c->name = "proxy (pid " + std::to_string(c->os_pid) + ")";
  // To know when its process has exited, should it leave while its MPI may still write
  // into the region (Grave).
  c->pidfd = pidfd_of(c->os_pid);
  if (c->pidfd < 0)
    LNET_LOG(Warn, kLogLnd, "%s: pidfd_open(%d) for %s: %s: receives it leaves behind are freed when it goes",
             ni_.nid.to_string().c_str(), static_cast<int>(c->os_pid), c->name.c_str(), errno_string(errno).c_str());
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.ptr = c.get();
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
    LNET_LOG(Warn, kLogLnd, "%s: epoll_ctl for a proxy: %s", ni_.nid.to_string().c_str(), errno_string(errno).c_str());
    ::close(c->fd);
    if (c->pidfd >= 0) ::close(c->pidfd);
    return;
  }
  {
    MutexLock g(mu_);
    ++stats_.connections;
    int fd = c->fd;
    conns_.emplace(fd, std::move(c));
  }
  host_.link_up(ni_);  // a proxy is the NI's link: a router reports it up now
}

void UpNi::close_conn(Conn& c, const char* why) {
  DoneList done;
  std::vector<Pid> pids;
  auto grave = std::make_unique<Grave>();
  grave->pidfd = c.pidfd;
  grave->name = c.name;
  {
    MutexLock g(mu_);
    pids.assign(c.pids.begin(), c.pids.end());
    fail_descs_locked(c, 0, done, c.pidfd >= 0 ? grave.get() : nullptr);
    for (const Done& d : done) stats_.failed += d.msg ? 1 : 0;
  }
  (void)epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  std::size_t failed =
      static_cast<std::size_t>(std::count_if(done.begin(), done.end(), [](const Done& d) { return d.msg; }));
  std::string list;
  for (Pid p : pids) list += (list.empty() ? "" : ",") + std::to_string(p & ~kPidUserFlag);
  std::string held = grave->descs.empty() ? std::string()
                                          : ", " + std::to_string(grave->descs.size()) +
                                                " buffers its MPI may still write held until its process exits";
  LNET_LOG(Info, kLogLnd, "%s: %s left the bridge (%s): %zu messages failed, pids [%s] released%s",
           ni_.nid.to_string().c_str(), c.name.c_str(), why, failed, list.c_str(), held.c_str());
  {
    MutexLock g(mu_);
    int fd = c.fd;
    ::close(fd);
    conns_.erase(fd);  // c is gone
    if (!grave->descs.empty()) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = grave.get();
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, grave->pidfd, &ev) == 0) {
        graves_.push_back(std::move(grave));
      } else {  // not watched: given back now, as without a pidfd
        for (Desc* d : grave->descs) unkeep_locked(*d, done);
        for (auto& [f, other] : conns_) flush_locked(*other);
      }
    }
  }
  if (grave && grave->pidfd >= 0) ::close(grave->pidfd);
  finalize_all(done);
}

Grave* UpNi::grave_of(void* p) {
  MutexLock g(mu_);
  for (auto& gr : graves_)
    if (gr.get() == p) return gr.get();
  return nullptr;
}

void UpNi::bury(Grave* gr) {
  DoneList done;
  std::size_t n;
  {
    MutexLock g(mu_);
    n = gr->descs.size();
    for (Desc* d : gr->descs) unkeep_locked(*d, done);
    for (auto& [fd, other] : conns_) flush_locked(*other);  // bounces came back
    if (epoll_fd_ >= 0) (void)epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, gr->pidfd, nullptr);
    ::close(gr->pidfd);
    LNET_LOG(Info, kLogLnd, "%s: the process of %s has exited: %zu buffers it held are free",
             ni_.nid.to_string().c_str(), gr->name.c_str(), n);
    std::erase_if(graves_, [gr](const std::unique_ptr<Grave>& x) { return x.get() == gr; });
  }
  finalize_all(done);
}

void UpNi::finalize_all(DoneList& done) {
  for (Done& d : done) {
    if (d.msg) {
      d.msg->health = d.health;
      host_.finalize(d.msg, d.status);
    }
    if (d.token) host_.release_memory(d.token);
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
