#include "ip_addr.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstring>

namespace lnet::sock {

IpAddr IpAddr::v4(std::uint32_t host_order) {
  IpAddr a;
  a.family_ = AF_INET;
  std::uint32_t be = htonl(host_order);
  std::memcpy(a.b_.data(), &be, 4);
  return a;
}

IpAddr IpAddr::of_nid(Nid nid) {
  if (nid.is_any()) return {};
  if (!nid.is_large()) return v4(nid.addr());
  std::uint8_t bytes[Nid::kMaxAddrBytes];
  if (nid.addr_bytes(bytes) != 16) return {};
  IpAddr a;
  a.family_ = AF_INET6;
  std::memcpy(a.b_.data(), bytes, 16);
  return a;
}

IpAddr IpAddr::of_sockaddr(const sockaddr_storage& sa, std::uint16_t* port) {
  IpAddr a;
  if (sa.ss_family == AF_INET) {
    const auto& s4 = reinterpret_cast<const sockaddr_in&>(sa);
    a.family_ = AF_INET;
    std::memcpy(a.b_.data(), &s4.sin_addr, 4);
    if (port) *port = ntohs(s4.sin_port);
  } else if (sa.ss_family == AF_INET6) {
    const auto& s6 = reinterpret_cast<const sockaddr_in6&>(sa);
    a.family_ = AF_INET6;
    std::memcpy(a.b_.data(), &s6.sin6_addr, 16);
    if (port) *port = ntohs(s6.sin6_port);
  }
  return a;
}

std::uint32_t IpAddr::v4_host() const {
  if (family_ != AF_INET) return 0;
  std::uint32_t be;
  std::memcpy(&be, b_.data(), 4);
  return ntohl(be);
}

socklen_t IpAddr::to_sockaddr(sockaddr_storage& sa, std::uint16_t port) const {
  sa = {};
  if (family_ == AF_INET6) {
    auto& s6 = reinterpret_cast<sockaddr_in6&>(sa);
    s6.sin6_family = AF_INET6;
    std::memcpy(&s6.sin6_addr, b_.data(), 16);
    s6.sin6_port = htons(port);
    return sizeof s6;
  }
  auto& s4 = reinterpret_cast<sockaddr_in&>(sa);
  s4.sin_family = AF_INET;
  std::memcpy(&s4.sin_addr, b_.data(), 4);
  s4.sin_port = htons(port);
  return sizeof s4;
}

Nid IpAddr::nid(NetId net) const {
  if (family_ == AF_INET6) {
    auto n = Nid::make(net, b_.data(), 16);
    return n ? *n : Nid::any();
  }
  return Nid::make(net, v4_host());
}

std::string IpAddr::to_string() const {
  if (family_ == 0) return "<no address>";
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(family_, b_.data(), buf, sizeof buf);
  return buf;
}

namespace {

// Calls f(name, flags, address) for every address of the node's interfaces until it
// returns true.
template <typename F>
bool each_address(F f) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* a = list; a && !found; a = a->ifa_next) {
    if (!a->ifa_addr || (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6)) continue;
    sockaddr_storage ss{};
    std::memcpy(&ss, a->ifa_addr, a->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    found = f(a->ifa_name, a->ifa_flags, IpAddr::of_sockaddr(ss, nullptr));
  }
  freeifaddrs(list);
  return found;
}

}  // namespace

std::string interface_of(const IpAddr& ip) {
  std::string name;
  each_address([&](const char* ifname, unsigned flags, const IpAddr& a) {
    if (!(a == ip)) return false;
    name = (flags & IFF_LOOPBACK) ? "lo" : ifname;
    return true;
  });
  return name;
}

bool interface_holds(const std::string& ifname, const IpAddr& ip) {
  return each_address([&](const char* name, unsigned, const IpAddr& a) { return ifname == name && a == ip; });
}

Result<IpAddr> interface_address(const std::string& ifname, bool large_nids) {
  IpAddr v4, v6;
  std::string chosen = ifname;
  each_address([&](const char* name, unsigned flags, const IpAddr& a) {
    if (chosen.empty()) {
      if ((flags & IFF_LOOPBACK) || !(flags & IFF_UP)) return false;
      chosen = name;  // the node's first interface that is up, as LNet takes it
    } else if (chosen != name) {
      return false;
    }
    if (!a.v6() && v4.any()) v4 = a;
    // A link-local address needs its interface to be reached: no NID is made of one.
    bool link_local = a.v6() && a.bytes()[0] == 0xfe && (a.bytes()[1] & 0xc0) == 0x80;
    if (a.v6() && !link_local && v6.any()) v6 = a;
    return false;
  });
  if (large_nids && !v6.any()) return v6;
  if (!v4.any()) return v4;
  if (large_nids && !v6.any()) return v6;
  std::string what = ifname.empty() ? std::string("no interface that is up") : "interface '" + ifname + "'";
  if (large_nids) return Failure{-ENODEV, what + " has no IPv6 (global) or IPv4 address"};
  return Failure{-ENODEV, what + " has no IPv4 address" +
                              (v6.any() ? std::string() : " (lnet configure --large takes its IPv6 one)")};
}

}  // namespace lnet::sock
