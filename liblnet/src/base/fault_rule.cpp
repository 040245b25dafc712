// Fault rules as text: the fields of `lnetctl fault` (also YAML's and LNET_FAULT's), their
// checks, and matching a message against a rule (lnet-facts §10).
#include <lnet/fault.hpp>

#include <algorithm>
#include <cctype>

#include <lnet/lnd/lnd.hpp>

#include "base/text.hpp"

namespace lnet {

namespace {

constexpr std::uint32_t kAllAddrs = 0xffffffffu;  // 255.255.255.255@net: every NID of the net
constexpr unsigned kAllMessages = 0xf;
constexpr unsigned kPutGet = (1u << static_cast<unsigned>(MsgType::Put)) | (1u << static_cast<unsigned>(MsgType::Get));
constexpr int kMaxHealthStatus = static_cast<int>(HealthStatus::NetworkTimeout);

bool nid_matches(Nid rule, Nid nid) {
  if (rule.is_any() || rule == nid) return true;
  return rule.addr() == kAllAddrs && rule.net() == nid.net();
}

Result<Nid> parse_rule_nid(const std::string& field, std::string_view v) {
  if (v == "*") return Nid::any();
  if (v.size() > 2 && v.substr(0, 2) == "*@") {
    auto net = NetId::parse(v.substr(2));
    if (!net) return Failure{-EINVAL, field + " '" + std::string(v) + "': " + net.message()};
    return Nid::make(*net, kAllAddrs);
  }
  auto nid = Nid::parse(v);
  if (!nid) return Failure{-EINVAL, field + " '" + std::string(v) + "': " + nid.message()};
  return *nid;
}

std::string rule_nid_string(Nid n) {
  if (n.is_any()) return "*";
  if (n.addr() == kAllAddrs) return "*@" + n.net().to_string();
  return n.to_string();
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<unsigned> parse_uint(const std::string& field, std::string_view v, std::uint32_t max) {
  std::uint32_t n = 0;
  if (!text::parse_u32(text::trim(v), max, n))
    return Failure{-EINVAL, field + " '" + std::string(v) + "' is not a number in 0.." + std::to_string(max)};
  return n;
}

Result<bool> parse_flag(const std::string& field, std::string_view v) {
  if (v.empty() || v == "1" || lower(v) == "true" || lower(v) == "yes") return true;
  if (v == "0" || lower(v) == "false" || lower(v) == "no") return false;
  return Failure{-EINVAL, field + " '" + std::string(v) + "' is not 0 or 1"};
}

// "a,b" and repeated fields alike.
std::vector<std::string_view> items(std::string_view v) {
  std::vector<std::string_view> out;
  while (!v.empty()) {
    std::size_t c = v.find(',');
    std::string_view item = text::trim(v.substr(0, c));
    if (!item.empty()) out.push_back(item);
    if (c == std::string_view::npos) break;
    v.remove_prefix(c + 1);
  }
  return out;
}

}  // namespace

Status FaultRule::check() const {
  if (!delay && drop_all) {
    if (rate && interval) return Failure{-EINVAL, "give rate or interval, not both"};
  } else if ((rate == 0) == (interval == 0)) {
    return Failure{-EINVAL, "give exactly one of rate and interval (both are above 0)"};
  }
  if (portals) {
    unsigned types = messages ? messages : kAllMessages;
    if ((types & kPutGet) == 0)
      return Failure{-EINVAL, "a portal filter only applies to PUT and GET: the message types leave none"};
  }
  if (delay) {
    if (health_errors || random || drop_all)
      return Failure{-EINVAL, "health_error, random and drop_all belong to drop rules"};
    if (latency == 0) return Failure{-EINVAL, "a delay rule needs a latency (seconds, above 0)"};
  } else {
    if (latency) return Failure{-EINVAL, "latency belongs to delay rules"};
    if (random && interval == 0) return Failure{-EINVAL, "random needs an interval"};
  }
  return {};
}

bool FaultRule::matches(Nid src, Nid dst, Nid local_nid, MsgType type, unsigned portal) const {
  if (!nid_matches(source, src) || !nid_matches(dest, dst) || !nid_matches(local, local_nid)) return false;
  auto bit = 1u << static_cast<unsigned>(type);
  unsigned types = messages ? messages : kAllMessages;
  if (portals) types &= kPutGet;  // ACK and REPLY have no portal
  if (!(types & bit)) return false;
  return !portals || (portal < 64 && (portals & (std::uint64_t{1} << portal)));
}

Result<FaultRule> FaultRule::from_fields(bool delay, const std::vector<std::pair<std::string, std::string>>& fields) {
  FaultRule r;
  r.delay = delay;
  for (const auto& [key, value] : fields) {
    std::string_view v = text::trim(value);
    if (key == "source" || key == "dest" || key == "local_nid") {
      auto n = parse_rule_nid(key, v);
      if (!n) return n.failure();
      (key == "source" ? r.source : key == "dest" ? r.dest : r.local) = *n;
    } else if (key == "rate" || key == "interval" || key == "latency") {
      auto n = parse_uint(key, v, 1u << 30);
      if (!n) return n.failure();
      (key == "rate" ? r.rate : key == "interval" ? r.interval : r.latency) = *n;
    } else if (key == "portal") {
      for (std::string_view p : items(v)) {
        auto n = parse_uint(key, p, 63);
        if (!n) return n.failure();
        r.portals |= std::uint64_t{1} << *n;
      }
    } else if (key == "message") {
      for (std::string_view m : items(v)) {
        std::string u = lower(m);
        unsigned bit = 0;
        for (MsgType t : {MsgType::Put, MsgType::Ack, MsgType::Get, MsgType::Reply})
          if (u == lower(msg_type_name(t))) bit = 1u << static_cast<unsigned>(t);
        if (!bit) return Failure{-EINVAL, "message '" + std::string(m) + "' is not PUT, ACK, GET or REPLY"};
        r.messages |= bit;
      }
    } else if (key == "health_error") {
      for (std::string_view h : items(v)) {
        std::string u = lower(h);
        if (u == "random") {
          r.health_errors = kFaultAnyHealthError;
          continue;
        }
        int found = 0;
        for (int s = 1; s <= kMaxHealthStatus && !found; ++s)
          if (u == lower(health_status_name(static_cast<HealthStatus>(s)))) found = s;
        if (!found)
          return Failure{-EINVAL, "health_error '" + std::string(h) +
                                      "' is not one of local_interrupt, local_dropped, local_aborted, local_no_route, "
                                      "local_error, local_timeout, remote_error, remote_dropped, remote_timeout, "
                                      "network_timeout, random"};
        if (r.health_errors != kFaultAnyHealthError) r.health_errors |= 1u << found;
      }
    } else if (key == "random" || key == "drop_all") {
      auto f = parse_flag(key, v);
      if (!f) return f.failure();
      (key == "random" ? r.random : r.drop_all) = *f;
    } else {
      return Failure{-EINVAL, "unknown fault rule field '" + key + "'"};
    }
  }
  if (Status s = r.check(); !s) return Failure{s.code(), (delay ? "delay rule: " : "drop rule: ") + s.message()};
  return r;
}

std::vector<std::pair<std::string, std::string>> FaultRule::to_fields() const {
  std::vector<std::pair<std::string, std::string>> f;
  f.emplace_back("source", rule_nid_string(source));
  f.emplace_back("dest", rule_nid_string(dest));
  f.emplace_back("local_nid", rule_nid_string(local));
  f.emplace_back(rate ? "rate" : "interval", std::to_string(rate ? rate : interval));
  for (unsigned p = 0; p < 64; ++p)
    if (portals & (std::uint64_t{1} << p)) f.emplace_back("portal", std::to_string(p));
  for (MsgType t : {MsgType::Put, MsgType::Ack, MsgType::Get, MsgType::Reply})
    if (messages & (1u << static_cast<unsigned>(t))) f.emplace_back("message", msg_type_name(t));
  if (delay) {
    f.emplace_back("latency", std::to_string(latency));
    return f;
  }
  if (health_errors == kFaultAnyHealthError) {
    f.emplace_back("health_error", "random");
  } else {
    for (int s = 1; s <= kMaxHealthStatus; ++s)
      if (health_errors & (1u << s))
        f.emplace_back("health_error", lower(health_status_name(static_cast<HealthStatus>(s))));
  }
  f.emplace_back("random", random ? "1" : "0");
  f.emplace_back("drop_all", drop_all ? "1" : "0");
  return f;
}

Result<std::vector<FaultRule>> FaultRule::parse_list(std::string_view text) {
  std::vector<FaultRule> out;
  while (!text.empty()) {
    std::size_t semi = text.find(';');
    std::string_view item = text::trim(text.substr(0, semi));
    text = semi == std::string_view::npos ? std::string_view{} : text.substr(semi + 1);
    if (item.empty()) continue;
    std::size_t sp = item.find_first_of(" \t");
    std::string_view kind = item.substr(0, sp);
    if (kind != "drop" && kind != "delay")
      return Failure{-EINVAL, "'" + std::string(item) + "': a rule starts with drop or delay"};
    std::vector<std::pair<std::string, std::string>> fields;
    std::string_view rest = sp == std::string_view::npos ? std::string_view{} : item.substr(sp + 1);
    // key=value pairs separated by commas or spaces; a value's own commas (lists) belong
    // to it until the next "key=".
    std::string key;
    std::string value;
    auto flush = [&] {
      if (!key.empty()) fields.emplace_back(key, value);
      key.clear();
      value.clear();
    };
    std::size_t i = 0;
    while (i < rest.size()) {
      std::size_t end = rest.find_first_of(", \t", i);
      std::string_view tok = rest.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i);
      i = end == std::string_view::npos ? rest.size() : end + 1;
      if (tok.empty()) continue;
      std::size_t eq = tok.find('=');
      if (eq != std::string_view::npos) {
        flush();
        key = std::string(tok.substr(0, eq));
        value = std::string(tok.substr(eq + 1));
      } else if (!key.empty() && (key == "portal" || key == "message" || key == "health_error")) {
        value += "," + std::string(tok);
      } else if (tok == "random" || tok == "drop_all") {
        flush();
        fields.emplace_back(std::string(tok), "1");
      } else {
        return Failure{-EINVAL, "'" + std::string(item) + "': '" + std::string(tok) + "' is not field=value"};
      }
    }
    flush();
    auto r = from_fields(kind == "delay", fields);
    if (!r) return Failure{r.code(), "'" + std::string(item) + "': " + r.message()};
    out.push_back(*r);
  }
  return out;
}

}  // namespace lnet
