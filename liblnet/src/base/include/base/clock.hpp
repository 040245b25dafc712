// The one clock of deadlines (message deadlines, response tracking, recovery pings):
// the steady clock in nanoseconds, as a plain integer that fits an atomic or a header.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace lnet {

inline std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline constexpr std::int64_t kNsPerSec = 1'000'000'000;

// The same clock read at the kernel's tick (a few ms behind at most, and several times
// cheaper): for the deadline every request gets, which counts in seconds.
inline std::int64_t coarse_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::int64_t{ts.tv_sec} * kNsPerSec + ts.tv_nsec;
}

}  // namespace lnet
