// Counters and state snapshots: what `lnetctl stats show`, `net show` and `peer show`
// print (the keys of the real lnetctl YAML).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <lnet/config.hpp>
#include <lnet/nid.hpp>

namespace lnet {

// Global message counters (lnet_counters: common + health).
struct Counters {
  std::uint64_t msgs_alloc = 0;
  std::uint64_t msgs_max = 0;
  std::uint64_t rst_alloc = 0;
  std::uint64_t errors = 0;
  std::uint64_t send_count = 0;
  std::uint64_t resend_count = 0;
  std::uint64_t response_timeout_count = 0;
  std::uint64_t local_interrupt_count = 0;
  std::uint64_t local_dropped_count = 0;
  std::uint64_t local_aborted_count = 0;
  std::uint64_t local_no_route_count = 0;
  std::uint64_t local_timeout_count = 0;
  std::uint64_t local_error_count = 0;
  std::uint64_t remote_dropped_count = 0;
  std::uint64_t remote_error_count = 0;
  std::uint64_t remote_timeout_count = 0;
  std::uint64_t network_timeout_count = 0;
  std::uint64_t recv_count = 0;
  std::uint64_t route_count = 0;
  std::uint64_t drop_count = 0;
  std::uint64_t send_length = 0;
  std::uint64_t recv_length = 0;
  std::uint64_t route_length = 0;
  std::uint64_t drop_length = 0;
  std::uint64_t failed_resends = 0;      // messages that failed after being resent
  std::uint64_t successful_resends = 0;  // messages that went after being resent
};

// Per-message-type counts (sent_stats / received_stats / dropped_stats).
struct MsgTypeStats {
  std::uint64_t put = 0;
  std::uint64_t get = 0;
  std::uint64_t reply = 0;
  std::uint64_t ack = 0;
  std::uint64_t hello = 0;
  std::uint64_t total() const { return put + get + reply + ack + hello; }
};

// The counters of a driver in use, by name, in its order (Lnd::counters()).
struct LndCounters {
  std::string driver;  // e.g. "up" (the UP LND), "mpi" (the MPI LND)
  std::vector<std::pair<std::string, std::uint64_t>> counters;
};

// How long operations of one kind took through an NI or with a peer NI, in nanoseconds
// (`net show -v`, `peer show -v`: put_egress_*, get_rtt_*, put_ack_*, as LNet 2.17):
// samples, and the least, greatest and mean of them (all 0 without a sample).
struct LatencyFigures {
  std::uint64_t samples = 0;
  std::uint64_t min_ns = 0, max_ns = 0, avg_ns = 0;
};
// The three LNet 2.17 counts: a PUT of ours from LNetPut until its send completed
// (egress), a GET until its REPLY came (round trip), a PUT asking for an ACK until the ACK
// came. Each on the NI and the peer NI the message went through.
struct OpLatencies {
  LatencyFigures put_egress, get_rtt, put_ack;
};

struct NiInfo {
  Nid nid;
  bool up = true;
  std::vector<std::string> interfaces;
  NetTunables tunables;  // as the driver settled them
  LndTunables lnd_tunables;
  int lnd_timeout = 0;         // seconds the driver gives a transfer on this NI (0: none of its own)
  std::vector<unsigned> cpts;  // the CPTs it is on, ascending (every CPT of the instance unless configured)
  int dev_cpt = -1;            // the CPT of its device's NUMA node (-1: not known)
  int health = 1000;
  bool fatal_error = false;
  // Failures that lowered `health`, by cause.
  std::uint64_t hs_interrupts = 0, hs_dropped = 0, hs_aborted = 0, hs_no_route = 0, hs_timeouts = 0, hs_error = 0;
  // Recovery: pings since the last success, and when the next is due (seconds of the
  // monotonic clock, as LNet shows it; 0: not in recovery).
  unsigned ping_count = 0;
  std::int64_t next_ping = 0;
  unsigned selection_priority = 0xFFFFFFFFu;  // selection rules (UINT_MAX: none)
  unsigned net_priority = 0xFFFFFFFFu;        // of its net
  int max_tx_credits = 0;                     // summed over CPTs
  int tx_credits = 0;                         // available now, summed over CPTs
  int min_tx_credits = 0;                     // lowest seen, summed over CPTs
  MsgTypeStats sent, received, dropped;
  OpLatencies latency;
};

struct PeerNiInfo {
  Nid nid;
  bool up = true;
  // Whether LNet judges its aliveness (`state` up/down, else NA): the NIs of a gateway,
  // and on a router those of a net with a peer_timeout.
  bool aliveness = false;
  int max_tx_credits = 0;
  int tx_credits = 0;
  int min_tx_credits = 0;
  std::uint64_t tx_q_nob = 0;  // bytes queued for sending
  int rtr_credits = 0;
  int min_rtr_credits = 0;
  int health = 1000;
  // Failures that lowered `health`, by cause.
  std::uint64_t hs_dropped = 0, hs_timeout = 0, hs_error = 0, hs_network_timeout = 0;
  unsigned ping_count = 0;  // recovery, as for an NI
  std::int64_t next_ping = 0;
  unsigned selection_priority = 0xFFFFFFFFu;    // selection rules (UINT_MAX: none)
  unsigned net_priority = 0xFFFFFFFFu;          // of its peer net
  std::vector<Nid> preferred_sources;           // NID-pair rules: local NIs it prefers
  std::vector<std::string> preferred_gateways;  // router rules: gateway patterns it prefers
  MsgTypeStats sent, received, dropped;
  OpLatencies latency;
  // References to it: its peer's, and one per message holding or waiting for one of its
  // credits (send or router credits).
  int refcount = 1;
};

struct RouteInfo {
  NetId net;
  Nid gateway;
  int hops = -1;
  unsigned priority = 0;
  bool up = true;
  bool multi_hop = false;           // more than one hop, or the gateway lists no NI on `net`
  int gateway_health = 0;           // the health of the gateway's best NI on our side
  unsigned health_sensitivity = 1;  // of the route (its gateway's)
};

struct RouterPoolInfo {
  int npages = 0;
  int nbuffers = 0;
  int credits = 0;
  int min_credits = 0;
};

// Router buffer pools of one CPT: tiny, small, large.
struct RouterCptInfo {
  RouterPoolInfo pools[3];
};

struct PeerInfo {
  Nid primary_nid;
  bool multi_rail = false;
  std::uint32_t state = 0;  // LNet's peer state bits (discovery's flags)
  std::vector<PeerNiInfo> nis;
};

}  // namespace lnet
