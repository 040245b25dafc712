#include "uplink.hpp"

#include <unistd.h>

#include <cerrno>

#include <lnet/log.hpp>

namespace lnet::proxy {

Result<std::unique_ptr<Uplink>> Uplink::connect(const std::string& path, std::uint32_t rank,
                                                std::chrono::milliseconds timeout, int wake_fd) {
  auto b = up::BridgeClient::connect(path, rank, timeout);
  if (!b) return b.failure();
  std::unique_ptr<Uplink> u(new Uplink);
  u->bridge_ = std::move(*b);
  u->wake_fd_ = wake_fd;
  u->reader_ = std::thread([p = u.get()] { p->reader_main(); });
  return u;
}

Uplink::~Uplink() {
  closing_.store(true);
  bridge_->shutdown();
  reader_.join();
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
  MutexLock g(mu_);
  links_[link->serial()] = std::move(link);
}

void Uplink::detach(const AppLink& link) {
  MutexLock g(mu_);
  links_.erase(link.serial());
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

void Uplink::reader_main() {
  for (;;) {
    auto m = bridge_->receive(-1);
    if (!m) {
      if (m.code() == -EPROTO) {
        LNET_LOG(Warn, kLogLnd, "proxy: from lnetd: %s", m.message().c_str());
        continue;
      }
      if (!closing_.load()) LNET_LOG(Error, kLogLnd, "proxy: %s", m.message().c_str());
      break;
    }
    if (auto* r = std::get_if<up::Recv>(&*m)) {
      if (auto link = by_serial(AppLink::serial_of(r->cookie)))
        link->on_recv(*r);
      else
        answer_orphan(*m);
    } else if (auto* s = std::get_if<up::Send>(&*m)) {
      if (auto link = by_pid(s->pid))
        link->on_send(*s);
      else
        answer_orphan(*m);
    } else if (auto* p = std::get_if<up::PidReply>(&*m)) {
      MutexLock g(mu_);
      if (auto it = calls_.find(p->cookie); it != calls_.end()) {
        it->second = *p;
        cv_.notify_all();
      }
    } else if (auto* e = std::get_if<up::Error>(&*m)) {
      LNET_LOG(Warn, kLogLnd, "proxy: lnetd refused a message: %s", e->text.c_str());
    } else {
      LNET_LOG(Warn, kLogLnd, "proxy: unexpected %s from lnetd", up::type_name(up::type_of(*m)));
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

}  // namespace lnet::proxy
