// The monitor thread: it expires the responses (ACKs, REPLYs) that did not come by their
// deadline (response tracking, lnet-facts §5.1; through the host, which owns them) and
// pings what is on the recovery queues (recovery.cpp) every recovery_interval. It sleeps
// until the earliest deadline (at most a second, so a deadline made shorter meanwhile is
// seen), and without a deadline while nothing is awaited or recovering: the first request
// tracked or NI queued wakes it.
#include <algorithm>

#include "base/clock.hpp"
#include "health/health.hpp"

namespace lnet::health {

void Health::start() {
  monitor_ = std::thread([this] { loop(); });
}

void Health::stop() {
  {
    MutexLock g(monitor_mutex_);
    monitor_cv_.notify_all();
  }
  if (monitor_.joinable()) monitor_.join();
}

void Health::wake_now() {
  {
    MutexLock g(monitor_mutex_);
    idle_.store(false);
  }
  monitor_cv_.notify_one();
}

void Health::loop() {
  std::int64_t next_recovery = 0;
  MutexLock lk(monitor_mutex_);
  while (!st_.stopping.load()) {
    lk.unlock();
    std::int64_t now = steady_now_ns();
    std::int64_t next = host_.expire(now);
    bool busy = true;  // recovery: until it says otherwise
    if (now >= next_recovery || look_now_.exchange(false)) {
      busy = recover(now);
      if (host_.periodic()) busy = true;
      next_recovery = now + st_.tun.recovery_interval.load(std::memory_order_relaxed) * kNsPerSec;
    }
    if (next == 0 && !busy) {
      // Going idle: a request tracked (or an NI queued) from now on sees the flag and
      // wakes us; one before it was set is seen by the second look (both under the
      // locks they were made under).
      idle_.store(true);
      if (host_.awaiting() || recovering()) idle_.store(false);
    }
    if (busy) next = next == 0 ? next_recovery : std::min(next, next_recovery);
    lk.lock();
    if (st_.stopping.load()) break;
    if (idle_.load()) {
      monitor_cv_.wait(lk.native(), [&] { return st_.stopping.load() || !idle_.load(); });
      continue;
    }
    std::int64_t wait_ns = std::clamp<std::int64_t>(next - steady_now_ns(), 1'000'000, kNsPerSec);
    monitor_cv_.wait_for(lk.native(), std::chrono::nanoseconds(wait_ns), [&] { return st_.stopping.load(); });
  }
}

}  // namespace lnet::health
