// ip2nets: choosing a node's networks by its IPv4 and IPv6 addresses, in the module-parameter form
// and as the rules of lnetctl YAML.
#include <lnet/config.hpp>

#include <algorithm>

#include <lnet/nid_range.hpp>

#include "base/text.hpp"

namespace lnet {

namespace {

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

// An IP pattern, read as the address of a tcp NID range: four octet expressions
// (192.168.[1-3].*), or an IPv6 address or prefix (2001:db8:0:1::/64).
Result<NidPattern> ip_pattern(std::string_view text) {
  std::string_view t = text::trim(text);
  if (t.empty()) return Failure{-EINVAL, "an empty IP pattern"};
  bool v6 = t.find(':') != std::string_view::npos;
  if (t.find('@') != std::string_view::npos || (!v6 && std::count(t.begin(), t.end(), '.') != 3))
    return Failure{-EINVAL, "bad IP pattern " + quoted(t) + ": four octets like 192.168.[1-3].*, or an IPv6 prefix"};
  auto p = NidPattern::parse(std::string(t) + "@tcp");
  if (!p) return Failure{-EINVAL, "bad IP pattern " + quoted(t) + ": " + p.message()};
  return *p;
}

// Whether the address of `h` is in pattern `p` (an IPv4 pattern never takes an IPv6 address).
bool matches(const NidPattern& p, const HostInterface& h) {
  NetId tcp = NetId::make(kSockLnd, 0);
  if (!h.is_v6) return p.matches(Nid::make(tcp, h.ipv4));
  auto nid = Nid::make(tcp, h.ipv6.data(), 16);
  return nid && p.matches(*nid);
}

}  // namespace

Status check_ip_range(std::string_view pattern) {
  auto p = ip_pattern(pattern);
  if (!p) return p.failure();
  return {};
}

Result<std::string> ip2nets_to_networks(std::string_view text, const std::vector<HostInterface>& host) {
  std::vector<const HostInterface*> addrs;
  for (const HostInterface& h : host)
    if (h.up && !h.loopback) addrs.push_back(&h);
  std::string networks;
  bool any_entry = false;
  std::size_t at = 0;
  while (at <= text.size()) {
    std::size_t end = text.find_first_of(";\n\r", at);
    std::string_view entry = text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    at = end == std::string_view::npos ? text.size() + 1 : end + 1;
    if (std::size_t hash = entry.find('#'); hash != std::string_view::npos) entry = entry.substr(0, hash);
    entry = text::trim(entry);
    if (entry.empty()) continue;
    any_entry = true;
    // The networks spec, then the patterns (whitespace outside parentheses separates them).
    std::vector<std::string_view> tokens;
    for (std::size_t i = 0; i < entry.size();)
      if (std::string_view t = text::next_item(entry, i, " \t"); !t.empty()) tokens.push_back(t);
    std::string_view spec = tokens[0];
    auto nets = Config::parse_networks(spec);
    if (!nets) return Failure{-EINVAL, "bad ip2nets entry " + quoted(entry) + ": " + nets.message()};
    bool hit = false;
    for (std::size_t k = 1; k < tokens.size(); ++k) {  // every pattern is checked, even after a match
      auto p = ip_pattern(tokens[k]);
      if (!p) return Failure{p.code(), "bad ip2nets entry " + quoted(entry) + ": " + p.message()};
      for (const HostInterface* a : addrs) hit = hit || matches(*p, *a);
    }
    if (tokens.size() == 1)
      return Failure{-EINVAL, "bad ip2nets entry " + quoted(entry) + ": no IP pattern after the networks"};
    if (!hit) continue;
    for (std::size_t i = 0; i < spec.size();) {
      std::string_view n = text::trim(text::next_item(spec, i, ","));
      if (n.empty()) continue;
      if (!networks.empty()) networks += ",";
      networks += n;
    }
  }
  if (!any_entry) return Failure{-EINVAL, "ip2nets is empty"};
  if (addrs.empty()) return Failure{-ENOENT, "no local IP interfaces (up, not loopback) for ip2nets to match"};
  if (networks.empty()) return Failure{-ENOENT, "ip2nets does not match any local IP interface"};
  return networks;
}

namespace {

// The interfaces rule `r` puts its net on: those it names (all of them up, with an address
// in its ranges if it has ranges), else every interface up with an address in its ranges,
// else the first one up. None: *why says so.
std::vector<Ip2netsRule::Interface> interfaces_for(const Ip2netsRule& r, const std::vector<HostInterface>& host,
                                                   const std::vector<NidPattern>& ranges, std::string* why) {
  auto in_range = [&](const HostInterface& h) {
    return std::any_of(ranges.begin(), ranges.end(), [&](const NidPattern& p) { return matches(p, h); });
  };
  std::vector<Ip2netsRule::Interface> chosen;
  if (!r.interfaces.empty()) {
    for (const auto& want : r.interfaces) {
      bool exists = false, up = false, hit = false;
      for (const HostInterface& h : host) {
        if (h.name != want.name) continue;
        exists = true;
        up = up || h.up;
        hit = hit || (h.up && in_range(h));
      }
      if (!exists)
        *why = "no interface '" + want.name + "'";
      else if (!up)
        *why = "interface '" + want.name + "' is not up";
      else if (!ranges.empty() && !hit)
        *why = "interface '" + want.name + "' has no address in the ranges";
      if (!why->empty()) break;
      chosen.push_back(want);
    }
  } else if (!ranges.empty()) {
    for (const HostInterface& h : host) {
      if (!h.up || !in_range(h)) continue;
      bool seen = std::any_of(chosen.begin(), chosen.end(), [&](const auto& c) { return c.name == h.name; });
      if (!seen) chosen.push_back({h.name, std::nullopt});
    }
    if (chosen.empty()) *why = "no interface that is up has an address in the ranges";
  } else {
    for (const HostInterface& h : host)
      if (h.up && !h.loopback) {
        chosen.push_back({h.name, std::nullopt});
        break;
      }
    if (chosen.empty()) *why = "no interface is up";
  }
  return chosen;
}

}  // namespace

Result<std::vector<NetConfig>> resolve_ip2nets(const std::vector<Ip2netsRule>& rules,
                                               const std::vector<HostInterface>& host,
                                               std::vector<std::string>* skipped) {
  std::vector<NetConfig> out;
  std::vector<NetId> done;
  auto skip = [&](const Ip2netsRule& r, const std::string& why) {
    if (skipped) skipped->push_back("ip2nets rule for " + r.ni.net.to_string() + " skipped: " + why);
  };
  for (const Ip2netsRule& r : rules) {
    if (std::find(done.begin(), done.end(), r.ni.net) != done.end()) {
      skip(r, "an earlier rule configured " + r.ni.net.to_string());
      continue;
    }
    std::vector<NidPattern> ranges;
    for (const std::string& t : r.ranges) {
      auto p = ip_pattern(t);
      if (!p) return p.failure();
      ranges.push_back(*p);
    }
    std::string why;
    std::vector<Ip2netsRule::Interface> chosen = interfaces_for(r, host, ranges, &why);
    if (!why.empty()) {
      skip(r, why);
      continue;
    }
    for (const auto& c : chosen) {
      NetConfig nc = r.ni;
      nc.interfaces = {c.name};
      if (c.cpts) nc.cpts = *c.cpts;
      out.push_back(nc);
    }
    done.push_back(r.ni.net);
  }
  if (out.empty()) return Failure{-EINVAL, "no ip2nets rule applies to this node's interfaces"};
  return out;
}

}  // namespace lnet
