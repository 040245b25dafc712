// The configuration object: parsing of "networks" strings and the LNET_* environment.
#include <lnet/config.hpp>

#include <cstdlib>

#include "nid/text.hpp"

namespace lnet {

namespace {

constexpr EnvVar kEnvVars[] = {
    {"LNET_NETWORKS", "", "networks to bring up besides 0@lo, e.g. \"tcp0(eth0),mpi\" (default: loopback only)"},
    {"LNET_CPT_NUMBER", "0", "CPU partitions for locks, queues and counters (0: one per CPU, at most 8)"},
    {"LNET_CREDITS", "256", "default NI tx credits of each network"},
    {"LNET_PEER_CREDITS", "8", "default tx credits per peer NI"},
    {"LNET_PEER_BUFFER_CREDITS", "0", "default router buffer credits per peer NI (0: peer credits)"},
    {"LNET_PEER_TIMEOUT", "180", "default seconds without traffic before a peer NI is considered dead"},
    {"LNET_LOG_LEVEL", "warn", "messages logged to stderr: error | warn | info | debug"},
    {"LNET_LOG_SUBSYS", "all", "subsystems logged: comma list of core, lnd, router, config, daemon, or all"},
    // Socket LND (tcp networks): the kernel module parameters of the acceptor and ksocklnd.
    {"LNET_ACCEPT", "secure", "tcp: accept connections from secure (privileged ports only) | all | none"},
    {"LNET_ACCEPT_PORT", "988", "tcp: port the acceptor listens on and connections go to"},
    {"LNET_ACCEPT_TIMEOUT", "5", "tcp: seconds a connecting peer has to identify itself"},
    {"LNET_ACCEPT_BACKLOG", "127", "tcp: listen() backlog"},
    {"LNET_SOCK_TIMEOUT", "50", "tcp: seconds before a stuck connection is closed and its messages fail"},
    {"LNET_SOCK_KEEPALIVE", "30", "tcp: seconds of silence before a keepalive NOOP (0: none)"},
    {"LNET_SOCK_TYPED_CONNS", "1", "tcp: 1 = CONTROL, BULK_IN and BULK_OUT connections per peer; 0 = one"},
    {"LNET_SOCK_NSCHEDS", "1", "tcp: epoll I/O threads"},
    {"LNET_SOCK_KEEPALIVE_IDLE", "30", "tcp: TCP keepalive idle seconds"},
    {"LNET_SOCK_KEEPALIVE_COUNT", "5", "tcp: TCP keepalive probes"},
    {"LNET_SOCK_KEEPALIVE_INTVL", "5", "tcp: seconds between TCP keepalive probes"},
    {"LNET_SOCK_MIN_BULK", "1024", "tcp: messages this big or bigger go on the BULK connections"},
    {"LNET_SOCK_TX_BUFFER_SIZE", "0", "tcp: SO_SNDBUF bytes (0: system default)"},
    {"LNET_SOCK_RX_BUFFER_SIZE", "0", "tcp: SO_RCVBUF bytes (0: system default)"},
    {"LNET_SOCK_NAGLE", "0", "tcp: 1 = leave Nagle's algorithm on"},
    {"LNET_SOCK_ENABLE_CSUM", "0", "tcp: 1 = checksum messages (protocol V2 connections only)"},
    {"LNET_SOCK_MIN_RECONNECTMS", "1000", "tcp: first reconnect delay in ms (doubles up to the max)"},
    {"LNET_SOCK_MAX_RECONNECTMS", "60000", "tcp: longest reconnect delay in ms"},
};

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

Result<int> env_int(const char* name, int def, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return def;
  std::string_view s = text::trim(v);
  bool neg = !s.empty() && s.front() == '-';
  if (neg) s.remove_prefix(1);
  std::uint32_t u = 0;
  if (!text::parse_u32(s, 0x7FFFFFFF, u)) {
    return Failure{-EINVAL, std::string(name) + "=" + quoted(v) + " is not a number"};
  }
  int x = neg ? -static_cast<int>(u) : static_cast<int>(u);
  if (x < lo || x > hi) {
    return Failure{
        -EINVAL, std::string(name) + "=" + quoted(v) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi)};
  }
  return x;
}

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
      if (rest.back() != ']')
        return Failure{-EINVAL, "bad networks entry " + quoted(item) + ": junk after the CPT list"};
      std::string_view cpts = rest.substr(1, rest.size() - 2);
      for (;;) {
        std::size_t comma = cpts.find(',');
        std::string_view c = text::trim(cpts.substr(0, comma));
        std::uint32_t v = 0;
        if (!text::parse_u32(c, 255, v)) {
          return Failure{-EINVAL,
                         "bad networks entry " + quoted(item) + ": CPT " + quoted(c) + " is not a number in 0..255"};
        }
        nc.cpts.push_back(v);
        if (comma == std::string_view::npos) break;
        cpts.remove_prefix(comma + 1);
      }
      rest = {};
    }
    if (!rest.empty()) return Failure{-EINVAL, "bad networks entry " + quoted(item) + ": unexpected " + quoted(rest)};
    out.push_back(std::move(nc));
  }
  return out;
}

Result<Config> Config::from_env() {
  Config cfg;
  NetTunables t;
  auto credits = env_int("LNET_CREDITS", t.credits, 1, 1 << 20);
  if (!credits) return credits.failure();
  auto peer_credits = env_int("LNET_PEER_CREDITS", t.peer_credits, 1, 1 << 16);
  if (!peer_credits) return peer_credits.failure();
  auto pbc = env_int("LNET_PEER_BUFFER_CREDITS", t.peer_buffer_credits, 0, 1 << 16);
  if (!pbc) return pbc.failure();
  auto timeout = env_int("LNET_PEER_TIMEOUT", t.peer_timeout, 0, 1 << 20);
  if (!timeout) return timeout.failure();
  auto ncpts = env_int("LNET_CPT_NUMBER", 0, 0, 255);
  if (!ncpts) return ncpts.failure();
  t.credits = *credits;
  t.peer_credits = *peer_credits;
  t.peer_buffer_credits = *pbc;
  t.peer_timeout = *timeout;
  cfg.ncpts = static_cast<unsigned>(*ncpts);
  if (const char* nets = std::getenv("LNET_NETWORKS")) {
    auto parsed = parse_networks(nets, t);
    if (!parsed) return Failure{parsed.code(), "LNET_NETWORKS: " + parsed.message()};
    cfg.nets = std::move(*parsed);
  }
  return cfg;
}

std::span<const EnvVar> env_vars() { return kEnvVars; }

std::string env_help() {
  std::string out;
  for (const EnvVar& v : kEnvVars) {
    const char* cur = std::getenv(v.name);
    out += std::string(v.name) + "\n    " + v.description + "\n    default: \"" + v.default_value + "\"";
    if (cur) out += ", now: \"" + std::string(cur) + "\"";
    out += "\n";
  }
  return out;
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
    {"numa_range", &GlobalTunables::numa_range, 0, 1 << 30},
    {"max_interfaces", &GlobalTunables::max_interfaces, 16, 1 << 20},
    {"discovery", &GlobalTunables::discovery, 0, 1},
    {"drop_asym_route", &GlobalTunables::drop_asym_route, 0, 1},
    {"retry_count", &GlobalTunables::retry_count, 0, 1 << 20},
    {"transaction_timeout", &GlobalTunables::transaction_timeout, 1, 1 << 30},
    {"health_sensitivity", &GlobalTunables::health_sensitivity, 0, 1000},
    {"recovery_interval", &GlobalTunables::recovery_interval, 1, 1 << 30},
    {"router_sensitivity", &GlobalTunables::router_sensitivity, 0, 100},
    {"response_tracking", &GlobalTunables::response_tracking, 0, 3},
    {"recovery_limit", &GlobalTunables::recovery_limit, 0, 1 << 30},
    {"max_recovery_ping_interval", &GlobalTunables::max_recovery_ping_interval, 1, 1 << 30},
    {"alive_router_check_interval", &GlobalTunables::alive_router_check_interval, 0, 1 << 30},
    {"router_ping_timeout", &GlobalTunables::router_ping_timeout, 1, 1 << 30},
};
constexpr const char* kNames[] = {"numa_range",
                                  "max_interfaces",
                                  "discovery",
                                  "drop_asym_route",
                                  "retry_count",
                                  "transaction_timeout",
                                  "health_sensitivity",
                                  "recovery_interval",
                                  "router_sensitivity",
                                  "response_tracking",
                                  "recovery_limit",
                                  "max_recovery_ping_interval",
                                  "alive_router_check_interval",
                                  "router_ping_timeout"};
}  // namespace

std::span<const char* const> GlobalTunables::names() { return kNames; }

Result<long> GlobalTunables::get(std::string_view name) const {
  for (const Tunable& t : kTunables)
    if (name == t.name) return static_cast<long>(this->*t.field);
  if (name == "lnd_timeout") return static_cast<long>(lnd_timeout());
  return Failure{-EINVAL, "unknown tunable '" + std::string(name) + "'"};
}

Status GlobalTunables::set(std::string_view name, long value) {
  for (const Tunable& t : kTunables) {
    if (name != t.name) continue;
    if (value < t.lo || value > t.hi) {
      return Failure{-EINVAL, std::string(name) + " " + std::to_string(value) + " is outside " + std::to_string(t.lo) +
                                  ".." + std::to_string(t.hi)};
    }
    GlobalTunables next = *this;
    next.*t.field = static_cast<int>(value);
    if (name == "health_sensitivity" && value == 0) next.retry_count = 0;  // no health, no resends
    if (next.retry_count >= next.transaction_timeout) {
      return Failure{-EINVAL, "retry_count (" + std::to_string(next.retry_count) +
                                  ") must stay below transaction_timeout (" + std::to_string(next.transaction_timeout) +
                                  ")"};
    }
    if (name == "retry_count" && value > 0 && next.health_sensitivity == 0) {
      return Failure{-EINVAL, "retry_count needs health_sensitivity above 0"};
    }
    *this = next;
    return {};
  }
  return Failure{-EINVAL, "unknown tunable '" + std::string(name) + "'"};
}

}  // namespace lnet
