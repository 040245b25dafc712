// The configuration object: parsing of "networks" strings, the LNET_* variables of the
// networks, and the global tunables.
#include <lnet/config.hpp>

#include <algorithm>
#include <array>

#include <lnet/env.hpp>
#include <lnet/log.hpp>
#include <lnet/nid_range.hpp>

#include "base/text.hpp"

namespace lnet {

namespace {

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

// Splits on commas and whitespace outside () and [].
std::vector<std::string_view> split_top(std::string_view s, bool& unbalanced) {
  std::vector<std::string_view> out;
  int depth = 0;
  std::size_t start = 0;
  unbalanced = false;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    char c = i < s.size() ? s[i] : ',';
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') {
      if (--depth < 0) unbalanced = true;
    }
    if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == ';')) {
      std::string_view item = text::trim(s.substr(start, i - start));
      if (!item.empty()) out.push_back(item);
      start = i + 1;
    }
  }
  if (depth != 0) unbalanced = true;
  return out;
}

}  // namespace

Result<std::vector<unsigned>> parse_cpt_list(std::string_view input) {
  std::string_view t = text::trim(input);
  if (t == "*" || t == "[*]") return std::vector<unsigned>{};
  if (!t.empty() && t.front() != '[' && t.find_first_not_of("0123456789") != std::string_view::npos)
    return Failure{-EINVAL, "bad CPT list " + quoted(input) + ": write a list like \"[0,1]\" or \"[0-3]\""};
  auto e = NumberExpr::parse(t, 255);
  if (!e) return Failure{-EINVAL, "bad CPT list " + quoted(input) + ": " + e.message()};
  std::vector<unsigned> out;
  for (const auto& r : e->ranges())
    for (std::uint64_t v = r.lo; v <= r.hi; v += r.step) {
      if (std::find(out.begin(), out.end(), v) != out.end()) continue;
      if (out.size() == 128) return Failure{-E2BIG, "bad CPT list " + quoted(input) + ": more than 128 CPTs"};
      out.push_back(static_cast<unsigned>(v));
    }
  return out;
}

Result<std::vector<NetConfig>> Config::parse_networks(std::string_view text, const NetTunables& defaults) {
  std::vector<NetConfig> out;
  bool unbalanced = false;
  auto items = split_top(text, unbalanced);
  if (unbalanced) return Failure{-EINVAL, "bad networks " + quoted(text) + ": unbalanced brackets"};
  for (std::string_view item : items) {
    NetConfig nc;
    nc.tunables = defaults;
    std::size_t paren = item.find('(');
    std::size_t bracket = item.find('[');
    std::size_t name_end = std::min(paren, bracket);
    auto net = NetId::parse(item.substr(0, name_end));
    if (!net) return Failure{-EINVAL, "bad networks entry " + quoted(item) + ": " + net.message()};
    nc.net = *net;
    std::string_view rest = item.substr(name_end == std::string_view::npos ? item.size() : name_end);
    if (!rest.empty() && rest.front() == '(') {
      std::size_t close = rest.find(')');
      if (close == std::string_view::npos)
        return Failure{-EINVAL, "bad networks entry " + quoted(item) + ": missing ')'"};
      std::string_view ifs = rest.substr(1, close - 1);
      for (;;) {
        std::size_t comma = ifs.find(',');
        std::string_view ifname = text::trim(ifs.substr(0, comma));
        if (std::string why = text::bad_interface_name(ifname); !why.empty())
          return Failure{-EINVAL, "bad networks entry " + quoted(item) + ": " + why};
        nc.interfaces.emplace_back(ifname);
        if (comma == std::string_view::npos) break;
        ifs.remove_prefix(comma + 1);
      }
      rest.remove_prefix(close + 1);
    }
    if (!rest.empty() && rest.front() == '[') {
      auto cpts = parse_cpt_list(rest);
      if (!cpts) return Failure{-EINVAL, "bad networks entry " + quoted(item) + ": " + cpts.message()};
      nc.cpts = *cpts;
      rest = {};
    }
    if (!rest.empty()) return Failure{-EINVAL, "bad networks entry " + quoted(item) + ": unexpected " + quoted(rest)};
    out.push_back(std::move(nc));
  }
  return out;
}

namespace {

// The variables of client processes (and lnetd): the networks of LNET_NETWORKS come up
// as kernel LNet's "networks=" module parameter brings them up, with these tunables.
const EnvVar kNetworksVar{"LNET_NETWORKS", "",
                          "networks to bring up besides 0@lo, e.g. \"tcp0(eth0),tcp1(eth1)\" (default: loopback only)"};
const EnvVar kIp2netsVar{"LNET_IP2NETS", "",
                         "networks chosen by the node's addresses, as the ip2nets= module parameter: "
                         "\"tcp(eth0) 192.168.0.*; tcp1 10.1.[1-3].*\" (not with LNET_NETWORKS)"};
const EnvVar kCptNumberVar{"LNET_CPT_NUMBER", "0",
                           "CPU partitions for locks, queues and counters (0: one per CPU, at most 8)"};
const EnvVar kCreditsVar{"LNET_CREDITS", "256", "tx credits of each NI of LNET_NETWORKS"};
const EnvVar kPeerCreditsVar{"LNET_PEER_CREDITS", "0",
                             "tx credits per peer NI on the networks of LNET_NETWORKS (0: the driver's default)"};
const EnvVar kPeerBufferCreditsVar{"LNET_PEER_BUFFER_CREDITS", "0",
                                   "router buffer credits per peer NI on those networks (0: peer credits)"};
const EnvVar kPeerTimeoutVar{"LNET_PEER_TIMEOUT", "180",
                             "seconds a router keeps forwarding to a peer NI whose driver reports it down, after "
                             "the last message from it (0: always)"};

// The global tunables a client process sets as kernel LNet's module parameters set them.
struct GlobalVar {
  const EnvVar var;
  const char* name;
};
const GlobalVar kGlobalVars[] = {
#define LNET_GLOBAL_TUNABLE_VAR(name, def, lo, hi, var, help) {{var, #def, help}, #name},
    LNET_GLOBAL_TUNABLES(LNET_GLOBAL_TUNABLE_VAR)
#undef LNET_GLOBAL_TUNABLE_VAR
};

const EnvVar kFaultVar{"LNET_FAULT", "",
                       "fault rules: \"drop source=*,dest=1@mpi,rate=1; delay dest=2@mpi,latency=2,rate=1\" "
                       "(the fields of lnetctl fault)"};

}  // namespace

Result<Config> Config::from_env() {
  if (Status s = log_env_status(); !s) return s.failure();
  Config cfg;
  NetTunables t;
  auto credits = kCreditsVar.number(1, 1 << 20);
  if (!credits) return credits.failure();
  auto peer_credits = kPeerCreditsVar.number(0, 1 << 16);
  if (!peer_credits) return peer_credits.failure();
  auto pbc = kPeerBufferCreditsVar.number(0, 1 << 16);
  if (!pbc) return pbc.failure();
  auto timeout = kPeerTimeoutVar.number(0, 1 << 20);
  if (!timeout) return timeout.failure();
  auto ncpts = kCptNumberVar.number(0, 255);
  if (!ncpts) return ncpts.failure();
  t.credits = static_cast<int>(*credits);
  t.peer_credits = static_cast<int>(*peer_credits);
  t.peer_buffer_credits = static_cast<int>(*pbc);
  t.peer_timeout = static_cast<int>(*timeout);
  cfg.ncpts = static_cast<unsigned>(*ncpts);
  for (const GlobalVar& g : kGlobalVars) {
    if (!g.var.value()) continue;
    auto v = g.var.number(0, 1 << 30);
    if (!v) return v.failure();
    if (Status s = cfg.globals.set(g.name, *v); !s)
      return Failure{s.code(), std::string(g.var.name()) + ": " + s.message()};
  }
  if (Status s = cfg.globals.check(); !s) return Failure{s.code(), "LNET_RETRY_COUNT: " + s.message()};
  if (const char* faults = kFaultVar.value()) {
    auto rules = FaultRule::parse_list(faults);
    if (!rules) return Failure{rules.code(), "LNET_FAULT: " + rules.message()};
    cfg.faults = std::move(*rules);
  }
  std::string from_ip2nets;
  if (const char* ip2nets = kIp2netsVar.value()) {
    if (kNetworksVar.value())
      return Failure{-EINVAL, "LNET_NETWORKS and LNET_IP2NETS are both set: give one (as networks= or ip2nets=)"};
    auto host = host_interfaces();
    if (!host) return Failure{host.code(), "LNET_IP2NETS: " + host.message()};
    auto nets = ip2nets_to_networks(ip2nets, *host);
    if (!nets) return Failure{nets.code(), "LNET_IP2NETS: " + nets.message()};
    from_ip2nets = *nets;
  }
  if (const char* nets = from_ip2nets.empty() ? kNetworksVar.value() : from_ip2nets.c_str()) {
    auto parsed = parse_networks(nets, t);
    if (!parsed)
      return Failure{parsed.code(), (from_ip2nets.empty() ? "LNET_NETWORKS: " : "LNET_IP2NETS: ") + parsed.message()};
    cfg.nets = std::move(*parsed);
  }
  return cfg;
}

}  // namespace lnet

namespace lnet {

namespace {

struct Tunable {
  const char* name;
  int GlobalTunables::*field;
  long lo;
  long hi;
};
constexpr Tunable kTunables[] = {
#define LNET_GLOBAL_TUNABLE_ROW(name, def, lo, hi, var, help) {#name, &GlobalTunables::name, lo, hi},
    LNET_GLOBAL_TUNABLES(LNET_GLOBAL_TUNABLE_ROW)
#undef LNET_GLOBAL_TUNABLE_ROW
};
// `global show`'s names: the table's, with the derived lnd_timeout after router_sensitivity.
constexpr auto kNames = [] {
  std::array<const char*, std::size(kTunables) + 1> out{};
  std::size_t n = 0;
  for (const Tunable& t : kTunables) {
    out[n++] = t.name;
    if (std::string_view(t.name) == "router_sensitivity") out[n++] = "lnd_timeout";
  }
  return out;
}();
Failure unknown(std::string_view name) { return Failure{-EINVAL, "unknown tunable '" + std::string(name) + "'"}; }

}  // namespace

std::span<const char* const> GlobalTunables::names() { return kNames; }

int GlobalTunables::lnd_timeout() const { return std::max((transaction_timeout - 1) / (retry_count + 1), 1); }

Status GlobalTunables::check() const {
  if (retry_count >= transaction_timeout)
    return Failure{-EINVAL, "retry_count " + std::to_string(retry_count) + " must be below transaction_timeout " +
                                std::to_string(transaction_timeout)};
  if (retry_count > 0 && health_sensitivity == 0)
    return Failure{-EINVAL, "retry_count " + std::to_string(retry_count) +
                                " needs health_sensitivity above 0 (health is off: nothing is resent)"};
  return {};
}

Result<long> GlobalTunables::get(std::string_view name) const {
  if (name == "lnd_timeout") return static_cast<long>(lnd_timeout());
  for (const Tunable& t : kTunables)
    if (name == t.name) return static_cast<long>(this->*t.field);
  return unknown(name);
}

Status GlobalTunables::set(std::string_view name, long value) {
  if (read_only(name))
    return Failure{-EINVAL,
                   std::string(name) + " is read-only: it is derived from transaction_timeout and retry_count"};
  for (const Tunable& t : kTunables) {
    if (name != t.name) continue;
    if (value < t.lo || value > t.hi) {
      return Failure{-EINVAL, std::string(name) + " " + std::to_string(value) + " is outside " + std::to_string(t.lo) +
                                  ".." + std::to_string(t.hi)};
    }
    this->*t.field = static_cast<int>(value);
    if (name == "health_sensitivity" && value == 0) retry_count = 0;  // nothing is resent without health
    return {};
  }
  return unknown(name);
}

}  // namespace lnet
