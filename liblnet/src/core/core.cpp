// Bringing an instance up and down, its peers, and the state snapshots.
#include "core/admin.hpp"

#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

#include "base/clock.hpp"

namespace lnet::core {

namespace {

unsigned default_cpts(unsigned requested) {
  if (requested) return std::min(requested, 255U);
  unsigned n = std::thread::hardware_concurrency();
  return std::clamp(n, 1U, 8U);
}

std::uint64_t make_interface_cookie() {
  std::random_device rd;
  std::uint64_t c = (std::uint64_t{rd()} << 32) ^ rd() ^ static_cast<std::uint64_t>(getpid());
  return c == kWireCookieNone ? 1 : c;
}

}  // namespace

Core::Core(const Config& config, Pid pid, std::vector<std::shared_ptr<Lnd>> drivers)
    : config_(config),
      pid_(pid),
      st_(default_cpts(config.ncpts)),
      portals_(st_.cpts, make_interface_cookie()),
      admin_(std::make_unique<Admin>(*this)) {
  for (const FaultRule& f : config.faults) (void)faults_.rules.add(f);  // checked when parsed
  st_.large_nids.store(config.large_nids);
  bool has_router_memory = false;
  for (auto& d : drivers) {
    if (!d) continue;
    if (BufferMemory* m = d->router_memory(); m && !has_router_memory) {
      has_router_memory = true;
      router_.set_memory(d, m);
    }
  }
  MutexLock g(nets_.mutex());
  (void)nets_.set_globals(config.globals);  // checked by whoever made the Config
  for (auto& d : drivers)
    if (d) nets_.add_driver(std::move(d));
}

Core::~Core() { shutdown(); }

Status Core::startup() {
  if (Status s = config_.globals.check(); !s) return s;
  Status s;
  {
    MutexLock g(nets_.mutex());
    s = nets_.start(config_.nets);
    if (s) {
      started_.store(true, std::memory_order_release);
      if (int rc = ping_target_.setup()) s = Failure{rc, "cannot set up the ping target: " + errno_string(rc)};
    }
  }
  if (!s) {
    shutdown();
    return s;
  }
  router_.start();
  health_.start();
  discovery_.start();
  return {};
}

void Core::shutdown() {
  if (st_.stopping.exchange(true)) return;
  router_.stop();
  health_.stop();
  discovery_.stop();               // fails the messages it held
  (void)faults_.release(0, true);  // messages fault rules still hold: discarded
  portals::DeliveryQueue dropped;
  portals_.clear_all(dropped, *this);
  while (portals::Delivery* d = dropped.pop_front()) drop_rx(as_message(d));
  // Messages still waiting for credits or router buffers never reached a driver: fail them.
  Fifo<FifoLink> waiting;
  {
    MutexLock g(nets_.mutex());
    ExclusiveLock x(st_.locks);
    for (auto& ni : nets_.all_nis())
      for (unsigned c = 0; ni->tq && c < st_.cpts.count(); ++c) waiting.splice(ni->tq[c].delayed);
    for (auto& p : st_.peers.peers()) {
      for (auto& lpni : p->nis) {
        waiting.splice(lpni->txq);
        waiting.splice(lpni->rtrq);
      }
    }
    router_.drain_waiting(waiting);
  }
  while (FifoLink* l = waiting.pop_front()) {
    Message* m = as_message(l);
    if (m->receiving) {
      drop_rx(m);  // a forwarded message still waiting for a buffer
      continue;
    }
    m->health = HealthStatus::LocalAborted;
    finalize(m, -ESHUTDOWN);
  }
  MutexLock g(nets_.mutex());
  nets_.stop();
  started_.store(false, std::memory_order_release);
}

Status Core::set_ni_up(Nid nid, bool up) {
  MutexLock g(nets_.mutex());
  Ni* ni = st_.nets().find_ni(nid);
  if (!ni || ni == st_.lo_ni) return Failure{-ENOENT, "no NI " + nid.to_string()};
  if (ni->up.exchange(up) != up) ping_target_.refresh();
  return {};
}

int Core::lnd_timeout() const {
  GlobalTunables g;
  g.transaction_timeout = st_.tun.transaction_timeout.load(std::memory_order_relaxed);
  g.retry_count = st_.tun.retry_count.load(std::memory_order_relaxed);
  return g.lnd_timeout();
}

// ---------------------------------------------------------------- Control: NIs and globals

Message* Core::new_msg(unsigned cpt) {
  Message* m = msg::msg_alloc();
  m->owner = this;
  m->cpt = m->alloc_cpt = cpt;
  st_.counters.msg_alloc(cpt);
  return m;
}

void Core::free_msg(Message* m) {
  st_.counters.msg_free(m->alloc_cpt);
  msg::msg_free(m);
}

// ---------------------------------------------------------------- peers

// ---------------------------------------------------------------- discovery's host

int Core::send_ping(MdHandle md, Nid target) {
  return send_get(Nid::any(), md, ProcessId{target, kPidLustre}, kReservedPortal, kPingMatchBits, 0, false);
}

int Core::send_push(MdHandle md, Nid target) {
  return put(Nid::any(), md, AckReq::Ack, ProcessId{target, kPidLustre}, kReservedPortal, kPingMatchBits, 0, 0);
}

void Core::release_held(MsgQueue& resend, MsgQueue& failed, int rc) {
  std::int64_t now = resend.empty() ? 0 : coarse_now_ns();
  while (Message* m = resend.pop_front()) {
    if (m->deadline_ns && now >= m->deadline_ns) {
      // It waited for discovery past its deadline (held again round after round, say):
      // too late, as for one that waited for credits.
      m->health = HealthStatus::LocalTimeout;
      finalize(m, -ETIMEDOUT);
      continue;
    }
    if (int err = send(m->self, m, m->target.nid)) {
      m->health = HealthStatus::LocalError;
      finalize(m, err);
    }
  }
  while (Message* m = failed.pop_front()) {
    m->health = HealthStatus::LocalError;
    finalize(m, rc ? rc : -EHOSTUNREACH);
  }
}

void Core::gateway_said(const Peer* gw, const PingInfo& info) { router_.update_routes_locked(gw, info); }

// ---------------------------------------------------------------- health's host

int Core::send_recovery_ping(MdHandle md, Nid src, Nid dst) {
  return send_get(src, md, ProcessId{dst, kPidLustre}, kReservedPortal, kPingMatchBits, 0, true);
}

std::int64_t Core::expire(std::int64_t now) {
  portals_.expire_responses(now, *this, [this](Nid hop) { health_.response_timed_out(hop); });
  std::int64_t next = portals_.next_response_deadline();
  if (std::int64_t held = faults_.release(now, false); held && (next == 0 || held < next)) next = held;
  return next;
}

bool Core::awaiting() { return portals_.tracked_responses() > 0 || faults_.release(0, false) != 0; }

void Core::push_status_changes() {
  // An NI whose health reached 0 or came back from it (health moves without a lock)
  // changes the status peers are told.
  for (Ni* ni : st_.nets().nis)
    if (ni != st_.lo_ni && !ni->deleted.load() && st_.ni_status_up(*ni) != ni->told_up.load()) {
      ping_info_changed();
      return;
    }
}

bool Core::periodic() {
  push_status_changes();
  router_.drain_step();
  if (!st_.routing.load(std::memory_order_relaxed)) return false;
  router_.check_ni_liveness();  // a router looks at its NIs every recovery_interval
  return true;
}

void Core::link_state(NetInterface& ni, bool up) {
  // Drivers call this from their threads holding their own locks, and from startup():
  // no lock of ours here. The monitor tells the peers (push_status_changes).
  Ni& n = static_cast<Ni&>(ni);
  if (n.fatal_error.exchange(!up) == !up) return;
  LNET_LOG(Warn, kLogCore, "%s: link %s", n.nid.to_string().c_str(), up ? "up again: NI up" : "down: NI down");
  st_.config_gen.fetch_add(1, std::memory_order_relaxed);  // paths chosen before are chosen again
  if (up) n.last_rx.store(coarse_now_ns() / kNsPerSec, std::memory_order_relaxed);  // a router's silence starts now
  health_.look_now();
}

void Core::link_up(NetInterface& ni) { router_.link_up(static_cast<Ni&>(ni)); }

void Core::ping_info_changed() {
  MutexLock c(nets_.mutex());
  ping_target_.refresh();
}

void Core::notify_peer(NetInterface&, Nid peer, bool alive) {
  PeerNi* lpni;
  {
    MutexLock g(st_.locks[st_.cpts.of_nid(peer)]);
    lpni = st_.peers.find(peer);
    if (!lpni) return;
    lpni->alive.store(alive, std::memory_order_relaxed);
  }
  // A driver that lost every connection to a peer NI says so: it counts against the peer
  // NI's health (and starts its recovery) as a failed send would, as LNet's notify does.
  if (!alive) health_.peer_ni_failed(lpni);
}

int Core::clear_lazy_portal(unsigned portal) {
  portals::DeliveryQueue dropped;
  int rc = portals_.clear_lazy(portal, dropped);
  while (portals::Delivery* d = dropped.pop_front()) drop_rx(as_message(d));
  return rc;
}

Result<MdHandle> Core::md_attach(MeHandle me, const MdDesc& desc, Unlink unlink) {
  portals::DeliveryQueue matched, dropped;
  auto r = portals_.md_attach(me, desc, unlink, matched, dropped);
  receive_matched(matched, dropped);
  return r;
}

}  // namespace lnet::core
