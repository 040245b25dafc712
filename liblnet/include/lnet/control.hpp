// The configuration API of a running instance (what LNet's DLC ioctls are to the kernel,
// and what lnetctl drives through lnetd): networks, peers, routes and router buffers,
// global tunables, selection rules, counters. Instance::control() gives it.
#pragma once

#include <chrono>
#include <string_view>
#include <vector>

#include <lnet/config.hpp>
#include <lnet/fault.hpp>
#include <lnet/nid.hpp>
#include <lnet/result.hpp>
#include <lnet/stats.hpp>

namespace lnet {

class Control {
 public:
  // ---- local networks ----
  // Brings an NI up; returns its NID.
  virtual Result<Nid> add_ni(const NetConfig& nc) = 0;
  // Takes an NI down (0@lo cannot go); what waits for it fails.
  virtual Status del_ni(Nid nid) = 0;
  // The NIs as configured (0@lo left out; tunables as the driver settled them).
  virtual std::vector<NetConfig> net_configs() const = 0;
  virtual std::vector<NiInfo> ni_info() const = 0;

  // ---- peers ----
  // Adds the peer `p` (its primary NID first when it is new) and its other NIDs.
  // `configured`: exported and kept as configuration, not merely met.
  virtual Status add_peer(const PeerConfig& p, bool configured = true) = 0;
  // Removes NIDs of a peer (the whole peer when `nids` is empty or holds the primary);
  // messages waiting for them fail. A locked primary NID (PeerConfig::lock_primary) stays
  // unless `force`: its peer only loses its other NIDs.
  virtual Status del_peer(Nid primary, const std::vector<Nid>& nids, bool force = false) = 0;
  virtual std::vector<PeerConfig> configured_peers() const = 0;
  virtual std::vector<PeerInfo> peer_info() const = 0;
  // Discovers the peer of `nid` (made if unknown): pings it, pushes it our NIDs when it is
  // multi-rail, and waits at most `timeout` for the round to end; the peer as it is then.
  // `force`: a full round even when it is discovered already.
  virtual Result<PeerInfo> discover(Nid nid, bool force, std::chrono::milliseconds timeout) = 0;

  // ---- routes, routing and router buffers ----
  virtual Status add_route(const RouteConfig& r) = 0;
  // gateway ANY: every route to `net`.
  virtual Status del_route(NetId net, Nid gateway) = 0;
  virtual std::vector<RouteConfig> route_configs() const = 0;
  virtual std::vector<RouteInfo> route_info() const = 0;
  // Off while on drains: the routes through this node are announced disabled at once
  // (RTE_DISABLED) and what arrives is still forwarded until it has been quiet for
  // alive_router_check_interval + 1 s (at most router_ping_timeout longer).
  virtual Status set_routing(bool on) = 0;
  virtual bool routing() const = 0;           // the setting (off while draining)
  virtual bool routing_draining() const = 0;  // off asked, still forwarding
  // Large NIDs (lnet configure --large): NIs added by interface from now on take the
  // interface's IPv6 address before its IPv4 one.
  virtual void set_large_nids(bool on) = 0;
  virtual bool large_nids() const = 0;
  virtual Status set_buffers(const BufferConfig& b) = 0;
  virtual BufferConfig buffers() const = 0;
  virtual std::vector<RouterCptInfo> router_pools() const = 0;

  // ---- global tunables, selection rules, counters ----
  virtual GlobalTunables globals() const = 0;
  // Sets one tunable by its lnetctl name (GlobalTunables::set says which it takes).
  virtual Status set_global(std::string_view name, long value) = 0;
  // Sets them all at once (GlobalTunables::check() first: nothing changes on failure).
  virtual Status set_globals(const GlobalTunables& g) = 0;

  // ---- health ----
  // Sets the health (0..1000) of the local NI `nid` (Nid::any(): every NI but 0@lo) or
  // of the peer NI `nid` (any: every peer NI); below 1000 it goes into recovery.
  virtual Status set_ni_health(Nid nid, int value) = 0;
  // The driver timeout of every NI on `net`, in seconds (0: LNet's derived lnd_timeout);
  // -EOPNOTSUPP when the net's driver fixes it when an NI comes up.
  virtual Status set_lnd_timeout(NetId net, int seconds) = 0;
  // One of the driver's tunables (its "lnd tunables" key, within its range) on the local
  // NI `nid`, for what the driver does from now on (conns_per_peer: new connections).
  virtual Status set_lnd_tunable(Nid nid, std::string_view name, long value) = 0;
  virtual Status set_peer_ni_health(Nid nid, int value) = 0;
  // Sets the state bits of the peer that has `nid` (as `peer show -v 4` prints them; the
  // kernel's test-only `peer set --state`): multi-rail, configured, locked primary, no
  // discovery, router. Bits that discovery owns must stay as they are (-EOPNOTSUPP).
  virtual Status set_peer_state(Nid nid, std::uint32_t state) = 0;
  // The NIDs on the local NI or the peer NI recovery queue.
  virtual std::vector<Nid> recovery_queue(bool local) const = 0;

  // ---- fault injection (lnetctl fault) ----
  virtual Status add_fault(const FaultRule& rule) = 0;
  // Removes the drop (or delay) rules of this source and destination (Nid::any(): any);
  // how many went.
  virtual int del_faults(bool delay, Nid source, Nid dest) = 0;
  virtual void reset_faults(bool delay) = 0;
  virtual std::vector<FaultRuleInfo> faults(bool delay) const = 0;
  // Inserts a selection rule at `idx` (-1: at the end).
  virtual Status add_udsp(const UdspRule& rule, int idx) = 0;
  // Removes the rule at `idx` (-1: every rule).
  virtual Status del_udsp(int idx) = 0;
  virtual std::vector<UdspRule> udsp_rules() const = 0;
  virtual Counters counters() const = 0;
  virtual void reset_counters() = 0;
  // The counters of the drivers in use that keep their own ("lnd statistics").
  virtual std::vector<LndCounters> lnd_counters() const { return {}; }
  // CPU partitions the instance shards its locks and queues over.
  virtual unsigned cpt_count() const = 0;
  // The CPT whose locks and queues serve `nid` (lnetctl cpt-of-nid).
  virtual unsigned cpt_of_nid(Nid nid) const = 0;

 protected:
  ~Control() = default;
};

}  // namespace lnet
