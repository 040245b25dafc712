// The lnetctl YAML schema: parsing an import document (validated completely before
// anything is applied), printing export documents, and applying a document to a running
// instance all-or-nothing.
#include <lnet/dlc.hpp>

#include <algorithm>
#include <set>

#include <lnet/nid_range.hpp>

#include "config/yaml_print.hpp"
#include "core/core.hpp"
#include "nid/text.hpp"

namespace lnet::dlc {

namespace {

std::string where(const YAML::Node& n) {
  YAML::Mark m = n.Mark();
  return m.line >= 0 ? " (line " + std::to_string(m.line + 1) + ")" : "";
}

Failure bad(const YAML::Node& n, const std::string& what) { return Failure{-EINVAL, what + where(n)}; }

Result<long> as_int(const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) return bad(n, "'" + key + "' must be a number");
  const std::string& s = n.Scalar();
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 0);
  if (s.empty() || *end || errno) return bad(n, "'" + key + "': '" + s + "' is not a number");
  return v;
}

Result<bool> as_bool(const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) return bad(n, "'" + key + "' must be True/False or 1/0");
  std::string s = n.Scalar();
  if (s == "True" || s == "true" || s == "1" || s == "yes") return true;
  if (s == "False" || s == "false" || s == "0" || s == "no") return false;
  return bad(n, "'" + key + "': '" + s + "' is not True/False or 1/0");
}

Result<Nid> as_nid(const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) return bad(n, "'" + key + "' must be a NID");
  auto r = Nid::parse(n.Scalar());
  if (!r) return bad(n, "'" + key + "': " + r.message());
  return *r;
}

Result<NetId> as_net(const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) return bad(n, "'" + key + "' must be a network");
  auto r = NetId::parse(n.Scalar());
  if (!r) return bad(n, "'" + key + "': " + r.message());
  return *r;
}

// Keys that show/export print and an import ignores.
bool runtime_key(const std::string& k) {
  static const std::set<std::string> keys = {"status",
                                             "statistics",
                                             "sent_stats",
                                             "received_stats",
                                             "dropped_stats",
                                             "health stats",
                                             "dev cpt",
                                             "udsp info",
                                             "tcp bonding",
                                             "state",
                                             "type",
                                             "peer state",
                                             "max_ni_tx_credits",
                                             "available_tx_credits",
                                             "min_tx_credits",
                                             "tx_q_num_of_buf",
                                             "available_rtr_credits",
                                             "min_rtr_credits",
                                             "refcount",
                                             "health_sensitivity",
                                             "lnd_timeout"};
  return keys.count(k) > 0;
}

Status check_map(const YAML::Node& n, const std::string& what) {
  if (!n.IsMap()) return bad(n, what + " must be a mapping");
  return {};
}

Status parse_tunables(const YAML::Node& n, NetTunables& t) {
  if (auto r = check_map(n, "'tunables'"); !r) return r;
  for (const auto& kv : n) {
    std::string k = kv.first.Scalar();
    auto v = as_int(kv.second, k);
    if (!v) return v.failure();
    if (k == "peer_timeout")
      t.peer_timeout = static_cast<int>(*v);
    else if (k == "peer_credits")
      t.peer_credits = static_cast<int>(*v);
    else if (k == "peer_buffer_credits")
      t.peer_buffer_credits = static_cast<int>(*v);
    else if (k == "credits")
      t.credits = static_cast<int>(*v);
    else
      return bad(kv.first, "unknown tunable '" + k + "'");
  }
  return {};
}

Status parse_lnd_tunables(const YAML::Node& n, LndTunables& t) {
  if (auto r = check_map(n, "'lnd tunables'"); !r) return r;
  for (const auto& kv : n) {
    std::string k = kv.first.Scalar();
    auto v = as_int(kv.second, k);
    if (!v) return v.failure();
    if (k == "conns_per_peer")
      t.conns_per_peer = static_cast<int>(*v);
    else if (k == "timeout")
      t.timeout = static_cast<int>(*v);
    else if (k == "tos")
      t.tos = static_cast<int>(*v);
    else
      return bad(kv.first, "unknown LND tunable '" + k + "'");
  }
  return {};
}

Status parse_cpts(const YAML::Node& n, std::vector<unsigned>& cpts) {
  // "[0,1]"
  if (!n.IsScalar()) return bad(n, "'CPT' must be a list like \"[0,1]\"");
  std::string s = n.Scalar();
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') return bad(n, "'CPT': '" + s + "' is not like \"[0,1]\"");
  std::string body = s.substr(1, s.size() - 2);
  std::size_t i = 0;
  while (i < body.size()) {
    std::size_t j = body.find(',', i);
    std::string item = body.substr(i, j == std::string::npos ? std::string::npos : j - i);
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end || v < 0 || v > 255) return bad(n, "'CPT': '" + item + "' is not a CPT number");
    cpts.push_back(static_cast<unsigned>(v));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return {};
}

Status parse_nets(const YAML::Node& n, SystemConfig& cfg) {
  if (!n.IsSequence()) return bad(n, "'net' must be a list");
  for (const auto& e : n) {
    if (auto r = check_map(e, "a 'net' entry"); !r) return r;
    if (!e["net type"]) return bad(e, "a 'net' entry without 'net type'");
    auto net = as_net(e["net type"], "net type");
    if (!net) return net.failure();
    if (net->type() == kLoLnd) continue;  // 0@lo always exists
    for (const auto& kv : e) {
      std::string k = kv.first.Scalar();
      if (k != "net type" && k != "local NI(s)") return bad(kv.first, "unknown key '" + k + "' in a 'net' entry");
    }
    const YAML::Node nis = e["local NI(s)"];
    if (!nis) {
      NetConfig nc;
      nc.net = *net;
      cfg.nets.push_back(nc);
      continue;
    }
    if (!nis.IsSequence()) return bad(nis, "'local NI(s)' must be a list");
    for (const auto& ni : nis) {
      if (auto r = check_map(ni, "a 'local NI(s)' entry"); !r) return r;
      NetConfig nc;
      nc.net = *net;
      for (const auto& kv : ni) {
        std::string k = kv.first.Scalar();
        const YAML::Node& v = kv.second;
        if (k == "nid") {
          auto nid = as_nid(v, k);
          if (!nid) return nid.failure();
          if (nid->net() != *net) return bad(v, "'nid' " + nid->to_string() + " is not on " + net->to_string());
          nc.nid = *nid;
        } else if (k == "interfaces") {
          if (!v.IsMap() && !v.IsSequence()) return bad(v, "'interfaces' must be a mapping like {0: eth0}");
          for (const auto& i2 : v) {
            const YAML::Node& name = v.IsMap() ? i2.second : static_cast<const YAML::Node&>(i2);
            if (!name.IsScalar()) return bad(name, "an interface must be a name");
            if (std::string why = text::bad_interface_name(name.Scalar()); !why.empty()) return bad(name, why);
            nc.interfaces.push_back(name.Scalar());
          }
        } else if (k == "tunables") {
          if (auto r = parse_tunables(v, nc.tunables); !r) return r;
        } else if (k == "lnd tunables") {
          if (auto r = parse_lnd_tunables(v, nc.lnd_tunables); !r) return r;
        } else if (k == "CPT") {
          if (auto r = parse_cpts(v, nc.cpts); !r) return r;
        } else if (!runtime_key(k)) {
          return bad(kv.first, "unknown key '" + k + "' in a 'local NI(s)' entry");
        }
      }
      cfg.nets.push_back(nc);
    }
  }
  return {};
}

Status parse_routes(const YAML::Node& n, SystemConfig& cfg) {
  if (!n.IsSequence()) return bad(n, "'route' must be a list");
  for (const auto& e : n) {
    if (auto r = check_map(e, "a 'route' entry"); !r) return r;
    RouteConfig rc;
    bool has_net = false, has_gw = false;
    for (const auto& kv : e) {
      std::string k = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      if (k == "net") {
        auto net = as_net(v, k);
        if (!net) return net.failure();
        rc.net = *net;
        has_net = true;
      } else if (k == "gateway") {
        auto gw = as_nid(v, k);
        if (!gw) return gw.failure();
        rc.gateway = *gw;
        has_gw = true;
      } else if (k == "hop") {
        auto h = as_int(v, k);
        if (!h) return h.failure();
        if (*h != -1 && (*h < 1 || *h > 255)) return bad(v, "'hop' " + std::to_string(*h) + " is not -1 or 1..255");
        rc.hops = static_cast<int>(*h);
      } else if (k == "priority") {
        auto p = as_int(v, k);
        if (!p) return p.failure();
        if (*p < 0) return bad(v, "'priority' cannot be negative");
        rc.priority = static_cast<unsigned>(*p);
      } else if (!runtime_key(k)) {
        return bad(kv.first, "unknown key '" + k + "' in a 'route' entry");
      }
    }
    if (!has_net || !has_gw) return bad(e, "a 'route' entry needs 'net' and 'gateway'");
    cfg.routes.push_back(rc);
  }
  return {};
}

Status parse_peers(const YAML::Node& n, SystemConfig& cfg) {
  if (!n.IsSequence()) return bad(n, "'peer' must be a list");
  for (const auto& e : n) {
    if (auto r = check_map(e, "a 'peer' entry"); !r) return r;
    PeerConfig pc;
    bool has_primary = false;
    for (const auto& kv : e) {
      std::string k = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      if (k == "primary nid") {
        auto nid = as_nid(v, k);
        if (!nid) return nid.failure();
        pc.primary = *nid;
        has_primary = true;
      } else if (k == "Multi-Rail") {
        auto b = as_bool(v, k);
        if (!b) return b.failure();
        pc.multi_rail = *b;
      } else if (k == "peer ni") {
        if (!v.IsSequence()) return bad(v, "'peer ni' must be a list");
        for (const auto& p : v) {
          if (auto r = check_map(p, "a 'peer ni' entry"); !r) return r;
          if (!p["nid"]) return bad(p, "a 'peer ni' entry without 'nid'");
          auto nid = as_nid(p["nid"], "nid");
          if (!nid) return nid.failure();
          for (const auto& i2 : p) {
            std::string k2 = i2.first.Scalar();
            if (k2 != "nid" && !runtime_key(k2)) return bad(i2.first, "unknown key '" + k2 + "' in a 'peer ni' entry");
          }
          pc.nids.push_back(*nid);
        }
      } else if (!runtime_key(k)) {
        return bad(kv.first, "unknown key '" + k + "' in a 'peer' entry");
      }
    }
    if (!has_primary) return bad(e, "a 'peer' entry without 'primary nid'");
    pc.nids.erase(std::remove(pc.nids.begin(), pc.nids.end(), pc.primary), pc.nids.end());
    cfg.peers.push_back(pc);
  }
  return {};
}

Status parse_routing(const YAML::Node& n, SystemConfig& cfg) {
  auto take = [&](const YAML::Node& en) -> Status {
    auto v = as_int(en, "enable");
    if (!v) return v.failure();
    if (*v != 0 && *v != 1) return bad(en, "'enable' must be 0 or 1");
    cfg.routing = *v == 1;
    return {};
  };
  if (n.IsMap()) {
    for (const auto& kv : n) {
      std::string k = kv.first.Scalar();
      if (k == "enable") {
        if (auto r = take(kv.second); !r) return r;
      } else if (k.rfind("cpt[", 0) != 0) {
        return bad(kv.first, "unknown key '" + k + "' in 'routing'");
      }
    }
    return {};
  }
  if (n.IsSequence()) {  // the show form: - cpt[0]: ..., - enable: 1
    for (const auto& e : n) {
      if (!e.IsMap()) return bad(e, "a 'routing' entry must be a mapping");
      for (const auto& kv : e) {
        std::string k = kv.first.Scalar();
        if (k == "enable") {
          if (auto r = take(kv.second); !r) return r;
        } else if (k.rfind("cpt[", 0) != 0) {
          return bad(kv.first, "unknown key '" + k + "' in 'routing'");
        }
      }
    }
    return {};
  }
  return bad(n, "'routing' must be a mapping like {enable: 1}");
}

Status parse_buffers(const YAML::Node& n, SystemConfig& cfg) {
  if (auto r = check_map(n, "'buffers'"); !r) return r;
  BufferConfig b;
  for (const auto& kv : n) {
    std::string k = kv.first.Scalar();
    auto v = as_int(kv.second, k);
    if (!v) return v.failure();
    if (*v < 0) return bad(kv.second, "'" + k + "' cannot be negative");
    if (k == "tiny")
      b.tiny = static_cast<int>(*v);
    else if (k == "small")
      b.small = static_cast<int>(*v);
    else if (k == "large")
      b.large = static_cast<int>(*v);
    else
      return bad(kv.first, "unknown key '" + k + "' in 'buffers'");
  }
  cfg.buffers = b;
  return {};
}

Status parse_global(const YAML::Node& n, SystemConfig& cfg) {
  if (auto r = check_map(n, "'global'"); !r) return r;
  GlobalTunables g;
  // Keys in document order, but validated together: retry_count vs transaction_timeout.
  std::vector<std::pair<std::string, long>> values;
  for (const auto& kv : n) {
    std::string k = kv.first.Scalar();
    if (k == "lnd_timeout") continue;  // derived
    auto v = as_int(kv.second, k);
    if (!v) return v.failure();
    if (!g.get(k)) return bad(kv.first, "unknown global tunable '" + k + "'");
    values.emplace_back(k, *v);
  }
  // transaction_timeout first so a larger retry_count fits.
  std::stable_sort(values.begin(), values.end(),
                   [](const auto& a, const auto& b) { return a.first == "transaction_timeout" && b.first != a.first; });
  for (auto& [k, v] : values) {
    if (auto r = g.set(k, v); !r) return bad(n[k], "'global': " + r.message());
  }
  cfg.global = g;
  return {};
}

Status parse_udsp(const YAML::Node& n, SystemConfig& cfg) {
  if (!n.IsSequence()) return bad(n, "'udsp' must be a list");
  for (const auto& e : n) {
    if (auto r = check_map(e, "a 'udsp' entry"); !r) return r;
    UdspRule u;
    for (const auto& kv : e) {
      std::string k = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      if (k == "src" || k == "dst" || k == "rte") {
        auto m = NidMatcher::parse(v.Scalar());
        if (!m) return bad(v, "'" + k + "': " + m.message());
        (k == "src" ? u.src : k == "dst" ? u.dst : u.rte) = v.Scalar();
      } else if (k == "action") {
        if (!v.IsMap()) return bad(v, "'action' must be a mapping like {priority: 0}");
        for (const auto& a : v) {
          std::string ak = a.first.Scalar();
          if (ak == "priority") {
            auto p = as_int(a.second, ak);
            if (!p) return p.failure();
            if (*p < 0) return bad(a.second, "'priority' cannot be negative");
            u.priority = static_cast<unsigned>(*p);
          } else if (ak != "pref") {
            return bad(a.first, "unknown action '" + ak + "'");
          }
        }
      } else if (k != "idx" && k != "src_nid" && k != "dst_nid") {
        return bad(kv.first, "unknown key '" + k + "' in a 'udsp' entry");
      }
    }
    cfg.udsp.push_back(u);
  }
  return {};
}

// ---- printing ----

YAML::Node int_node(long v) { return YAML::Node(std::to_string(v)); }

std::map<NetId, std::vector<const NetConfig*>> by_net(const std::vector<NetConfig>& nets, std::vector<NetId>& order) {
  std::map<NetId, std::vector<const NetConfig*>> m;
  for (const auto& nc : nets) {
    if (!m.count(nc.net)) order.push_back(nc.net);
    m[nc.net].push_back(&nc);
  }
  return m;
}

YAML::Node tunables_node(const NetTunables& t) {
  YAML::Node n;
  n["peer_timeout"] = int_node(t.peer_timeout);
  n["peer_credits"] = int_node(t.peer_credits);
  n["peer_buffer_credits"] = int_node(t.peer_buffer_credits);
  n["credits"] = int_node(t.credits);
  return n;
}

YAML::Node lnd_tunables_node(const LndTunables& t, NetId net) {
  YAML::Node n;
  n["conns_per_peer"] = int_node(t.conns_per_peer > 0 ? t.conns_per_peer : 1);
  n["timeout"] = int_node(t.timeout > 0 ? t.timeout : (net.type() == kSockLnd ? 50 : 0));
  n["tos"] = int_node(t.tos);
  return n;
}

YAML::Node interfaces_node(const std::vector<std::string>& ifs) {
  YAML::Node n;
  for (std::size_t i = 0; i < ifs.size(); ++i) n[std::to_string(i)] = ifs[i];
  return n;
}

std::string cpt_list(const std::vector<unsigned>& cpts) {
  std::string s = "[";
  for (std::size_t i = 0; i < cpts.size(); ++i) s += (i ? "," : "") + std::to_string(cpts[i]);
  return s + "]";
}

YAML::Node global_node(const GlobalTunables& g) {
  YAML::Node n;
  for (const char* name : GlobalTunables::names()) n[name] = int_node(*g.get(name));
  n["lnd_timeout"] = int_node(g.lnd_timeout());
  return n;
}

}  // namespace

Result<SystemConfig> parse_config(std::string_view yaml) {
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return Failure{-EINVAL, "bad YAML at line " + std::to_string(e.mark.line + 1) + ", column " +
                                std::to_string(e.mark.column + 1) + ": " + e.msg};
  }
  SystemConfig cfg;
  if (!doc || doc.IsNull()) return cfg;
  if (!doc.IsMap()) return bad(doc, "the document must be a mapping of net, route, peer, routing, buffers, global");
  try {
    for (const auto& kv : doc) {
      std::string k = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      Status r;
      if (k == "net")
        r = parse_nets(v, cfg);
      else if (k == "route")
        r = parse_routes(v, cfg);
      else if (k == "peer")
        r = parse_peers(v, cfg);
      else if (k == "routing")
        r = parse_routing(v, cfg);
      else if (k == "buffers")
        r = parse_buffers(v, cfg);
      else if (k == "global")
        r = parse_global(v, cfg);
      else if (k == "udsp")
        r = parse_udsp(v, cfg);
      else
        return bad(kv.first, "unknown section '" + k + "'");
      if (!r) return r.failure();
    }
  } catch (const YAML::Exception& e) {
    return Failure{-EINVAL, "bad YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg};
  }
  return cfg;
}

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
        ni["lnd tunables"] = lnd_tunables_node(nc->lnd_tunables, nc->net);
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
  core::Core& c = lnet.core();
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

Status apply_config(Instance& lnet, const SystemConfig& cfg, ImportMode mode, std::string* shown) {
  core::Core& c = lnet.core();
  if (mode == ImportMode::Show) {
    SystemConfig now = export_config(lnet);
    SystemConfig sel;
    for (const auto& nc : now.nets)
      for (const auto& want : cfg.nets)
        if (want.net == nc.net) {
          sel.nets.push_back(nc);
          break;
        }
    for (const auto& r : now.routes)
      for (const auto& want : cfg.routes)
        if (want.net == r.net && want.gateway == r.gateway) sel.routes.push_back(r);
    for (const auto& p : now.peers)
      for (const auto& want : cfg.peers)
        if (want.primary == p.primary) sel.peers.push_back(p);
    if (cfg.routing) sel.routing = now.routing;
    if (cfg.buffers) sel.buffers = now.buffers;
    if (cfg.global) sel.global = now.global;
    if (shown) *shown = config_to_yaml(sel, true);
    return {};
  }
  if (mode == ImportMode::Del) {
    // Everything named must exist before anything goes.
    auto nis = c.ni_info();
    for (const auto& nc : cfg.nets) {
      bool found = false;
      for (const auto& i : nis) found = found || i.nid.net() == nc.net;
      if (!found) return Failure{-ENOENT, "no network " + nc.net.to_string() + " to delete"};
    }
    auto routes = c.route_configs();
    for (const auto& r : cfg.routes) {
      bool found = false;
      for (const auto& x : routes) found = found || (x.net == r.net && x.gateway == r.gateway);
      if (!found) return Failure{-ENOENT, "no route to " + r.net.to_string() + " via " + r.gateway.to_string()};
    }
    for (const auto& r : cfg.routes) (void)c.del_route(r.net, r.gateway);
    for (const auto& p : cfg.peers) (void)c.del_peer(p.primary, p.nids);
    for (const auto& nc : cfg.nets) {
      for (const auto& i : nis) {
        if (i.nid.net() != nc.net) continue;
        if (nc.nid && *nc.nid != i.nid) continue;
        if (!nc.interfaces.empty() && i.interfaces != nc.interfaces) continue;
        (void)c.del_ni(i.nid);
      }
    }
    return {};
  }

  // Add: apply in order; on a failure undo what was done, last first.
  std::vector<std::function<void()>> undo;
  auto fail = [&](Failure f) -> Status {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) (*it)();
    return f;
  };
  if (cfg.global) {
    GlobalTunables before = c.globals();
    for (const char* name : GlobalTunables::names()) {
      if (auto r = c.set_global(name, *cfg.global->get(name)); !r) return fail(r.failure());
    }
    undo.push_back([&c, before] {
      for (const char* name : GlobalTunables::names()) (void)c.set_global(name, *before.get(name));
    });
  }
  if (cfg.buffers) {
    BufferConfig before = c.buffers();
    if (auto r = c.set_buffers(*cfg.buffers); !r) return fail(r.failure());
    undo.push_back([&c, before] { (void)c.set_buffers(before); });
  }
  for (const auto& nc : cfg.nets) {
    auto r = c.add_ni(nc);
    if (!r) return fail(Failure{r.code(), "cannot add " + nc.net.to_string() + ": " + r.message()});
    Nid nid = *r;
    undo.push_back([&c, nid] { (void)c.del_ni(nid); });
  }
  for (const auto& rt : cfg.routes) {
    auto r = c.add_route(rt);
    if (!r) return fail(r.failure());
    undo.push_back([&c, rt] { (void)c.del_route(rt.net, rt.gateway); });
  }
  for (const auto& p : cfg.peers) {
    bool existed = false;
    for (const auto& x : c.configured_peers()) existed = existed || x.primary == p.primary;
    int rc = c.add_peer_ni(p.primary, p.primary, p.multi_rail, true);
    for (Nid nid : p.nids)
      if (rc == 0) rc = c.add_peer_ni(p.primary, nid, p.multi_rail, true);
    if (rc) return fail(Failure{rc, "cannot add peer " + p.primary.to_string() + ": " + errno_string(rc)});
    if (!existed) undo.push_back([&c, p] { (void)c.del_peer(p.primary, {}); });
  }
  for (const auto& u : cfg.udsp) {
    auto r = c.add_udsp(u, -1);
    if (!r) return fail(r.failure());
    undo.push_back([&c] { (void)c.del_udsp(static_cast<int>(c.udsp_rules().size()) - 1); });
  }
  if (cfg.routing) {
    bool before = c.routing();
    if (auto r = c.set_routing(*cfg.routing); !r) return fail(r.failure());
    undo.push_back([&c, before] { (void)c.set_routing(before); });
  }
  return {};
}

}  // namespace lnet::dlc
