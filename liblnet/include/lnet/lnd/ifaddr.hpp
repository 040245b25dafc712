// The node's IPv4 addresses, for drivers whose NIDs are made of one (the socket LND's
// <ip>@tcp, the UP LND's <primary IPv4>@mpi).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <lnet/result.hpp>

namespace lnet {

// The IPv4 address of interface `ifname` (host byte order), or with an empty name the
// node's primary address: that of the first interface that is up and not loopback.
// Fails with -ENODEV naming the interface when it has none.
Result<std::uint32_t> interface_ipv4(const std::string& ifname);

// An address of one of the node's interfaces: IPv4 (host byte order), or IPv6 (ipv4 0).
struct HostInterface {
  std::string name;
  std::uint32_t ipv4 = 0;
  bool up = false;
  bool loopback = false;
  bool is_v6 = false;
  std::array<std::uint8_t, 16> ipv6{};  // network order, when is_v6
};

// Every IPv4 address of the node's interfaces, then every IPv6 one but the link-local
// ones (which name no host off their link), each in the kernel's order.
Result<std::vector<HostInterface>> host_interfaces();

}  // namespace lnet
