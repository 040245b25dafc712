// Prints a YAML::Node tree in the block layouts of libyaml as lnetctl 2.17 prints them,
// insertion order kept (yaml-cpp parses; this only prints): the classic one (four spaces
// a level, sequence items as "- " four in), the netlink commands' (six columns), and the
// compact one of ping and discover (two). A scalar tagged "!quoted" is double-quoted;
// "!tag-dq" and "!tag-sq" print as lnetctl's error descriptions do (`! "..."`, `! '...'`).
// And the nodes that show and export print alike: one builder each.
#pragma once

#include <string>

#include <vector>

#include <yaml-cpp/yaml.h>

#include <lnet/config.hpp>
#include <lnet/stats.hpp>

namespace lnet::dlc {

std::string print_yaml(const YAML::Node& root);
// The layout of lnetctl's netlink commands (`net show` since 2.15): six columns per
// level, a sequence at its key's column ("-     net type: tcp"), so that lines in that
// layout appended to the output (as Lustre's test suite appends them) stay valid YAML.
std::string print_yaml_netlink(const YAML::Node& root);
// ping's and discover's: two columns a level, sequences at their key's column
// ("- primary nid: ...\n  Multi-Rail: true\n  peer_ni:\n  - nid: ...").
std::string print_yaml_compact(const YAML::Node& root);

// A number as a plain scalar.
YAML::Node int_node(long v);
// `udsp info` of net show / peer show -v 4: the priorities selection rules gave (-1:
// none) and the preferred gateways and source NIDs (`NID-0: ...`), as lnetctl prints it.
YAML::Node udsp_info_node(unsigned net_priority, unsigned nid_priority, const std::vector<std::string>& gateways,
                          const std::vector<Nid>& sources);
// A fault rule as `fault ... show` and export print it (lists for portal, message and
// health_error), and back (fails naming the field and the line).
YAML::Node fault_rule_node(const FaultRule& r);
Result<FaultRule> fault_rule_from_yaml(const YAML::Node& n, bool delay);
// "tunables": peer_timeout, peer_credits, peer_buffer_credits, credits.
YAML::Node tunables_node(const NetTunables& t);
// "lnd tunables" of a net, those its driver has: tcp conns_per_peer, timeout (the
// driver's, `timeout` seconds) and tos; mpi timeout; none for lo (a null node).
// The "lnd tunables" of an NI on `net`: its driver's keys (LndTunableSpec) in their order,
// each as `t` has it or its default; `settable_only`: without the read-only ones.
YAML::Node lnd_tunables_node(NetId net, const LndTunables& t, bool settable_only = false);
// "interfaces": {0: eth0, 1: eth1}.
YAML::Node interfaces_node(const std::vector<std::string>& ifs);
// "[0,1]".
std::string cpt_list(const std::vector<unsigned>& cpts);
// "statistics" of an NI or a peer NI as `show -v` prints it: send_count, recv_count,
// drop_count, then the latencies (put_egress_, get_rtt_, put_ack_ samples, min_nsec,
// max_nsec, avg_nsec).
void put_statistics(YAML::Node& n, const MsgTypeStats& sent, const MsgTypeStats& received, const MsgTypeStats& dropped,
                    const OpLatencies& latency);
// "sent_stats", "received_stats" and "dropped_stats" by message type (`show -v 2`).
void put_type_stats(YAML::Node& n, const MsgTypeStats& sent, const MsgTypeStats& received, const MsgTypeStats& dropped);

}  // namespace lnet::dlc
