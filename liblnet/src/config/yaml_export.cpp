// Writing documents in the lnetctl YAML schema (export, show), and the configuration of
// a running instance as such a document.
#include <lnet/dlc.hpp>

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

}  // namespace

std::string config_to_yaml(const SystemConfig& cfg, bool backup) {
  YAML::Node root;
  if (!cfg.nets.empty()) {
    std::vector<NetId> order;
    auto nets = by_net(cfg.nets, order);
    YAML::Node list(YAML::NodeType::Sequence);
    for (NetId id : order) {
      YAML::Node net;
      net["net type"] = id.to_string();
      YAML::Node nis(YAML::NodeType::Sequence);
      for (const NetConfig* nc : nets[id]) {
        YAML::Node ni;
        if (nc->nid && (nc->interfaces.empty() || !backup)) ni["nid"] = nc->nid->to_string();
        if (!nc->interfaces.empty()) ni["interfaces"] = interfaces_node(nc->interfaces);
        ni["tunables"] = tunables_node(nc->tunables);
        YAML::Node lt = lnd_tunables_node(nc->net, nc->lnd_tunables, nc->lnd_tunables.timeout);
        if (lt.size() > 0) ni["lnd tunables"] = lt;
        if (!nc->cpts.empty()) ni["CPT"] = cpt_list(nc->cpts);
        nis.push_back(ni);
      }
      net["local NI(s)"] = nis;
      list.push_back(net);
    }
    root["net"] = list;
  }
  if (!cfg.routes.empty()) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (const auto& r : cfg.routes) {
      YAML::Node n;
      n["net"] = r.net.to_string();
      n["gateway"] = r.gateway.to_string();
      n["hop"] = int_node(r.hops);
      n["priority"] = int_node(r.priority);
      list.push_back(n);
    }
    root["route"] = list;
  }
  if (!cfg.peers.empty()) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (const auto& p : cfg.peers) {
      YAML::Node n;
      n["primary nid"] = p.primary.to_string();
      n["Multi-Rail"] = p.multi_rail ? "True" : "False";
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
      list.push_back(n);
    }
    root["peer"] = list;
  }
  if (cfg.routing) {
    YAML::Node r;
    r["enable"] = int_node(*cfg.routing ? 1 : 0);
    root["routing"] = r;
  }
  if (cfg.buffers) {
    YAML::Node b;
    b["tiny"] = int_node(cfg.buffers->tiny);
    b["small"] = int_node(cfg.buffers->small);
    b["large"] = int_node(cfg.buffers->large);
    root["buffers"] = b;
  }
  if (cfg.global) root["global"] = global_node(*cfg.global);
  if (!cfg.udsp.empty()) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (std::size_t i = 0; i < cfg.udsp.size(); ++i) {
      const UdspRule& u = cfg.udsp[i];
      YAML::Node n;
      n["idx"] = int_node(static_cast<long>(i));
      if (!u.src.empty()) n["src"] = u.src;
      if (!u.dst.empty()) n["dst"] = u.dst;
      if (!u.rte.empty()) n["rte"] = u.rte;
      YAML::Node a;
      if (u.priority)
        a["priority"] = int_node(*u.priority);
      else
        a["pref"] = "nid";
      n["action"] = a;
      list.push_back(n);
    }
    root["udsp"] = list;
  }
  return print_yaml(root);
}

SystemConfig export_config(Instance& lnet) {
  const Control& c = lnet.control();
  SystemConfig cfg;
  cfg.nets = c.net_configs();
  cfg.routes = c.route_configs();
  cfg.peers = c.configured_peers();
  cfg.routing = c.routing();
  cfg.buffers = c.buffers();
  cfg.global = c.globals();
  cfg.udsp = c.udsp_rules();
  return cfg;
}

}  // namespace lnet::dlc
