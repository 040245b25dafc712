// Which driver serves which network type (drivers register with register_lnd()).
#pragma once

#include <memory>

#include <lnet/lnd/lnd.hpp>

namespace lnet {

// A new driver for `net_type`, or nullptr when none is registered.
std::unique_ptr<Lnd> make_lnd(std::uint32_t net_type);

}  // namespace lnet
