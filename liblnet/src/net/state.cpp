#include "net/state.hpp"

#include <algorithm>

namespace lnet::net {

void LiveTunables::store(const GlobalTunables& g) {
#define LNET_GLOBAL_TUNABLE_STORE(name, def, lo, hi, var, help) name.store(g.name, std::memory_order_relaxed);
  LNET_GLOBAL_TUNABLES(LNET_GLOBAL_TUNABLE_STORE)
#undef LNET_GLOBAL_TUNABLE_STORE
}

int State::peer_credits_for(NetId net) const {
  const NetView* v = find_net(net);
  if (v && !v->nis.empty()) {
    const NetTunables& t = v->nis.front()->config.tunables;
    return std::min(t.peer_credits, t.credits);  // a peer never gets more than the NI has
  }
  return kDefaultPeerCredits;
}

int State::peer_rtr_credits_for(NetId net) const {
  const NetView* v = find_net(net);
  NetTunables t = v && !v->nis.empty() ? v->nis.front()->config.tunables : NetTunables{};
  if (t.peer_buffer_credits > 0) return t.peer_buffer_credits;
  return std::max(t.peer_credits > 0 ? t.peer_credits : kDefaultPeerCredits, 1);
}

PeerNi* State::find_peer_ni(Nid nid) const {
  MutexLock g(locks[cpts.of_nid(nid)]);
  return peers.find(nid);
}

int State::add_peer_ni_locked(Nid primary, Nid nid, bool multi_rail) {
  int rc = peers.add_ni(primary, nid, multi_rail, peer_credits_for(nid.net()), peer_rtr_credits_for(nid.net()));
  if (rc == 0) {
    udsp.apply_new(peers.find(primary), nets());
    udsp.apply_new(peers.find(nid), nets());
  }
  config_gen.fetch_add(1, std::memory_order_relaxed);
  return rc;
}

PeerNi* State::peer_ni_for(Nid nid, Nid* primary) {
  {
    MutexLock g(locks[cpts.of_nid(nid)]);
    if (PeerNi* lpni = peers.find(nid)) {
      if (primary) *primary = lpni->peer->primary;  // discovery may change it: read under the lock
      return lpni;
    }
  }
  // First message to or from this NID: its peer is made (a configuration change).
  ExclusiveLock x(locks);
  if (!peers.find(nid)) (void)add_peer_ni_locked(nid, nid, false);
  PeerNi* lpni = peers.find(nid);
  if (lpni && primary) *primary = lpni->peer->primary;
  return lpni;
}

std::size_t State::peer_ni_count(const PeerNi* lpni) const {
  MutexLock g(locks[lpni->cpt]);  // peers change under every net lock
  std::size_t nis = 0;
  for (const auto& pn : lpni->peer->nets) nis += pn->nis.size();
  return nis;
}

Nid State::gateway_nid(const Peer* peer) const {
  const RouteTable* rt = routes.table();
  for (std::size_t i = 0; rt && i < rt->routes.size(); ++i) {
    Nid gw = rt->routes[i].cfg.gateway;
    MutexLock g(locks[cpts.of_nid(gw)]);
    if (PeerNi* named = peers.find(gw); named && named->peer == peer) return gw;
  }
  return Nid::any();
}

bool State::is_gateway(const PeerNi* lpni) const {
  // Any NI of a gateway peer (a route names one of its NIDs).
  const RouteTable* rt = routes.table();
  for (std::size_t i = 0; rt && i < rt->routes.size(); ++i) {
    Nid gw = rt->routes[i].cfg.gateway;
    if (gw == lpni->nid) return true;
    MutexLock g(locks[cpts.of_nid(gw)]);
    if (PeerNi* named = peers.find(gw); named && named->peer == lpni->peer) return true;
  }
  return false;
}

std::vector<Nid> State::nids() const {
  std::vector<Nid> out;
  for (Ni* ni : nets().nis) out.push_back(ni->nid);
  return out;
}

int State::dist(Nid nid, Nid* src, std::uint32_t* order) const {
  if (nid.is_lo() && nid != Nid::lo()) return -EHOSTUNREACH;
  const net::NetTable& t = nets();
  if (t.find_ni(nid) || nid == Nid::lo()) {
    if (src) *src = nid;
    if (order) *order = 0;
    return 0;
  }
  for (std::size_t i = 0; i < t.nets.size(); ++i) {
    if (t.nets[i].net->id == nid.net() && !t.nets[i].nis.empty()) {
      if (src) *src = t.nets[i].nis.front()->nid;
      if (order) *order = static_cast<std::uint32_t>(i);
      return 1;
    }
  }
  // Reachable through a router: the distance is the route's hop count plus one.
  const net::RouteTable* rt = routes.table();
  int best = -1;
  for (std::size_t i = 0; rt && i < rt->routes.size(); ++i) {
    const net::RouteEntry& r = rt->routes[i];
    if (r.cfg.net != nid.net()) continue;
    const net::NetView* gwnet = t.find(r.cfg.gateway.net());
    if (!gwnet || gwnet->nis.empty()) continue;
    int d = (r.cfg.hops < 0 ? 1 : r.cfg.hops) + 1;
    if (best < 0 || d < best) {
      best = d;
      if (src) *src = gwnet->nis.front()->nid;
      if (order) *order = static_cast<std::uint32_t>(i);
    }
  }
  return best < 0 ? -EHOSTUNREACH : best;
}

}  // namespace lnet::net
