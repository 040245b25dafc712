// The loopback LND (0@lo): a send is parsed at once by the same instance and the payload
// copied straight from the sender's fragments into the receiver's.
#pragma once

#include <memory>

#include <lnet/lnd.hpp>

namespace lnet {

std::unique_ptr<Lnd> make_lo_lnd();

}  // namespace lnet
