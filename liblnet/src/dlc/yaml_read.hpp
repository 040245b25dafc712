// The reader's helpers that the YAML import's files share: where a node is, failures in
// lnetctl's words, typed values, checked mappings. Internal to the config layer.
#pragma once

#include <lnet/dlc.hpp>

#include <climits>
#include <initializer_list>
#include <set>
#include <string>

#include <yaml-cpp/yaml.h>

namespace lnet::dlc::yaml {

inline std::string where(const YAML::Node& n) {
  YAML::Mark m = n.Mark();
  return m.line >= 0 ? " (line " + std::to_string(m.line + 1) + ")" : "";
}

inline Failure bad(const YAML::Node& n, const std::string& what) { return Failure{-EINVAL, what + where(n)}; }

// lnetctl's words lead each failure, as its scripts grep for them: "invalid key",
// "no value", "invalid value"; our detail follows.
inline Failure no_value(const YAML::Node& n, const std::string& key) { return bad(n, "no value for '" + key + "'"); }

inline Result<long> as_int(const YAML::Node& n, const std::string& key) {
  if (n.IsNull()) return no_value(n, key);
  if (!n.IsScalar()) return bad(n, "invalid value for '" + key + "': it must be a number");
  const std::string& s = n.Scalar();
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 0);
  if (s.empty() || *end || errno) return bad(n, "invalid value '" + s + "' for '" + key + "': not a number");
  return v;
}

// A flag as lnetctl reads one: yes/true/on/y or no/false/off/n in any case, or 1/0.
inline Result<bool> as_bool(const YAML::Node& n, const std::string& key) {
  if (n.IsNull()) return no_value(n, key);
  if (!n.IsScalar()) return bad(n, "invalid value for '" + key + "': it must be True or False");
  std::string s = n.Scalar();
  std::string low;
  for (char c : s) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (low == "true" || low == "yes" || low == "on" || low == "y" || low == "1") return true;
  if (low == "false" || low == "no" || low == "off" || low == "n" || low == "0") return false;
  return bad(n, "invalid value '" + s + "' for '" + key + "': not True or False");
}

// A NID or a network: what `T::parse` takes.
template <class T>
Result<T> as_parsed(const YAML::Node& n, const std::string& key, const char* kind) {
  if (n.IsNull()) return no_value(n, key);
  if (!n.IsScalar()) return bad(n, "invalid value for '" + key + "': it must be " + kind);
  auto r = T::parse(n.Scalar());
  if (!r) return bad(n, "invalid value for '" + key + "': " + r.message());
  return *r;
}

inline Result<Nid> as_nid(const YAML::Node& n, const std::string& key) { return as_parsed<Nid>(n, key, "a NID"); }
inline Result<NetId> as_net(const YAML::Node& n, const std::string& key) {
  return as_parsed<NetId>(n, key, "a network");
}

inline void warn(SystemConfig& cfg, const YAML::Node& n, const std::string& what) {
  cfg.warnings.push_back(what + where(n));
}

// Keys that show/export print and an import ignores.
inline bool runtime_key(const std::string& k) {
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
                                             "max_tx_credits",
                                             "refcount",
                                             "lnd_timeout",
                                             "gateway health",
                                             "seq_no",
                                             "detail"};
  return keys.count(k) > 0;
}

inline Status check_map(const YAML::Node& n, const std::string& what) {
  if (!n.IsMap()) return bad(n, what + " must be a mapping");
  return {};
}

// A mapping of numbers, each key naming an int field and its range; `what` names the
// mapping in errors.
struct IntField {
  const char* key;
  int* field;
  long lo = INT_MIN;
  long hi = INT_MAX;
};

inline Status parse_int_field(const YAML::Node& value, const IntField& f) {
  auto v = as_int(value, f.key);
  if (!v) return v.failure();
  if (*v < f.lo || *v > f.hi)
    return bad(value, "invalid value " + std::to_string(*v) + " for '" + std::string(f.key) + "': out of range (" +
                          std::to_string(f.lo) + ".." + std::to_string(f.hi) + ")");
  *f.field = static_cast<int>(*v);
  return {};
}

inline Status parse_int_fields(const YAML::Node& n, const std::string& what, std::initializer_list<IntField> fields) {
  if (auto r = check_map(n, what); !r) return r;
  for (const auto& kv : n) {
    std::string k = kv.first.Scalar();
    auto f = std::find_if(fields.begin(), fields.end(), [&](const IntField& i) { return k == i.key; });
    if (f == fields.end()) return bad(kv.first, "invalid key \'" + k + "' in " + what);
    if (auto r = parse_int_field(kv.second, *f); !r) return r;
  }
  return {};
}

// NI tunables. 0 (and -1 for peer_timeout) mean the default, as in LNet.

// The values of one of lnetctl's lists: a mapping like {0: eth0, 1: eth1} (its keys
// ignored) or a YAML list; not empty. `f` gets each value.
template <class F>
Status each_item(const YAML::Node& v, const std::string& key, F f) {
  if (!v.IsMap() && !v.IsSequence()) return bad(v, "'" + key + "' must be a mapping like {0: ...}");
  if (v.size() == 0) return bad(v, "'" + key + "': an empty list");
  for (const auto& i : v)
    if (Status r = f(v.IsMap() ? i.second : static_cast<const YAML::Node&>(i)); !r) return r;
  return {};
}

// The `net` and `ip2nets` sections (yaml_import_nets.cpp).
Status parse_nets(const YAML::Node& n, SystemConfig& cfg);
Status parse_ip2nets(const YAML::Node& n, SystemConfig& cfg);
// "lnd tunables": the drivers' own keys (LndTunableSpec).
Status parse_lnd_tunables(const YAML::Node& n, LndTunables& t, SystemConfig& cfg);

}  // namespace lnet::dlc::yaml
