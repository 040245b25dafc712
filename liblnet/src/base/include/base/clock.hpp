// The one clock of deadlines (message deadlines, response tracking, recovery pings):
// the steady clock in nanoseconds, as a plain integer that fits an atomic or a header.
#pragma once

#include <chrono>
#include <cstdint>

namespace lnet {

inline std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline constexpr std::int64_t kNsPerSec = 1'000'000'000;

}  // namespace lnet
