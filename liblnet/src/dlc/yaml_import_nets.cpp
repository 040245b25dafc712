// Reading the `net` and `ip2nets` sections of lnetctl YAML: NIs, their tunables, the
// drivers' "lnd tunables", CPT lists and interfaces.
#include <algorithm>
#include <functional>
#include <optional>

#include <lnet/nid_range.hpp>

#include "base/text.hpp"
#include "yaml_read.hpp"

namespace lnet::dlc::yaml {

Status parse_tunables(const YAML::Node& n, NetTunables& t, SystemConfig& cfg) {
  if (auto r = check_map(n, "'tunables'"); !r) return r;
  const IntField fields[] = {{"peer_timeout", &t.peer_timeout, -1, 1 << 20},
                             {"peer_credits", &t.peer_credits, 0, 65535},
                             {"peer_buffer_credits", &t.peer_buffer_credits, 0, 65535},
                             {"credits", &t.credits, 0, 1 << 20}};
  for (const auto& kv : n) {
    std::string k = kv.first.Scalar();
    const IntField* f =
        std::find_if(std::begin(fields), std::end(fields), [&](const IntField& i) { return k == i.key; });
    if (f == std::end(fields)) {
      warn(cfg, kv.first, "ignored: unknown key '" + k + "' in 'tunables'");
      continue;
    }
    if (auto r = parse_int_field(kv.second, *f); !r) return r;
  }
  if (t.peer_timeout < 0) t.peer_timeout = NetTunables{}.peer_timeout;
  if (t.credits == 0) t.credits = NetTunables{}.credits;
  return {};
}

// Driver tunables this build has no spec of: the net type whose driver takes them
// (ko2iblnd's memory-mapping ones among o2ib's even when our o2ib driver is here, since
// it has no such mapping), accepted without effect, with a warning.
std::optional<std::uint32_t> foreign_lnd_tunable(const std::string& k) {
  static const std::set<std::string> o2ib = {
      "peercredits_hiw", "map_on_demand", "concurrent_sends", "fmr_pool_size", "fmr_flush_trigger", "fmr_cache", "ntx"};
  static const std::set<std::string> kfi = {"prov_major_version", "prov_minor_version", "auth_key", "traffic_class"};
  if (o2ib.count(k)) return kO2ibLnd;
  if (kfi.count(k)) return kKfiLnd;
  if (k == "nqps") return kEfaLnd;
  return std::nullopt;
}

// The spec of `name` among `type`'s tunables, and the net type of whichever driver
// declares it otherwise.
std::optional<LndTunableSpec> spec_of(std::uint32_t type, std::string_view name) {
  for (LndTunableSpec& spec : lnd_tunables_of(type))
    if (spec.name == name) return spec;
  return std::nullopt;
}
std::optional<std::uint32_t> owner_of(const std::string& name) {
  for (std::uint32_t type : registered_lnd_tunable_types())
    if (spec_of(type, name)) return type;
  return foreign_lnd_tunable(name);
}

// Why key `k` of `net`'s "lnd tunables" is ignored.
std::string ignored_why(const std::string& k, NetId net) {
  std::optional<std::uint32_t> owner = owner_of(k);
  if (!owner) return "ignored: unknown key '" + k + "' in 'lnd tunables'";
  std::string name = lnd_type_name(*owner);
  if (*owner != net.type()) return "ignored: '" + k + "' is a tunable of " + name + " nets, not of " + net.to_string();
  if (lnd_tunables_of(*owner).empty())
    return "ignored: '" + k + "' is a tunable of the " + name + " driver, which this build does not have";
  return "ignored: '" + k + "' has no effect on this " + name +
         " driver (it registers memory per buffer: no FMR pools)";
}

// `net`'s "lnd tunables": the keys its driver declares (LndTunableSpec), checked against
// their ranges; the rest ignored with a warning saying why.
Status parse_lnd_tunables(const YAML::Node& n, LndTunables& t, SystemConfig& cfg, NetId net) {
  if (auto r = check_map(n, "'lnd tunables'"); !r) return r;
  for (const auto& kv : n) {
    std::string k = kv.first.Scalar();
    std::optional<LndTunableSpec> spec = spec_of(net.type(), k);
    // Another driver's key is read too, for the NI's driver to refuse ("not supported
    // yet") — but not ko2iblnd's, which sites carry over to other nets and lnetctl ignores.
    std::optional<std::uint32_t> owner = spec ? std::nullopt : owner_of(k);
    if (owner && *owner != net.type() && !foreign_lnd_tunable(k)) spec = spec_of(*owner, k);
    if (!spec) {
      warn(cfg, kv.first, ignored_why(k, net));
      continue;
    }
    if (spec->read_only) continue;  // shown only (timeout: derived from lnd_timeout, net set --lnd-timeout)
    auto v = as_int(kv.second, k);
    if (!v) return v.failure();
    if (*v < spec->min || *v > spec->max)
      return bad(kv.second, "invalid " + k + " value " + std::to_string(*v) + " (valid range " +
                                std::to_string(spec->min) + "-" + std::to_string(spec->max) + ")");
    t.set(k, *v);
  }
  return {};
}

Status parse_cpts(const YAML::Node& n, std::vector<unsigned>& cpts) {
  // "[0,1]", "[0-3]", 2, or a YAML sequence of those ([0, 2-3]).
  if (n.IsScalar()) {
    auto r = parse_cpt_list(n.Scalar());
    if (!r) return bad(n, "'CPT': " + r.message());
    cpts = *r;
    return {};
  }
  if (!n.IsSequence()) return bad(n, "'CPT' must be a list like \"[0,1]\"");
  if (n.size() == 0) return bad(n, "'CPT': an empty list");
  std::vector<unsigned> all;
  for (const auto& item : n) {
    if (!item.IsScalar()) return bad(item, "'CPT': an item must be a number or a range like 0-3");
    std::string text = item.Scalar();
    auto r = parse_cpt_list(text.find('[') == std::string::npos ? "[" + text + "]" : text);
    if (!r) return bad(item, "'CPT': " + r.message());
    for (unsigned c : *r)
      if (std::find(all.begin(), all.end(), c) == all.end()) all.push_back(c);
  }
  cpts = all;
  return {};
}

// "eth0" or "eth0[0,1]" (an interface with its own CPTs).
Status parse_interface(const YAML::Node& name, std::string& ifname, std::optional<std::vector<unsigned>>& cpts) {
  if (!name.IsScalar()) return bad(name, "an interface must be a name");
  std::string text = name.Scalar();
  std::size_t br = text.find('[');
  if (br != std::string::npos) {
    auto c = parse_cpt_list(text.substr(br));
    if (!c) return bad(name, "interface '" + text + "': " + c.message());
    cpts = *c;
    text.resize(br);
  }
  if (std::string why = text::bad_interface_name(text); !why.empty()) return bad(name, why);
  ifname = text;
  return {};
}

// The keys a net entry, an NI entry and an ip2nets rule share: tunables, lnd tunables
// and CPT, read into `nc`. Whether `k` is one of them.
Result<bool> ni_setting(const std::string& k, const YAML::Node& v, NetConfig& nc, SystemConfig& cfg) {
  Status r;
  if (k == "tunables")
    r = parse_tunables(v, nc.tunables, cfg);
  else if (k == "lnd tunables")
    r = parse_lnd_tunables(v, nc.lnd_tunables, cfg, nc.net);
  else if (k == "CPT")
    r = parse_cpts(v, nc.cpts);
  else
    return false;
  if (!r) return r.failure();
  return true;
}

// The NIs of one `local NI(s)` item (or of a net entry without that list): one per
// interface, sharing the item's tunables.
// `entry`: the net entry's own settings (net level), which the NI's override key by key.
Status parse_ni_item(const YAML::Node& ni, const NetConfig& entry, SystemConfig& cfg) {
  NetConfig nc = entry;
  NetId net = entry.net;
  struct If {
    std::string name;
    std::optional<std::vector<unsigned>> cpts;
  };
  std::vector<If> ifs;
  for (const auto& kv : ni) {
    std::string k = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    auto shared = ni_setting(k, v, nc, cfg);
    if (!shared) return shared.failure();
    if (*shared) continue;
    if (k == "nid") {
      auto nid = as_nid(v, k);
      if (!nid) return nid.failure();
      if (nid->net() != net) return bad(v, "'nid' " + nid->to_string() + " is not on " + net.to_string());
      nc.nid = *nid;
    } else if (k == "interfaces") {
      Status r = each_item(v, k, [&](const YAML::Node& name) -> Status {
        If i;
        if (auto p = parse_interface(name, i.name, i.cpts); !p) return p;
        for (const If& seen : ifs)
          if (seen.name == i.name) return bad(name, "interface '" + i.name + "' is listed twice");
        ifs.push_back(i);
        return {};
      });
      if (!r) return r;
    } else if (!runtime_key(k)) {
      return bad(kv.first, "invalid key \'" + k + "' in a 'local NI(s)' entry");
    }
  }
  if (ifs.size() > 1 && nc.nid)
    return bad(ni, "a 'nid' names one NI, not the " + std::to_string(ifs.size()) + " of its interfaces");
  if (ifs.empty()) {
    cfg.nets.push_back(nc);
    return {};
  }
  for (const If& i : ifs) {  // one NI per interface, as LNet makes them
    NetConfig one = nc;
    one.interfaces = {i.name};
    if (i.cpts) one.cpts = *i.cpts;
    cfg.nets.push_back(one);
  }
  return {};
}

// ip2nets: a list of rules {net-spec, interfaces, ip-range, tunables, lnd tunables, CPT}.
Status parse_ip2nets(const YAML::Node& n, SystemConfig& cfg) {
  if (!n.IsSequence()) return bad(n, "'ip2nets' must be a list of rules");
  for (const auto& e : n) {
    if (auto r = check_map(e, "an 'ip2nets' rule"); !r) return r;
    if (!e["net-spec"]) return bad(e, "an 'ip2nets' rule without 'net-spec'");
    auto net = as_net(e["net-spec"], "net-spec");
    if (!net) return net.failure();
    if (net->type() == kLoLnd) return bad(e["net-spec"], "'net-spec': lo is always there");
    Ip2netsRule rule;
    rule.ni.net = *net;
    for (const auto& kv : e) {
      std::string k = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      if (k == "net-spec") continue;
      auto shared = ni_setting(k, v, rule.ni, cfg);
      if (!shared) return shared.failure();
      if (*shared) continue;
      if (k == "interfaces") {
        Status r = each_item(v, k, [&](const YAML::Node& item) -> Status {
          Ip2netsRule::Interface i;
          if (auto p = parse_interface(item, i.name, i.cpts); !p) return p;
          rule.interfaces.push_back(i);
          return {};
        });
        if (!r) return r;
      } else if (k == "ip-range") {
        Status r = each_item(v, k, [&](const YAML::Node& item) -> Status {
          if (!item.IsScalar()) return bad(item, "an 'ip-range' item must be a pattern like 192.168.[1-3].*");
          if (Status c = check_ip_range(item.Scalar()); !c)
            return Failure{c.code(), "'ip-range': " + c.message() + where(item)};
          rule.ranges.push_back(item.Scalar());
          return {};
        });
        if (!r) return r;
      } else if (k == "local NI(s)") {
        return bad(kv.first,
                   "'local NI(s)' belongs in 'net', not in an 'ip2nets' rule (it has interfaces and ip-range)");
      } else if (k != "seq_no") {
        return bad(kv.first, "invalid key \'" + k + "' in an 'ip2nets' rule");
      }
    }
    cfg.ip2nets.push_back(rule);
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
    NetConfig entry;                      // the net level: defaults of its NIs
    entry.net = *net;
    std::optional<YAML::Node> nis;  // a copy: the iterator's pair lives one iteration
    for (const auto& kv : e) {
      std::string k = kv.first.Scalar();
      if (k == "net type") continue;
      auto shared = ni_setting(k, kv.second, entry, cfg);
      if (!shared) return shared.failure();
      if (*shared) continue;
      if (k == "local NI(s)")
        nis.emplace(kv.second);
      else if (!runtime_key(k))
        return bad(kv.first, "invalid key \'" + k + "' in a 'net' entry");
    }
    if (!nis) {
      cfg.nets.push_back(entry);
      continue;
    }
    if (!nis->IsSequence()) return bad(*nis, "'local NI(s)' must be a list");
    for (const auto& ni : *nis) {
      if (auto r = check_map(ni, "a 'local NI(s)' entry"); !r) return r;
      if (auto r = parse_ni_item(ni, entry, cfg); !r) return r;
    }
  }
  return {};
}

}  // namespace lnet::dlc::yaml
