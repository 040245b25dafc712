// Which driver serves which network type.
#pragma once

#include <memory>

#include <lnet/lnd.hpp>

namespace lnet {

// A new driver for `net_type`, or nullptr when none is registered.
std::unique_ptr<Lnd> make_lnd(std::uint32_t net_type);

}  // namespace lnet
