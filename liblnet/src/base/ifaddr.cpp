#include <lnet/lnd/ifaddr.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cerrno>

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

}  // namespace lnet
