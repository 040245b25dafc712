// The BRW test's data pattern and the console's arithmetic: what fills and checks a
// bulk, which servers a client talks to (--distribute), and what `lst stat` prints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <selftest/wire.hpp>

namespace lnet::selftest {

// A bulk is cut into fragments at page boundaries, its first byte `page_offset` into a
// page. Simple: the magic in the first and (if the fragment is longer) the last 8 bytes
// of each fragment; Full: in every 8-byte word; None/Discard: nothing. The magic is a
// native u64; a checker of data written in the other byte order passes it swapped.
void brw_fill(std::span<std::uint8_t> buf, std::size_t page_offset, BrwCheck check, std::uint64_t magic);
bool brw_check(std::span<const std::uint8_t> buf, std::size_t page_offset, BrwCheck check, std::uint64_t magic);

// --distribute DIST:SPAN: client `idx` (0-based, in group order) talks to SPAN
// consecutive servers of the n in the target group, from ((idx / DIST) * SPAN) mod n,
// wrapping. Empty when span is 0 or larger than n.
std::vector<std::size_t> distribute_window(std::size_t idx, unsigned dist, unsigned span, std::size_t n);

// `lst stat`: per node, the change of its LNet counters between two STAT replies over
// the change of its running_ms; per group, the average over the nodes, min and max.
struct NodeRates {
  double recv_rate = 0, send_rate = 0;  // messages per second ([R], [W])
  double recv_bw = 0, send_bw = 0;      // bytes per second / unit
};
// nullopt when running_ms did not move forward (a restarted session, the same sample).
std::optional<NodeRates> node_rates(const FwCounters& fw0, const LnetCounters& ln0, const FwCounters& fw1,
                                    const LnetCounters& ln1, double unit);
struct Column {
  double avg = 0, min = 0, max = 0;
};
struct GroupRates {
  Column recv_rate, send_rate, recv_bw, send_bw;
  std::size_t nodes = 0;
};
GroupRates group_rates(std::span<const NodeRates> nodes);
inline constexpr double kMiB = 1048576.0;  // --mbs: 1e6
inline constexpr double kMB = 1000000.0;

}  // namespace lnet::selftest
