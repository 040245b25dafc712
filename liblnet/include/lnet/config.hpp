// The configuration object a process brings up its networks from, read from the LNET_*
// environment variables (<lnet/env.hpp> lists them) or built by the program.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <lnet/fault.hpp>
#include <lnet/lnd/ifaddr.hpp>
#include <lnet/nid.hpp>
#include <lnet/result.hpp>

namespace lnet {

// Per-network tunables (defaults of the real LNet).
struct NetTunables {
  // Seconds a router keeps forwarding to a peer NI that has sent nothing and that its
  // driver reports down (LNet's peer aliveness; 0: forever).
  int peer_timeout = 180;
  int peer_credits = 0;         // messages in flight to one peer NI; 0: the driver's default
  int peer_buffer_credits = 0;  // router buffers one peer NI may hold; 0: peer_credits
  int credits = 256;            // messages in flight on the NI
  friend bool operator==(const NetTunables&, const NetTunables&) = default;
};

// Driver tunables of a network ("lnd tunables" in lnetctl YAML): the keys set, by name.
// Which keys a driver takes, their ranges and defaults are the driver's own
// (LndTunableSpec, <lnet/lnd/lnd.hpp>); the DLC reads, checks and prints them from there.
struct LndTunables {
  std::map<std::string, long, std::less<>> values;

  std::optional<long> get(std::string_view name) const {
    auto it = values.find(name);
    return it == values.end() ? std::nullopt : std::optional<long>(it->second);
  }
  long get_or(std::string_view name, long def) const { return get(name).value_or(def); }
  void set(std::string_view name, long v) { values[std::string(name)] = v; }
  bool empty() const { return values.empty(); }
  friend bool operator==(const LndTunables&, const LndTunables&) = default;
};

// A tunable of a driver: a key of "lnd tunables" in lnetctl YAML. A driver declares its
// list once per process (register_lnd_tunables, from its library's static initialiser);
// the DLC reads, checks and prints "lnd tunables" from the list of the NI's net type, and
// Lnd::check_config refuses a key the list lacks ("not supported yet").
struct LndTunableSpec {
  std::string name;        // the YAML key (conns_per_peer)
  long min = 0, max = 0;   // its range
  long def = 0;            // what an NI not configured with it has
  bool read_only = false;  // shown, never set (timeout: from lnd_timeout)
  std::string help;
  friend bool operator==(const LndTunableSpec&, const LndTunableSpec&) = default;
};
// Declares the tunables of `net_type`'s drivers (replacing an earlier list; drivers that
// share a net type declare the same one).
void register_lnd_tunables(std::uint32_t net_type, std::vector<LndTunableSpec> specs);
// The tunables of `net_type` (empty: none, or no driver declared them here).
std::vector<LndTunableSpec> lnd_tunables_of(std::uint32_t net_type);
// The net types that declared tunables.
std::vector<std::uint32_t> registered_lnd_tunable_types();

// A CPT list as LNet reads one: "[0,1]", "[0-3]", "[0-6/2,9]", a bare "2", or "[*]"/"*"
// (every CPT: an empty list). Empty lists, empty items and inverted ranges are refused,
// the failure naming the text; at most 128 CPTs, each below 256.
Result<std::vector<unsigned>> parse_cpt_list(std::string_view text);

// One network interface to bring up ("tcp1(eth2)[0,1]").
struct NetConfig {
  NetId net;
  std::vector<std::string> interfaces;
  std::vector<unsigned> cpts;  // CPTs the NI serves; empty: all
  std::optional<Nid> nid;      // an explicit NID instead of one derived by the driver
  NetTunables tunables;
  LndTunables lnd_tunables;
};

// A static route: messages for `net` go through `gateway`.
struct RouteConfig {
  NetId net;
  Nid gateway;
  int hops = -1;          // -1: undefined (counts as 1)
  unsigned priority = 0;  // lower is preferred
  // What a failure takes off the health of the gateway's NIs (instead of the global
  // health_sensitivity); 0 asks for the default, 1, as LNet's.
  unsigned health_sensitivity = 1;
  friend bool operator==(const RouteConfig&, const RouteConfig&) = default;
};

// A configured peer: its NIDs, the first one primary.
struct PeerConfig {
  Nid primary;
  bool multi_rail = true;
  std::vector<Nid> nids;      // besides the primary
  bool lock_primary = false;  // discovery keeps `primary` (lnetctl peer add --lock_prim)
  // The document's NID list named the primary too (import --del then deletes the whole
  // peer, as lnetctl peer del does).
  bool lists_primary = false;
  friend bool operator==(const PeerConfig&, const PeerConfig&) = default;
};

// Router buffers: totals over all CPTs (LNet: tiny_buffers, small_buffers, large_buffers).
struct BufferConfig {
  int tiny = 2048;
  int small = 16384;
  int large = 1024;
  friend bool operator==(const BufferConfig&, const BufferConfig&) = default;
};

// The global tunables, declared once. A row: the name (lnetctl's and the field's), the
// default, the range, the variable a client process sets it with (as kernel LNet's
// module parameter sets it) and what it does. The rows are in `global show`'s order
// (lnd_timeout, derived, comes after router_sensitivity). GlobalTunables, the live copy
// the core reads, the variables and `lnetctl set`'s range checks are all made from it.
#define LNET_GLOBAL_TUNABLES(X)                                                                                     \
  X(numa_range, 0, 0, 1 << 30, "LNET_NUMA_RANGE",                                                                   \
    "NUMA distance within which local NIs count as equally near the sender's memory")                               \
  X(max_interfaces, 4096, 16, 1 << 20, "LNET_MAX_INTERFACES", "NIs a peer's ping or push may list")                 \
  X(discovery, 1, 0, 1, "LNET_DISCOVERY",                                                                           \
    "dynamic discovery of peers: 1 on, 0 off (peers stay as first met or configured)")                              \
  X(drop_asym_route, 0, 0, 1, "LNET_DROP_ASYM_ROUTE",                                                               \
    "1: drop what a gateway routes to us from a net we would not route back to through it")                         \
  X(retry_count, 2, 0, 1 << 20, "LNET_RETRY_COUNT",                                                                 \
    "resends of a failed PUT or GET on another path (below LNET_TRANSACTION_TIMEOUT)")                              \
  X(transaction_timeout, 150, 1, 1 << 20, "LNET_TRANSACTION_TIMEOUT",                                               \
    "seconds: a message's deadline, and how long its ACK or REPLY is awaited")                                      \
  X(health_sensitivity, 100, 0, 1000, "LNET_HEALTH_SENSITIVITY",                                                    \
    "health an NI or peer NI loses per failure and gains per success (0..1000)")                                    \
  X(recovery_interval, 1, 1, 1 << 20, "LNET_RECOVERY_INTERVAL", "seconds between looks at the recovery queues")     \
  X(router_sensitivity, 100, 0, 100, "LNET_ROUTER_SENSITIVITY",                                                     \
    "percent of maximum health a gateway NI needs to be used (0..100)")                                             \
  X(response_tracking, 3, 0, 3, "LNET_RESPONSE_TRACKING",                                                           \
    "ACKs and REPLYs awaited: 0 pings only, 1 GETs, 2 PUTs, 3 both")                                                \
  X(recovery_limit, 0, 0, 1 << 20, "LNET_RECOVERY_LIMIT", "seconds a peer NI stays in recovery (0: until healthy)") \
  X(max_recovery_ping_interval, 900, 1, 1 << 20, "LNET_MAX_RECOVERY_PING_INTERVAL",                                 \
    "seconds: the longest back-off between recovery pings")                                                         \
  X(alive_router_check_interval, 60, 0, 1 << 30, "LNET_ALIVE_ROUTER_CHECK_INTERVAL",                                \
    "seconds between the discovery pings of each gateway (0: none)")                                                \
  X(router_ping_timeout, 50, 1, 1 << 30, "LNET_ROUTER_PING_TIMEOUT",                                                \
    "seconds a gateway has to answer its ping before its routes go down")

// The global tunables of `lnetctl set` / `global show` (LNET_GLOBAL_TUNABLES).
struct GlobalTunables {
#define LNET_GLOBAL_TUNABLE_FIELD(name, def, lo, hi, var, help) int name = def;
  LNET_GLOBAL_TUNABLES(LNET_GLOBAL_TUNABLE_FIELD)
#undef LNET_GLOBAL_TUNABLE_FIELD
  // Sets one tunable by its lnetctl name; fails naming the name and the value's range.
  // As in LNet, health_sensitivity 0 also sets retry_count 0.
  Status set(std::string_view name, long value);
  // The rules between tunables (LNet's): retry_count below transaction_timeout, and 0
  // while health_sensitivity is 0.
  Status check() const;
  // The per-attempt driver timeout LNet derives: (transaction_timeout - 1) / (retry_count
  // + 1), at least 1 (`global show` lnd_timeout; read-only).
  int lnd_timeout() const;
  // Names `global show` prints, in its order (lnd_timeout among them: read_only()).
  static std::span<const char* const> names();
  static bool read_only(std::string_view name) { return name == "lnd_timeout"; }
  Result<long> get(std::string_view name) const;
  friend bool operator==(const GlobalTunables&, const GlobalTunables&) = default;
};

// A selection rule (`lnetctl udsp add`): src/dst/rte patterns (NIDs or nets, with ranges)
// and a priority, or (without a priority) a NID pair: dst peer NIs prefer the src local NIs.
struct UdspRule {
  std::string src;
  std::string dst;
  std::string rte;
  std::optional<unsigned> priority;
  friend bool operator==(const UdspRule&, const UdspRule&) = default;
};

// ip2nets: the networks of a node chosen by its IPv4 addresses.
//
// The module-parameter form ("tcp(eth0) 192.168.0.*; o2ib1 10.10.[1-3].[2-200/2]"), as
// LNET_IP2NETS and `lnetctl net add --ip2net` take it: entries separated by ';' or new
// lines, '#' comments; an entry is a networks spec ("tcp1(eth0),o2ib") and IPv4 patterns
// (four octet expressions). Every entry with a pattern that matches an address of an
// interface that is up and not loopback contributes its networks, in order, as the
// "networks=" string they make (a net named by two entries gets the interfaces of both).
// Fails with -ENOENT when no entry matches, -EINVAL naming the bad part of the text.
Result<std::string> ip2nets_to_networks(std::string_view ip2nets, const std::vector<HostInterface>& host);

// An `ip2nets:` rule of lnetctl YAML: NIs on `ni.net` (with its tunables and CPTs) for the
// host interfaces that match. With `interfaces`, every one of them must exist, be up and
// (with `ranges`) have an address in one of the ranges; without, each interface that is
// up with an address in a range; with neither, the first interface that is up.
struct Ip2netsRule {
  NetConfig ni;
  struct Interface {
    std::string name;
    std::optional<std::vector<unsigned>> cpts;  // "eth0[0,1]"
  };
  std::vector<Interface> interfaces;
  std::vector<std::string> ranges;  // "192.168.*.[1-10/2]"
};
// Checks an IPv4 pattern of a rule; the failure names it.
Status check_ip_range(std::string_view pattern);
// The NIs the rules make on this host: the first rule that matches wins for its net
// (later rules for that net are skipped). `skipped` (if given) gets why each rule that
// did not match did not. Fails when no rule matches.
Result<std::vector<NetConfig>> resolve_ip2nets(const std::vector<Ip2netsRule>& rules,
                                               const std::vector<HostInterface>& host,
                                               std::vector<std::string>* skipped = nullptr);

struct Config {
  // Networks besides 0@lo, which always exists.
  std::vector<NetConfig> nets;
  // CPU partitions (lock and queue shards); 0: one per online CPU, at most 8.
  unsigned ncpts = 0;
  // Health, resend and deadline tunables a process starts with (`lnetctl set` later).
  GlobalTunables globals;
  // Fault rules a process starts with (LNET_FAULT; `lnetctl fault` later).
  std::vector<FaultRule> faults;
  // Large NIDs (lnetctl lnet configure --large, lnetd --large): an NI given an interface
  // takes the interface's IPv6 address before its IPv4 one, as the kernel's do.
  bool large_nids = false;

  // Reads LNET_NETWORKS (or LNET_IP2NETS, not both), LNET_CPT_NUMBER, the tunables of those networks and the global
  // ones a client process may set (LNET_TRANSACTION_TIMEOUT, ...); fails naming the
  // variable and the bad value.
  static Result<Config> from_env();
  // Parses an LNET_NETWORKS / "networks=" string: "tcp0(eth0,eth1)[0,1], o2ib1, mpi".
  static Result<std::vector<NetConfig>> parse_networks(std::string_view text, const NetTunables& defaults = {});
};

}  // namespace lnet
