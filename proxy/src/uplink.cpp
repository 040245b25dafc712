#include "uplink.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <lnet/log.hpp>

namespace lnet::proxy {

Result<std::unique_ptr<Uplink>> Uplink::connect(const std::string& path, std::uint32_t rank,
                                                std::chrono::milliseconds timeout, int wake_fd, int idle_us) {
  int nudge_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (nudge_fd < 0) return Failure{-errno, std::string("eventfd: ") + std::strerror(errno)};
  auto b = up::BridgeClient::connect(path, rank, timeout);
  if (!b) {
    ::close(nudge_fd);
    return b.failure();
  }
  std::unique_ptr<Uplink> u(new Uplink);
  u->bridge_ = std::move(*b);
  u->wake_fd_ = wake_fd;
  u->idle_us_ = idle_us;
  u->nudge_fd_ = nudge_fd;
  u->reader_ = std::thread([p = u.get()] { p->reader_main(); });
  return u;
}

Uplink::~Uplink() {
  closing_.store(true);
  bridge_->shutdown();
  reader_.join();
  ::close(nudge_fd_);
  // An application's driver may have left transfers to MPI (dropped, it could not wait
  // for them): MPI_Finalize, or MPI meanwhile, may still move their bytes to and from
  // the region. Its mapping stays until the process exits; lnetd frees it then.
  bridge_->region().leave_mapped();
}

Result<up::PidReply> Uplink::call(up::Message m, std::chrono::milliseconds timeout) {
  std::uint64_t cookie;
  {
    MutexLock g(mu_);
    cookie = next_cookie_++;
    calls_.emplace(cookie, std::nullopt);
  }
  std::visit(
      [cookie](auto& x) {
        if constexpr (requires { x.cookie; }) x.cookie = cookie;
      },
      m);
  Status sent = bridge_->send(m);
  MutexLock g(mu_);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto it = calls_.find(cookie);
  while (sent && !it->second && !gone_.load() && std::chrono::steady_clock::now() < deadline)
    (void)g.wait_until(cv_, deadline);
  std::optional<up::PidReply> r = it->second;
  calls_.erase(it);
  if (!sent) return sent.failure();
  if (!r)
    return Failure{gone_.load() ? -ECONNRESET : -ETIMEDOUT,
                   std::string(up::type_name(up::type_of(m))) + ": " + (gone_.load() ? "lnetd went away" : "no reply")};
  return *r;
}

void Uplink::attach(std::shared_ptr<AppLink> link) {
  {
    MutexLock g(mu_);
    links_[link->serial()] = std::move(link);
    links_gen_.fetch_add(1, std::memory_order_release);
  }
  wake();
}

void Uplink::detach(const AppLink& link) {
  MutexLock g(mu_);
  links_.erase(link.serial());
  links_gen_.fetch_add(1, std::memory_order_release);
}

void Uplink::wake() {
  std::uint64_t one = 1;
  (void)!::write(nudge_fd_, &one, sizeof one);
}

std::shared_ptr<AppLink> Uplink::by_serial(std::uint64_t serial) {
  MutexLock g(mu_);
  auto it = links_.find(serial);
  return it == links_.end() ? nullptr : it->second;
}

std::shared_ptr<AppLink> Uplink::by_pid(Pid pid) {
  MutexLock g(mu_);
  for (auto& [serial, link] : links_)
    if (link->pid() == pid) return link;
  return nullptr;
}

// A RECV or SEND for an application this rank no longer serves: lnetd's descriptor is
// answered with an error, so it completes.
void Uplink::answer_orphan(const up::Message& m) {
  Status s;
  if (const auto* r = std::get_if<up::Recv>(&m)) {
    if (r->status < 0) return;  // no RECV_DONE follows a refused one
    s = bridge_->send(up::RecvDone{r->desc, -ESHUTDOWN, static_cast<std::uint32_t>(HealthStatus::LocalAborted)});
  } else if (const auto* sd = std::get_if<up::Send>(&m)) {
    s = bridge_->send(up::SendDone{sd->desc, -EHOSTUNREACH, static_cast<std::uint32_t>(HealthStatus::LocalNoRoute)});
  }
  if (!s) LNET_LOG(Warn, kLogLnd, "proxy: %s", s.message().c_str());
}

// The bridge thread. Each round drives the attached applications' drivers once and
// takes what lnetd has sent (a batch at most, so the drivers get their turn); between
// rounds it waits as the MPI LND's progress thread would (IdlePolicy), its naps
// taken in ppoll() on the bridge, so a message from lnetd ends a nap at once. With no
// driver to drive it sleeps until lnetd writes or an application is attached.
void Uplink::reader_main() {
  constexpr int kBatch = 16;
  IdlePolicy idle(idle_us_);
  std::vector<std::shared_ptr<AppLink>> links;  // a copy of links_, taken when it changes
  unsigned gen = ~0u;
  bool polling = false;  // some driver needs driving
  for (;;) {
    if (unsigned g = links_gen_.load(std::memory_order_acquire); g != gen) {
      std::vector<std::shared_ptr<AppLink>> fresh;
      {
        MutexLock lk(mu_);
        gen = links_gen_.load(std::memory_order_relaxed);
        for (auto& [serial, link] : links_) fresh.push_back(link);
      }
      links.swap(fresh);  // a detached link may go with `fresh` now, outside mu_
      polling = std::any_of(links.begin(), links.end(), [](const auto& l) { return l->polled(); });
    }
    bool worked = false;
    for (auto& link : links) worked |= link->poll();
    bool gone = false;
    for (int i = 0; i < kBatch; ++i) {
      auto m = bridge_->receive(0);
      if (!m) {
        if (m.code() == -ETIMEDOUT) break;
        if (m.code() == -EPROTO) {
          LNET_LOG(Warn, kLogLnd, "proxy: from lnetd: %s", m.message().c_str());
          continue;
        }
        if (!closing_.load()) LNET_LOG(Error, kLogLnd, "proxy: %s", m.message().c_str());
        gone = true;
        break;
      }
      dispatch(*m, links);
      worked = true;
    }
    if (gone) break;
    int us = polling ? idle.after_round(worked,
                                        [&] {
                                          for (auto& link : links)
                                            if (link->busy()) return true;
                                          return false;
                                        })
                     : (worked ? 0 : -1);
    if (us == 0) continue;
    pollfd fds[2] = {{bridge_->fd(), POLLIN, 0}, {nudge_fd_, POLLIN, 0}};
    timespec nap{us / 1000000, (us % 1000000) * 1000L};
    if (::ppoll(fds, 2, us < 0 ? nullptr : &nap, nullptr) > 0 && (fds[1].revents & POLLIN)) {
      std::uint64_t n;
      (void)!::read(nudge_fd_, &n, sizeof n);
      idle.restart();
    }
  }
  {
    MutexLock g(mu_);
    gone_.store(true);
    cv_.notify_all();
  }
  std::uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
}

// `links`: the bridge thread's copy of links_, looked in first (without a lock).
void Uplink::dispatch(const up::Message& m, const std::vector<std::shared_ptr<AppLink>>& links) {
  if (const auto* r = std::get_if<up::Recv>(&m)) {
    std::uint64_t serial = AppLink::serial_of(r->cookie);
    auto it = std::find_if(links.begin(), links.end(), [serial](const auto& l) { return l->serial() == serial; });
    if (auto link = it != links.end() ? *it : by_serial(serial))
      link->on_recv(*r);
    else
      answer_orphan(m);
  } else if (const auto* s = std::get_if<up::Send>(&m)) {
    auto it = std::find_if(links.begin(), links.end(), [pid = s->pid](const auto& l) { return l->pid() == pid; });
    if (auto link = it != links.end() ? *it : by_pid(s->pid))
      link->on_send(*s);
    else
      answer_orphan(m);
  } else if (const auto* p = std::get_if<up::PidReply>(&m)) {
    MutexLock g(mu_);
    if (auto it = calls_.find(p->cookie); it != calls_.end()) {
      it->second = *p;
      cv_.notify_all();
    }
  } else if (const auto* e = std::get_if<up::Error>(&m)) {
    LNET_LOG(Warn, kLogLnd, "proxy: lnetd refused a message: %s", e->text.c_str());
  } else {
    LNET_LOG(Warn, kLogLnd, "proxy: unexpected %s from lnetd", up::type_name(up::type_of(m)));
  }
}

}  // namespace lnet::proxy
