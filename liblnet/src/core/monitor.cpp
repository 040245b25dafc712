// The monitor thread: it expires the responses (ACKs, REPLYs) that did not come by their
// deadline (response tracking, lnet-facts §5.1). It sleeps until the earliest deadline
// (at most a second, so a deadline made shorter meanwhile is seen), and without a
// deadline while nothing is awaited: the first request that is tracked wakes it.
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
  std::vector<Nid> next_hops;
  MutexLock lk(monitor_mutex_);
  while (!stopping_.load()) {
    lk.unlock();
    next_hops.clear();
    portals_.expire_responses(steady_now_ns(), false, next_hops, *this);
    for (Nid hop : next_hops) response_timed_out(hop);
    std::int64_t next = portals_.next_response_deadline();
    if (next == 0) {
      // Going idle: a request tracked from now on sees the flag and wakes us; one
      // tracked before it was set is seen by the second look (both under the portals'
      // locks).
      monitor_idle_.store(true);
      if (portals_.tracked_responses() > 0) monitor_idle_.store(false);
    }
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
