// Where a local NI or a peer NI stands in health recovery (lnet-facts §5.1): on the
// recovery queue or not, a recovery ping out or not, how many pings so far (the back-off)
// and when the next one is due. The core's recovery lock guards it.
#pragma once

#include <cstdint>

namespace lnet {

// The health of a fully healthy NI or peer NI (LNET_MAX_HEALTH_VALUE).
inline constexpr int kMaxHealth = 1000;

struct RecoveryState {
  bool queued = false;
  bool pending = false;        // a recovery ping is out
  unsigned ping_count = 0;     // pings since the last success
  std::int64_t next_ping = 0;  // steady clock, ns
  std::int64_t since = 0;      // when recovery started (recovery_limit), ns
};

}  // namespace lnet
