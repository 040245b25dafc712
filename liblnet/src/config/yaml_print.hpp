// Prints a YAML::Node tree in the block layout of libyaml as lnetctl prints it: four
// spaces per level, sequence items as "- " at the parent's indent plus four, insertion
// order kept (yaml-cpp parses; this only prints). And the nodes that show and export
// print alike: one builder each.
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
// The traffic of an NI or a peer NI as `show -v` prints it: "statistics" (the totals),
// then "sent_stats", "received_stats" and "dropped_stats" by message type.
void put_traffic(YAML::Node& n, const MsgTypeStats& sent, const MsgTypeStats& received, const MsgTypeStats& dropped);
// `show -v 4`: the round trips of pings in "statistics" (get_rtt_count, then _last, _min,
// _avg, _max in microseconds once there is one).
void put_rtt(YAML::Node& n, const RttFigures& r);

}  // namespace lnet::dlc
