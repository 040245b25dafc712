// Which of a peer's connections a message goes on: the placement rule of the socket LND,
// kept apart from the connections themselves so that it is tested on its own.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sock_wire.hpp"

namespace lnet::sock {

// What the rule looks at in a connection.
struct ConnLoad {
  ConnType type = ConnType::None;
  bool usable = false;          // established and not closed
  std::uint64_t queued = 0;     // bytes taken and not yet written to the socket
  std::uint64_t last_post = 0;  // when it was last chosen (a per-peer sequence number)
};

// The index in [0, n) of the connection for a message, or n when none can take it. The
// wanted type is CONTROL for small messages, BULK_OUT for those of min_bulk bytes or
// more, BULK_IN for a NOOP carrying a zero-copy ACK. Among the connections of that type
// the least queued wins and, on a tie, the one chosen longest ago: ksocklnd's rule
// (bytes queued, then round robin), so that conns_per_peer connections share a stream
// and an idle one is never left out. Without one of that type: an ANY connection, then
// any other but BULK_IN (which only carries ACKs) for a message.
template <class LoadAt>
std::size_t choose_conn(std::size_t n, ConnType want, bool zc_ack, LoadAt load_at) {
  std::size_t best = n;
  int best_rank = 3;
  ConnLoad b;
  for (std::size_t i = 0; i < n; ++i) {
    ConnLoad c = load_at(i);
    if (!c.usable) continue;
    int rank = c.type == want ? 0 : c.type == ConnType::Any ? 1 : c.type != ConnType::BulkIn || zc_ack ? 2 : 3;
    if (rank == 3) continue;
    bool better = best == n || rank < best_rank ||
                  (rank == best_rank && (c.queued < b.queued || (c.queued == b.queued && c.last_post < b.last_post)));
    if (!better) continue;
    best = i;
    best_rank = rank;
    b = c;
  }
  return best;
}

}  // namespace lnet::sock
