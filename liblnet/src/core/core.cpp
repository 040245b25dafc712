// Bringing an instance up and down, its local NIs and peers, and the state snapshots.
#include "core/core.hpp"

#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>

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
      peers_(cpts_) {}

Core::~Core() { shutdown(); }

Net* Core::find_net(NetId id) const {
  for (const auto& n : nets_)
    if (n->id == id) return n.get();
  return nullptr;
}

Ni* Core::find_ni_locked(Nid nid) const {
  for (const auto& ni : nis_)
    if (ni->nid == nid) return ni.get();
  return nullptr;
}

Ni* Core::find_ni(Nid nid) const { return find_ni_locked(nid); }

int Core::peer_credits_for(NetId net) const {
  Net* n = find_net(net);
  if (n && !n->nis.empty()) {
    const NetTunables& t = n->nis.front()->config.tunables;
    return std::min(t.peer_credits, t.credits);  // a peer never gets more than the NI has
  }
  return NetTunables{}.peer_credits;
}

Result<bool> Core::startup() {
  auto bring_up = [&](const NetConfig& nc) -> Result<bool> {
    std::uint32_t type = nc.net.type();
    auto it = lnds_.find(type);
    if (it == lnds_.end()) {
      std::unique_ptr<Lnd> lnd = make_lnd(type);
      if (!lnd) {
        const char* name = lnd_type_name(type);
        return Failure{-EPROTONOSUPPORT, "not supported: no driver for network type '" +
                                             std::string(name ? name : std::to_string(type)) + "' in this process"};
      }
      it = lnds_.emplace(type, std::move(lnd)).first;
    }
    Net* net = find_net(nc.net);
    if (!net) {
      nets_.push_back(std::make_unique<Net>());
      net = nets_.back().get();
      net->id = nc.net;
      net->lnd = it->second.get();
    }
    auto ni = std::make_unique<Ni>();
    ni->config = nc;
    ni->host = this;
    ni->lnd = net->lnd;
    ni->net = net;
    ni->index = static_cast<unsigned>(nis_.size());
    ni->pid = pid_;
    if (nc.nid) ni->nid = *nc.nid;
    int rc = net->lnd->startup(*ni);
    if (rc < 0) {
      if (net->nis.empty()) nets_.pop_back();
      return Failure{rc, "cannot start network " + nc.net.to_string() + ": " + errno_string(rc)};
    }
    if (ni->nid.is_any() || ni->nid.net() != nc.net) {
      net->lnd->shutdown(*ni);
      if (net->nis.empty()) nets_.pop_back();
      return Failure{-EINVAL, "the driver of " + nc.net.to_string() + " gave no NID on that network"};
    }
    if (find_ni(ni->nid)) {
      net->lnd->shutdown(*ni);
      return Failure{-EEXIST, "NID " + ni->nid.to_string() + " is configured twice"};
    }
    const NetTunables& t = nc.tunables;
    if (t.credits < 1 || t.peer_credits < 1 || t.peer_buffer_credits < 0 || t.peer_timeout < 0) {
      net->lnd->shutdown(*ni);
      if (net->nis.empty()) nets_.pop_back();
      return Failure{-EINVAL, "bad tunables for " + nc.net.to_string() + ": credits " + std::to_string(t.credits) +
                                  ", peer_credits " + std::to_string(t.peer_credits) + " (both must be >= 1)"};
    }
    int per_cpt = t.credits;
    if (cpts_.count() > 1) per_cpt = std::min(t.credits, std::max(t.credits / static_cast<int>(cpts_.count()),
                                                                  8 * t.peer_credits));
    ni->tq = std::make_unique<TxQueue[]>(cpts_.count());
    for (unsigned c = 0; c < cpts_.count(); ++c) ni->tq[c].credits = ni->tq[c].max_credits = ni->tq[c].min_credits = per_cpt;
    net->nis.push_back(ni.get());
    nis_.push_back(std::move(ni));
    return true;
  };

  NetConfig lo;  // self sends take no credits; the tunables are never used
  lo.net = NetId::make(kLoLnd, 0);
  if (auto r = bring_up(lo); !r) return r;
  lo_ni_ = nis_.front().get();
  for (const NetConfig& nc : config_.nets) {
    if (nc.net.type() == kLoLnd) continue;  // 0@lo always exists
    if (auto r = bring_up(nc); !r) {
      shutdown();
      return r;
    }
  }
  started_.store(true, std::memory_order_release);
  if (int rc = setup_ping_target()) {
    shutdown();
    return Failure{rc, "cannot set up the ping target: " + errno_string(rc)};
  }
  return true;
}

void Core::shutdown() {
  if (stopping_.exchange(true)) return;
  MsgQueue dropped;
  portals_->clear_all(dropped, *this);
  while (Message* m = dropped.pop_front()) drop_rx(m);
  // Messages still waiting for credits never reached a driver: fail them.
  MsgQueue waiting;
  {
    ExclusiveLock x(net_locks_);
    for (auto& ni : nis_)
      for (unsigned c = 0; ni->tq && c < cpts_.count(); ++c)
        while (Message* m = ni->tq[c].delayed.pop_front()) waiting.push_back(m);
    for (auto& p : peers_.peers())
      for (auto& lpni : p->nis)
        while (Message* m = lpni->txq.pop_front()) waiting.push_back(m);
  }
  while (Message* m = waiting.pop_front()) {
    m->health = HealthStatus::LocalAborted;
    finalize(m, -ESHUTDOWN);
  }
  for (auto& ni : nis_) ni->lnd->shutdown(*ni);
  {
    ExclusiveLock x(net_locks_);
    peers_.clear();
  }
  nis_.clear();
  nets_.clear();
  lnds_.clear();
  lo_ni_ = nullptr;
  started_.store(false, std::memory_order_release);
}

std::vector<Nid> Core::nids() const {
  std::vector<Nid> out;
  for (const auto& ni : nis_) out.push_back(ni->nid);
  return out;
}

int Core::dist(Nid nid, Nid* src, std::uint32_t* order) const {
  if (nid.is_lo() && nid != Nid::lo()) return -EHOSTUNREACH;
  if (find_ni(nid) || nid == Nid::lo()) {
    if (src) *src = nid;
    if (order) *order = 0;
    return 0;
  }
  for (std::size_t i = 0; i < nets_.size(); ++i) {
    if (nets_[i]->id == nid.net() && !nets_[i]->nis.empty()) {
      if (src) *src = nets_[i]->nis.front()->nid;
      if (order) *order = static_cast<std::uint32_t>(i);
      return 1;
    }
  }
  return -EHOSTUNREACH;
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
  for (auto& ni : nis_) ni->stats.reset();
  ExclusiveLock x(net_locks_);
  for (auto& p : peers_.peers())
    for (auto& lpni : p->nis) lpni->stats.reset();
}

std::vector<NiInfo> Core::ni_info() const {
  std::vector<NiInfo> out;
  auto& locks = const_cast<CptLocks&>(net_locks_);
  for (const auto& ni : nis_) {
    NiInfo i;
    i.nid = ni->nid;
    i.up = ni->up.load();
    i.interfaces = ni->config.interfaces;
    i.tunables = ni->config.tunables;
    i.health = ni->health.load();
    i.fatal_error = ni->fatal_error.load();
    i.selection_priority = ni->sel_priority.load();
    for (unsigned c = 0; c < cpts_.count(); ++c) {
      std::lock_guard g(locks[c]);
      i.tx_credits += ni->tq[c].credits;
      i.min_tx_credits += ni->tq[c].min_credits;
    }
    i.sent = ni->stats.get(TypeStats::kSent);
    i.received = ni->stats.get(TypeStats::kReceived);
    i.dropped = ni->stats.get(TypeStats::kDropped);
    out.push_back(std::move(i));
  }
  return out;
}

std::vector<PeerInfo> Core::peer_info() const {
  std::vector<PeerInfo> out;
  ExclusiveLock x(const_cast<CptLocks&>(net_locks_));
  for (const auto& p : peers_.peers()) {
    PeerInfo pi;
    pi.primary_nid = p->primary;
    pi.multi_rail = p->multi_rail;
    for (const auto& lpni : p->nis) {
      PeerNiInfo n;
      n.nid = lpni->nid;
      n.up = lpni->alive.load();
      n.max_tx_credits = lpni->max_tx_credits;
      n.tx_credits = lpni->tx_credits.load();
      n.min_tx_credits = lpni->min_tx_credits;
      n.tx_q_nob = lpni->txq_nob;
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

int Core::add_peer_ni(Nid primary, Nid nid, bool multi_rail) {
  if (primary.is_any() || nid.is_any()) return -EINVAL;
  if (is_local_nid(primary) || is_local_nid(nid)) return -EINVAL;
  ExclusiveLock x(net_locks_);
  int rc = peers_.add_ni(primary, nid, multi_rail, peer_credits_for(nid.net()));
  config_gen_.fetch_add(1, std::memory_order_relaxed);
  return rc;
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
