// The Control of an instance: peers, selection rules, fault rules and counters (the NIs
// and globals are in admin_nets.cpp).
#include <algorithm>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

#include "base/clock.hpp"
#include "core/admin.hpp"

namespace lnet::core {

Control& Core::control() { return *admin_; }
const Control& Core::control() const { return *admin_; }

Status Admin::add_peer(const PeerConfig& p, bool configured) {
  std::vector<Nid> all{p.primary};
  all.insert(all.end(), p.nids.begin(), p.nids.end());
  for (Nid nid : all) {
    if (nid.is_any() || nid.is_lo()) return Failure{-EINVAL, "bad peer NID " + nid.to_string()};
  }
  ExclusiveLock x(c_.st_.locks);
  for (Nid nid : all) {
    if (int rc = c_.st_.add_peer_ni_locked(p.primary, nid, p.multi_rail); rc)
      return Failure{rc, "cannot add " + nid.to_string() + " to peer " + p.primary.to_string() +
                             (rc == -EEXIST ? ": it belongs to another peer" : ": " + errno_string(rc))};
  }
  if (configured) {
    net::Peer* peer = c_.st_.peers.find(p.primary)->peer;
    peer->configured = true;
    for (Nid nid : all) c_.st_.peers.find(nid)->configured = true;
    if (p.lock_primary) peer->dc.flags.fetch_or(net::peer_state::kLockPrimary);
  }
  return {};
}

Status Admin::del_peer(Nid primary, const std::vector<Nid>& nids, bool force) {
  std::vector<PeerNi*> removed;
  MsgQueue failed;
  {
    ExclusiveLock x(c_.st_.locks);
    std::vector<Nid> gone = nids;
    PeerNi* prim = c_.st_.peers.find(primary);
    // A gateway's peer stays while a route goes through it, as LNet keeps it.
    if (prim)
      if (const net::RouteTable* rt = c_.st_.routes.table())
        for (const auto& r : rt->routes)
          for (const auto& lpni : prim->peer->nis)
            if (!lpni->removed && lpni->nid == r.cfg.gateway)
              return Failure{-EINVAL, "peer " + prim->peer->primary.to_string() + " is a router (" +
                                          r.cfg.gateway.to_string() + " is the gateway of a route to " +
                                          r.cfg.net.to_string() + "): not deleted (route del first)"};
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
    if (int rc = c_.st_.peers.remove(primary, gone, &removed); rc)
      return Failure{rc, "no peer " + primary.to_string() + (nids.empty() ? "" : " with those NIDs")};
    c_.st_.config_gen.fetch_add(1, std::memory_order_relaxed);
    for (PeerNi* lpni : removed)
      while (FifoLink* l = lpni->txq.pop_front()) failed.push_back(as_message(l));
  }
  while (Message* m = failed.pop_front()) {
    m->health = HealthStatus::LocalAborted;
    c_.finalize(m, -EHOSTUNREACH);
  }
  return {};
}

std::vector<PeerConfig> Admin::configured_peers() const {
  std::vector<PeerConfig> out;
  ExclusiveLock x(const_cast<CptLocks&>(c_.st_.locks));
  for (const auto& p : c_.st_.peers.peers()) {
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

std::vector<PeerInfo> Admin::peer_info() const {
  std::vector<PeerInfo> out;
  std::vector<Nid> gateways;
  if (const net::RouteTable* rt = c_.st_.routes.table())
    for (const auto& e : rt->routes) gateways.push_back(e.cfg.gateway);
  bool routing = c_.st_.routing.load(std::memory_order_relaxed);
  ExclusiveLock x(const_cast<CptLocks&>(c_.st_.locks));
  for (const auto& p : c_.st_.peers.peers()) {
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
        const net::NetView* v = c_.st_.find_net(lpni->nid.net());
        n.aliveness = v && !v->nis.empty() && v->nis.front()->config.tunables.peer_timeout > 0;
      }
      n.max_tx_credits = lpni->max_tx_credits;
      n.tx_credits = lpni->tx_credits.load();
      n.min_tx_credits = lpni->min_tx_credits;
      n.tx_q_nob = lpni->txq_nob;
      n.rtr_credits = lpni->rtr_credits;
      n.min_rtr_credits = lpni->min_rtr_credits;
      n.refcount =
          1 + std::max(0, n.max_tx_credits - n.tx_credits) + std::max(0, lpni->max_rtr_credits - n.rtr_credits);
      n.health = lpni->health.load();
      n.hs_dropped = lpni->failures.get(HealthStatus::RemoteDropped);
      n.hs_timeout = lpni->failures.get(HealthStatus::RemoteTimeout);
      n.hs_error = lpni->failures.get(HealthStatus::RemoteError);
      n.hs_network_timeout = lpni->failures.get(HealthStatus::NetworkTimeout);
      std::tie(n.ping_count, n.next_ping) = c_.health_.recovery_of(lpni->recovery);
      n.selection_priority = lpni->sel_priority.load();
      n.net_priority = lpni->peer_net->sel_priority;
      n.preferred_sources = lpni->pref_local;
      for (const NidMatcher& m : lpni->pref_rtr) n.preferred_gateways.push_back(m.to_string());
      n.sent = lpni->stats.get(TypeStats::kSent);
      n.received = lpni->stats.get(TypeStats::kReceived);
      n.dropped = lpni->stats.get(TypeStats::kDropped);
      n.latency = lpni->latency.get();
      pi.nis.push_back(n);
    }
    out.push_back(std::move(pi));
  }
  return out;
}

Result<PeerInfo> Admin::discover(Nid nid, bool force, std::chrono::milliseconds timeout) {
  if (nid.is_any()) return Failure{-EINVAL, "cannot discover " + nid.to_string()};
  if (!c_.started_.load() || c_.st_.stopping.load()) return Failure{-ESHUTDOWN, "LNet is not running"};
  PeerNi* lpni = c_.st_.peer_ni_for(nid);
  if (!lpni) return Failure{-ENOMEM, "cannot make the peer of " + nid.to_string()};
  Peer* peer;
  {
    MutexLock n(c_.st_.locks[c_.st_.cpts.of_nid(nid)]);
    peer = lpni->peer;
  }
  if (auto r = c_.discovery_.discover(peer, nid, force, timeout); !r) return r.failure();
  for (const PeerInfo& p : peer_info())
    for (const PeerNiInfo& n : p.nis)
      if (n.nid == nid) return p;
  return Failure{-ENOENT, "peer of " + nid.to_string() + " went away"};
}

Status Admin::set_peer_state(Nid nid, std::uint32_t state) { return c_.discovery_.set_peer_state(nid, state); }

std::vector<LndCounters> Admin::lnd_counters() const { return c_.nets_.lnd_counters(); }

void Admin::reset_counters() {
  c_.st_.counters.reset();
  for (Ni* ni : c_.st_.nets().nis) {
    ni->stats.reset();
    ni->latency.reset();
  }
  ExclusiveLock x(c_.st_.locks);
  for (auto& p : c_.st_.peers.peers())
    for (auto& lpni : p->nis) {
      lpni->stats.reset();
      lpni->latency.reset();
    }
}

Status Admin::add_udsp(const UdspRule& rule, int idx) {
  MutexLock g(c_.nets_.mutex());
  ExclusiveLock x(c_.st_.locks);
  if (Status s = c_.st_.udsp.add(rule, idx); !s) return s;
  c_.st_.udsp.apply(c_.st_.nets(), c_.st_.peers);
  c_.st_.config_gen.fetch_add(1, std::memory_order_relaxed);
  return {};
}

Status Admin::del_udsp(int idx) {
  MutexLock g(c_.nets_.mutex());
  ExclusiveLock x(c_.st_.locks);
  if (Status s = c_.st_.udsp.del(idx); !s) return s;
  c_.st_.udsp.apply(c_.st_.nets(), c_.st_.peers);
  c_.st_.config_gen.fetch_add(1, std::memory_order_relaxed);
  return {};
}

std::vector<UdspRule> Admin::udsp_rules() const {
  ExclusiveLock x(const_cast<CptLocks&>(c_.st_.locks));
  return c_.st_.udsp.list();
}

Status Admin::add_fault(const FaultRule& rule) {
  if (Status s = c_.faults_.rules.add(rule); !s) return s;
  LNET_LOG(Info, kLogCore, "fault %s rule added", rule.delay ? "delay" : "drop");
  return {};
}

}  // namespace lnet::core
