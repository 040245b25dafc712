// The node's IPv4 addresses, for drivers whose NIDs are made of one (the socket LND's
// <ip>@tcp, the UP LND's <primary IPv4>@mpi).
#pragma once

#include <cstdint>
#include <string>

#include <lnet/result.hpp>

namespace lnet {

// The IPv4 address of interface `ifname` (host byte order), or with an empty name the
// node's primary address: that of the first interface that is up and not loopback.
// Fails with -ENODEV naming the interface when it has none.
Result<std::uint32_t> interface_ipv4(const std::string& ifname);

}  // namespace lnet
