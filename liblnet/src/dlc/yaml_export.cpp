// Writing documents in the lnetctl YAML schema (export, show), and the configuration of
// a running instance as such a document.
#include <lnet/dlc.hpp>

#include <algorithm>
#include <map>

#include "yaml_print.hpp"

namespace lnet::dlc {

namespace {

std::map<NetId, std::vector<const NetConfig*>> by_net(const std::vector<NetConfig>& nets, std::vector<NetId>& order) {
  std::map<NetId, std::vector<const NetConfig*>> m;
  for (const auto& nc : nets) {
    if (!m.count(nc.net)) order.push_back(nc.net);
    m[nc.net].push_back(&nc);
  }
  return m;
}

YAML::Node global_node(const GlobalTunables& g) {
  YAML::Node n;
  for (const char* name : GlobalTunables::names()) n[name] = int_node(*g.get(name));
  return n;
}

YAML::Node ni_node(const NetConfig& nc, bool backup) {
  YAML::Node ni;
  if (nc.nid && (nc.interfaces.empty() || !backup)) ni["nid"] = nc.nid->to_string();
  if (!nc.interfaces.empty()) ni["interfaces"] = interfaces_node(nc.interfaces);
  ni["tunables"] = tunables_node(nc.tunables);
  YAML::Node lt = lnd_tunables_node(nc.net, nc.lnd_tunables, backup);  // read-only keys: the driver's own
  if (lt.size() > 0) ni["lnd tunables"] = lt;
  if (!nc.cpts.empty()) ni["CPT"] = cpt_list(nc.cpts);
  return ni;
}

// One entry per network, its NIs in configuration order.
YAML::Node nets_node(const std::vector<NetConfig>& configs, bool backup) {
  std::vector<NetId> order;
  auto nets = by_net(configs, order);
  YAML::Node list(YAML::NodeType::Sequence);
  for (NetId id : order) {
    YAML::Node net;
    net["net type"] = id.to_string();
    YAML::Node nis(YAML::NodeType::Sequence);
    for (const NetConfig* nc : nets[id]) nis.push_back(ni_node(*nc, backup));
    net["local NI(s)"] = nis;
    list.push_back(net);
  }
  return list;
}

YAML::Node route_node(const RouteConfig& r) {
  YAML::Node n;
  n["net"] = r.net.to_string();
  n["gateway"] = r.gateway.to_string();
  n["hop"] = int_node(r.hops);
  n["priority"] = int_node(r.priority);
  if (r.health_sensitivity != 1) n["health_sensitivity"] = int_node(r.health_sensitivity);  // ours, when set
  return n;
}

YAML::Node peer_node(const PeerConfig& p) {
  YAML::Node n;
  n["primary nid"] = p.primary.to_string();
  n["Multi-Rail"] = p.multi_rail ? "true" : "false";
  YAML::Node nis(YAML::NodeType::Sequence);
  YAML::Node first;
  first["nid"] = p.primary.to_string();
  nis.push_back(first);
  for (Nid nid : p.nids) {
    YAML::Node e;
    e["nid"] = nid.to_string();
    nis.push_back(e);
  }
  n["peer ni"] = nis;
  return n;
}

YAML::Node buffers_node(const BufferConfig& b) {
  YAML::Node n;
  n["tiny"] = int_node(b.tiny);
  n["small"] = int_node(b.small);
  n["large"] = int_node(b.large);
  return n;
}

YAML::Node udsp_node(const UdspRule& u, std::size_t idx) {
  YAML::Node n;
  n["idx"] = int_node(static_cast<long>(idx));
  if (!u.src.empty()) n["src"] = u.src;
  if (!u.dst.empty()) n["dst"] = u.dst;
  if (!u.rte.empty()) n["rte"] = u.rte;
  YAML::Node a;
  if (u.priority)
    a["priority"] = int_node(*u.priority);
  else
    a["pref"] = "nid";
  n["action"] = a;
  return n;
}

template <class T, class F>
YAML::Node sequence(const std::vector<T>& items, F node) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const T& item : items) list.push_back(node(item));
  return list;
}

}  // namespace

// Each section as lnetctl 2.17 prints it: net, route and peer in the netlink layout, the
// rest (mappings, and udsp and fault lists) in the classic one.
std::string config_to_yaml(const SystemConfig& cfg, bool backup) {
  std::string out;
  auto section = [&out](const char* key, const YAML::Node& v, bool netlink) {
    YAML::Node root;
    root[key] = v;
    out += netlink ? print_yaml_netlink(root) : print_yaml(root);
  };
  if (!cfg.nets.empty()) section("net", nets_node(cfg.nets, backup), true);
  if (!cfg.routes.empty()) section("route", sequence(cfg.routes, route_node), true);
  if (!cfg.peers.empty()) section("peer", sequence(cfg.peers, peer_node), true);
  YAML::Node root;
  if (cfg.routing) {
    YAML::Node r;
    r["enable"] = int_node(*cfg.routing ? 1 : 0);
    root["routing"] = r;
  }
  if (cfg.buffers) root["buffers"] = buffers_node(*cfg.buffers);
  if (cfg.global) root["global"] = global_node(*cfg.global);
  if (!cfg.udsp.empty()) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (std::size_t i = 0; i < cfg.udsp.size(); ++i) list.push_back(udsp_node(cfg.udsp[i], i));
    root["udsp"] = list;
  }
  if (!cfg.faults.empty()) {
    YAML::Node f;
    for (const FaultRule& r : cfg.faults) f[r.delay ? "delay" : "drop"].push_back(fault_rule_node(r));
    root["fault"] = f;
  }
  if (root.size() > 0) out += print_yaml(root);
  return out;
}

SystemConfig export_config(Instance& lnet) {
  const Control& c = lnet.control();
  SystemConfig cfg;
  cfg.nets = c.net_configs();
  // The driver's timeout each NI runs with (read-only: export shows it, backup leaves it).
  // Each configuration takes the first NI not yet taken that it describes (one without
  // interfaces or NID: the NI its driver chose on that net).
  auto live = c.ni_info();
  std::vector<bool> taken(live.size(), false);
  for (NetConfig& nc : cfg.nets)
    for (std::size_t k = 0; k < live.size(); ++k) {
      const NiInfo& i = live[k];
      bool same = nc.nid ? *nc.nid == i.nid : nc.interfaces.empty() || i.interfaces == nc.interfaces;
      if (taken[k] || i.nid.net() != nc.net || !same) continue;
      nc.lnd_tunables = i.lnd_tunables;  // the values in effect (what the drivers made of 0s)
      nc.cpts = i.cpts;                  // the CPTs it is on, listed as lnetctl lists them
      taken[k] = true;
      break;
    }
  cfg.routes = c.route_configs();
  // Every peer LNet holds, as lnetctl exports them (met and discovered ones too), in the
  // order it holds them; a configured peer's NIDs as configured.
  std::vector<PeerConfig> configured = c.configured_peers();
  for (const PeerInfo& p : c.peer_info()) {
    PeerConfig pc{p.primary_nid, p.multi_rail, {}, false};
    for (const PeerConfig& k : configured)
      if (k.primary == p.primary_nid) pc = k;
    if (pc.nids.empty())
      for (const PeerNiInfo& n : p.nis)
        if (n.nid != p.primary_nid) pc.nids.push_back(n.nid);
    cfg.peers.push_back(pc);
  }
  if (c.routing()) {  // a router's: lnetctl shows nothing of routing elsewhere
    cfg.routing = true;
    cfg.buffers = c.buffers();
  }
  cfg.global = c.globals();
  cfg.udsp = c.udsp_rules();
  for (bool delay : {false, true})
    for (const FaultRuleInfo& i : c.faults(delay)) cfg.faults.push_back(i.rule);
  return cfg;
}

}  // namespace lnet::dlc
