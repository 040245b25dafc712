// The lnetctl commands: one table of their options (lnetctl parses its command line from
// it, the daemon checks requests against it) and the handler of each, and the commands
// that act on the whole configuration (lnet configure, import, export).
#include <algorithm>

#include <lnet/log.hpp>

#include "commands.hpp"
#include "yaml_print.hpp"

namespace lnet::dlc {

namespace {

using K = OptionSpec::Kind;

const OptionSpec kVerbose{"verbose", 'v', K::Level, "more detail (level 1 or 2)"};

struct Entry {
  CommandSpec spec;
  Handler handler;
};

const std::vector<Entry>& table() {
  static const std::vector<Entry> t = {
      {{"lnet configure",
        "with --all: bring up the networks, routes and tunables of the daemon's configuration",
        true,
        {{"all", 'a', K::Flag, "bring up the daemon's configuration (else LNet, which is up, stays as it is)"},
         {"large", 0, K::Flag,
          "large NIDs: NIs added by interface from now on take its IPv6 address before its IPv4 one"}}},
       lnet_configure},
      {{"lnet unconfigure", "take every network but 0@lo down, with routes, peers, rules and routing", true, {}},
       lnet_unconfigure},
      {{"net add",
        "add a local NI",
        true,
        {{"net", 0, K::Value, "network, e.g. tcp1"},
         {"if", 0, K::Values, "interface(s), e.g. eth0"},
         {"nid", 0, K::Value, "the NID instead of an interface"},
         {"ip2net", 0, K::Value, "networks chosen by this node's addresses: \"tcp(eth0) 192.168.0.*; tcp1 10.1.*.*\""},
         {"peer-timeout", 0, K::Value, "seconds a router forwards to a silent peer NI its driver reports down"},
         {"peer-credits", 0, K::Value, "messages in flight to one peer NI"},
         {"peer-buffer-credits", 0, K::Value, "router buffers one peer NI may hold"},
         {"credits", 0, K::Value, "messages in flight on the NI"},
         {"cpt", 0, K::Value, "CPT list, e.g. \"[0,1]\": the CPTs the NI is on (default: every CPT)"},
         {"conns-per-peer", 0, K::Value,
          "tcp: connections of each bulk type per peer (1..127; 0: from the link speed)"},
         {"tos", 0, K::Value, "tcp: IP type of service"},
         {"skip-mr-route-setup", 0, K::Flag, "set up no IP routing rules (always so: lnetd sets up none)"},
         {"auth-key", 0, K::Value, "kfi authentication key", "there is no kfi driver"},
         {"traffic-class", 0, K::Value, "o2ib/kfi traffic class",
          "the o2ib driver sets no traffic class yet, and there is no kfi driver"}}},
       net_add},
      {{"net del",
        "delete local NIs",
        true,
        {{"net", 0, K::Value, "network"},
         {"nid", 0, K::Value, "only this NI"},
         {"if", 0, K::Values, "only the NI on this interface"}}},
       net_del},
      {{"net show", "show local NIs", false, {{"net", 'n', K::Value, "only this network"}, kVerbose}}, net_show},
      {{"net set",
        "set local NIs' health (below 1000 they go into recovery), connections per peer, the driver timeout",
        true,
        {{"nid", 0, K::Value, "the NI"},
         {"net", 0, K::Value, "every NI of this network"},
         {"all", 0, K::Flag, "every NI"},
         {"health", 0, K::Value, "health value 0..1000"},
         {"lnd-timeout", 0, K::Value, "seconds: the driver timeout of the NIs of --net (0: LNet's lnd_timeout)"},
         {"conns-per-peer", 0, K::Value,
          "tcp connections of each bulk type per peer for new connections (1..127; 0: from the link speed)"}}},
       net_set},
      {{"peer add",
        "add a peer",
        true,
        {{"prim_nid", 0, K::Value, "primary NID"},
         {"nid", 0, K::Values, "more NIDs (comma separated)"},
         {"non_mr", 0, K::Flag, "not multi-rail"},
         {"lock_prim", 0, K::Flag, "keep the primary NID whatever discovery learns"}}},
       peer_add},
      {{"peer del",
        "delete a peer or some of its NIDs",
        true,
        {{"prim_nid", 0, K::Value, "primary NID"},
         {"nid", 0, K::Values, "only these NIDs"},
         {"force", 0, K::Flag, "delete a locked primary NID too"}}},
       peer_del},
      {{"peer show", "show peers", false, {{"nid", 0, K::Value, "only the peer with this NID"}, kVerbose}}, peer_show},
      {{"peer list", "list the primary NIDs of the peers", false, {}}, peer_list},
      {{"peer set",
        "set the health of peer NIs (below 1000 they go into recovery), or a peer's state bits",
        true,
        {{"nid", 0, K::Values, "peer NID(s)"},
         {"all", 0, K::Flag, "every peer NI"},
         {"health", 0, K::Value, "health value 0..1000"},
         {"state", 0, K::Value, "peer state bits, as peer show -v 4 prints them (tests)"}}},
       peer_set},
      {{"debug recovery",
        "list the local NIs or peer NIs in recovery",
        false,
        {{"local", 0, K::Flag, "the local NI recovery queue"}, {"peer", 0, K::Flag, "the peer NI recovery queue"}}},
       debug_recovery},
      {{"debug peer",
        "write a peer's state to the daemon's log (as LNet writes it to the kernel log)",
        false,
        {{"prim_nid", 0, K::Value, "the peer (any of its NIDs)"}, {"nid", 0, K::Value, "same as --prim_nid"}}},
       debug_peer},
      {{"route add",
        "add a route",
        true,
        {{"net", 0, K::Value, "remote network"},
         {"gateway", 0, K::Value, "gateway NID"},
         {"hop", 0, K::Value, "hop count 1..255"},
         {"hop-count", 0, K::Value, "same as --hop"},
         {"priority", 0, K::Value, "lower is preferred"},
         {"health_sensitivity", 0, K::Value, "what a failure takes off the gateway's health (default 1)"}}},
       route_add},
      {{"route del",
        "delete a route",
        true,
        {{"net", 0, K::Value, "remote network"}, {"gateway", 0, K::Value, "gateway NID"}}},
       route_del},
      {{"route show",
        "show routes",
        false,
        {{"net", 0, K::Value, "only to this network"},
         {"gateway", 0, K::Value, "only through this gateway"},
         {"hop", 0, K::Value, "only of this hop count"},
         {"priority", 0, K::Value, "only of this priority"},
         kVerbose}},
       route_show},
      {{"routing show", "show the router buffer pools and whether this node routes", false, {}}, routing_show},
      {{"set",
        "set a tunable: routing, tiny_buffers, small_buffers, large_buffers or a global tunable (global show)",
        true,
        {{"name", 0, K::Positional, "tunable"}, {"value", 0, K::Positional, "value"}}},
       set_tunable},
      {{"global show", "show the global tunables", false, {kVerbose}}, global_show},
      {{"stats show", "show the LNet counters", false, {}}, stats_show},
      {{"stats reset", "zero the LNet counters", true, {}}, stats_reset},
      {{"ping",
        "ping NIDs",
        false,
        {{"timeout", 0, K::Value, "seconds (default 1)"},
         {"source", 0, K::Value, "local NID to ping from"},
         {"nid", 0, K::Positional, "NID[s] to ping"}}},
       ping},
      {{"discover",
        "discover peers: ping them, merge the NIs they list, push them ours",
        true,
        {{"force", 0, K::Flag, "a full round (ping and push) even if discovered"},
         {"nid", 0, K::Positional, "NID[s] to discover"}}},
       discover},
      {{"import",
        "apply a YAML configuration",
        true,
        {{"add", 0, K::Flag, "add what the document describes (default)"},
         {"del", 0, K::Flag, "delete it"},
         {"show", 0, K::Flag, "show the current state of it"},
         {"merge", 0, K::Flag,
          "add what is not configured yet, leave what is (this tool's: the reload of lnetd.service)"},
         {"exec", 'e', K::Flag, "run its ping and discover sections (and nothing else)"},
         {"old-api", 0, K::Flag, "the kernel's lnetctl: import through ioctls; here the one importer, as without it"},
         {"file", 0, K::Positional, "the document (- or none: standard input)"}}},
       import_yaml},
      {{"export",
        "print the configuration as YAML",
        false,
        {{"backup", 'b', K::Flag, "only what configures"}, {"file", 0, K::Positional, "write it here"}}},
       export_yaml},
      {{"udsp add",
        "add a selection rule",
        true,
        {{"src", 0, K::Value, "local NID or net pattern"},
         {"dst", 0, K::Value, "peer NID or net pattern"},
         {"rte", 0, K::Value, "router pattern"},
         {"priority", 0, K::Value, "0 is the highest"},
         {"idx", 0, K::Value, "position"}}},
       udsp_add},
      {{"udsp del",
        "delete selection rules",
        true,
        {{"idx", 0, K::Value, "rule index"}, {"all", 0, K::Flag, "every rule"}}},
       udsp_del},
      {{"udsp show", "show selection rules", false, {{"idx", 0, K::Value, "rule index"}}}, udsp_show},
      {{"cpt-of-nid",
        "the CPT that serves each NID (LNet's mapping over this instance's CPTs)",
        false,
        {{"nid", 0, K::Positional, "NID[s]"}}},
       cpt_of_nid},
      {{"service-id", "ptlrpc service ids: there is no ptlrpc above this LNet", false, {}}, not_built},
      {{"setup-mrrouting", "source routing rules for multi-rail tcp: lnetd sets up no IP routing", true, {}},
       not_built},
      {{"setup-sysctl", "kernel sysctls for multi-rail tcp: lnetd changes no kernel settings", true, {}}, not_built},
      {{"fault drop add",
        "add a drop rule: matching messages are dropped on receive (or, with --health_error, fail on send)",
        true,
        {{"source", 's', K::Value, "source NID (* or *@net: any)"},
         {"dest", 'd', K::Value, "destination NID (* or *@net: any)"},
         {"local_nid", 'o', K::Value, "local NI it arrives on or leaves from"},
         {"rate", 'r', K::Value, "one in every N matching messages"},
         {"interval", 'i', K::Value, "one in every N seconds"},
         {"portal", 'p', K::Values, "only PUT/GET to these portals"},
         {"message", 'm', K::Values, "only these types: PUT, ACK, GET, REPLY"},
         {"health_error", 'e', K::Values, "fail the send with this health status (or random)"},
         {"random", 'n', K::Flag, "with --interval: each match with probability 1/2"},
         {"drop_all", 'a', K::Flag, "every matching message"}}},
       fault_add},
      {{"fault drop del",
        "delete drop rules",
        true,
        {{"source", 's', K::Value, "of this source"},
         {"dest", 'd', K::Value, "to this destination"},
         {"all", 'a', K::Flag, "every rule"}}},
       fault_del},
      {{"fault drop reset", "zero the counters of the drop rules", true, {}}, fault_reset},
      {{"fault drop show", "show the drop rules and their counters", false, {}}, fault_show},
      {{"fault delay add",
        "add a delay rule: matching messages are held on receive for --latency seconds",
        true,
        {{"source", 's', K::Value, "source NID (* or *@net: any)"},
         {"dest", 'd', K::Value, "destination NID (* or *@net: any)"},
         {"local_nid", 'o', K::Value, "local NI it arrives on"},
         {"rate", 'r', K::Value, "one in every N matching messages"},
         {"interval", 'i', K::Value, "one in every N seconds"},
         {"latency", 'l', K::Value, "seconds to hold it"},
         {"portal", 'p', K::Values, "only PUT/GET to these portals"},
         {"message", 'm', K::Values, "only these types: PUT, ACK, GET, REPLY"}}},
       fault_add},
      {{"fault delay del",
        "delete delay rules",
        true,
        {{"source", 's', K::Value, "of this source"},
         {"dest", 'd', K::Value, "to this destination"},
         {"all", 'a', K::Flag, "every rule"}}},
       fault_del},
      {{"fault delay reset", "zero the counters of the delay rules", true, {}}, fault_reset},
      {{"fault delay show", "show the delay rules and their counters", false, {}}, fault_show},
  };
  return t;
}

const Entry* find_entry(std::string_view name) {
  for (const Entry& e : table())
    if (e.spec.name == name) return &e;
  return nullptr;
}

// Every option of the request is one the command has and takes.
Response check_options(const Request& r, const CommandSpec& spec) {
  for (const auto& arg : r.args) {
    const std::string& name = arg.first;
    auto it =
        std::find_if(spec.options.begin(), spec.options.end(), [&](const OptionSpec& o) { return name == o.name; });
    if (it == spec.options.end())
      return error_block("manage", "command", -EINVAL, "'" + r.command + "' has no option --" + name);
    if (it->unsupported)
      return error_block("manage", "command", -EOPNOTSUPP,
                         "not supported yet: " + r.command + " --" + name + " (" + it->unsupported + ")");
  }
  return Response{};
}

}  // namespace

const std::vector<CommandSpec>& commands() {
  static const std::vector<CommandSpec> specs = [] {
    std::vector<CommandSpec> v;
    for (const Entry& e : table()) v.push_back(e.spec);
    return v;
  }();
  return specs;
}

const CommandSpec* find_command(std::string_view name) {
  const Entry* e = find_entry(name);
  return e ? &e->spec : nullptr;
}

Response execute(Instance& lnet, const Request& r, const Hooks& hooks) {
  const Entry* e = find_entry(r.command);
  if (!e) return error_block("manage", "command", -ENOSYS, "unknown command '" + r.command + "'");
  if (Response bad = check_options(r, e->spec); bad.rc) return bad;
  try {
    return e->handler(lnet, r, hooks);
  } catch (const std::exception& ex) {
    LNET_LOG(Error, kLogConfig, "%s: internal error: %s", r.command.c_str(), ex.what());
    return error_block("manage", "command", -EIO, std::string("internal error: ") + ex.what());
  }
}

// ---- commands on the whole configuration ----

Response lnet_configure(Instance& lnet, const Request& r, const Hooks& hooks) {
  if (r.flag("large")) lnet.control().set_large_nids(true);  // before --all brings NIs up
  if (!r.flag("all")) return ok(YAML::Node());               // LNet is up; without --all nothing more comes up
  if (!hooks.configure)
    return error_block("configure", "lnet", -EOPNOTSUPP, "not supported here: this process has no configuration");
  if (Status s = hooks.configure(); !s) return error_block("configure", "lnet", s.code(), s.message());
  return ok(YAML::Node());
}

Response lnet_unconfigure(Instance&, const Request&, const Hooks& hooks) {
  if (!hooks.unconfigure)
    return error_block("unconfigure", "lnet", -EOPNOTSUPP, "not supported here: this process cannot unconfigure");
  if (Status s = hooks.unconfigure(); !s) return error_block("unconfigure", "lnet", s.code(), s.message());
  return ok(YAML::Node());
}

namespace {

bool configures(const SystemConfig& c) {
  return !c.nets.empty() || !c.ip2nets.empty() || !c.routes.empty() || !c.peers.empty() || c.routing || c.buffers ||
         !c.global_keys.empty() || !c.udsp.empty() || !c.faults.empty() || c.selftest;
}

// import --exec: the ping and discover sections, run as the commands would run them.
Response run_exec(Instance& lnet, const SystemConfig& cfg, const Hooks& hooks) {
  Response out{0, "", cfg.warnings};
  if (configures(cfg))
    out.warnings.push_back("import --exec runs the ping and discover sections: the others were not applied");
  for (const ExecSection& x : cfg.exec) {
    Request q;
    q.command = x.discover ? "discover" : "ping";
    for (const ProcessId& id : x.targets)
      q.args["nid"].push_back(id.pid == kPidAny || x.discover ? id.nid.to_string() : id.to_string());
    if (x.timeout_ms) q.args["timeout"].push_back(std::to_string((*x.timeout_ms + 999) / 1000));
    if (x.source) q.args["source"].push_back(x.source->to_string());
    if (x.force) q.args["force"];
    Response one = x.discover ? discover(lnet, q, hooks) : ping(lnet, q, hooks);
    out.text += one.text;
    if (one.rc && !out.rc) out.rc = one.rc;
  }
  return out;
}

}  // namespace

Response import_yaml(Instance& lnet, const Request& r, const Hooks& hooks) {
  auto cfg = parse_config(r.body);
  if (!cfg) return error_block("import", "yaml", cfg.code(), cfg.message());
  if (r.flag("exec")) return run_exec(lnet, *cfg, hooks);
  if (!cfg->exec.empty()) cfg->warnings.push_back("the ping and discover sections run with import --exec: not run now");
  ImportMode mode = r.flag("del")     ? ImportMode::Del
                    : r.flag("show")  ? ImportMode::Show
                    : r.flag("merge") ? ImportMode::Merge
                                      : ImportMode::Add;
  if (mode == ImportMode::Merge && cfg->selftest) {  // lnetd's own key, taken when it starts
    cfg->warnings.push_back("selftest: lnetd takes it when it starts; left as it is");
    cfg->selftest.reset();
  }
  std::string shown;
  if (Status s = apply_config(lnet, *cfg, mode, &shown); !s) {
    Response failed = error_block("import", "yaml", s.code(), s.message() + " (nothing was applied)");
    failed.warnings = cfg->warnings;
    return failed;
  }
  return Response{0, shown, cfg->warnings};
}

// export --backup: the configuration to load again. export: the state, as lnetctl 2.17
// writes it: net show -v 3, route show -v, peer show -v 3, routing show, global show
// (and the selection and fault rules), one after the other.
Response export_yaml(Instance& lnet, const Request& r, const Hooks& hooks) {
  if (r.flag("backup")) return Response{0, config_to_yaml(export_config(lnet), true)};
  auto shown = [&](Response (*show)(Instance&, const Request&, const Hooks&), const char* verbose) {
    Request q;
    if (verbose) q.args["verbose"] = {verbose};
    Response s = show(lnet, q, hooks);
    return s.rc == 0 ? s.text : std::string();
  };
  std::string out = shown(net_show, "3") + shown(route_show, "1") + shown(peer_show, "3") +
                    shown(routing_show, nullptr) + shown(global_show, nullptr);
  SystemConfig rules;
  rules.udsp = lnet.control().udsp_rules();
  for (bool delay : {false, true})
    for (const FaultRuleInfo& i : lnet.control().faults(delay)) rules.faults.push_back(i.rule);
  return Response{0, out + config_to_yaml(rules, false)};
}

}  // namespace lnet::dlc
