// The handlers of the lnetctl commands, one file per group (net, peer, route, global),
// and what they share: argument parsing and the YAML of answers and error blocks.
#pragma once

#include <climits>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include <lnet/api.hpp>
#include <lnet/dlc.hpp>

namespace lnet::dlc {

using Handler = Response (*)(Instance& lnet, const Request& r, const Hooks& hooks);

// ---- answers ----
// An lnetctl error block: "<verb>:\n    - <object>:\n          errno: rc\n          descr: ...".
Response error_block(const std::string& verb, const std::string& object, int rc, const std::string& descr);
// One entry of such a block: "<object>:\n    errno: rc\n    descr: ...".
YAML::Node error_item(const std::string& object, int rc, const std::string& descr);
Response ok(const YAML::Node& root);
// The same in the netlink layout (net, peer and route show, export: lnetctl 2.17's).
Response ok_netlink(const YAML::Node& root);

// ---- arguments ----
// --name as a number in [lo, hi], `def` when absent; a failure names the option.
Result<long> int_arg(const Request& r, const std::string& name, long def, long lo, long hi);
// Values that may be given once with commas ("a,b") or many times.
std::vector<std::string> list_arg(const Request& r, const std::string& name);

// ---- handlers ----
Response lnet_configure(Instance& lnet, const Request& r, const Hooks& hooks);
Response lnet_unconfigure(Instance& lnet, const Request& r, const Hooks& hooks);
Response net_show(Instance& lnet, const Request& r, const Hooks& hooks);
Response net_add(Instance& lnet, const Request& r, const Hooks& hooks);
Response net_del(Instance& lnet, const Request& r, const Hooks& hooks);
Response net_set(Instance& lnet, const Request& r, const Hooks& hooks);
Response peer_show(Instance& lnet, const Request& r, const Hooks& hooks);
Response peer_list(Instance& lnet, const Request& r, const Hooks& hooks);
Response peer_add(Instance& lnet, const Request& r, const Hooks& hooks);
Response peer_del(Instance& lnet, const Request& r, const Hooks& hooks);
Response peer_set(Instance& lnet, const Request& r, const Hooks& hooks);
Response debug_recovery(Instance& lnet, const Request& r, const Hooks& hooks);
Response debug_peer(Instance& lnet, const Request& r, const Hooks& hooks);
Response ping(Instance& lnet, const Request& r, const Hooks& hooks);
Response discover(Instance& lnet, const Request& r, const Hooks& hooks);
Response route_show(Instance& lnet, const Request& r, const Hooks& hooks);
Response route_add(Instance& lnet, const Request& r, const Hooks& hooks);
Response route_del(Instance& lnet, const Request& r, const Hooks& hooks);
Response routing_show(Instance& lnet, const Request& r, const Hooks& hooks);
Response set_tunable(Instance& lnet, const Request& r, const Hooks& hooks);
Response global_show(Instance& lnet, const Request& r, const Hooks& hooks);
Response stats_show(Instance& lnet, const Request& r, const Hooks& hooks);
Response stats_reset(Instance& lnet, const Request& r, const Hooks& hooks);
Response udsp_add(Instance& lnet, const Request& r, const Hooks& hooks);
Response udsp_del(Instance& lnet, const Request& r, const Hooks& hooks);
Response udsp_show(Instance& lnet, const Request& r, const Hooks& hooks);
Response fault_add(Instance& lnet, const Request& r, const Hooks& hooks);
Response fault_del(Instance& lnet, const Request& r, const Hooks& hooks);
Response fault_reset(Instance& lnet, const Request& r, const Hooks& hooks);
Response fault_show(Instance& lnet, const Request& r, const Hooks& hooks);
Response cpt_of_nid(Instance& lnet, const Request& r, const Hooks& hooks);
// A command of the real lnetctl this build does not have: refused, saying so.
Response not_built(Instance& lnet, const Request& r, const Hooks& hooks);
Response import_yaml(Instance& lnet, const Request& r, const Hooks& hooks);
Response export_yaml(Instance& lnet, const Request& r, const Hooks& hooks);

}  // namespace lnet::dlc
