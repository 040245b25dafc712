// Progress of drivers that have no thread of their own. The MPI LND in a runtime without
// MPI_THREAD_MULTIPLE (or with its progress thread turned off) is driven by the
// application: it asks its host to poll it (NetInterface::poll in the driver SPI), and
// every blocking wait of liblnet (EventQueue::poll and poll_many, LNetEQPoll,
// Instance::ping) then polls the drivers instead of sleeping. Instance::progress() (and
// EventQueue::poll with a zero timeout) polls them once. With no such driver, waits
// block on condition variables. An application that waits on its own condition
// variable for LNet's events waits with wait_with_progress().
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include <lnet/mutex.hpp>

namespace lnet {

// Polls every driver that needs it once. Not re-entrant: a call from inside a progress
// function (an event handler that polls) returns false at once.
bool drive_progress();
// True when some driver needs to be driven.
bool progress_is_polled();

// Waits on `cv` (with `lk` held) until pred() or `deadline`. When a driver needs driving,
// runs drive_progress() between checks instead of sleeping: tightly while there is
// work, then backing off to sleeps of at most 1 ms (woken early by cv), so an idle wait
// costs little CPU. Returns pred(). pred runs with `lk` held, which the thread-safety
// analysis cannot see through a std::unique_lock: annotate the predicate instead
// (a lambda with LNET_REQUIRES(the mutex)).
template <class Clock, class Duration, class Pred>
bool wait_with_progress(std::unique_lock<std::mutex>& lk, std::condition_variable& cv,
                        std::chrono::time_point<Clock, Duration> deadline, Pred pred) LNET_NO_THREAD_SAFETY_ANALYSIS {
  using namespace std::chrono;
  int idle = 0;
  while (!pred()) {
    if (!progress_is_polled()) {
      if (deadline == time_point<Clock, Duration>::max()) {
        cv.wait(lk, pred);
        return true;
      }
      return cv.wait_until(lk, deadline, pred);
    }
    if (Clock::now() >= deadline) return pred();
    lk.unlock();
    bool worked = drive_progress();
    lk.lock();
    if (worked) {
      idle = 0;
      continue;
    }
    if (++idle < 64) continue;  // a few tens of microseconds of polling before sleeping
    auto nap = microseconds(std::min(1000, 10 << std::min(idle - 64, 7)));
    auto until = std::min<time_point<Clock, Duration>>(deadline, Clock::now() + nap);
    cv.wait_until(lk, until);
  }
  return true;
}

}  // namespace lnet
