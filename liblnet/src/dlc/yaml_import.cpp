// Reading documents in the lnetctl YAML schema: every key checked and every value
// validated before anything is applied, failures naming the key and its line.
#include <lnet/dlc.hpp>

#include <algorithm>
#include <climits>
#include <functional>
#include <initializer_list>
#include <set>
#include <unordered_map>

#include <lnet/nid_range.hpp>

#include "base/text.hpp"
#include "yaml_print.hpp"
#include "yaml_read.hpp"

namespace lnet::dlc {

namespace {

using namespace yaml;  // the reader's helpers (yaml_read.hpp)

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
      } else if (k == "health_sensitivity") {
        auto hs = as_int(v, k);
        if (!hs) return hs.failure();
        if (*hs < 0 || *hs > 1000) return bad(v, "'health_sensitivity' " + std::to_string(*hs) + " is not 0..1000");
        rc.health_sensitivity = *hs == 0 ? 1 : static_cast<unsigned>(*hs);
      } else if (!runtime_key(k)) {
        return bad(kv.first, "invalid key \'" + k + "' in a 'route' entry");
      }
    }
    if (!has_net || !has_gw) return bad(e, "a 'route' entry needs 'net' and 'gateway'");
    cfg.routes.push_back(rc);
  }
  return {};
}

// A peer NI's NID: one NID, or a NID range ("10.0.0.[2-4]@tcp") naming several.
Status peer_nids(const YAML::Node& v, std::vector<Nid>& out) {
  if (!v.IsScalar()) return bad(v, "'nid' must be a NID");
  auto nids = expand_nid_list(v.Scalar(), kMaxNidsPerPeer);
  if (!nids) return bad(v, "'nid': " + nids.message());
  out.insert(out.end(), nids->begin(), nids->end());
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
          if (auto r = peer_nids(p["nid"], pc.nids); !r) return r;
          for (const auto& i2 : p) {
            std::string k2 = i2.first.Scalar();
            if (k2 != "nid" && !runtime_key(k2)) return bad(i2.first, "invalid key \'" + k2 + "' in a 'peer ni' entry");
          }
        }
      } else if (!runtime_key(k)) {
        return bad(kv.first, "invalid key \'" + k + "' in a 'peer' entry");
      }
    }
    if (!has_primary) return bad(e, "a 'peer' entry without 'primary nid'");
    if (pc.primary.is_lo()) return bad(e, "'primary nid' 0@lo is this node, not a peer");
    pc.lists_primary = std::find(pc.nids.begin(), pc.nids.end(), pc.primary) != pc.nids.end();
    pc.nids.erase(std::remove(pc.nids.begin(), pc.nids.end(), pc.primary), pc.nids.end());
    std::vector<Nid> unique;
    for (Nid x : pc.nids)
      if (std::find(unique.begin(), unique.end(), x) == unique.end()) unique.push_back(x);
    pc.nids = unique;
    if (pc.nids.size() + 1 > kMaxNidsPerPeer)
      return bad(e, "peer " + pc.primary.to_string() + " has " + std::to_string(pc.nids.size() + 1) +
                        " NIDs, more than " + std::to_string(kMaxNidsPerPeer));
    if (cfg.peers.size() >= kMaxImportPeers)
      return bad(e, "more than " + std::to_string(kMaxImportPeers) + " peers in one document");
    cfg.peers.push_back(pc);
  }
  return {};
}

Status parse_selftest(const YAML::Node& n, SystemConfig& cfg) {
  SelftestConfig st;
  if (n.IsScalar()) {
    if (n.Scalar() != "enable" && n.Scalar() != "disable")
      return bad(n, "'selftest' must be enable, disable or a mapping {enable: 1, session_timeout: S, rpc_timeout: S}");
    st.enable = n.Scalar() == "enable";
    cfg.selftest = st;
    return {};
  }
  if (!n.IsMap()) return bad(n, "'selftest' must be enable, disable or a mapping");
  for (const auto& kv : n) {
    std::string k = kv.first.Scalar();
    auto v = as_int(kv.second, k);
    if (!v) return v.failure();
    if (k == "enable") {
      if (*v != 0 && *v != 1) return bad(kv.second, "'enable' must be 0 or 1");
      st.enable = *v == 1;
    } else if (k == "session_timeout" || k == "rpc_timeout") {
      if (*v < 0 || *v > 86400) return bad(kv.second, "'" + k + "' must be 0..86400 seconds");
      (k == "session_timeout" ? st.session_timeout : st.rpc_timeout) = static_cast<unsigned>(*v);
    } else {
      return bad(kv.first, "invalid key \'" + k + "' in 'selftest'");
    }
  }
  cfg.selftest = st;
  return {};
}

Status parse_routing(const YAML::Node& n, SystemConfig& cfg) {
  // {enable: 1}, or the show form: a list of single-key mappings (- cpt[0]: ..., - enable: 1).
  auto take = [&](const YAML::Node& map) -> Status {
    if (!map.IsMap()) return bad(map, "a 'routing' entry must be a mapping");
    for (const auto& kv : map) {
      std::string k = kv.first.Scalar();
      if (k.rfind("cpt[", 0) == 0) continue;
      if (k != "enable") return bad(kv.first, "invalid key \'" + k + "' in 'routing'");
      auto v = as_int(kv.second, k);
      if (!v) return v.failure();
      if (*v != 0 && *v != 1) return bad(kv.second, "'enable' must be 0 or 1");
      cfg.routing = *v == 1;
    }
    return {};
  };
  if (n.IsMap()) return take(n);
  if (!n.IsSequence()) return bad(n, "'routing' must be a mapping like {enable: 1}");
  for (const auto& e : n)
    if (auto r = take(e); !r) return r;
  return {};
}

Status parse_buffers(const YAML::Node& n, SystemConfig& cfg) {
  BufferConfig b;
  if (auto r = parse_int_fields(
          n, "'buffers'",
          {{"tiny", &b.tiny, 0, 1 << 24}, {"small", &b.small, 0, 1 << 24}, {"large", &b.large, 0, 1 << 24}});
      !r)
    return r;
  cfg.buffers = b;
  return {};
}

// One global tunable: checked on its own here; the rules between tunables are checked
// when the document is applied, against what the instance has.
Status global_key(const YAML::Node& key, const YAML::Node& value, SystemConfig& cfg, const std::string& section) {
  std::string k = key.Scalar();
  if (GlobalTunables::read_only(k)) return {};  // what lnetctl shows, derived
  if (k == "max_intf") {
    warn(cfg, key, "'max_intf' is the old spelling of 'max_interfaces' (lnetctl before 2.14): read as max_interfaces");
    k = "max_interfaces";
  }
  if (value.IsNull()) return Failure{-EINVAL, section + "no value for '" + k + "'" + where(key)};  // no line of its own
  auto v = as_int(value, k);
  if (!v) return v.failure();
  GlobalTunables probe;
  // Unknown tunables and those of features not built fail here, naming the key.
  if (Status r = probe.set(k, *v); !r) {
    bool unknown = !probe.get(k) && r.code() == -EINVAL;
    const char* word = r.code() == -EOPNOTSUPP ? "" : unknown ? "invalid key: " : "invalid value: ";
    return Failure{r.code(), section + word + r.message() + where(unknown ? key : value)};
  }
  if (!cfg.global) cfg.global = GlobalTunables{};
  (void)cfg.global->set(k, *v);
  cfg.global_keys.emplace_back(k, *v);
  return {};
}

Status parse_global(const YAML::Node& n, SystemConfig& cfg) {
  if (auto r = check_map(n, "'global'"); !r) return r;
  for (const auto& kv : n)
    if (Status r = global_key(kv.first, kv.second, cfg, "'global': "); !r) return r;
  if (!cfg.global) cfg.global = GlobalTunables{};
  return {};
}

// numa: {range: N}, the numa_range of `global`.
Status parse_numa(const YAML::Node& n, SystemConfig& cfg) {
  if (auto r = check_map(n, "'numa'"); !r) return r;
  for (const auto& kv : n) {
    std::string k = kv.first.Scalar();
    if (k != "range") return bad(kv.first, "invalid key \'" + k + "' in 'numa' (it has 'range')");
    YAML::Node key = YAML::Node("numa_range");
    if (Status r = global_key(key, kv.second, cfg, "'numa': "); !r) return r;
  }
  return {};
}

// ping: / discover: (import --exec): the NIDs to ping or discover, in the shape lnetctl
// wrote them (a list of {primary nid: NID[,NID...]}, or any mapping or list of NIDs),
// with timeout (ms) and source_nid/source for ping, force for discover.
Status parse_exec(const YAML::Node& n, bool discover, SystemConfig& cfg) {
  ExecSection x;
  x.discover = discover;
  std::function<Status(const YAML::Node&)> walk = [&](const YAML::Node& node) -> Status {
    if (node.IsScalar()) {
      std::string text = node.Scalar();
      std::size_t at = 0;
      while (at <= text.size()) {
        std::size_t comma = text.find(',', at);
        std::string one(
            text::trim(std::string_view(text).substr(at, comma == std::string::npos ? std::string::npos : comma - at)));
        if (!one.empty()) {
          auto id = ProcessId::parse(one);
          if (!id) return bad(node, "'" + std::string(discover ? "discover" : "ping") + "': " + id.message());
          x.targets.push_back(*id);
        }
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
      return {};
    }
    if (node.IsSequence()) {
      for (const auto& item : node)
        if (Status r = walk(item); !r) return r;
      return {};
    }
    if (node.IsMap()) {
      for (const auto& kv : node) {
        std::string k = kv.first.Scalar();
        if (k == "timeout") {
          auto v = as_int(kv.second, k);
          if (!v) return v.failure();
          if (*v <= 0 || *v > 3600000) return bad(kv.second, "'timeout' must be 1..3600000 ms");
          x.timeout_ms = static_cast<int>(*v);
        } else if (k == "source_nid" || k == "source") {
          auto src = as_nid(kv.second, k);
          if (!src) return src.failure();
          x.source = *src;
        } else if (k == "force") {
          auto f = as_bool(kv.second, k);
          if (!f) return f.failure();
          x.force = *f;
        } else if (k == "seq_no") {
          continue;
        } else if (Status r = walk(kv.second); !r) {
          return r;
        }
      }
      return {};
    }
    return {};
  };
  if (Status r = walk(n); !r) return r;
  if (x.targets.empty()) return bad(n, std::string("'") + (discover ? "discover" : "ping") + "' names no NID");
  cfg.exec.push_back(x);
  return {};
}

// fault: {drop: [rule...], delay: [rule...]} (the fields of lnetctl fault).
Status parse_fault(const YAML::Node& n, SystemConfig& cfg) {
  if (auto r = check_map(n, "'fault'"); !r) return r;
  for (const auto& kv : n) {
    std::string k = kv.first.Scalar();
    if (k != "drop" && k != "delay") return bad(kv.first, "'fault' has drop and delay, not '" + k + "'");
    if (!kv.second.IsSequence()) return bad(kv.second, "'fault: " + k + "' must be a list of rules");
    for (const auto& e : kv.second) {
      auto rule = fault_rule_from_yaml(e, k == "delay");
      if (!rule) return Failure{rule.code(), "'fault': " + rule.message()};
      cfg.faults.push_back(*rule);
    }
  }
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
        return bad(kv.first, "invalid key \'" + k + "' in a 'udsp' entry");
      }
    }
    cfg.udsp.push_back(u);
  }
  return {};
}

}  // namespace

namespace {

bool same_ni(const NetConfig& a, const NetConfig& b) {
  return a.net == b.net && a.interfaces == b.interfaces && a.nid == b.nid;
}
bool same_config(const NetConfig& a, const NetConfig& b) {
  return same_ni(a, b) && a.tunables == b.tunables && a.lnd_tunables == b.lnd_tunables && a.cpts == b.cpts;
}
std::string ni_name(const NetConfig& nc) {
  std::string s = nc.net.to_string();
  if (!nc.interfaces.empty()) s += "(" + nc.interfaces[0] + ")";
  if (nc.nid) s += " " + nc.nid->to_string();
  return s;
}

// What a document repeats (`lnetctl net show >> /etc/lnet.conf` twice): an identical
// repeat is dropped with a warning, a repeat that says something else is an error.
Status drop_repeats(SystemConfig& cfg) {
  std::vector<NetConfig> nets;
  for (const NetConfig& nc : cfg.nets) {
    auto it = std::find_if(nets.begin(), nets.end(), [&](const NetConfig& x) { return same_ni(x, nc); });
    if (it == nets.end()) {
      // An interface carries one NI of a net (LNet refuses a second NI on it): two NIs
      // of one net on one interface cannot be configured, nor printed back as one.
      for (const NetConfig& x : nets)
        if (x.net == nc.net)
          for (const std::string& i : nc.interfaces)
            if (std::find(x.interfaces.begin(), x.interfaces.end(), i) != x.interfaces.end())
              return Failure{-EEXIST, "net " + nc.net.to_string() + " has interface '" + i + "' in two NIs (" +
                                          ni_name(x) + ", " + ni_name(nc) + "): an interface carries one NI of a net"};
      nets.push_back(nc);
    } else if (same_config(*it, nc)) {
      cfg.warnings.push_back("NI " + ni_name(nc) + " appears twice in the document, the same: configured once");
    } else {
      return Failure{-EINVAL, "NI " + ni_name(nc) + " appears twice in the document with different tunables or CPTs"};
    }
  }
  cfg.nets = std::move(nets);
  std::vector<RouteConfig> routes;
  for (const RouteConfig& r : cfg.routes) {
    auto it = std::find_if(routes.begin(), routes.end(),
                           [&](const RouteConfig& x) { return x.net == r.net && x.gateway == r.gateway; });
    std::string name = "route to " + r.net.to_string() + " via " + r.gateway.to_string();
    if (it == routes.end())
      routes.push_back(r);
    else if (*it == r)
      cfg.warnings.push_back(name + " appears twice in the document, the same: added once");
    else
      return Failure{-EINVAL,
                     name + " appears twice in the document with different hop, priority or health_sensitivity"};
  }
  cfg.routes = std::move(routes);
  std::vector<PeerConfig> peers;
  std::unordered_map<Nid, std::size_t> index;
  for (const PeerConfig& p : cfg.peers) {
    auto it = index.find(p.primary);
    if (it == index.end()) {
      index.emplace(p.primary, peers.size());
      peers.push_back(p);
      continue;
    }
    PeerConfig& first = peers[it->second];
    std::string name = "peer " + p.primary.to_string();
    if (first == p) {
      cfg.warnings.push_back(name + " appears twice in the document, the same: added once");
      continue;
    }
    if (first.multi_rail != p.multi_rail)
      return Failure{-EINVAL, name + " appears twice in the document, once Multi-Rail and once not"};
    for (Nid n : p.nids)  // as a second peer add does: its NIDs join the peer
      if (std::find(first.nids.begin(), first.nids.end(), n) == first.nids.end()) first.nids.push_back(n);
  }
  cfg.peers = std::move(peers);
  return {};
}

Status parse_section(const std::string& k, const YAML::Node& key, const YAML::Node& v, SystemConfig& cfg) {
  if (k == "net") return parse_nets(v, cfg);
  if (k == "route") return parse_routes(v, cfg);
  if (k == "peer") return parse_peers(v, cfg);
  if (k == "routing") return parse_routing(v, cfg);
  if (k == "buffers") return parse_buffers(v, cfg);
  if (k == "global") return parse_global(v, cfg);
  if (k == "numa") return parse_numa(v, cfg);
  if (k == "udsp") return parse_udsp(v, cfg);
  if (k == "fault") return parse_fault(v, cfg);
  if (k == "selftest") return parse_selftest(v, cfg);
  if (k == "ip2nets") return parse_ip2nets(v, cfg);
  if (k == "ping" || k == "discover") return parse_exec(v, k == "discover", cfg);
  if (k == "statistics") return {};  // stats show: counters, nothing to configure
  // A tunable of `global` written at the top level, as lnetctl takes it too.
  if (k == "max_intf" || GlobalTunables{}.get(k)) return global_key(key, v, cfg, "");
  return bad(key, "invalid key '" + k +
                      "': not a section (net, ip2nets, route, peer, routing, buffers, global, numa, udsp, ping, "
                      "discover, fault)");
}

// The line of a second document ("---" after content), 0 when there is one document.
// (yaml-cpp's LoadAll can loop on malformed input: the documents are counted here.)
int second_document_line(std::string_view text) {
  bool content = false;
  int line = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t nl = text.find('\n', at);
    std::string_view l = text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    ++line;
    bool marker = l.substr(0, 3) == "---" && (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
    if (marker && content) return line;
    std::string_view t = text::trim(l);
    if (!t.empty() && t.front() != '#' && !marker && t != "...") content = true;
    if (nl == std::string_view::npos) break;
    at = nl + 1;
  }
  return 0;
}

}  // namespace

Result<SystemConfig> parse_config(std::string_view yaml) {
  YAML::Node loaded;
  try {
    loaded = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return Failure{-EINVAL, "bad YAML at line " + std::to_string(e.mark.line + 1) + ", column " +
                                std::to_string(e.mark.column + 1) + ": " + e.msg};
  }
  SystemConfig cfg;
  if (int line = second_document_line(yaml))
    return Failure{-EINVAL, "a second YAML document at line " + std::to_string(line) +
                                ": a configuration is one document (remove the '---' between them)"};
  if (!loaded || loaded.IsNull()) return cfg;  // empty, or only comments: nothing to do
  const YAML::Node& doc = loaded;
  if (!doc.IsMap()) return bad(doc, "the document must be a mapping of net, route, peer, routing, buffers, global");
  try {
    for (const auto& kv : doc) {
      if (!kv.first.IsScalar()) return bad(kv.first, "a section name must be a word");
      if (Status r = parse_section(kv.first.Scalar(), kv.first, kv.second, cfg); !r) return r.failure();
    }
    if (Status r = drop_repeats(cfg); !r) return r.failure();
  } catch (const YAML::Exception& e) {
    return Failure{-EINVAL, "bad YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg};
  }
  return cfg;
}

}  // namespace lnet::dlc
