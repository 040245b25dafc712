#include "ip_addr.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include <lnet/lnd/ifaddr.hpp>

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

// The address of one of host_interfaces()'s entries.
IpAddr address_of(const HostInterface& h) {
  if (!h.is_v6) return IpAddr::v4(h.ipv4);
  sockaddr_storage ss{};
  auto& s6 = reinterpret_cast<sockaddr_in6&>(ss);
  s6.sin6_family = AF_INET6;
  std::memcpy(&s6.sin6_addr, h.ipv6.data(), 16);
  return IpAddr::of_sockaddr(ss, nullptr);
}

}  // namespace

std::string interface_of(const IpAddr& ip) {
  auto host = host_interfaces();
  if (host)
    for (const HostInterface& h : *host)
      if (address_of(h) == ip) return h.loopback ? std::string("lo") : h.name;
  return {};
}

bool interface_holds(const std::string& ifname, const IpAddr& ip) {
  auto host = host_interfaces();
  return host && std::any_of(host->begin(), host->end(),
                             [&](const HostInterface& h) { return h.name == ifname && address_of(h) == ip; });
}

Result<IpAddr> interface_address(const std::string& ifname, bool large_nids) {
  auto host = host_interfaces();  // IPv4 addresses first, link-local IPv6 ones left out
  if (!host) return host.failure();
  IpAddr v4, v6;
  std::string chosen = ifname;
  for (const HostInterface& h : *host) {
    if (chosen.empty() && h.up && !h.loopback) chosen = h.name;  // the first interface up, as LNet takes it
    if (h.name != chosen) continue;
    IpAddr a = address_of(h);
    IpAddr& first = a.v6() ? v6 : v4;  // each family's first address
    if (first.any()) first = a;
  }
  if (large_nids && !v6.any()) return v6;
  if (!v4.any()) return v4;
  std::string what = ifname.empty() ? std::string("no interface that is up") : "interface '" + ifname + "'";
  if (large_nids) return Failure{-ENODEV, what + " has no IPv6 (global) or IPv4 address"};
  return Failure{-ENODEV, what + " has no IPv4 address" +
                              (v6.any() ? std::string() : " (lnet configure --large takes its IPv6 one)")};
}

}  // namespace lnet::sock
