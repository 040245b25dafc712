// A peer's discovery flags and state, as discovery and merging change them (under the
// discovery lock; the send path reads the state without it).
#pragma once

#include "net/peer_table.hpp"

namespace lnet::peer {

using net::DcState;
namespace ps = net::peer_state;

inline void set_flags(net::Peer* p, std::uint32_t bits) { p->dc.flags.fetch_or(bits, std::memory_order_relaxed); }
inline void clear_flags(net::Peer* p, std::uint32_t bits) { p->dc.flags.fetch_and(~bits, std::memory_order_relaxed); }
inline bool has(const net::Peer* p, std::uint32_t bits) {
  return (p->dc.flags.load(std::memory_order_relaxed) & bits) != 0;
}
inline void set_state(net::Peer* p, DcState s) { p->dc.state.store(s, std::memory_order_release); }

}  // namespace lnet::peer
