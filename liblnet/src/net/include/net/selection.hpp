// Multi-rail selection: the criteria as pure comparisons (the order of lnet_get_best_ni
// and lnet_select_peer_ni), and the Selector that walks the local NIs, the peer's NIs
// and the routes with them to pick the path of a message.
#pragma once

#include <climits>
#include <cstdint>

#include <lnet/nid.hpp>

#include "net/ni.hpp"
#include "net/peer_table.hpp"
#include "net/routing.hpp"

namespace lnet::net {

inline constexpr std::uint32_t kNoPriority = UINT_MAX;  // LNET_MAX_SELECTION_PRIORITY

// What decides between two local NIs, in this order: not in fatal error, higher health,
// lower selection priority, lower device priority, shorter NUMA distance (distances
// below numa_range count as equal), more tx credits, then the lower round-robin sequence.
struct LocalNiScore {
  bool fatal = false;
  int health = 1000;
  std::uint32_t priority = kNoPriority;
  int dev_prio = 0;
  int numa_distance = 0;
  int credits = 0;
  std::uint32_t seq = 0;
};

// Between two peer NIs: higher health, lower selection priority, on the preferred list
// of the chosen local NI, more tx credits, then the lower round-robin sequence.
struct PeerNiScore {
  int health = 1000;
  std::uint32_t priority = kNoPriority;
  bool preferred = false;
  int credits = 0;
  std::uint32_t seq = 0;
};

// -1: a is better, 1: b is better, 0: equal on every criterion.
int compare_local_ni(const LocalNiScore& a, const LocalNiScore& b, int numa_range);
int compare_peer_ni(const PeerNiScore& a, const PeerNiScore& b);

// Index of the best of n candidates (-1 if n == 0); score(i) gives candidate i's score.
// Ties keep the earlier candidate.
template <class ScoreFn>
int best_local_ni(int n, ScoreFn&& score, int numa_range) {
  int best = -1;
  LocalNiScore bs;
  for (int i = 0; i < n; ++i) {
    LocalNiScore s = score(i);
    if (best < 0 || compare_local_ni(s, bs, numa_range) < 0) {
      best = i;
      bs = s;
    }
  }
  return best;
}

template <class ScoreFn>
int best_peer_ni(int n, ScoreFn&& score) {
  int best = -1;
  PeerNiScore bs;
  for (int i = 0; i < n; ++i) {
    PeerNiScore s = score(i);
    if (best < 0 || compare_peer_ni(s, bs) < 0) {
      best = i;
      bs = s;
    }
  }
  return best;
}

// Where a message leaves: by local NI `ni` to peer NI `lpni` (the next hop), for the
// final destination NID `dest` (the peer NI chosen, or the routed target).
struct Path {
  Ni* ni = nullptr;
  PeerNi* lpni = nullptr;
  Nid dest;
};

// Picks a message's path. The caller holds the net lock of `cpt` (which keeps the peer
// index still); the Selector only reads, apart from the round-robin sequence numbers.
class Selector {
 public:
  Selector(const PeerTable& peers, const Routes& routes) : peers_(peers), routes_(routes) {}

  struct Query {
    unsigned cpt = 0;                // the CPT whose net lock the caller holds
    const NetTable* nets = nullptr;  // the local networks now
    PeerNi* dst = nullptr;           // the peer NI of the destination NID
    Ni* src = nullptr;               // the local NI the sender asked for (nullptr: any)
    bool exact = false;              // a response or a forwarded message: to dst's NID itself
    int numa_range = 0;
    int gw_min_health = 1000;   // gateway NIs below this are not used (router_sensitivity)
    bool gw_discovery = false;  // a gateway not yet discovered is waited for (-EAGAIN)
  };
  // 0, or -EHOSTUNREACH when no local NI, peer NI or route will do, or -EAGAIN with
  // out.lpni the gateway whose discovery the message waits for.
  int select(const Query& q, Path& out) const;
  // Whether a route may be used now: the gateway answered its last discovery (routes
  // through it up then: RouteState), and has an NI on our side that is up and at least
  // `min_health` healthy. The caller holds a net lock.
  static bool route_alive(const RouteEntry& r, const PeerNi* gw, const NetTable& nets, int min_health);

 private:
  int select_route(const Query& q, Ni* src, Nid dst, Path& out) const;
  // A multi-rail peer, no local NI asked for: the best pair of local and peer NI.
  int select_multi_rail(const Query& q, Path& out) const;
  // The gateway's best NI for reaching it from our side (through `src`'s net if set).
  PeerNi* best_gateway_ni(const Query& q, Peer* gw, Ni* src) const;
  Ni* best_ni_on(const NetView& net, const Query& q) const;
  PeerNi* best_peer_ni_on(PeerNet* pn, Ni* ni) const;

  const PeerTable& peers_;
  const Routes& routes_;
};

}  // namespace lnet::net
