// lnetctl net show | add | del.
#include <algorithm>
#include <map>

#include "base/text.hpp"
#include "commands.hpp"
#include "yaml_print.hpp"

namespace lnet::dlc {

namespace {

// `health stats` of an NI: its health, the failures that lowered it, and recovery.
void health_ni(YAML::Node& ni, const NiInfo& i) {
  YAML::Node h;
  h["fatal_error"] = int_node(i.fatal_error ? 1 : 0);
  h["health value"] = int_node(i.health);
  h["interrupts"] = int_node(static_cast<long>(i.hs_interrupts));
  h["dropped"] = int_node(static_cast<long>(i.hs_dropped));
  h["aborted"] = int_node(static_cast<long>(i.hs_aborted));
  h["no route"] = int_node(static_cast<long>(i.hs_no_route));
  h["timeouts"] = int_node(static_cast<long>(i.hs_timeouts));
  h["error"] = int_node(static_cast<long>(i.hs_error));
  h["ping_count"] = int_node(static_cast<long>(i.ping_count));
  h["next_ping"] = int_node(static_cast<long>(i.next_ping));
  ni["health stats"] = h;
}

// The detail of `net show -v N` for one NI, as lnetctl 2.17 prints it: statistics with
// the latencies (1), udsp info (4), the counts by message type and health (2),
// tunables, lnd tunables, dev cpt and CPT (1).
void verbose_ni(YAML::Node& ni, const NiInfo& i, long verbose) {
  put_statistics(ni, i.sent, i.received, i.dropped, i.latency);
  if (verbose > 3) ni["udsp info"] = udsp_info_node(i.net_priority, i.selection_priority, {}, {});
  if (verbose > 1) {
    put_type_stats(ni, i.sent, i.received, i.dropped);
    health_ni(ni, i);
  }
  ni["tunables"] = tunables_node(i.tunables);
  if (!i.nid.is_lo()) {
    YAML::Node lt = lnd_tunables_node(i.nid.net(), i.lnd_tunables);
    if (lt.size() > 0) ni["lnd tunables"] = lt;
  }
  ni["dev cpt"] = int_node(i.dev_cpt);
  ni["CPT"] = cpt_list(i.cpts);
}

}  // namespace

Response net_show(Instance& lnet, const Request& r, const Hooks&) {
  std::optional<NetId> filter;
  if (const std::string* n = r.arg("net")) {
    auto net = NetId::parse(*n);
    if (!net) return error_block("show", "net", -EINVAL, net.message());
    filter = *net;
  }
  auto verbose = int_arg(r, "verbose", 0, 0, INT_MAX);
  if (!verbose) return error_block("show", "net", verbose.code(), verbose.message());
  const Control& c = lnet.control();
  std::vector<NetId> order;
  std::map<NetId, YAML::Node> groups;
  for (const NiInfo& i : c.ni_info()) {
    NetId id = i.nid.net();
    if (filter && *filter != id) continue;
    if (!groups.count(id)) {
      order.push_back(id);
      groups[id] = YAML::Node(YAML::NodeType::Sequence);
    }
    YAML::Node ni;
    ni["nid"] = i.nid.to_string();
    ni["status"] = i.up ? "up" : "down";
    if (!i.interfaces.empty()) ni["interfaces"] = interfaces_node(i.interfaces);
    if (*verbose > 0) verbose_ni(ni, i, *verbose);
    groups[id].push_back(ni);
  }
  if (filter && order.empty()) return error_block("show", "net", -ENOENT, "no network " + filter->to_string());
  YAML::Node list(YAML::NodeType::Sequence);
  for (NetId id : order) {
    YAML::Node net;
    net["net type"] = id.to_string();
    net["local NI(s)"] = groups[id];
    list.push_back(net);
  }
  YAML::Node root;
  root["net"] = list;
  return Response{0, print_yaml_netlink(root)};  // lnetctl's net show is a netlink command
}

namespace {

// net add --ip2net: the NIs the string names on this host, each with the tunables given.
Response add_ip2net(Control& c, const std::string& text, const NetConfig& tunables) {
  if (text.size() > 127) return error_block("add", "net", -ERANGE, "--ip2net: longer than 127 characters");
  auto host = host_interfaces();
  if (!host) return error_block("add", "net", host.code(), host.message());
  auto networks = ip2nets_to_networks(text, *host);
  if (!networks) return error_block("add", "net", networks.code(), "--ip2net: " + networks.message());
  auto nis = Config::parse_networks(*networks, tunables.tunables);
  if (!nis) return error_block("add", "net", nis.code(), "--ip2net: " + nis.message());
  std::vector<Nid> added;
  for (NetConfig nc : *nis) {
    nc.lnd_tunables = tunables.lnd_tunables;
    if (nc.cpts.empty()) nc.cpts = tunables.cpts;
    auto id = c.add_ni(nc);
    if (!id) {
      for (Nid n : added) (void)c.del_ni(n);
      return error_block("add", "net", id.code(), "--ip2net: cannot add " + nc.net.to_string() + ": " + id.message());
    }
    added.push_back(*id);
  }
  return ok(YAML::Node());
}

// net add's tunables, CPTs and driver tunables into `nc`.
Status read_tunables(const Request& r, NetConfig& nc) {
  struct IntArg {
    const char* name;
    int* field;
    long lo, hi;
  } ints[] = {{"peer-timeout", &nc.tunables.peer_timeout, -1, 1 << 20},  // -1: the default, as in YAML
              {"peer-credits", &nc.tunables.peer_credits, 0, 65535},
              {"peer-buffer-credits", &nc.tunables.peer_buffer_credits, 0, 65535},
              {"credits", &nc.tunables.credits, 1, 1 << 20}};
  for (auto& a : ints) {
    auto v = int_arg(r, a.name, *a.field, a.lo, a.hi);
    if (!v) return v.failure();
    *a.field = static_cast<int>(*v);
  }
  // lnetctl's options for driver tunables: set only when given; the NI's driver says
  // whether it takes them.
  for (auto [option, key, lo, hi] :
       {std::tuple{"conns-per-peer", "conns_per_peer", 0L, 127L}, std::tuple{"tos", "tos", -1L, 255L}}) {
    if (!r.arg(option)) continue;
    auto v = int_arg(r, option, 0, lo, hi);
    if (!v) return v.failure();
    nc.lnd_tunables.set(key, *v);
  }
  if (nc.tunables.peer_timeout < 0) nc.tunables.peer_timeout = NetTunables{}.peer_timeout;
  if (const std::string* cpt = r.arg("cpt")) {
    auto parsed = parse_cpt_list(*cpt);
    if (!parsed) return Failure{-EINVAL, "--cpt: " + parsed.message()};
    nc.cpts = *parsed;
  }
  return {};
}

}  // namespace

Response net_add(Instance& lnet, const Request& r, const Hooks&) {
  const std::string* net = r.arg("net");
  const std::string* ip2net = r.arg("ip2net");
  // As the kernel's lnetctl: --nid alone names the net too.
  std::string net_of_nid;
  if (!net && !ip2net && r.arg("nid")) {
    auto n = Nid::parse(*r.arg("nid"));
    if (!n) return error_block("add", "net", -EINVAL, n.message());
    net_of_nid = n->net().to_string();
    net = &net_of_nid;
  }
  if (!net && !ip2net) return error_block("add", "net", -EINVAL, "net add needs --net, --nid or --ip2net");
  if (net && ip2net) return error_block("add", "net", -EINVAL, "net add takes --net or --ip2net, not both");
  NetConfig nc;
  if (net) {
    auto id = NetId::parse(*net);
    if (!id) return error_block("add", "net", -EINVAL, id.message());
    nc.net = *id;
  }
  nc.interfaces = list_arg(r, "if");
  for (const std::string& i : nc.interfaces)
    if (std::string why = text::bad_interface_name(i); !why.empty())
      return error_block("add", "net", -EINVAL, "--if: " + why);
  if (ip2net && (r.arg("nid") || !nc.interfaces.empty()))
    return error_block("add", "net", -EINVAL, "--ip2net names the interfaces: no --if or --nid with it");
  if (const std::string* nid = r.arg("nid")) {
    auto n = Nid::parse(*nid);
    if (!n) return error_block("add", "net", -EINVAL, n.message());
    if (n->net() != nc.net) return error_block("add", "net", -EINVAL, "--nid " + *nid + " is not on " + *net);
    nc.nid = *n;
  }
  if (Status t = read_tunables(r, nc); !t) return error_block("add", "net", t.code(), t.message());
  if (ip2net) return add_ip2net(lnet.control(), *ip2net, nc);
  auto added = lnet.control().add_ni(nc);
  if (!added) return error_block("add", "net", added.code(), added.message());
  return ok(YAML::Node());
}

Response net_del(Instance& lnet, const Request& r, const Hooks&) {
  const std::string* net = r.arg("net");
  std::optional<Nid> nid;
  if (const std::string* n = r.arg("nid")) {
    auto p = Nid::parse(*n);
    if (!p) return error_block("del", "net", -EINVAL, p.message());
    nid = *p;
  }
  if (!net && !nid) return error_block("del", "net", -EINVAL, "net del needs --net or --nid");
  // --nid alone: the net is the NID's, as lnetctl takes it.
  auto id = net ? NetId::parse(*net) : Result<NetId>(nid->net());
  if (!id) return error_block("del", "net", -EINVAL, id.message());
  auto ifs = list_arg(r, "if");
  Control& c = lnet.control();
  int deleted = 0;
  for (const NiInfo& i : c.ni_info()) {
    if (i.nid.net() != *id || (nid && *nid != i.nid)) continue;
    if (!ifs.empty() && (i.interfaces.empty() || std::find(ifs.begin(), ifs.end(), i.interfaces[0]) == ifs.end()))
      continue;
    if (Status s = c.del_ni(i.nid); !s) return error_block("del", "net", s.code(), s.message());
    ++deleted;
  }
  if (!deleted) return error_block("del", "net", -ENOENT, "no matching NI on " + id->to_string());
  return ok(YAML::Node());
}

namespace {

// The local NIs net set names (--all, --nid or --net); none named is an error when
// `needed`.
Result<std::vector<NiInfo>> nis_named(Control& c, const Request& r, bool needed) {
  std::vector<NiInfo> nis;
  if (r.flag("all")) {
    for (const NiInfo& i : c.ni_info())
      if (!i.nid.is_lo()) nis.push_back(i);
  } else if (const std::string* n = r.arg("nid")) {
    auto p = Nid::parse(*n);
    if (!p) return Failure{-EINVAL, p.message()};
    for (const NiInfo& i : c.ni_info())
      if (i.nid == *p) nis.push_back(i);
    if (nis.empty()) return Failure{-ENOENT, "no local NI " + p->to_string()};
  } else if (const std::string* net = r.arg("net")) {
    auto id = NetId::parse(*net);
    if (!id) return Failure{-EINVAL, id.message()};
    for (const NiInfo& i : c.ni_info())
      if (i.nid.net() == *id) nis.push_back(i);
    if (nis.empty()) return Failure{-ENOENT, "no local NI on " + id->to_string()};
  } else if (needed) {
    return Failure{-EINVAL, "net set needs --nid, --net or --all"};
  }
  return nis;
}

}  // namespace

Response net_set(Instance& lnet, const Request& r, const Hooks&) {
  auto health = int_arg(r, "health", -1, 0, 1000);
  if (!health) return error_block("set", "net", -EINVAL, health.message());
  auto cpp = int_arg(r, "conns-per-peer", -1, 0, 127);
  if (!cpp) return error_block("set", "net", -EINVAL, "invalid conns-per-peer value (valid range 0-127)");
  auto lnd_timeout = int_arg(r, "lnd-timeout", -1, 0, 3600);
  if (!lnd_timeout)
    return error_block("set", "net", -EINVAL,
                       "invalid LND timeout value '" + *r.arg("lnd-timeout") + "', must be 0..3600");
  if (*health < 0 && *cpp < 0 && *lnd_timeout < 0)
    return error_block("set", "net", -EINVAL, "net set needs --health, --conns-per-peer or --lnd-timeout");
  Control& c = lnet.control();
  if (*lnd_timeout >= 0) {  // the driver's, for a net (lnetctl writes the driver's module parameter)
    const std::string* net = r.arg("net");
    if (!net) return error_block("set", "net", -EINVAL, "specified --lnd-timeout without --net");
    auto id = NetId::parse(*net);
    if (!id) return error_block("set", "net", -EINVAL, id.message());
    if (Status s = c.set_lnd_timeout(*id, static_cast<int>(*lnd_timeout)); !s)
      return error_block("set", "net", s.code(), s.message());
  }
  auto nis = nis_named(c, r, *health >= 0 || *cpp >= 0);
  if (!nis) return error_block("set", "net", nis.code(), nis.message());
  if (*cpp >= 0) {  // a driver that takes conns_per_peer (the socket LND), for its new connections
    for (const NiInfo& i : *nis)
      if (!i.lnd_tunables.get("conns_per_peer"))
        return error_block("set", "net", -EOPNOTSUPP,
                           "not supported yet: conns_per_peer on " + i.nid.net().to_string());
    for (const NiInfo& i : *nis)
      if (Status s = c.set_lnd_tunable(i.nid, "conns_per_peer", *cpp); !s)
        return error_block("set", "net", s.code(), s.message());
  }
  if (*health >= 0) {
    if (r.flag("all")) {
      if (Status s = c.set_ni_health(Nid::any(), static_cast<int>(*health)); !s)
        return error_block("set", "net", s.code(), s.message());
    } else {
      for (const NiInfo& i : *nis)
        if (Status s = c.set_ni_health(i.nid, static_cast<int>(*health)); !s)
          return error_block("set", "net", s.code(), s.message());
    }
  }
  return ok(YAML::Node());
}

}  // namespace lnet::dlc
