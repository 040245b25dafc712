// The lnetctl commands as a daemon (or any liblnet process with a control socket) runs
// them: arguments in, YAML out in the shapes lnetctl prints, errors as lnetctl error
// blocks. Also the request/response encoding and the framing of the control socket.
#include <lnet/dlc.hpp>

#include <unistd.h>

#include <cstring>

#include <lnet/byteorder.hpp>
#include <lnet/socklnd.hpp>

#include "config/yaml_print.hpp"
#include "core/core.hpp"
#include "nid/text.hpp"

namespace lnet::dlc {

const std::string* Request::arg(const std::string& name) const {
  auto it = args.find(name);
  return it == args.end() || it->second.empty() ? nullptr : &it->second.front();
}

namespace {

YAML::Node num(long v) { return YAML::Node(std::to_string(v)); }

Response error_block(const std::string& verb, const std::string& object, int rc, const std::string& descr) {
  YAML::Node inner;
  inner["errno"] = num(rc);
  YAML::Node d(descr);
  d.SetTag("!quoted");
  inner["descr"] = d;
  YAML::Node item;
  item[object] = inner;
  YAML::Node list(YAML::NodeType::Sequence);
  list.push_back(item);
  YAML::Node root;
  root[verb] = list;
  return Response{rc < 0 ? rc : -rc, print_yaml(root)};
}

Response ok(const YAML::Node& root) { return Response{0, root.IsNull() ? std::string() : print_yaml(root)}; }

Result<long> int_arg(const Request& r, const std::string& name, long def, long lo, long hi) {
  const std::string* v = r.arg(name);
  if (!v) return def;
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v->c_str(), &end, 0);
  if (v->empty() || *end || errno || x < lo || x > hi) {
    return Failure{-EINVAL,
                   "--" + name + " '" + *v + "' is not a number in " + std::to_string(lo) + ".." + std::to_string(hi)};
  }
  return x;
}

// Values that may be given once with commas ("a,b") or many times.
std::vector<std::string> list_arg(const Request& r, const std::string& name) {
  std::vector<std::string> out;
  auto it = r.args.find(name);
  if (it == r.args.end()) return out;
  for (const std::string& v : it->second) {
    std::size_t i = 0;
    while (i <= v.size()) {
      std::size_t j = v.find(',', i);
      std::string item = v.substr(i, j == std::string::npos ? std::string::npos : j - i);
      if (!item.empty()) out.push_back(item);
      if (j == std::string::npos) break;
      i = j + 1;
    }
  }
  return out;
}

YAML::Node type_stats(const MsgTypeStats& s) {
  YAML::Node n;
  n["put"] = num(static_cast<long>(s.put));
  n["get"] = num(static_cast<long>(s.get));
  n["reply"] = num(static_cast<long>(s.reply));
  n["ack"] = num(static_cast<long>(s.ack));
  n["hello"] = num(static_cast<long>(s.hello));
  return n;
}

YAML::Node stats3(const MsgTypeStats& sent, const MsgTypeStats& recv, const MsgTypeStats& drop) {
  YAML::Node n;
  n["send_count"] = num(static_cast<long>(sent.total()));
  n["recv_count"] = num(static_cast<long>(recv.total()));
  n["drop_count"] = num(static_cast<long>(drop.total()));
  return n;
}

// ---- net ----

Response net_show(core::Core& c, const Request& r) {
  std::optional<NetId> filter;
  if (const std::string* n = r.arg("net")) {
    auto net = NetId::parse(*n);
    if (!net) return error_block("show", "net", -EINVAL, net.message());
    filter = *net;
  }
  auto verbose = int_arg(r, "verbose", 0, 0, 4);
  if (!verbose) return error_block("show", "net", verbose.code(), verbose.message());
  auto nis = c.ni_info();
  std::vector<NetId> order;
  std::map<NetId, YAML::Node> groups;
  for (const NiInfo& i : nis) {
    NetId id = i.nid.net();
    if (filter && *filter != id) continue;
    if (!groups.count(id)) {
      order.push_back(id);
      groups[id] = YAML::Node(YAML::NodeType::Sequence);
    }
    YAML::Node ni;
    ni["nid"] = i.nid.to_string();
    ni["status"] = i.up ? "up" : "down";
    if (!i.interfaces.empty()) {
      YAML::Node ifs;
      for (std::size_t k = 0; k < i.interfaces.size(); ++k) ifs[std::to_string(k)] = i.interfaces[k];
      ni["interfaces"] = ifs;
    }
    if (*verbose > 0) {
      ni["statistics"] = stats3(i.sent, i.received, i.dropped);
      ni["sent_stats"] = type_stats(i.sent);
      ni["received_stats"] = type_stats(i.received);
      ni["dropped_stats"] = type_stats(i.dropped);
      YAML::Node h;
      h["fatal_error"] = num(i.fatal_error ? 1 : 0);
      h["health value"] = num(i.health);
      h["interrupts"] = num(0);
      h["dropped"] = num(0);
      h["aborted"] = num(0);
      h["no route"] = num(0);
      h["timeouts"] = num(0);
      h["error"] = num(0);
      h["ping_count"] = num(0);
      h["next_ping"] = num(0);
      ni["health stats"] = h;
      if (!i.nid.is_lo()) {
        YAML::Node t;
        t["peer_timeout"] = num(i.tunables.peer_timeout);
        t["peer_credits"] = num(i.tunables.peer_credits);
        t["peer_buffer_credits"] = num(i.tunables.peer_buffer_credits);
        t["credits"] = num(i.tunables.credits);
        ni["tunables"] = t;
        YAML::Node lt;
        lt["conns_per_peer"] = num(i.lnd_tunables.conns_per_peer > 0 ? i.lnd_tunables.conns_per_peer : 1);
        lt["timeout"] = num(i.lnd_tunables.timeout > 0 ? i.lnd_tunables.timeout
                                                       : (id.type() == kSockLnd ? socket_params().timeout : 0));
        lt["tos"] = num(i.lnd_tunables.tos);
        ni["lnd tunables"] = lt;
      }
      ni["dev cpt"] = num(-1);
      std::string cpts = "[";
      for (unsigned k = 0; k < c.cpts().count(); ++k) cpts += (k ? "," : "") + std::to_string(k);
      ni["CPT"] = cpts + "]";
    }
    if (*verbose > 1) {
      ni["max_tx_credits"] = num(i.max_tx_credits);
      ni["available_tx_credits"] = num(i.tx_credits);
      ni["min_tx_credits"] = num(i.min_tx_credits);
    }
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
  return ok(root);
}

Response net_add(core::Core& c, const Request& r) {
  const std::string* net = r.arg("net");
  if (!net) return error_block("add", "net", -EINVAL, "net add needs --net");
  if (r.arg("ip2net")) return error_block("add", "net", -EOPNOTSUPP, "not supported: --ip2net");
  NetConfig nc;
  auto id = NetId::parse(*net);
  if (!id) return error_block("add", "net", -EINVAL, id.message());
  nc.net = *id;
  nc.interfaces = list_arg(r, "if");
  for (const std::string& i : nc.interfaces)
    if (std::string why = text::bad_interface_name(i); !why.empty())
      return error_block("add", "net", -EINVAL, "--if: " + why);
  if (const std::string* nid = r.arg("nid")) {
    auto n = Nid::parse(*nid);
    if (!n) return error_block("add", "net", -EINVAL, n.message());
    if (n->net() != nc.net) return error_block("add", "net", -EINVAL, "--nid " + *nid + " is not on " + *net);
    nc.nid = *n;
  }
  struct IntArg {
    const char* name;
    int* field;
    long lo, hi;
  } ints[] = {{"peer-timeout", &nc.tunables.peer_timeout, 0, 1 << 20},
              {"peer-credits", &nc.tunables.peer_credits, 1, 1 << 16},
              {"peer-buffer-credits", &nc.tunables.peer_buffer_credits, 0, 1 << 16},
              {"credits", &nc.tunables.credits, 1, 1 << 20},
              {"conns-per-peer", &nc.lnd_tunables.conns_per_peer, 0, 127},
              {"tos", &nc.lnd_tunables.tos, -1, 255}};
  for (auto& a : ints) {
    auto v = int_arg(r, a.name, *a.field, a.lo, a.hi);
    if (!v) return error_block("add", "net", v.code(), v.message());
    *a.field = static_cast<int>(*v);
  }
  if (const std::string* cpt = r.arg("cpt")) {
    auto parsed = Config::parse_networks(*net + *cpt);
    if (!parsed || parsed->empty()) return error_block("add", "net", -EINVAL, "bad --cpt '" + *cpt + "'");
    nc.cpts = parsed->front().cpts;
  }
  auto added = c.add_ni(nc);
  if (!added) return error_block("add", "net", added.code(), added.message());
  return ok(YAML::Node());
}

Response net_del(core::Core& c, const Request& r) {
  const std::string* net = r.arg("net");
  if (!net) return error_block("del", "net", -EINVAL, "net del needs --net");
  auto id = NetId::parse(*net);
  if (!id) return error_block("del", "net", -EINVAL, id.message());
  std::optional<Nid> nid;
  if (const std::string* n = r.arg("nid")) {
    auto p = Nid::parse(*n);
    if (!p) return error_block("del", "net", -EINVAL, p.message());
    nid = *p;
  }
  auto ifs = list_arg(r, "if");
  int deleted = 0;
  for (const NiInfo& i : c.ni_info()) {
    if (i.nid.net() != *id || (nid && *nid != i.nid)) continue;
    if (!ifs.empty() && (i.interfaces.empty() || std::find(ifs.begin(), ifs.end(), i.interfaces[0]) == ifs.end()))
      continue;
    int rc = c.del_ni(i.nid);
    if (rc) return error_block("del", "net", rc, "cannot delete " + i.nid.to_string() + ": " + errno_string(rc));
    ++deleted;
  }
  if (!deleted) return error_block("del", "net", -ENOENT, "no matching NI on " + id->to_string());
  return ok(YAML::Node());
}

// ---- peers ----

YAML::Node peer_node(const PeerInfo& p, int verbose) {
  YAML::Node n;
  n["primary nid"] = p.primary_nid.to_string();
  n["Multi-Rail"] = p.multi_rail ? "True" : "False";
  YAML::Node nis(YAML::NodeType::Sequence);
  for (const PeerNiInfo& i : p.nis) {
    YAML::Node e;
    e["nid"] = i.nid.to_string();
    e["state"] = i.up ? "up" : "down";
    if (verbose > 0) {
      e["max_ni_tx_credits"] = num(i.max_tx_credits);
      e["available_tx_credits"] = num(i.tx_credits);
      e["min_tx_credits"] = num(i.min_tx_credits);
      e["tx_q_num_of_buf"] = num(static_cast<long>(i.tx_q_nob));
      e["available_rtr_credits"] = num(i.rtr_credits);
      e["min_rtr_credits"] = num(i.min_rtr_credits);
      e["statistics"] = stats3(i.sent, i.received, i.dropped);
      e["sent_stats"] = type_stats(i.sent);
      e["received_stats"] = type_stats(i.received);
      e["dropped_stats"] = type_stats(i.dropped);
      YAML::Node h;
      h["health value"] = num(i.health);
      h["dropped"] = num(0);
      h["timeout"] = num(0);
      h["error"] = num(0);
      h["network timeout"] = num(0);
      h["ping_count"] = num(0);
      h["next_ping"] = num(0);
      e["health stats"] = h;
    }
    nis.push_back(e);
  }
  n["peer ni"] = nis;
  return n;
}

Response peer_show(core::Core& c, const Request& r) {
  std::optional<Nid> filter;
  if (const std::string* n = r.arg("nid")) {
    auto p = Nid::parse(*n);
    if (!p) return error_block("show", "peer", -EINVAL, p.message());
    filter = *p;
  }
  auto verbose = int_arg(r, "verbose", 0, 0, 4);
  if (!verbose) return error_block("show", "peer", verbose.code(), verbose.message());
  YAML::Node list(YAML::NodeType::Sequence);
  for (const PeerInfo& p : c.peer_info()) {
    if (filter) {
      bool has = false;
      for (const auto& i : p.nis) has = has || i.nid == *filter;
      if (!has) continue;
    }
    list.push_back(peer_node(p, static_cast<int>(*verbose)));
  }
  if (filter && list.size() == 0)
    return error_block("show", "peer", -ENOENT, "no peer with NID " + filter->to_string());
  YAML::Node root;
  root["peer"] = list;
  return ok(root);
}

Response peer_list(core::Core& c) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const PeerInfo& p : c.peer_info()) {
    YAML::Node e;
    e["nid"] = p.primary_nid.to_string();
    list.push_back(e);
  }
  YAML::Node root;
  root["peer list"] = list;
  return ok(root);
}

Response peer_add_del(core::Core& c, const Request& r, bool add) {
  const char* verb = add ? "add" : "del";
  const std::string* prim = r.arg("prim_nid");
  if (!prim) return error_block(verb, "peer_ni", -EINVAL, std::string("peer ") + verb + " needs --prim_nid");
  auto primary = Nid::parse(*prim);
  if (!primary) return error_block(verb, "peer_ni", -EINVAL, primary.message());
  std::vector<Nid> nids;
  for (const std::string& s : list_arg(r, "nid")) {
    auto n = Nid::parse(s);
    if (!n) return error_block(verb, "peer_ni", -EINVAL, n.message());
    nids.push_back(*n);
  }
  if (!add) {
    int rc = c.del_peer(*primary, nids);
    if (rc) return error_block(verb, "peer_ni", rc, "cannot delete peer " + *prim + ": " + errno_string(rc));
    return ok(YAML::Node());
  }
  bool mr = !r.flag("non_mr");
  int rc = c.add_peer_ni(*primary, *primary, mr, true);
  for (Nid n : nids)
    if (rc == 0) rc = c.add_peer_ni(*primary, n, mr, true);
  if (rc) return error_block(verb, "peer_ni", rc, "cannot add peer " + *prim + ": " + errno_string(rc));
  return ok(YAML::Node());
}

// ---- routes and routing ----

Response route_show(core::Core& c, const Request& r) {
  std::optional<NetId> net;
  std::optional<Nid> gw;
  if (const std::string* s = r.arg("net")) {
    auto n = NetId::parse(*s);
    if (!n) return error_block("show", "route", -EINVAL, n.message());
    net = *n;
  }
  if (const std::string* s = r.arg("gateway")) {
    auto n = Nid::parse(*s);
    if (!n) return error_block("show", "route", -EINVAL, n.message());
    gw = *n;
  }
  auto hop = int_arg(r, "hop", -2, -1, 255);
  auto prio = int_arg(r, "priority", -1, 0, UINT32_MAX);
  auto verbose = int_arg(r, "verbose", 0, 0, 4);
  if (!hop || !prio || !verbose) return error_block("show", "route", -EINVAL, "bad --hop, --priority or --verbose");
  YAML::Node list(YAML::NodeType::Sequence);
  for (const RouteInfo& ri : c.route_info()) {
    if ((net && *net != ri.net) || (gw && *gw != ri.gateway) || (*hop != -2 && *hop != ri.hops) ||
        (*prio >= 0 && static_cast<unsigned>(*prio) != ri.priority)) {
      continue;
    }
    YAML::Node e;
    e["net"] = ri.net.to_string();
    e["gateway"] = ri.gateway.to_string();
    if (*verbose > 0) {
      e["hop"] = num(ri.hops);
      e["priority"] = num(ri.priority);
      e["health_sensitivity"] = num(1);
      e["state"] = ri.up ? "up" : "down";
      e["type"] = ri.multi_hop ? "multi-hop" : "single-hop";
    }
    list.push_back(e);
  }
  YAML::Node root;
  root["route"] = list;
  return ok(root);
}

Response route_add_del(core::Core& c, const Request& r, bool add) {
  const char* verb = add ? "add" : "del";
  const std::string* net = r.arg("net");
  const std::string* gw = r.arg("gateway");
  if (!net || !gw)
    return error_block(verb, "route", -EINVAL, std::string("route ") + verb + " needs --net and --gateway");
  auto n = NetId::parse(*net);
  if (!n) return error_block(verb, "route", -EINVAL, n.message());
  auto g = Nid::parse(*gw);
  if (!g) return error_block(verb, "route", -EINVAL, g.message());
  if (!add) {
    int rc = c.del_route(*n, *g);
    if (rc) return error_block(verb, "route", rc, "no route to " + *net + " via " + *gw);
    return ok(YAML::Node());
  }
  const std::string* hop_name = r.arg("hop") ? r.arg("hop") : r.arg("hop-count");
  Request hr;
  if (hop_name) hr.args["hop"] = {*hop_name};
  auto hop = int_arg(hr, "hop", -1, -1, 255);
  auto prio = int_arg(r, "priority", 0, 0, UINT32_MAX);
  if (!hop) return error_block(verb, "route", hop.code(), hop.message());
  if (!prio) return error_block(verb, "route", prio.code(), prio.message());
  if (*hop == 0) return error_block(verb, "route", -EINVAL, "--hop 0 is not 1..255");
  auto res = c.add_route(RouteConfig{*n, *g, static_cast<int>(*hop), static_cast<unsigned>(*prio)});
  if (!res) return error_block(verb, "route", res.code(), res.message());
  return ok(YAML::Node());
}

Response routing_show(core::Core& c) {
  YAML::Node list(YAML::NodeType::Sequence);
  auto pools = c.router_pools();
  static const char* names[] = {"tiny", "small", "large"};
  for (std::size_t cpt = 0; cpt < pools.size(); ++cpt) {
    YAML::Node cn;
    for (int k = 0; k < 3; ++k) {
      const RouterPoolInfo& p = pools[cpt].pools[k];
      YAML::Node pn;
      pn["npages"] = num(p.npages);
      pn["nbuffers"] = num(p.nbuffers);
      pn["credits"] = num(p.credits);
      pn["mincredits"] = num(p.min_credits);
      cn[names[k]] = pn;
    }
    YAML::Node item;
    item["cpt[" + std::to_string(cpt) + "]"] = cn;
    list.push_back(item);
  }
  YAML::Node en;
  en["enable"] = num(c.routing() ? 1 : 0);
  list.push_back(en);
  YAML::Node root;
  root["routing"] = list;
  YAML::Node b;
  BufferConfig bc = c.buffers();
  b["tiny"] = num(bc.tiny);
  b["small"] = num(bc.small);
  b["large"] = num(bc.large);
  root["buffers"] = b;
  return ok(root);
}

Response set_cmd(core::Core& c, const Request& r) {
  const std::string* name = r.arg("name");
  const std::string* value = r.arg("value");
  if (!name || !value) return error_block("set", "global", -EINVAL, "set needs a tunable name and a value");
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(value->c_str(), &end, 0);
  if (value->empty() || *end || errno) return error_block("set", *name, -EINVAL, "'" + *value + "' is not a number");
  if (*name == "routing") {
    if (v != 0 && v != 1) return error_block("set", "routing", -EINVAL, "routing takes 0 or 1");
    auto res = c.set_routing(v == 1);
    if (!res) return error_block("set", "routing", res.code(), res.message());
    return ok(YAML::Node());
  }
  if (*name == "tiny_buffers" || *name == "small_buffers" || *name == "large_buffers") {
    if (v < 0) return error_block("set", *name, -EINVAL, *name + " cannot be negative");
    BufferConfig b = c.buffers();
    (*name == "tiny_buffers" ? b.tiny : *name == "small_buffers" ? b.small : b.large) = static_cast<int>(v);
    auto res = c.set_buffers(b);
    if (!res) return error_block("set", *name, res.code(), res.message());
    return ok(YAML::Node());
  }
  if (*name == "max_interfaces" || *name == "max_intf") {
    auto res = c.set_global("max_interfaces", v);
    if (!res) return error_block("set", *name, res.code(), res.message());
    return ok(YAML::Node());
  }
  auto res = c.set_global(*name, v);
  if (!res) return error_block("set", *name, res.code(), res.message());
  return ok(YAML::Node());
}

Response global_show(core::Core& c) {
  GlobalTunables g = c.globals();
  YAML::Node n;
  for (const char* name : GlobalTunables::names()) n[name] = num(*g.get(name));
  n["lnd_timeout"] = num(g.lnd_timeout());
  YAML::Node root;
  root["global"] = n;
  return ok(root);
}

Response stats_show(core::Core& c) {
  Counters k = c.counters();
  YAML::Node n;
  auto put = [&](const char* name, std::uint64_t v) { n[name] = num(static_cast<long>(v)); };
  put("msgs_alloc", k.msgs_alloc);
  put("msgs_max", k.msgs_max);
  put("rst_alloc", k.rst_alloc);
  put("errors", k.errors);
  put("send_count", k.send_count);
  put("resend_count", k.resend_count);
  put("response_timeout_count", k.response_timeout_count);
  put("local_interrupt_count", k.local_interrupt_count);
  put("local_dropped_count", k.local_dropped_count);
  put("local_aborted_count", k.local_aborted_count);
  put("local_no_route_count", k.local_no_route_count);
  put("local_timeout_count", k.local_timeout_count);
  put("local_error_count", k.local_error_count);
  put("remote_dropped_count", k.remote_dropped_count);
  put("remote_error_count", k.remote_error_count);
  put("remote_timeout_count", k.remote_timeout_count);
  put("network_timeout_count", k.network_timeout_count);
  put("recv_count", k.recv_count);
  put("route_count", k.route_count);
  put("drop_count", k.drop_count);
  put("send_length", k.send_length);
  put("recv_length", k.recv_length);
  put("route_length", k.route_length);
  put("drop_length", k.drop_length);
  YAML::Node root;
  root["statistics"] = n;
  return ok(root);
}

// ---- ping and discover ----

Response ping_cmd(core::Core& c, const Request& r, bool discover) {
  const char* what = discover ? "discover" : "ping";
  auto nids = list_arg(r, "nid");
  if (nids.empty()) return error_block("manage", what, -EINVAL, std::string(what) + " needs at least one NID");
  auto timeout = int_arg(r, "timeout", discover ? 10 : 1, 1, 3600);
  if (!timeout) return error_block("manage", what, timeout.code(), timeout.message());
  if (const std::string* src = r.arg("source")) {
    auto s = Nid::parse(*src);
    if (!s || !c.find_ni(*s)) return error_block("manage", what, -EINVAL, "--source " + *src + " is not a local NID");
  }
  YAML::Node list(YAML::NodeType::Sequence);
  YAML::Node errors(YAML::NodeType::Sequence);
  int first_rc = 0;
  for (const std::string& s : nids) {
    auto id = ProcessId::parse(s);
    if (!id) {
      YAML::Node e;
      e["errno"] = num(-EINVAL);
      e["descr"] = id.message();
      YAML::Node item;
      item[what] = e;
      errors.push_back(item);
      if (!first_rc) first_rc = -EINVAL;
      continue;
    }
    auto res = c.ping(*id, std::chrono::seconds(*timeout), 256);
    if (!res) {
      YAML::Node e;
      e["errno"] = num(res.code());
      YAML::Node d("failed to " + std::string(what) + " " + id->nid.to_string() + ": " + res.message());
      d.SetTag("!quoted");
      e["descr"] = d;
      YAML::Node item;
      item[what] = e;
      errors.push_back(item);
      if (!first_rc) first_rc = res.code();
      continue;
    }
    const PingInfo& info = res->info;
    YAML::Node p;
    Nid primary = info.nis.size() > 1 ? info.nis[1].nid : id->nid;
    p["primary nid"] = primary.to_string();
    p["Multi-Rail"] = (info.features & kPingFeatMultiRail) ? "True" : "False";
    YAML::Node pnis(YAML::NodeType::Sequence);
    for (std::size_t i = 1; i < info.nis.size(); ++i) {
      YAML::Node e;
      e["nid"] = info.nis[i].nid.to_string();
      pnis.push_back(e);
    }
    p["peer ni"] = pnis;
    list.push_back(p);
    if (discover) {
      // Record what the peer says it has (as a configured multi-rail peer when it is one).
      bool mr = (info.features & kPingFeatMultiRail) != 0;
      for (std::size_t i = 1; i < info.nis.size(); ++i) {
        if (info.nis[i].status == kNiStatusUp) (void)c.add_peer_ni(primary, info.nis[i].nid, mr, false);
      }
    }
  }
  std::string text;
  if (list.size() > 0) {
    YAML::Node root;
    root[what] = list;
    text = print_yaml(root);
  }
  if (errors.size() > 0) {
    YAML::Node root;
    root["manage"] = errors;
    text += print_yaml(root);
  }
  return Response{first_rc, text};
}

// ---- udsp ----

Response udsp_cmd(core::Core& c, const Request& r, const std::string& verb) {
  if (verb == "add") {
    UdspRule u;
    if (const std::string* s = r.arg("src")) u.src = *s;
    if (const std::string* s = r.arg("dst")) u.dst = *s;
    if (const std::string* s = r.arg("rte")) u.rte = *s;
    auto prio = int_arg(r, "priority", -1, 0, UINT32_MAX);
    auto idx = int_arg(r, "idx", -1, 0, 1 << 20);
    if (!prio || !idx) return error_block("add", "udsp", -EINVAL, "bad --priority or --idx");
    if (*prio >= 0) u.priority = static_cast<unsigned>(*prio);
    auto res = c.add_udsp(u, static_cast<int>(*idx));
    if (!res) return error_block("add", "udsp", res.code(), res.message());
    return ok(YAML::Node());
  }
  if (verb == "del") {
    auto idx = int_arg(r, "idx", -1, 0, 1 << 20);
    if (!idx || (*idx < 0 && !r.flag("all")))
      return error_block("del", "udsp", -EINVAL, "udsp del needs --idx or --all");
    int rc = c.del_udsp(r.flag("all") ? -1 : static_cast<int>(*idx));
    if (rc) return error_block("del", "udsp", rc, "no rule at index " + std::to_string(*idx));
    return ok(YAML::Node());
  }
  SystemConfig cfg;
  cfg.udsp = c.udsp_rules();
  auto idx = int_arg(r, "idx", -1, 0, 1 << 20);
  if (idx && *idx >= 0) {
    if (static_cast<std::size_t>(*idx) >= cfg.udsp.size())
      return error_block("show", "udsp", -ENOENT, "no rule at that index");
    cfg.udsp = {cfg.udsp[static_cast<std::size_t>(*idx)]};
  }
  if (cfg.udsp.empty()) return ok(YAML::Node());
  return Response{0, config_to_yaml(cfg, true)};
}

const std::vector<std::pair<std::string, std::string>> kCommands = {
    {"lnet configure", "bring the configured networks up"},
    {"lnet unconfigure", "take every network but 0@lo down, and routes, peers and routing"},
    {"net add",
     "add a local NI: --net N (--if IF | --nid NID) [--peer-timeout] [--peer-credits] "
     "[--peer-buffer-credits] [--credits] [--cpt] [--conns-per-peer] [--tos]"},
    {"net del", "delete local NIs: --net N [--nid NID] [--if IF]"},
    {"net show", "show local NIs: [--net N] [--verbose [2]]"},
    {"peer add", "add a peer: --prim_nid NID [--nid NID,...] [--non_mr]"},
    {"peer del", "delete a peer or some of its NIDs: --prim_nid NID [--nid NID,...]"},
    {"peer show", "show peers: [--nid NID] [--verbose [2]]"},
    {"peer list", "list the primary NIDs of the peers"},
    {"route add", "add a route: --net N --gateway NID [--hop 1..255] [--priority P]"},
    {"route del", "delete a route: --net N --gateway NID"},
    {"route show", "show routes: [--net N] [--gateway NID] [--hop H] [--priority P] [--verbose]"},
    {"routing show", "show the router buffer pools and whether this node routes"},
    {"set",
     "set a tunable: tiny_buffers|small_buffers|large_buffers|routing|numa_range|max_interfaces|"
     "discovery|drop_asym_route|retry_count|transaction_timeout|health_sensitivity|recovery_interval|"
     "router_sensitivity|response_tracking|recovery_limit|max_recovery_ping_interval VALUE"},
    {"global show", "show the global tunables"},
    {"stats show", "show the LNet counters"},
    {"stats reset", "zero the LNet counters"},
    {"ping", "ping NIDs: [--timeout S] [--source NID] NID..."},
    {"discover", "ping NIDs and record their NIs as peers: [--force] NID..."},
    {"import", "apply a YAML configuration: [--add|--del|--show] FILE|-"},
    {"export", "print the configuration as YAML: [--backup] [FILE]"},
    {"udsp add", "add a selection rule: [--src P] [--dst P] [--rte P] [--priority P] [--idx N]"},
    {"udsp del", "delete selection rules: --idx N | --all"},
    {"udsp show", "show selection rules: [--idx N]"},
};

}  // namespace

const std::vector<std::pair<std::string, std::string>>& command_list() { return kCommands; }

Response execute(Instance& lnet, const Request& r, const Hooks& hooks) {
  core::Core& c = lnet.core();
  const std::string& cmd = r.command;
  try {
    if (cmd == "lnet configure" || cmd == "lnet unconfigure") {
      bool conf = cmd == "lnet configure";
      const auto& hook = conf ? hooks.configure : hooks.unconfigure;
      if (!hook) return error_block(conf ? "configure" : "unconfigure", "lnet", -EOPNOTSUPP, "not supported here");
      auto res = hook();
      if (!res) return error_block(conf ? "configure" : "unconfigure", "lnet", res.code(), res.message());
      return ok(YAML::Node());
    }
    if (cmd == "net show") return net_show(c, r);
    if (cmd == "net add") return net_add(c, r);
    if (cmd == "net del") return net_del(c, r);
    if (cmd == "peer show") return peer_show(c, r);
    if (cmd == "peer list") return peer_list(c);
    if (cmd == "peer add") return peer_add_del(c, r, true);
    if (cmd == "peer del") return peer_add_del(c, r, false);
    if (cmd == "route show") return route_show(c, r);
    if (cmd == "route add") return route_add_del(c, r, true);
    if (cmd == "route del") return route_add_del(c, r, false);
    if (cmd == "routing show") return routing_show(c);
    if (cmd == "set") return set_cmd(c, r);
    if (cmd == "global show") return global_show(c);
    if (cmd == "stats show") return stats_show(c);
    if (cmd == "stats reset") {
      c.reset_counters();
      return ok(YAML::Node());
    }
    if (cmd == "ping") return ping_cmd(c, r, false);
    if (cmd == "discover") return ping_cmd(c, r, true);
    if (cmd == "udsp add") return udsp_cmd(c, r, "add");
    if (cmd == "udsp del") return udsp_cmd(c, r, "del");
    if (cmd == "udsp show") return udsp_cmd(c, r, "show");
    if (cmd == "export") return Response{0, config_to_yaml(export_config(lnet), r.flag("backup"))};
    if (cmd == "import") {
      auto cfg = parse_config(r.body);
      if (!cfg) return error_block("import", "yaml", cfg.code(), cfg.message());
      ImportMode mode = r.flag("del") ? ImportMode::Del : r.flag("show") ? ImportMode::Show : ImportMode::Add;
      std::string shown;
      auto res = apply_config(lnet, *cfg, mode, &shown);
      if (!res) return error_block("import", "yaml", res.code(), res.message() + " (nothing was applied)");
      return Response{0, shown};
    }
  } catch (const std::exception& e) {
    return error_block("manage", "command", -EIO, std::string("internal error: ") + e.what());
  }
  return error_block("manage", "command", -ENOSYS, "unknown command '" + cmd + "'");
}

// ---- encoding and framing ----

namespace {
// Plain scalars do not survive every string (a trailing CR, bytes that are not UTF-8):
// quote and escape everything so that what we encode decodes to the same text.
void exact_strings(YAML::Emitter& out) {
  out.SetStringFormat(YAML::DoubleQuoted);
  out.SetOutputCharset(YAML::EscapeNonAscii);
}
// Command and option names: 1..64 of [a-z0-9_-] (and single spaces between the words of
// a command). Anything else is not from lnetctl.
bool is_word(const std::string& s, bool spaces) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              (spaces && c == ' ');
    if (!ok) return false;
  }
  return true;
}
}  // namespace

std::string encode_request(const Request& r) {
  YAML::Node n;
  n["command"] = r.command;
  YAML::Node args(YAML::NodeType::Map);
  for (const auto& [k, vs] : r.args) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (const auto& v : vs) list.push_back(v);
    args[k] = list;
  }
  n["args"] = args;
  n["body"] = r.body;
  YAML::Emitter out;
  exact_strings(out);
  out << n;
  return out.c_str();
}

Result<Request> decode_request(std::string_view text) {
  try {
    YAML::Node n = YAML::Load(std::string(text));
    if (!n.IsMap() || !n["command"] || !n["command"].IsScalar()) return Failure{-EPROTO, "request without a command"};
    Request r;
    r.command = n["command"].Scalar();
    if (!is_word(r.command, true)) return Failure{-EPROTO, "bad command name"};
    const YAML::Node args = n["args"];
    if (args && args.IsMap()) {
      for (const auto& kv : args) {
        std::vector<std::string> vs;
        if (kv.second.IsSequence()) {
          for (const auto& v : kv.second) vs.push_back(v.Scalar());
        } else if (kv.second.IsScalar()) {
          vs.push_back(kv.second.Scalar());
        }
        if (!kv.first.IsScalar() || !is_word(kv.first.Scalar(), false)) return Failure{-EPROTO, "bad option name"};
        r.args[kv.first.Scalar()] = vs;
      }
    }
    if (n["body"] && n["body"].IsScalar()) r.body = n["body"].Scalar();
    return r;
  } catch (const YAML::Exception& e) {
    return Failure{-EPROTO, std::string("bad request: ") + e.what()};
  }
}

std::string encode_response(const Response& r) {
  YAML::Node n;
  n["rc"] = r.rc;
  n["text"] = r.text;
  YAML::Emitter out;
  exact_strings(out);
  out << n;
  return out.c_str();
}

Result<Response> decode_response(std::string_view text) {
  try {
    YAML::Node n = YAML::Load(std::string(text));
    if (!n.IsMap() || !n["rc"]) return Failure{-EPROTO, "response without a status"};
    Response r;
    r.rc = n["rc"].as<int>();
    if (n["text"] && n["text"].IsScalar()) r.text = n["text"].Scalar();
    return r;
  } catch (const YAML::Exception& e) {
    return Failure{-EPROTO, std::string("bad response: ") + e.what()};
  }
}

namespace {
int write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return 0;
}
int read_all(int fd, char* p, std::size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (r == 0) return -ECONNRESET;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return 0;
}
}  // namespace

int write_frame(int fd, std::string_view payload) {
  if (payload.size() > kMaxFrame) return -EMSGSIZE;
  std::uint8_t len[4];
  wire::put_le32(len, static_cast<std::uint32_t>(payload.size()));
  if (int rc = write_all(fd, reinterpret_cast<const char*>(len), 4)) return rc;
  return write_all(fd, payload.data(), payload.size());
}

int read_frame(int fd, std::string& out) {
  std::uint8_t len[4];
  if (int rc = read_all(fd, reinterpret_cast<char*>(len), 4)) return rc;
  std::uint32_t n = wire::get_le32(len);
  if (n > kMaxFrame) return -EPROTO;
  out.resize(n);
  return read_all(fd, out.data(), n);
}

}  // namespace lnet::dlc
