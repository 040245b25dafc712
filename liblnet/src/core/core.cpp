// Bringing an instance up and down, its peers, and the state snapshots.
#include "core/core.hpp"

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
      cpts_(default_cpts(config.ncpts)),
      net_locks_(cpts_.count()),
      counters_(cpts_.count()),
      portals_(cpts_, make_interface_cookie()),
      peers_(cpts_),
      rtr_buffers_(cpts_.count()) {
  {
    MutexLock g(config_mutex_);
    (void)set_globals_locked(config.globals);  // checked by whoever made the Config
  }
  for (const FaultRule& f : config.faults) (void)faults_.add(f);  // checked when parsed
  for (auto& d : drivers) {
    if (!d) continue;
    if (BufferMemory* m = d->router_memory(); m && !rtr_memory_owner_) {
      rtr_memory_owner_ = d;
      rtr_buffers_.set_memory(m);
    }
    lnds_[d->net_type()] = std::move(d);
  }
}

Core::~Core() { shutdown(); }

Status Core::startup() {
  if (Status s = config_.globals.check(); !s) return s;
  if (Status s = start_nets(); !s) {
    shutdown();
    return s;
  }
  checker_ = std::thread([this] { checker_loop(); });
  monitor_ = std::thread([this] { monitor_loop(); });
  discovery_thread_ = std::thread([this] { discovery_loop(); });
  return {};
}

Status Core::start_nets() {
  MutexLock g(config_mutex_);
  table_.store(tables_.emplace_back(std::make_unique<net::NetTable>()).get(), std::memory_order_release);
  NetConfig lo;  // self sends take no credits; the tunables are never used
  lo.net = NetId::make(kLoLnd, 0);
  auto r = bring_up(lo);
  if (!r) return r.failure();
  lo_ni_ = *r;
  for (const NetConfig& nc : config_.nets) {
    if (nc.net.type() == kLoLnd) continue;  // 0@lo always exists
    if (auto n = bring_up(nc); !n) return n.failure();
  }
  started_.store(true, std::memory_order_release);
  if (int rc = setup_ping_target()) return Failure{rc, "cannot set up the ping target: " + errno_string(rc)};
  return {};
}

void Core::shutdown() {
  if (stopping_.exchange(true)) return;
  {
    MutexLock g(checker_mutex_);
    checker_cv_.notify_all();
  }
  if (checker_.joinable()) checker_.join();
  {
    MutexLock g(monitor_mutex_);
    monitor_cv_.notify_all();
  }
  if (monitor_.joinable()) monitor_.join();
  {
    MutexLock g(dc_mutex_);
    dc_cv_.notify_all();
    dc_done_cv_.notify_all();
  }
  if (discovery_thread_.joinable()) discovery_thread_.join();  // fails the messages it held
  (void)release_delayed(0, true);                              // messages fault rules still hold: discarded
  portals::DeliveryQueue dropped;
  portals_.clear_all(dropped, *this);
  while (portals::Delivery* d = dropped.pop_front()) drop_rx(as_message(d));
  // Messages still waiting for credits or router buffers never reached a driver: fail them.
  Fifo<FifoLink> waiting;
  {
    MutexLock g(config_mutex_);
    ExclusiveLock x(net_locks_);
    for (auto& ni : all_nis_)
      for (unsigned c = 0; ni->tq && c < cpts_.count(); ++c) waiting.splice(ni->tq[c].delayed);
    for (auto& p : peers_.peers()) {
      for (auto& lpni : p->nis) {
        waiting.splice(lpni->txq);
        waiting.splice(lpni->rtrq);
      }
    }
    for (unsigned c = 0; c < cpts_.count(); ++c)
      for (int k = 0; k < net::kNumPools; ++k) waiting.splice(rtr_buffers_.pool(c, k).waiting);
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
  MutexLock g(config_mutex_);
  for (auto& ni : all_nis_)
    if (!ni->deleted.load()) take_down(ni.get());
  {
    ExclusiveLock x(net_locks_);
    peers_.clear();
  }
  table_.store(nullptr, std::memory_order_release);
  tables_.clear();
  all_nis_.clear();
  all_nets_.clear();
  lnds_.clear();
  lo_ni_ = nullptr;
  started_.store(false, std::memory_order_release);
}

Message* Core::new_msg(unsigned cpt) {
  Message* m = msg_alloc();
  m->core = this;
  m->cpt = m->alloc_cpt = cpt;
  counters_.msg_alloc(cpt);
  return m;
}

void Core::free_msg(Message* m) {
  counters_.msg_free(m->alloc_cpt);
  msg_free(m);
}

void Core::reset_counters() {
  counters_.reset();
  for (Ni* ni : table().nis) ni->stats.reset();
  ExclusiveLock x(net_locks_);
  for (auto& p : peers_.peers())
    for (auto& lpni : p->nis) lpni->stats.reset();
}

// ---------------------------------------------------------------- peers

int Core::add_peer_ni_locked(Nid primary, Nid nid, bool multi_rail) {
  int rc = peers_.add_ni(primary, nid, multi_rail, peer_credits_for(nid.net()), peer_rtr_credits_for(nid.net()));
  if (rc == 0) {
    udsp_.apply_new(peers_.find(primary), table());
    udsp_.apply_new(peers_.find(nid), table());
  }
  config_gen_.fetch_add(1, std::memory_order_relaxed);
  return rc;
}

PeerNi* Core::peer_ni_for(Nid nid, Nid* primary) {
  {
    MutexLock g(net_locks_[cpts_.of_nid(nid)]);
    if (PeerNi* lpni = peers_.find(nid)) {
      if (primary) *primary = lpni->peer->primary;  // discovery may change it: read under the lock
      return lpni;
    }
  }
  // First message to or from this NID: its peer is made (a configuration change).
  ExclusiveLock x(net_locks_);
  if (!peers_.find(nid)) (void)add_peer_ni_locked(nid, nid, false);
  PeerNi* lpni = peers_.find(nid);
  if (lpni && primary) *primary = lpni->peer->primary;
  return lpni;
}

Status Core::add_peer(const PeerConfig& p, bool configured) {
  std::vector<Nid> all{p.primary};
  all.insert(all.end(), p.nids.begin(), p.nids.end());
  for (Nid nid : all) {
    if (nid.is_any() || nid.is_lo()) return Failure{-EINVAL, "bad peer NID " + nid.to_string()};
  }
  ExclusiveLock x(net_locks_);
  for (Nid nid : all) {
    if (int rc = add_peer_ni_locked(p.primary, nid, p.multi_rail); rc)
      return Failure{rc, "cannot add " + nid.to_string() + " to peer " + p.primary.to_string() +
                             (rc == -EEXIST ? ": it belongs to another peer" : ": " + errno_string(rc))};
  }
  if (configured) {
    net::Peer* peer = peers_.find(p.primary)->peer;
    peer->configured = true;
    for (Nid nid : all) peers_.find(nid)->configured = true;
    if (p.lock_primary) peer->dc.flags.fetch_or(net::peer_state::kLockPrimary);
  }
  return {};
}

Status Core::del_peer(Nid primary, const std::vector<Nid>& nids, bool force) {
  std::vector<PeerNi*> removed;
  MsgQueue failed;
  {
    ExclusiveLock x(net_locks_);
    std::vector<Nid> gone = nids;
    PeerNi* prim = peers_.find(primary);
    bool whole = gone.empty() || std::find(gone.begin(), gone.end(), primary) != gone.end();
    if (prim && prim->peer->primary == primary && whole && !force &&
        (prim->peer->dc.flags.load() & net::peer_state::kLockPrimary)) {
      // A locked primary NID stays (as LNet keeps the NIDs Lustre gave it): the peer
      // loses its other NIDs only.
      LNET_LOG(Warn, kLogConfig, "peer %s has a locked primary NID: keeping it (--force deletes it)",
               primary.to_string().c_str());
      gone.clear();
      for (auto& lpni : prim->peer->nis)
        if (!lpni->removed && lpni->nid != primary) gone.push_back(lpni->nid);
      if (gone.empty()) return {};
    }
    if (int rc = peers_.remove(primary, gone, &removed); rc)
      return Failure{rc, "no peer " + primary.to_string() + (nids.empty() ? "" : " with those NIDs")};
    config_gen_.fetch_add(1, std::memory_order_relaxed);
    for (PeerNi* lpni : removed)
      while (FifoLink* l = lpni->txq.pop_front()) failed.push_back(as_message(l));
  }
  while (Message* m = failed.pop_front()) {
    m->health = HealthStatus::LocalAborted;
    finalize(m, -EHOSTUNREACH);
  }
  return {};
}

std::vector<PeerConfig> Core::configured_peers() const {
  std::vector<PeerConfig> out;
  ExclusiveLock x(const_cast<CptLocks&>(net_locks_));
  for (const auto& p : peers_.peers()) {
    if (!p->configured) continue;
    PeerConfig pc;
    pc.primary = p->primary;
    pc.multi_rail = p->multi_rail;
    pc.lock_primary = (p->dc.flags.load() & net::peer_state::kLockPrimary) != 0;
    for (const auto& lpni : p->nis)
      if (!lpni->removed && lpni->nid != p->primary) pc.nids.push_back(lpni->nid);
    out.push_back(std::move(pc));
  }
  return out;
}

std::vector<PeerInfo> Core::peer_info() const {
  std::vector<PeerInfo> out;
  std::vector<Nid> gateways;
  if (const net::RouteTable* rt = routes_.table())
    for (const auto& e : rt->routes) gateways.push_back(e.cfg.gateway);
  bool routing = routing_.load(std::memory_order_relaxed);
  ExclusiveLock x(const_cast<CptLocks&>(net_locks_));
  for (const auto& p : peers_.peers()) {
    PeerInfo pi;
    bool gateway = false;
    for (const auto& lpni : p->nis)
      gateway = gateway || (!lpni->removed && std::find(gateways.begin(), gateways.end(), lpni->nid) != gateways.end());
    pi.primary_nid = p->primary;
    pi.multi_rail = p->multi_rail;
    pi.state = p->state_bits();
    // Its NIs grouped by net, the primary's net first (LNet's order).
    std::vector<const PeerNi*> order;
    for (int pass = 0; pass < 2; ++pass)
      for (const auto& pn : p->nets)
        if ((pn->net == p->primary.net()) == (pass == 0))
          for (const PeerNi* n : pn->nis)
            if (!n->removed) order.push_back(n);
    for (const PeerNi* lpni : order) {
      PeerNiInfo n;
      n.nid = lpni->nid;
      n.up = lpni->alive.load();
      if (gateway) {
        n.aliveness = true;
      } else if (routing) {
        const net::NetView* v = find_net(lpni->nid.net());
        n.aliveness = v && !v->nis.empty() && v->nis.front()->config.tunables.peer_timeout > 0;
      }
      n.max_tx_credits = lpni->max_tx_credits;
      n.tx_credits = lpni->tx_credits.load();
      n.min_tx_credits = lpni->min_tx_credits;
      n.tx_q_nob = lpni->txq_nob;
      n.rtr_credits = lpni->rtr_credits;
      n.min_rtr_credits = lpni->min_rtr_credits;
      n.health = lpni->health.load();
      n.hs_dropped = lpni->failures.get(HealthStatus::RemoteDropped);
      n.hs_timeout = lpni->failures.get(HealthStatus::RemoteTimeout);
      n.hs_error = lpni->failures.get(HealthStatus::RemoteError);
      n.hs_network_timeout = lpni->failures.get(HealthStatus::NetworkTimeout);
      {
        MutexLock g(recovery_mutex_);
        n.ping_count = lpni->recovery.ping_count;
        n.next_ping = lpni->recovery.queued ? lpni->recovery.next_ping / kNsPerSec : 0;
      }
      n.selection_priority = lpni->sel_priority.load();
      n.net_priority = lpni->peer_net->sel_priority;
      n.preferred_sources = lpni->pref_local;
      for (const NidMatcher& m : lpni->pref_rtr) n.preferred_gateways.push_back(m.to_string());
      n.sent = lpni->stats.get(TypeStats::kSent);
      n.received = lpni->stats.get(TypeStats::kReceived);
      n.dropped = lpni->stats.get(TypeStats::kDropped);
      pi.nis.push_back(n);
    }
    out.push_back(std::move(pi));
  }
  return out;
}

PeerNi* Core::find_peer_ni(Nid nid) {
  MutexLock g(net_locks_[cpts_.of_nid(nid)]);
  return peers_.find(nid);
}

void Core::notify_peer(NetInterface&, Nid peer, bool alive) {
  MutexLock g(net_locks_[cpts_.of_nid(peer)]);
  if (PeerNi* lpni = peers_.find(peer)) lpni->alive.store(alive, std::memory_order_relaxed);
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
