// An IP address of the socket LND: IPv4 (a classic NID's address) or IPv6 (a large
// NID's), with what the driver does with one: the socket address to bind or connect,
// the NID it makes on a net, its text, the interface that holds it.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>

#include <lnet/nid.hpp>
#include <lnet/result.hpp>

namespace lnet::sock {

class IpAddr {
 public:
  IpAddr() = default;
  static IpAddr v4(std::uint32_t host_order);
  // A NID's address: IPv4 for a classic NID, IPv6 for a 16-byte large one; unset (any())
  // for any other.
  static IpAddr of_nid(Nid nid);
  // The address and port of a socket address (AF_INET or AF_INET6; unset otherwise).
  static IpAddr of_sockaddr(const sockaddr_storage& sa, std::uint16_t* port);

  bool v6() const { return family_ == AF_INET6; }
  int family() const { return family_; }
  bool any() const { return family_ == 0; }
  std::uint32_t v4_host() const;  // the IPv4 address in host order (0 for IPv6)
  // The socket address of this address and `port`; returns its length.
  socklen_t to_sockaddr(sockaddr_storage& sa, std::uint16_t port) const;
  // The NID of this address on `net` (large for IPv6).
  Nid nid(NetId net) const;
  std::string to_string() const;  // "10.0.0.1", "2001:db8::1"
  const std::array<std::uint8_t, 16>& bytes() const { return b_; }
  friend bool operator==(const IpAddr&, const IpAddr&) = default;

 private:
  int family_ = 0;                    // AF_INET, AF_INET6, 0: unset
  std::array<std::uint8_t, 16> b_{};  // network order; IPv4 in the first four bytes
};

// The name of the interface that holds `ip` ("lo" for a loopback one; empty: none).
std::string interface_of(const IpAddr& ip);
// Whether interface `ifname` holds `ip`.
bool interface_holds(const std::string& ifname, const IpAddr& ip);
// The address an NI on interface `ifname` takes (empty name: the first interface that is
// up and not loopback): its first IPv4 address, or with large NIDs (lnet configure
// --large) its first IPv6 one of global or host scope before that, as the kernel
// enumerates them. -ENODEV naming the interface and what it lacks.
Result<IpAddr> interface_address(const std::string& ifname, bool large_nids);

}  // namespace lnet::sock
