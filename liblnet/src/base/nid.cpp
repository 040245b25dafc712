// Parsing and printing of network ids, NIDs and process ids in the real LNet text forms.
#include <lnet/nid.hpp>

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

#include "base/text.hpp"

namespace lnet {

namespace {

struct LndName {
  std::uint32_t type;
  const char* name;
  bool ip;
};

constexpr LndName kLndNames[] = {
    {kSockLnd, "tcp", true},    {kO2ibLnd, "o2ib", true},  {kLoLnd, "lo", false},   {kGniLnd, "gni", false},
    {kGipLnd, "gip", true},     {kPtl4Lnd, "ptlf", false}, {kKfiLnd, "kfi", false}, {kEfaLnd, "efa", true},
    {kBxi3Lnd, "bxi3f", false}, {kMpiLnd, "mpi", false},
};

const LndName* find_type(std::uint32_t type) {
  for (const auto& l : kLndNames)
    if (l.type == type) return &l;
  return nullptr;
}

// Splits "tcp12" into the longest matching name and the digits after it.
const LndName* find_name_prefix(std::string_view text, std::string_view& rest) {
  const LndName* best = nullptr;
  for (const auto& l : kLndNames) {
    std::string_view name(l.name);
    if (text.substr(0, name.size()) == name && (!best || name.size() > std::strlen(best->name))) {
      best = &l;
    }
  }
  if (best) rest = text.substr(std::strlen(best->name));
  return best;
}

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

}  // namespace

const char* lnd_type_name(std::uint32_t type) {
  const LndName* l = find_type(type);
  return l ? l->name : nullptr;
}

bool mpi_net_type(std::uint32_t type) {
  switch (type) {
    case kMpiLnd:
    case kGniLnd:
    case kGipLnd:
    case kPtl4Lnd:
    case kKfiLnd:
    case kEfaLnd:
    case kBxi3Lnd: return true;
    default: return false;
  }
}

bool lnd_type_uses_ip(std::uint32_t type) {
  const LndName* l = find_type(type);
  return l && l->ip;
}

namespace text {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

std::string_view next_item(std::string_view input, std::size_t& i, std::string_view seps) {
  while (i < input.size() && seps.find(input[i]) != std::string_view::npos) ++i;
  std::size_t start = i;
  int depth = 0;
  while (i < input.size() && (depth > 0 || seps.find(input[i]) == std::string_view::npos)) {
    if (input[i] == '[' || input[i] == '(') ++depth;
    if (input[i] == ']' || input[i] == ')') --depth;
    ++i;
  }
  return input.substr(start, i - start);
}

std::string bad_interface_name(std::string_view name) {
  if (name.empty()) return "an empty interface name";
  // The name as it can be printed in an error: bytes that are not printable as \xNN.
  auto shown = [&] {
    std::string out;
    for (char c : name.substr(0, 40)) {
      if (c >= ' ' && c <= '~') {
        out += c;
      } else {
        char hex[5];
        std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
        out += hex;
      }
    }
    return out + (name.size() > 40 ? "..." : "");
  };
  if (name.size() > 15) return "interface name '" + shown() + "' is longer than 15 characters";
  for (char c : name)
    if (c <= ' ' || c > '~' || c == '/')
      return "interface name '" + shown() + "' has a character that is not allowed (space, '/', control or non-ASCII)";
  return {};
}

bool parse_u32(std::string_view s, std::uint32_t max, std::uint32_t& out) {
  if (s.empty() || s.size() > 10) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v > max) return false;
  out = static_cast<std::uint32_t>(v);
  return true;
}

bool parse_numeric_address(std::string_view s, std::uint32_t& out) {
  if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return parse_u32(s, 0xFFFFFFFFu, out);
  s.remove_prefix(2);
  if (s.size() > 8) return false;
  std::uint32_t v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return false;
    v = (v << 4) | static_cast<std::uint32_t>(d);
  }
  out = v;
  return true;
}

bool parse_ipv4(std::string_view s, std::uint32_t& out) {
  std::uint32_t addr = 0;
  for (int i = 0; i < 4; ++i) {
    std::size_t dot = s.find('.');
    std::string_view octet = i < 3 ? s.substr(0, dot) : s;
    if ((i < 3 && dot == std::string_view::npos)) return false;
    std::uint32_t v = 0;
    if (!parse_u32(octet, 255, v)) return false;
    addr = (addr << 8) | v;
    if (i < 3) s.remove_prefix(dot + 1);
  }
  out = addr;
  return true;
}

std::string ipv4_string(std::uint32_t addr) {
  return std::to_string(addr >> 24) + "." + std::to_string((addr >> 16) & 0xFF) + "." +
         std::to_string((addr >> 8) & 0xFF) + "." + std::to_string(addr & 0xFF);
}

Result<NetLndType> parse_net_name(std::string_view text, std::string_view& rest) {
  const LndName* l = find_name_prefix(text, rest);
  if (!l) return Failure{-EINVAL, "unknown network type " + quoted(text)};
  return NetLndType{l->type};
}

}  // namespace text

std::string NetId::to_string() const {
  if (is_any()) return "<?>";
  const char* name = lnd_type_name(type());
  if (!name) return "<" + std::to_string(type()) + ":" + std::to_string(num()) + ">";
  if (num() == 0) return name;
  return name + std::to_string(num());
}

Result<NetId> NetId::parse(std::string_view input) {
  std::string_view s = text::trim(input);
  if (s.empty()) return Failure{-EINVAL, "empty network name"};
  if (s == "<?>") return NetId::any();
  std::string_view rest;
  auto type = text::parse_net_name(s, rest);
  if (!type) return Failure{-EINVAL, "bad network " + quoted(input) + ": " + type.message()};
  std::uint32_t num = 0;
  if (!rest.empty()) {
    if (type->type == kLoLnd) return Failure{-EINVAL, "bad network " + quoted(input) + ": lo takes no network number"};
    if (!text::parse_u32(rest, 0xFFFF, num)) {
      return Failure{-EINVAL, "bad network " + quoted(input) + ": network number " + quoted(rest) +
                                  " is not a number in 0..65535"};
    }
  }
  return NetId::make(type->type, num);
}

std::string Nid::to_string() const {
  if (is_any()) return "<?>";
  NetId n = net();
  if (is_large()) {
    std::uint8_t a[kMaxAddrBytes];
    char buf[INET6_ADDRSTRLEN];
    if (addr_bytes(a) != kMaxAddrBytes || !inet_ntop(AF_INET6, a, buf, sizeof buf))
      return "<bad large NID>@" + n.to_string();
    return std::string(buf) + "@" + n.to_string();
  }
  if (!lnd_type_name(n.type())) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%x", addr());
    return std::string(buf) + "@" + n.to_string();
  }
  std::string a =
      lnd_type_uses_ip(n.type()) || mpi_ip_form(n.type(), addr()) ? text::ipv4_string(addr()) : std::to_string(addr());
  return a + "@" + n.to_string();
}

Result<Nid> Nid::parse(std::string_view input) {
  std::string_view s = text::trim(input);
  if (s.empty()) return Failure{-EINVAL, "empty NID"};
  if (s == "<?>") return Nid::any();
  std::size_t at = s.find('@');
  std::string_view addr_text = s.substr(0, at);
  NetId net = NetId::make(kSockLnd, 0);
  if (at != std::string_view::npos) {
    auto parsed = NetId::parse(s.substr(at + 1));
    if (!parsed) return Failure{-EINVAL, "bad NID " + quoted(input) + ": " + parsed.message()};
    net = *parsed;
    if (net.is_any()) return Failure{-EINVAL, "bad NID " + quoted(input) + ": network '<?>' is not allowed"};
  }
  if (addr_text.empty()) return Failure{-EINVAL, "bad NID " + quoted(input) + ": missing address before '@'"};
  if (addr_text.find(':') != std::string_view::npos) {
    // An IPv6 address: a large NID, on the networks that take IP addresses.
    if (!lnd_type_uses_ip(net.type()))
      return Failure{-EINVAL, "bad NID " + quoted(input) + ": " + net.to_string() + " takes no IPv6 address"};
    std::uint8_t a[kMaxAddrBytes];
    if (addr_text.size() >= INET6_ADDRSTRLEN || inet_pton(AF_INET6, std::string(addr_text).c_str(), a) != 1)
      return Failure{-EINVAL,
                     "bad NID " + quoted(input) + ": address " + quoted(addr_text) + " is not an IPv6 address"};
    auto large = Nid::make(net, a, kMaxAddrBytes);
    if (!large) return Failure{large.code(), "bad NID " + quoted(input) + ": " + large.message()};
    return *large;
  }
  std::uint32_t addr = 0;
  if (lnd_type_uses_ip(net.type()) || (net.type() == kMpiLnd && addr_text.find('.') != std::string_view::npos)) {
    if (text::parse_ipv4(addr_text, addr) && net.type() == kMpiLnd && !mpi_ip_form(kMpiLnd, addr)) {
      return Failure{-EINVAL, "bad NID " + quoted(input) + ": address " + quoted(addr_text) +
                                  " is below 1.0.0.0 (an application rank is written as a number)"};
    }
    if (!text::parse_ipv4(addr_text, addr)) {
      return Failure{-EINVAL,
                     "bad NID " + quoted(input) + ": address " + quoted(addr_text) + " is not a dotted IPv4 address"};
    }
  } else if (net.type() == kLoLnd) {
    addr = 0;  // as LNet reads it: whatever is written before @lo, the NID is 0@lo
  } else if (!text::parse_numeric_address(addr_text, addr)) {
    return Failure{-EINVAL, "bad NID " + quoted(input) + ": address " + quoted(addr_text) +
                                " is not a number (decimal, or hexadecimal after 0x)"};
  }
  return Nid::make(net, addr);
}

std::string ProcessId::to_string() const {
  if (pid == kPidAny) return "LNET_PID_ANY-" + nid.to_string();
  if (pid & kPidUserFlag) return "U" + std::to_string(pid & ~kPidUserFlag) + "-" + nid.to_string();
  return std::to_string(pid) + "-" + nid.to_string();
}

Result<ProcessId> ProcessId::parse(std::string_view input) {
  std::string_view s = text::trim(input);
  std::size_t dash = s.find('-');
  ProcessId id;
  std::string_view nid_text = s;
  if (dash != std::string_view::npos) {
    std::string_view pid_text = s.substr(0, dash);
    nid_text = s.substr(dash + 1);
    if (pid_text == "LNET_PID_ANY") {
      id.pid = kPidAny;
    } else {
      bool user = !pid_text.empty() && pid_text.front() == 'U';
      if (user) pid_text.remove_prefix(1);
      std::uint32_t pid = 0;
      if (!text::parse_u32(pid_text, user ? ~kPidUserFlag : 0xFFFFFFFFu, pid)) {
        return Failure{-EINVAL, "bad process id " + quoted(input) + ": pid " + quoted(s.substr(0, dash)) +
                                    " is not a number" + (user ? " below 2^31" : "")};
      }
      id.pid = user ? (pid | kPidUserFlag) : pid;
    }
  }
  auto nid = Nid::parse(nid_text);
  if (!nid) return Failure{-EINVAL, "bad process id " + quoted(input) + ": " + nid.message()};
  id.nid = *nid;
  return id;
}

}  // namespace lnet
