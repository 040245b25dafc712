// Parser and matcher of NID range expressions (numbers, ranges with steps, '*').
#include <lnet/nid_range.hpp>

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "base/text.hpp"

namespace lnet {

namespace {

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

Failure bad(std::string_view what, std::string_view input, const std::string& why) {
  return Failure{-EINVAL, "bad " + std::string(what) + " " + quoted(input) + ": " + why};
}

Result<NumberExpr::Range> parse_range(std::string_view item, std::uint32_t max) {
  item = text::trim(item);
  if (item.empty()) return Failure{-EINVAL, "empty item in list"};
  NumberExpr::Range r;
  std::size_t dash = item.find('-');
  std::size_t slash = item.find('/');
  std::string_view lo = item.substr(0, dash);
  if (dash == std::string_view::npos && slash != std::string_view::npos) {
    return Failure{-EINVAL, "step without a range in " + quoted(item)};
  }
  auto number = [&](std::string_view s, std::uint32_t& out) -> Status {
    s = text::trim(s);
    if (!text::parse_u32(s, 0xFFFFFFFFu, out)) return Failure{-EINVAL, quoted(s) + " is not a number"};
    if (out > max) return Failure{-EINVAL, "value " + std::string(s) + " is above " + std::to_string(max)};
    return {};
  };
  if (auto ok = number(lo, r.lo); !ok) return ok.failure();
  r.hi = r.lo;
  if (dash != std::string_view::npos) {
    std::string_view hi =
        item.substr(dash + 1, slash == std::string_view::npos ? std::string_view::npos : slash - dash - 1);
    if (auto ok = number(hi, r.hi); !ok) return ok.failure();
    if (r.hi < r.lo) return Failure{-EINVAL, "range " + quoted(item) + " has its start above its end"};
    if (slash != std::string_view::npos) {
      if (auto ok = number(item.substr(slash + 1), r.step); !ok) return ok.failure();
      if (r.step == 0) return Failure{-EINVAL, "step 0 in " + quoted(item) + " must be at least 1"};
    }
  }
  return r;
}

}  // namespace

Result<NumberExpr> NumberExpr::parse(std::string_view input, std::uint32_t max) {
  std::string_view s = text::trim(input);
  if (s.empty()) return bad("number expression", input, "empty");
  if (s == "*") return NumberExpr();
  std::vector<Range> ranges;
  if (s.front() == '[') {
    if (s.back() != ']') return bad("number expression", input, "missing ']'");
    std::string_view body = s.substr(1, s.size() - 2);
    if (text::trim(body).empty()) return bad("number expression", input, "empty list");
    while (true) {
      std::size_t comma = body.find(',');
      auto r = parse_range(body.substr(0, comma), max);
      if (!r) return bad("number expression", input, r.message());
      ranges.push_back(*r);
      if (comma == std::string_view::npos) break;
      body.remove_prefix(comma + 1);
    }
  } else {
    std::uint32_t v = 0;
    if (!text::parse_u32(s, 0xFFFFFFFFu, v)) return bad("number expression", input, quoted(s) + " is not a number");
    if (v > max) return bad("number expression", input, "value " + std::string(s) + " is above " + std::to_string(max));
    ranges.push_back(Range{v, v, 1});
  }
  return NumberExpr(std::move(ranges));
}

bool NumberExpr::matches(std::uint32_t v) const {
  if (ranges_.empty()) return true;
  for (const auto& r : ranges_) {
    if (v >= r.lo && v <= r.hi && (v - r.lo) % r.step == 0) return true;
  }
  return false;
}

std::string NumberExpr::to_string() const {
  if (ranges_.empty()) return "*";
  if (ranges_.size() == 1 && ranges_[0].lo == ranges_[0].hi) return std::to_string(ranges_[0].lo);
  std::string out = "[";
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    const Range& r = ranges_[i];
    if (i) out += ",";
    out += std::to_string(r.lo);
    if (r.hi != r.lo) {
      out += "-" + std::to_string(r.hi);
      if (r.step != 1) out += "/" + std::to_string(r.step);
    }
  }
  return out + "]";
}

bool operator==(const NumberExpr& a, const NumberExpr& b) {
  if (a.ranges_.size() != b.ranges_.size()) return false;
  for (std::size_t i = 0; i < a.ranges_.size(); ++i) {
    const auto& x = a.ranges_[i];
    const auto& y = b.ranges_[i];
    if (x.lo != y.lo || x.hi != y.hi || (x.lo != x.hi && x.step != y.step)) return false;
  }
  return true;
}

NetPattern NetPattern::exact(NetId net) {
  NetPattern p;
  p.type_ = net.type();
  p.num_ = NumberExpr::single(net.num());
  return p;
}

Result<NetPattern> NetPattern::parse(std::string_view input) {
  std::string_view s = text::trim(input);
  if (s.empty()) return bad("network pattern", input, "empty");
  std::string_view rest;
  auto type = text::parse_net_name(s, rest);
  if (!type) return bad("network pattern", input, type.message());
  NetPattern p;
  p.type_ = type->type;
  if (!rest.empty()) {
    if (p.type_ == kLoLnd) return bad("network pattern", input, "lo takes no network number");
    auto num = NumberExpr::parse(rest, 0xFFFF);
    if (!num) return bad("network pattern", input, "network number: " + num.message());
    p.num_ = *num;
  }
  return p;
}

bool NetPattern::is_single() const { return num_.ranges().size() == 1 && num_.ranges()[0].lo == num_.ranges()[0].hi; }

std::string NetPattern::to_string() const {
  const char* name = lnd_type_name(type_);
  std::string base = name ? name : "<" + std::to_string(type_) + ">";
  if (is_single() && num_.ranges()[0].lo == 0) return base;
  return base + num_.to_string();
}

Result<NidPattern> NidPattern::parse(std::string_view input) {
  std::string_view s = text::trim(input);
  std::size_t at = s.find('@');
  if (at == std::string_view::npos) return bad("NID range", input, "missing '@<network>'");
  auto net = NetPattern::parse(s.substr(at + 1));
  if (!net) return bad("NID range", input, net.message());
  NidPattern p;
  p.net_ = *net;
  std::string_view addr = text::trim(s.substr(0, at));
  if (addr.empty()) return bad("NID range", input, "missing address before '@'");
  // The mpi net writes a proxy's address (2^24 and above) as dotted IPv4, a rank's as a number.
  bool ip = lnd_type_uses_ip(p.net_.type()) || (p.net_.type() == kMpiLnd && addr.find('.') != std::string_view::npos);
  if (addr == "*") {
    p.addr_.assign(ip ? 4 : 1, NumberExpr());
    return p;
  }
  if (lnd_type_uses_ip(p.net_.type()) && addr.find(':') != std::string_view::npos) {  // not mpi's dotted form
    if (Status st = p.parse_v6(addr); !st) return bad("NID range", input, st.message());
    return p;
  }
  if (!ip) {
    auto e = NumberExpr::parse(addr, p.net_.type() == kLoLnd ? 0 : 0xFFFFFFFFu);
    if (!e) return bad("NID range", input, "address: " + e.message());
    p.addr_.push_back(*e);
    return p;
  }
  for (int i = 0; i < 4; ++i) {
    std::size_t dot = addr.find('.');
    if (i < 3 && dot == std::string_view::npos) {
      return bad("NID range", input, "address " + quoted(s.substr(0, at)) + " does not have four octets");
    }
    std::string_view octet = i < 3 ? addr.substr(0, dot) : addr;
    auto e = NumberExpr::parse(octet, 255);
    if (!e) return bad("NID range", input, "octet " + std::to_string(i + 1) + ": " + e.message());
    p.addr_.push_back(*e);
    if (i < 3) addr.remove_prefix(dot + 1);
  }
  const auto& first = p.addr_[0].ranges();
  if (p.net_.type() == kMpiLnd && std::any_of(first.begin(), first.end(), [](const auto& r) { return r.lo == 0; })) {
    return bad("NID range", input,
               "a dotted mpi address names a proxy (1.0.0.0 and above); an application rank is written as a number");
  }
  return p;
}

Status NidPattern::parse_v6(std::string_view addr) {
  std::string_view a = addr;
  int prefix = 128;
  if (std::size_t slash = addr.find('/'); slash != std::string_view::npos) {
    std::uint32_t n = 0;
    if (!text::parse_u32(text::trim(addr.substr(slash + 1)), 128, n))
      return Failure{-EINVAL, "prefix length " + quoted(addr.substr(slash + 1)) + " is not 0..128"};
    prefix = static_cast<int>(n);
    a = text::trim(addr.substr(0, slash));
  }
  if (a.find_first_of("[]*") != std::string_view::npos)
    return Failure{-EINVAL, "IPv6 address " + quoted(a) + ": ranges are written as a prefix (2001:db8::/64)"};
  std::string s(a);
  if (s.find('\0') != std::string::npos || inet_pton(AF_INET6, s.c_str(), v6_addr_.data()) != 1)
    return Failure{-EINVAL, quoted(a) + " is not an IPv6 address"};
  v6_prefix_ = prefix;
  for (int bit = prefix; bit < 128; ++bit)  // the host part is not compared: cleared, as printed
    v6_addr_[static_cast<std::size_t>(bit / 8)] &= static_cast<std::uint8_t>(~(0x80u >> (bit % 8)));
  return {};
}

bool NidPattern::matches(Nid nid) const {
  if (nid.is_any() || !net_.matches(nid.net())) return false;
  if (is_v6()) {
    std::uint8_t b[Nid::kMaxAddrBytes];
    if (nid.addr_bytes(b) != 16) return false;
    int full = v6_prefix_ / 8, rest = v6_prefix_ % 8;
    if (std::memcmp(b, v6_addr_.data(), static_cast<std::size_t>(full)) != 0) return false;
    auto mask = static_cast<std::uint8_t>(0xFF00u >> rest);
    return rest == 0 || (b[full] & mask) == v6_addr_[static_cast<std::size_t>(full)];
  }
  if (nid.is_large())  // an IPv4 or numeric pattern: only its all-wildcard form takes an IPv6 address
    return std::all_of(addr_.begin(), addr_.end(), [](const NumberExpr& e) { return e.is_any(); });
  std::uint32_t a = nid.addr();
  if (addr_.size() == 1) return addr_[0].matches(a);
  if (nid.net().type() == kMpiLnd && !mpi_ip_form(kMpiLnd, a)) return false;  // a rank, not a proxy
  for (int i = 0; i < 4; ++i) {
    if (!addr_[static_cast<std::size_t>(i)].matches((a >> (24 - 8 * i)) & 0xFF)) return false;
  }
  return true;
}

std::string NidPattern::to_string() const {
  if (is_v6()) {
    char buf[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, v6_addr_.data(), buf, sizeof buf);
    return std::string(buf) + (v6_prefix_ == 128 ? "" : "/" + std::to_string(v6_prefix_)) + "@" + net_.to_string();
  }
  std::string a;
  bool all_any = true;
  for (const auto& e : addr_) all_any = all_any && e.is_any();
  if (all_any) {
    a = "*";
  } else {
    for (std::size_t i = 0; i < addr_.size(); ++i) {
      if (i) a += ".";
      a += addr_[i].to_string();
    }
  }
  return a + "@" + net_.to_string();
}

Result<NidRangeList> NidRangeList::parse(std::string_view input) {
  NidRangeList list;
  std::size_t i = 0;
  while (i < input.size()) {
    std::string_view item = text::next_item(input, i, " \t\n");
    if (item.empty()) break;
    auto p = NidPattern::parse(item);
    if (!p) return p.failure();
    list.patterns_.push_back(*p);
  }
  if (list.patterns_.empty()) return bad("NID range list", input, "empty");
  return list;
}

bool NidRangeList::matches(Nid nid) const {
  for (const auto& p : patterns_)
    if (p.matches(nid)) return true;
  return false;
}

std::string NidRangeList::to_string() const {
  std::string out;
  for (const auto& p : patterns_) {
    if (!out.empty()) out += " ";
    out += p.to_string();
  }
  return out;
}

Result<NidMatcher> NidMatcher::parse(std::string_view input) {
  NidMatcher m;
  if (input.find('@') != std::string_view::npos) {
    auto p = NidPattern::parse(input);
    if (!p) return p.failure();
    m.has_nid_ = true;
    m.nid_ = *p;
  } else {
    auto p = NetPattern::parse(input);
    if (!p) return p.failure();
    m.net_ = *p;
  }
  return m;
}

namespace {

// One NID range of a list, expanded into `out` (first bracket slowest).
Status expand_range(std::string_view item, std::vector<Nid>& out, std::size_t max) {
  auto p = NidPattern::parse(item);
  if (!p) return p.failure();
  if (!p->net().is_single()) return bad("NID list", item, "a range of networks names no NIDs: write each network");
  NetId net = NetId::make(p->net().type(), p->net().numbers().ranges()[0].lo);
  std::vector<std::vector<std::uint32_t>> parts;
  for (const NumberExpr& e : p->address()) {
    if (e.is_any()) return bad("NID list", item, "'*' names no NIDs: list them, or give a range like [1-10]");
    std::vector<std::uint32_t> vs;
    for (const auto& r : e.ranges())
      for (std::uint64_t v = r.lo; v <= r.hi; v += r.step) {
        vs.push_back(static_cast<std::uint32_t>(v));
        if (vs.size() > max)
          return Failure{-E2BIG, "bad NID list " + quoted(item) + ": more than " + std::to_string(max) + " NIDs"};
      }
    parts.push_back(std::move(vs));
  }
  std::vector<std::size_t> at(parts.size(), 0);
  for (;;) {
    std::uint32_t addr = 0;
    if (parts.size() == 4)
      for (std::size_t k = 0; k < 4; ++k) addr = (addr << 8) | (parts[k][at[k]] & 0xff);
    else
      addr = net.type() == kLoLnd ? 0 : parts[0][at[0]];
    Nid nid = Nid::make(net, addr);
    if (std::find(out.begin(), out.end(), nid) == out.end()) {
      if (out.size() == max)
        return Failure{-E2BIG, "bad NID list " + quoted(item) + ": more than " + std::to_string(max) + " NIDs"};
      out.push_back(nid);
    }
    std::size_t k = parts.size();
    while (k-- > 0) {  // the last bracket varies fastest
      if (++at[k] < parts[k].size()) break;
      at[k] = 0;
    }
    if (k == static_cast<std::size_t>(-1)) return {};
  }
}

}  // namespace

Result<std::vector<Nid>> expand_nid_list(std::string_view input, std::size_t max) {
  std::vector<Nid> out;
  std::size_t i = 0;
  bool any = false;
  while (i < input.size()) {
    std::string_view item = text::next_item(input, i, ", \t\n");
    if (item.empty()) continue;
    any = true;
    if (item.find_first_of("[*") != std::string_view::npos) {
      if (Status s = expand_range(item, out, max); !s) return s.failure();
      continue;
    }
    auto nid = Nid::parse(item);
    if (!nid) return nid.failure();
    if (nid->is_any()) return bad("NID list", input, "'<?>' is not a NID");
    if (std::find(out.begin(), out.end(), *nid) != out.end()) continue;
    if (out.size() == max)
      return Failure{-E2BIG, "bad NID list " + quoted(input) + ": more than " + std::to_string(max) + " NIDs"};
    out.push_back(*nid);
  }
  if (!any) return bad("NID list", input, "empty");
  return out;
}

}  // namespace lnet
