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

// How a thread that drives a driver waits between rounds of polling: the MPI LND's
// progress thread, lnet-proxy's bridge thread (which drives the MPI LNDs of its
// applications) and the socket LND's I/O threads while a message is half-way through a
// socket. It depends on no timer: while rounds find work, or transfers of ours are in
// flight, the thread keeps polling (a transfer's completion wakes nobody, and a nap is
// as long as the host's timers make it); after a few idle microseconds it yields the CPU
// each round (to a thread that shares its core, whose send it may be waiting for); only
// once idle, or when transfers in flight made no progress for a second, it naps, longer
// and longer up to idle_us (a thread that can sleep until woken, in epoll_wait say,
// sleeps instead).
class IdlePolicy {
 public:
  explicit IdlePolicy(int idle_us) : idle_us_(idle_us) {}
  // After a round that found work (`worked`) or not. `in_flight()` (transfers of ours
  // that only polling moves on, MPI requests say) is asked only once the thread has
  // polled a while. Returns 0: poll again now; otherwise nap this many microseconds (or
  // until woken) first.
  template <class InFlight>
  int after_round(bool worked, InFlight in_flight) {
    using Clock = std::chrono::steady_clock;
    if (worked) {
      restart();
      return 0;
    }
    if (++idle_ == 1) quiet_since_ = Clock::now();
    // Measured in time, not rounds: a round of MPI's progress takes 0.1 us on shared
    // memory and a system call or two on tcp; a round of epoll_wait a system call.
    if (!yielding_ && idle_ > 1) yielding_ = Clock::now() - quiet_since_ >= kSpinBeforeYield;
    bool spin = idle_ < kSpinRounds;
    if (!spin && in_flight()) spin = idle_ % kClockEvery != 0 || Clock::now() - quiet_since_ < kInFlightPatience;
    if (spin) {
      if (yielding_) yield();
      return 0;
    }
    return std::min(idle_us_, 5 << std::min(naps_++, 10));
  }
  // As after a round that found work: poll at once, and a while (the thread was woken).
  void restart() {
    idle_ = naps_ = 0;
    yielding_ = false;
  }

 private:
  static constexpr std::chrono::microseconds kSpinBeforeYield{5};  // idle polling before it yields each round
  static constexpr int kSpinRounds = 200;                          // idle rounds before it may nap
  static constexpr auto kInFlightPatience = std::chrono::seconds(1);
  static constexpr int kClockEvery = 64;  // idle rounds between reads of the clock
  static void yield();
  int idle_us_;
  int idle_ = 0;           // rounds since the last one that did something
  int naps_ = 0;           // naps since then
  bool yielding_ = false;  // yields each idle round
  std::chrono::steady_clock::time_point quiet_since_;
};

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
