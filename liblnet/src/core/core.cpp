// Bringing an instance up and down, its local NIs and peers, and the state snapshots.
#include "core/core.hpp"

#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>

#include <lnet/log.hpp>

#include "lnd/registry.hpp"

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

Core::Core(const Config& config, Pid pid)
    : config_(config),
      pid_(pid),
      cpts_(default_cpts(config.ncpts)),
      net_locks_(cpts_.count()),
      counters_(cpts_.count()),
      portals_(std::make_unique<portals::PortalTable>(cpts_, make_interface_cookie())),
      peers_(cpts_) {
  (void)log_enabled(LogLevel::Error, kLogCore);  // reads LNET_LOG_* now: a bad value is reported at start
}

Core::~Core() { shutdown(); }

Status Core::startup() {
  std::lock_guard g(config_mutex_);
  table_.store(tables_.emplace_back(std::make_unique<NetTable>()).get(), std::memory_order_release);
  pools_ = std::make_unique<RtrPool[]>(cpts_.count() * kNumPools);
  NetConfig lo;  // self sends take no credits; the tunables are never used
  lo.net = NetId::make(kLoLnd, 0);
  auto r = bring_up(lo);
  if (!r) return r.failure();
  lo_ni_ = *r;
  for (const NetConfig& nc : config_.nets) {
    if (nc.net.type() == kLoLnd) continue;  // 0@lo always exists
    if (auto n = bring_up(nc); !n) {
      config_mutex_.unlock();
      shutdown();
      config_mutex_.lock();
      return n.failure();
    }
  }
  started_.store(true, std::memory_order_release);
  if (int rc = setup_ping_target()) {
    config_mutex_.unlock();
    shutdown();
    config_mutex_.lock();
    return Failure{rc, "cannot set up the ping target: " + errno_string(rc)};
  }
  checker_ = std::thread([this] { checker_loop(); });
  return {};
}

void Core::shutdown() {
  if (stopping_.exchange(true)) return;
  {
    std::lock_guard g(checker_mutex_);
    checker_cv_.notify_all();
  }
  if (checker_.joinable()) checker_.join();
  MsgQueue dropped;
  portals_->clear_all(dropped, *this);
  while (Message* m = dropped.pop_front()) drop_rx(m);
  // Messages still waiting for credits or router buffers never reached a driver: fail them.
  MsgQueue waiting;
  {
    ExclusiveLock x(net_locks_);
    for (auto& ni : all_nis_)
      for (unsigned c = 0; ni->tq && c < cpts_.count(); ++c)
        while (Message* m = ni->tq[c].delayed.pop_front()) waiting.push_back(m);
    for (auto& p : peers_.peers()) {
      for (auto& lpni : p->nis) {
        while (Message* m = lpni->txq.pop_front()) waiting.push_back(m);
        while (Message* m = lpni->rtrq.pop_front()) waiting.push_back(m);
      }
    }
    for (unsigned i = 0; pools_ && i < cpts_.count() * kNumPools; ++i)
      while (Message* m = pools_[i].waiting.pop_front()) waiting.push_back(m);
  }
  while (Message* m = waiting.pop_front()) {
    if (m->receiving) {
      drop_rx(m);  // a forwarded message still waiting for a buffer
      continue;
    }
    m->health = HealthStatus::LocalAborted;
    finalize(m, -ESHUTDOWN);
  }
  std::lock_guard g(config_mutex_);
  for (auto& ni : all_nis_)
    if (!ni->deleted.load()) ni->lnd->shutdown(*ni);
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

std::vector<PeerInfo> Core::peer_info() const {
  std::vector<PeerInfo> out;
  ExclusiveLock x(const_cast<CptLocks&>(net_locks_));
  for (const auto& p : peers_.peers()) {
    PeerInfo pi;
    pi.primary_nid = p->primary;
    pi.multi_rail = p->multi_rail;
    for (const auto& lpni : p->nis) {
      if (lpni->removed) continue;
      PeerNiInfo n;
      n.nid = lpni->nid;
      n.up = lpni->alive.load();
      n.max_tx_credits = lpni->max_tx_credits;
      n.tx_credits = lpni->tx_credits.load();
      n.min_tx_credits = lpni->min_tx_credits;
      n.tx_q_nob = lpni->txq_nob;
      n.rtr_credits = lpni->rtr_credits;
      n.min_rtr_credits = lpni->min_rtr_credits;
      n.health = lpni->health.load();
      n.selection_priority = lpni->sel_priority.load();
      n.sent = lpni->stats.get(TypeStats::kSent);
      n.received = lpni->stats.get(TypeStats::kReceived);
      n.dropped = lpni->stats.get(TypeStats::kDropped);
      pi.nis.push_back(n);
    }
    out.push_back(std::move(pi));
  }
  return out;
}

int Core::add_peer_ni(Nid primary, Nid nid, bool multi_rail, bool configured) {
  if (primary.is_any() || nid.is_any() || primary.is_lo() || nid.is_lo()) return -EINVAL;
  if (is_local_nid(primary) || is_local_nid(nid)) return -EINVAL;
  ExclusiveLock x(net_locks_);
  int rc = peers_.add_ni(primary, nid, multi_rail, peer_credits_for(nid.net()), peer_rtr_credits_for(nid.net()));
  if (rc == 0) {
    if (configured) peers_.find(primary)->peer->configured = true;
    udsp_new_peer_ni(peers_.find(primary));
    udsp_new_peer_ni(peers_.find(nid));
  }
  config_gen_.fetch_add(1, std::memory_order_relaxed);
  return rc;
}

int Core::del_peer(Nid primary, const std::vector<Nid>& nids) {
  std::vector<PeerNi*> removed;
  MsgQueue failed;
  {
    ExclusiveLock x(net_locks_);
    int rc = peers_.remove(primary, nids, &removed);
    if (rc) return rc;
    config_gen_.fetch_add(1, std::memory_order_relaxed);
    for (PeerNi* lpni : removed) {
      while (Message* m = lpni->txq.pop_front()) failed.push_back(m);
    }
  }
  while (Message* m = failed.pop_front()) {
    m->health = HealthStatus::LocalAborted;
    finalize(m, -EHOSTUNREACH);
  }
  return 0;
}

std::vector<PeerConfig> Core::configured_peers() const {
  std::vector<PeerConfig> out;
  ExclusiveLock x(const_cast<CptLocks&>(net_locks_));
  for (const auto& p : peers_.peers()) {
    if (!p->configured) continue;
    PeerConfig pc;
    pc.primary = p->primary;
    pc.multi_rail = p->multi_rail;
    for (const auto& lpni : p->nis)
      if (!lpni->removed && lpni->nid != p->primary) pc.nids.push_back(lpni->nid);
    out.push_back(std::move(pc));
  }
  return out;
}

PeerNi* Core::find_peer_ni(Nid nid) {
  std::lock_guard g(net_locks_[cpts_.of_nid(nid)]);
  return peers_.find(nid);
}

void Core::notify_peer(NetInterface&, Nid peer, bool alive) {
  std::lock_guard g(net_locks_[cpts_.of_nid(peer)]);
  if (PeerNi* lpni = peers_.find(peer)) lpni->alive.store(alive, std::memory_order_relaxed);
}

int Core::clear_lazy_portal(unsigned portal) {
  MsgQueue dropped;
  int rc = portals_->clear_lazy(portal, dropped);
  while (Message* m = dropped.pop_front()) drop_rx(m);
  return rc;
}

Result<MdHandle> Core::md_attach(MeHandle me, const MdDesc& desc, Unlink unlink) {
  MsgQueue matched, dropped;
  auto r = portals_->md_attach(me, desc, unlink, matched, dropped);
  receive_matched(matched, dropped);
  return r;
}

}  // namespace lnet::core
