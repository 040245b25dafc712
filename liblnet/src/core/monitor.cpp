// The monitor thread: it expires the responses (ACKs, REPLYs) that did not come by their
// deadline (response tracking, lnet-facts §5.1) and pings what is on the recovery queues
// (recovery.cpp) every recovery_interval. It sleeps until the earliest deadline (at most
// a second, so a deadline made shorter meanwhile is seen), and without a deadline while
// nothing is awaited or recovering: the first request tracked or NI queued wakes it.
#include "core/core.hpp"

#include <algorithm>

#include "base/clock.hpp"

namespace lnet::core {

void Core::wake_monitor() {
  {
    MutexLock g(monitor_mutex_);
    monitor_idle_.store(false);
  }
  monitor_cv_.notify_one();
}

void Core::monitor_loop() {
  std::int64_t next_recovery = 0;
  MutexLock lk(monitor_mutex_);
  while (!stopping_.load()) {
    lk.unlock();
    std::int64_t now = steady_now_ns();
    portals_.expire_responses(now, *this, [this](Nid hop) { response_timed_out(hop); });
    bool busy = true;  // recovery: until it says otherwise
    if (now >= next_recovery) {
      busy = recover(now);
      if (routing()) {
        check_ni_liveness();  // a router looks at its NIs every recovery_interval
        busy = true;
      }
      next_recovery = now + recovery_interval_.load(std::memory_order_relaxed) * kNsPerSec;
    }
    std::int64_t next = portals_.next_response_deadline();
    if (std::int64_t held = release_delayed(now, false); held && (next == 0 || held < next)) next = held;
    if (next == 0 && !busy) {
      // Going idle: a request tracked (or an NI queued) from now on sees the flag and
      // wakes us; one before it was set is seen by the second look (both under the
      // locks they were made under).
      monitor_idle_.store(true);
      if (portals_.tracked_responses() > 0 || recovering() || release_delayed(0, false)) monitor_idle_.store(false);
    }
    if (busy) next = next == 0 ? next_recovery : std::min(next, next_recovery);
    lk.lock();
    if (stopping_.load()) break;
    if (monitor_idle_.load()) {
      monitor_cv_.wait(lk.native(), [&] { return stopping_.load() || !monitor_idle_.load(); });
      continue;
    }
    std::int64_t wait_ns = std::clamp<std::int64_t>(next - steady_now_ns(), 1'000'000, kNsPerSec);
    monitor_cv_.wait_for(lk.native(), std::chrono::nanoseconds(wait_ns), [&] { return stopping_.load(); });
  }
}

}  // namespace lnet::core
