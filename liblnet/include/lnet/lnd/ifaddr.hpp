// The node's IPv4 addresses, for drivers whose NIDs are made of one (the socket LND's
// <ip>@tcp, the UP LND's <primary IPv4>@mpi).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <lnet/result.hpp>

namespace lnet {

// The IPv4 address of interface `ifname` (host byte order), or with an empty name the
// node's primary address: that of the first interface that is up and not loopback.
// Fails with -ENODEV naming the interface when it has none.
Result<std::uint32_t> interface_ipv4(const std::string& ifname);

// An interface of the node with an IPv4 address (host byte order).
struct HostInterface {
  std::string name;
  std::uint32_t ipv4 = 0;
  bool up = false;
  bool loopback = false;
};

// Every IPv4 address of the node's interfaces, in the kernel's order.
Result<std::vector<HostInterface>> host_interfaces();

}  // namespace lnet
