// What the parts of an instance share (core, peer, health, router): the CPTs and their
// net locks, the counters, the NI table snapshot, the peers, the routes, the selection
// rules, and the global tunables as the data path reads them (atomics, no lock). Each
// part owns its own lock and thread beside it; this is data and look-ups only.
#pragma once

#include <atomic>

#include <lnet/config.hpp>
#include <lnet/mutex.hpp>
#include <lnet/wire.hpp>

#include "base/counters.hpp"
#include "base/cpt.hpp"
#include "net/ni.hpp"
#include "net/peer_table.hpp"
#include "net/routing.hpp"
#include "net/udsp.hpp"

namespace lnet::net {

inline constexpr int kDefaultPeerCredits = 8;  // LNet's, for a driver that names none

// The global tunables the data path and the threads read (set under the configuration
// mutex by the core's set_globals).
struct LiveTunables {
#define LNET_GLOBAL_TUNABLE_LIVE(name, def, lo, hi, var, help) std::atomic<int> name{def};
  LNET_GLOBAL_TUNABLES(LNET_GLOBAL_TUNABLE_LIVE)
#undef LNET_GLOBAL_TUNABLE_LIVE

  void store(const GlobalTunables& g);
};

class State {
 public:
  explicit State(unsigned ncpts) : cpts(ncpts), locks(ncpts), counters(ncpts), peers(cpts) {}
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  const CptTable cpts;
  mutable CptLocks locks;  // per CPT: peers' credits and queues; all of them: the peer index
  GlobalCounters counters;
  PeerTable peers;
  Routes routes;
  // Changed under the configuration mutex and every net lock; peers made on the data
  // path (under every net lock only) read it.
  UdspRules udsp LNET_GUARDED_BY(locks);
  LiveTunables tun;
  std::atomic<const NetTable*> table{nullptr};  // the NIs now (published by the core)
  Ni* lo_ni = nullptr;                          // 0@lo, set at startup
  std::atomic<std::uint64_t> config_gen{0};     // bumped by every change selection caches depend on
  std::atomic<bool> routing{false};             // this node forwards
  std::atomic<bool> routing_draining{false};    // routing off asked: announced, still forwarding
  std::atomic<bool> large_nids{false};          // NIs by interface take IPv6 first (configure --large)
  std::atomic<bool> stopping{false};            // shutdown has begun
  std::atomic<std::uint32_t> ping_seq{1};       // our ping info's sequence number

  const NetTable& nets() const { return *table.load(std::memory_order_acquire); }
  const NetView* find_net(NetId id) const { return nets().find(id); }
  Ni* find_ni(Nid nid) const { return nets().find_ni(nid); }
  bool is_local_nid(Nid nid) const { return find_ni(nid) != nullptr; }
  // A local NI's status, as net show prints it and our ping info tells peers (2.17): down
  // while its link is down, while a router hears nothing on it, and at health 0 while
  // health is on (health_sensitivity above 0).
  bool ni_status_up(const Ni& ni) const {
    return ni.up.load() && !ni.silent.load() && !ni.fatal_error.load() &&
           (ni.health.load() > 0 || tun.health_sensitivity.load(std::memory_order_relaxed) == 0);
  }
  // Our NIDs, and the distance to `nid` (0: ours, 1: on one of our nets, else through
  // the nearest route; -EHOSTUNREACH) with the NID we would send from (lnet::Instance).
  std::vector<Nid> nids() const;
  int dist(Nid nid, Nid* src, std::uint32_t* order) const;
  // The credits a new peer NI on `net` gets, and its router credits (from the net's NIs).
  int peer_credits_for(NetId net) const;
  int peer_rtr_credits_for(NetId net) const;

  // Peers. The peer NI of `nid` (nullptr: none), under its CPT's lock.
  PeerNi* find_peer_ni(Nid nid) const;
  // The peer NI of `nid`, made (single-rail, unconfigured) if missing; takes every net
  // lock to make one. nullptr: it could not be made. `primary`: its peer's primary NID.
  PeerNi* peer_ni_for(Nid nid, Nid* primary = nullptr);
  int add_peer_ni_locked(Nid primary, Nid nid, bool multi_rail) LNET_REQUIRES(locks);
  // The peer NIs of `lpni`'s peer (takes its CPT's lock: not under a net lock).
  std::size_t peer_ni_count(const PeerNi* lpni) const;

  // Gateways. The NID a route names `peer` by, or ANY when it is no gateway; whether a
  // peer NI belongs to a gateway (both take net locks: not under one).
  Nid gateway_nid(const Peer* peer) const;
  bool is_gateway(const PeerNi* lpni) const;
  // The health a gateway NI needs to be used: router_sensitivity percent of the maximum.
  int gateway_min_health() const { return kMaxHealth * tun.router_sensitivity.load(std::memory_order_relaxed) / 100; }
};

}  // namespace lnet::net
