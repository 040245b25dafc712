// Reading documents in the lnetctl YAML schema: every key checked and every value
// validated before anything is applied, failures naming the key and its line.
#include <lnet/dlc.hpp>

#include <algorithm>
#include <climits>
#include <initializer_list>
#include <set>

#include <lnet/nid_range.hpp>

#include "base/text.hpp"
#include "yaml_print.hpp"

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

// A NID or a network: what `T::parse` takes.
template <class T>
Result<T> as_parsed(const YAML::Node& n, const std::string& key, const char* kind) {
  if (!n.IsScalar()) return bad(n, "'" + key + "' must be " + kind);
  auto r = T::parse(n.Scalar());
  if (!r) return bad(n, "'" + key + "': " + r.message());
  return *r;
}

Result<Nid> as_nid(const YAML::Node& n, const std::string& key) { return as_parsed<Nid>(n, key, "a NID"); }
Result<NetId> as_net(const YAML::Node& n, const std::string& key) { return as_parsed<NetId>(n, key, "a network"); }

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
                                             "lnd_timeout"};
  return keys.count(k) > 0;
}

Status check_map(const YAML::Node& n, const std::string& what) {
  if (!n.IsMap()) return bad(n, what + " must be a mapping");
  return {};
}

// A mapping of numbers, each key naming an int field; `what` names the mapping in errors.
struct IntField {
  const char* key;
  int* field;
};

Status parse_int_fields(const YAML::Node& n, const std::string& what, std::initializer_list<IntField> fields,
                        long min = INT_MIN) {
  if (auto r = check_map(n, what); !r) return r;
  for (const auto& kv : n) {
    std::string k = kv.first.Scalar();
    auto v = as_int(kv.second, k);
    if (!v) return v.failure();
    auto f = std::find_if(fields.begin(), fields.end(), [&](const IntField& i) { return k == i.key; });
    if (f == fields.end()) return bad(kv.first, "unknown key '" + k + "' in " + what);
    if (min == 0 && *v < 0) return bad(kv.second, "'" + k + "' cannot be negative");
    if (*v < min || *v > INT_MAX) return bad(kv.second, "'" + k + "': " + std::to_string(*v) + " is out of range");
    *f->field = static_cast<int>(*v);
  }
  return {};
}

Status parse_tunables(const YAML::Node& n, NetTunables& t) {
  return parse_int_fields(n, "'tunables'",
                          {{"peer_timeout", &t.peer_timeout},
                           {"peer_credits", &t.peer_credits},
                           {"peer_buffer_credits", &t.peer_buffer_credits},
                           {"credits", &t.credits}});
}

Status parse_lnd_tunables(const YAML::Node& n, LndTunables& t) {
  return parse_int_fields(n, "'lnd tunables'",
                          {{"conns_per_peer", &t.conns_per_peer}, {"timeout", &t.timeout}, {"tos", &t.tos}});
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
      } else if (k == "health_sensitivity") {
        return Failure{
            -EOPNOTSUPP,
            "not supported yet: a route's health_sensitivity (routes follow their gateway's health)" + where(kv.first)};
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
      return bad(kv.first, "unknown key '" + k + "' in 'selftest'");
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
      if (k != "enable") return bad(kv.first, "unknown key '" + k + "' in 'routing'");
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
  if (auto r = parse_int_fields(n, "'buffers'", {{"tiny", &b.tiny}, {"small", &b.small}, {"large", &b.large}}, 0); !r)
    return r;
  cfg.buffers = b;
  return {};
}

Status parse_global(const YAML::Node& n, SystemConfig& cfg) {
  if (auto r = check_map(n, "'global'"); !r) return r;
  GlobalTunables g;
  for (const auto& kv : n) {
    std::string k = kv.first.Scalar();
    if (GlobalTunables::read_only(k)) continue;  // what lnetctl shows, derived
    auto v = as_int(kv.second, k);
    if (!v) return v.failure();
    // Unknown tunables and those of features not built fail here, naming the key.
    if (Status r = g.set(k, *v); !r) return Failure{r.code(), "'global': " + r.message() + where(kv.first)};
  }
  if (Status r = g.check(); !r) return Failure{r.code(), "'global': " + r.message() + where(n)};
  cfg.global = g;
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
        return bad(kv.first, "unknown key '" + k + "' in a 'udsp' entry");
      }
    }
    cfg.udsp.push_back(u);
  }
  return {};
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
      else if (k == "fault")
        r = parse_fault(v, cfg);
      else if (k == "selftest")
        r = parse_selftest(v, cfg);
      else
        return bad(kv.first, "unknown section '" + k + "'");
      if (!r) return r.failure();
    }
  } catch (const YAML::Exception& e) {
    return Failure{-EINVAL, "bad YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg};
  }
  return cfg;
}

}  // namespace lnet::dlc
