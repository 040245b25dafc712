// Comparison of selection candidates, and the Selector that walks the local NIs, peer
// NIs and routes with them.
#include "net/selection.hpp"

#include <sched.h>

#include <algorithm>
#include <tuple>

namespace lnet::net {

namespace {
constexpr int kMaxPeerHealth = 1000;

template <class T>
int cmp_less_better(T a, T b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}
}  // namespace

int compare_local_ni(const LocalNiScore& a, const LocalNiScore& b, int numa_range) {
  if (a.fatal != b.fatal) return a.fatal ? 1 : -1;
  if (int c = cmp_less_better(b.health, a.health)) return c;
  if (int c = cmp_less_better(a.priority, b.priority)) return c;
  if (int c = cmp_less_better(a.dev_prio, b.dev_prio)) return c;
  if (int c = cmp_less_better(std::max(a.numa_distance, numa_range), std::max(b.numa_distance, numa_range))) return c;
  if (int c = cmp_less_better(b.credits, a.credits)) return c;
  return cmp_less_better(a.seq, b.seq);
}

int compare_peer_ni(const PeerNiScore& a, const PeerNiScore& b) {
  if (int c = cmp_less_better(b.health, a.health)) return c;
  if (int c = cmp_less_better(a.priority, b.priority)) return c;
  if (a.preferred != b.preferred) return a.preferred ? -1 : 1;
  if (int c = cmp_less_better(b.credits, a.credits)) return c;
  return cmp_less_better(a.seq, b.seq);
}

}  // namespace lnet::net

namespace lnet::net {

// ---------------------------------------------------------------- the Selector

namespace {

LocalNiScore score_of(const Ni* ni, const Selector::Query& q, unsigned node) {
  LocalNiScore s;
  s.fatal = !ni->usable();
  s.health = ni->health.load(std::memory_order_relaxed);
  s.priority = ni->sel_priority.load(std::memory_order_relaxed);
  s.dev_prio = ni->dev_prio;
  s.numa_distance = node < ni->numa_dist.size() ? ni->numa_dist[node] : 0;
  {
    // The queue the message would take credits of (its destination's, on an NI of some CPTs).
    TxQueue& tq = ni->tx_queue(q.dst ? q.dst->nid : Nid{}, q.cpt);
    TxQueueLock l(*ni, tq);
    s.credits = tq.credits;
  }
  s.seq = ni->seq.load(std::memory_order_relaxed);
  return s;
}

// A gateway NI we may send through: its ping info says it is up, and its health is at
// least the router_sensitivity share of the maximum.
bool usable_gateway_ni(const PeerNi* p, int min_health) {
  return p->ns_status.load(std::memory_order_relaxed) == kNiStatusUp &&
         p->health.load(std::memory_order_relaxed) >= min_health;
}

unsigned current_node() {
  unsigned cpu = 0, node = 0;
  (void)getcpu(&cpu, &node);
  return node;
}

}  // namespace

Ni* Selector::best_ni_on(const NetView& net, const Query& q) const {
  const auto& nis = net.nis;
  if (nis.empty()) return nullptr;
  if (nis.size() == 1) return nis.front()->usable() ? nis.front() : nullptr;
  unsigned node = current_node();
  int best = best_local_ni(
      static_cast<int>(nis.size()), [&](int i) { return score_of(nis[static_cast<std::size_t>(i)], q, node); },
      q.numa_range);
  Ni* ni = nis[static_cast<std::size_t>(best)];
  if (!ni->usable()) return nullptr;
  ni->seq.fetch_add(1, std::memory_order_relaxed);
  return ni;
}

PeerNi* Selector::best_peer_ni_on(PeerNet* pn, Ni* ni) const {
  const auto& lpnis = pn->nis;
  int best = best_peer_ni(static_cast<int>(lpnis.size()), [&](int i) {
    PeerNi* p = lpnis[static_cast<std::size_t>(i)];
    PeerNiScore s;
    s.health = p->health.load(std::memory_order_relaxed);
    s.priority = p->sel_priority.load(std::memory_order_relaxed);
    s.preferred = std::find(p->pref_local.begin(), p->pref_local.end(), ni->nid) != p->pref_local.end();
    s.credits = p->tx_credits.load(std::memory_order_relaxed);
    s.seq = p->seq.load(std::memory_order_relaxed);
    return s;
  });
  if (best < 0) return nullptr;
  PeerNi* p = lpnis[static_cast<std::size_t>(best)];
  p->seq.fetch_add(1, std::memory_order_relaxed);
  return p;
}

bool Selector::route_alive(const RouteEntry& r, const PeerNi* gw, const NetTable& nets, int min_health) {
  if (!gw || !r.state->up.load(std::memory_order_relaxed)) return false;
  const Peer* p = gw->peer;
  if (!p->reachable.load(std::memory_order_relaxed)) return false;
  for (const auto& pn : p->nets) {
    // A net of ours with an NI that is up (one whose link is down carries nothing).
    const NetView* v = nets.find(pn->net);
    if (!v || std::none_of(v->nis.begin(), v->nis.end(), [](const Ni* ni) { return ni->usable(); })) continue;
    for (const PeerNi* n : pn->nis)
      if (usable_gateway_ni(n, min_health)) return true;
  }
  return false;
}

PeerNi* Selector::best_gateway_ni(const Query& q, Peer* gw, Ni* src) const {
  PeerNi* best = nullptr;
  PeerNiScore bs;
  for (auto& pn : gw->nets) {
    if (src ? pn->net != src->net->id : !q.nets->find(pn->net)) continue;
    for (PeerNi* p : pn->nis) {
      if (!usable_gateway_ni(p, q.gw_min_health)) continue;
      PeerNiScore s;
      s.health = p->health.load(std::memory_order_relaxed);
      s.priority = p->sel_priority.load(std::memory_order_relaxed);
      s.credits = p->tx_credits.load(std::memory_order_relaxed);
      s.seq = p->seq.load(std::memory_order_relaxed);
      if (!best || compare_peer_ni(s, bs) < 0) {
        best = p;
        bs = s;
      }
    }
  }
  return best;
}

int Selector::select_route(const Query& q, Ni* src, Nid dst, Path& out) const {
  // Routes in the order of lnet_compare_routes: preferred by a router rule, priority,
  // hops, then the health, queued bytes, credits and round robin of each gateway's best
  // NI on our side (a multi-rail gateway is one peer, whichever of its NIDs a route names).
  const RouteTable* rt = routes_.table();
  PeerNi* best = nullptr;
  const RouteEntry* best_r = nullptr;
  // A router rule of the destination (udsp --dst --rte) prefers its gateways first.
  const auto& pref = q.dst->pref_rtr;
  auto preferred = [&](const RouteEntry& r, const PeerNi* gw) {
    for (const NidMatcher& m : pref)
      if (m.matches(gw->nid) || m.matches(r.cfg.gateway)) return 0;
    return 1;
  };
  auto key = [&](const RouteEntry& r, PeerNi* gw) {
    return std::make_tuple(pref.empty() ? 1 : preferred(r, gw), r.cfg.priority, r.cfg.hops < 0 ? 1 : r.cfg.hops,
                           -gw->health.load(std::memory_order_relaxed), gw->txq_nob.load(std::memory_order_relaxed),
                           -gw->tx_credits.load(std::memory_order_relaxed), gw->seq.load(std::memory_order_relaxed));
  };
  for (std::size_t i = 0; rt && i < rt->routes.size(); ++i) {
    const RouteEntry& r = rt->routes[i];
    if (r.cfg.net != dst.net()) continue;
    PeerNi* named = peers_.find(r.cfg.gateway);  // holding one net lock keeps the index still
    if (!route_alive(r, named, *q.nets, q.gw_min_health)) continue;
    PeerNi* gw = best_gateway_ni(q, named->peer, src);
    if (!gw) continue;
    if (!best || key(r, gw) < key(*best_r, best)) {
      best = gw;
      best_r = &r;
    }
  }
  if (!best) return -EHOSTUNREACH;
  if (q.gw_discovery && best->peer->dc.state.load(std::memory_order_acquire) != DcState::Discovered) {
    out = {nullptr, best, dst};  // the gateway is discovered on first use
    return -EAGAIN;
  }
  const NetView* v = q.nets->find(best->nid.net());
  Ni* ni = src ? src : (v ? best_ni_on(*v, q) : nullptr);
  if (!ni) return -EHOSTUNREACH;
  best->seq.fetch_add(1, std::memory_order_relaxed);
  out = {ni, best, dst};
  return 0;
}

int Selector::select_multi_rail(const Query& q, Path& out) const {
  PeerNi* dst = q.dst;
  Peer* peer = dst->peer;
  // Multi-rail: the best local NI over every peer net we share, the nets ranked first by
  // the health of their best peer NI (a net whose peer NIs all failed is avoided while
  // another works), then by their selection priorities; then the best peer NI on that
  // net for it.
  PeerNet* best_pn = nullptr;
  Ni* best_ni = nullptr;
  std::uint32_t best_prio[3] = {UINT_MAX, UINT_MAX, UINT_MAX};
  LocalNiScore best_score;
  unsigned node = current_node();
  for (auto& pn : peer->nets) {
    const NetView* net = pn->net.type() == kLoLnd ? nullptr : q.nets->find(pn->net);
    if (!net) continue;
    int health = 0;
    for (PeerNi* p : pn->nis) health = std::max(health, p->health.load(std::memory_order_relaxed));
    std::uint32_t prio[3] = {static_cast<std::uint32_t>(kMaxPeerHealth - health), pn->sel_priority,
                             net->net->sel_priority.load(std::memory_order_relaxed)};
    if (best_ni && std::lexicographical_compare(best_prio, best_prio + 3, prio, prio + 3)) continue;
    bool better_net = !best_ni || std::lexicographical_compare(prio, prio + 3, best_prio, best_prio + 3);
    for (Ni* ni : net->nis) {
      LocalNiScore s = score_of(ni, q, node);
      if (s.fatal) continue;
      if (!best_ni || better_net || compare_local_ni(s, best_score, q.numa_range) < 0) {
        best_ni = ni;
        best_pn = pn.get();
        best_score = s;
        std::copy(prio, prio + 3, best_prio);
        better_net = false;
      }
    }
  }
  if (!best_ni) return select_route(q, nullptr, dst->nid, out);
  best_ni->seq.fetch_add(1, std::memory_order_relaxed);
  PeerNi* lpni = best_peer_ni_on(best_pn, best_ni);
  if (!lpni) return -EHOSTUNREACH;
  out = {best_ni, lpni, lpni->nid};
  return 0;
}

int Selector::select(const Query& q, Path& out) const {
  PeerNi* dst = q.dst;
  Peer* peer = dst->peer;
  NetId dst_net = dst->nid.net();
  const NetView* local = dst_net.type() == kLoLnd ? nullptr : q.nets->find(dst_net);

  // Responses go back exactly where the request came from; forwarded messages go to
  // the NID their header names.
  if (q.exact || (q.src && !peer->multi_rail)) {
    if (!local) return select_route(q, q.src, dst->nid, out);
    Ni* ni = q.src;
    if (!ni || ni->net->id != dst_net) ni = best_ni_on(*local, q);
    if (!ni) return -EHOSTUNREACH;
    out = {ni, dst, dst->nid};
    return 0;
  }
  if (q.src) {
    for (auto& pn : peer->nets) {
      if (pn->net != q.src->net->id) continue;
      PeerNi* p = best_peer_ni_on(pn.get(), q.src);
      out = {q.src, p, p ? p->nid : Nid::any()};
      return p ? 0 : -EHOSTUNREACH;
    }
    return select_route(q, q.src, dst->nid, out);
  }
  if (!peer->multi_rail) {
    // A non-multi-rail peer always hears from the same local NI.
    if (!local) return select_route(q, nullptr, dst->nid, out);
    Ni* ni = dst->pref_ni;
    if (!ni || !ni->usable()) {
      ni = best_ni_on(*local, q);
      if (!ni) return -EHOSTUNREACH;
      dst->pref_ni = ni;
    }
    out = {ni, dst, dst->nid};
    return 0;
  }
  return select_multi_rail(q, out);
}

}  // namespace lnet::net
