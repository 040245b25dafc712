#include <lnet/lnd/ifaddr.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace lnet {

Result<std::uint32_t> interface_ipv4(const std::string& ifname) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Failure{-errno, "getifaddrs: " + errno_string(errno)};
  std::uint32_t ip = 0;
  bool found = false;
  for (ifaddrs* a = list; a && !found; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    if (ifname.empty()) {
      if ((a->ifa_flags & IFF_LOOPBACK) || !(a->ifa_flags & IFF_UP)) continue;
    } else if (ifname != a->ifa_name) {
      continue;
    }
    ip = ntohl(reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr);
    found = true;
  }
  freeifaddrs(list);
  if (!found) {
    return Failure{-ENODEV, ifname.empty() ? std::string("no interface that is up with an IPv4 address")
                                           : "interface '" + ifname + "' has no IPv4 address"};
  }
  return ip;
}

Result<std::vector<HostInterface>> host_interfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Failure{-errno, "getifaddrs: " + errno_string(errno)};
  std::vector<HostInterface> out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    HostInterface h;
    h.name = a->ifa_name;
    h.ipv4 = ntohl(reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr);
    h.up = (a->ifa_flags & IFF_UP) != 0;
    h.loopback = (a->ifa_flags & IFF_LOOPBACK) != 0;
    out.push_back(h);
  }
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET6) continue;
    const auto* s6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
    if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) continue;
    HostInterface h;
    h.name = a->ifa_name;
    h.is_v6 = true;
    std::memcpy(h.ipv6.data(), &s6->sin6_addr, 16);
    h.up = (a->ifa_flags & IFF_UP) != 0;
    h.loopback = (a->ifa_flags & IFF_LOOPBACK) != 0;
    out.push_back(h);
  }
  freeifaddrs(list);
  return out;
}

}  // namespace lnet
