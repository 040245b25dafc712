// Test helper: an MD event handler that records events, thread-safe, with waiting.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <lnet/lnet.hpp>

namespace lnet::test {

// The recorded events live as long as the longest of the log and its handlers, so an
// event that comes after a test returned early (a failed ASSERT) lands nowhere harmful.
// Tests still wait for each MD's last event (wait_unlinked) before they look at what
// is left over: that is what makes their checks true, not the shared state.
class EventLog {
 public:
  EventHandler handler() {
    return [st = st_](const Event& e) {
      std::lock_guard g(st->m);
      st->events.push_back(e);
      st->cv.notify_all();
    };
  }
  std::vector<Event> events() const {
    std::lock_guard g(st_->m);
    return st_->events;
  }
  std::size_t count(EventType t) const {
    std::lock_guard g(st_->m);
    return count_locked(t);
  }
  std::vector<Event> all(EventType t) const {
    std::lock_guard g(st_->m);
    std::vector<Event> v;
    for (const Event& e : st_->events)
      if (e.type == t) v.push_back(e);
    return v;
  }
  // Waits (up to `timeout`) for `n` events of type t; returns how many there are. Every
  // wait here drives the progress of drivers that need it (wait_with_progress), so the
  // log serves applications that drive progress themselves too.
  std::size_t wait(EventType t, std::size_t n, std::chrono::milliseconds timeout = kPatience) {
    std::unique_lock lk(st_->m);
    wait_with_progress(lk, st_->cv, std::chrono::steady_clock::now() + timeout, [&] { return count_locked(t) >= n; });
    return count_locked(t);
  }
  // The first event of type t, waiting for it.
  std::optional<Event> find(EventType t, std::chrono::milliseconds timeout = kPatience) {
    if (wait(t, 1, timeout) == 0) return std::nullopt;
    std::lock_guard g(st_->m);
    for (const auto& e : st_->events)
      if (e.type == t) return e;
    return std::nullopt;
  }
  // Waits for the last event of `md` (the one with `unlinked`): after it LNet delivers
  // nothing more for that MD. Drivers with threads of their own may deliver an MD's
  // events in another order than they happened (a GET's SEND after its REPLY): having
  // seen one event says nothing about the others.
  bool wait_unlinked(MdHandle md, std::chrono::milliseconds timeout = kPatience) {
    std::unique_lock lk(st_->m);
    auto done = [&] {
      for (const auto& e : st_->events)
        if (e.md_handle == md && e.unlinked) return true;
      return false;
    };
    return wait_with_progress(lk, st_->cv, std::chrono::steady_clock::now() + timeout, done);
  }
  void clear() {
    std::lock_guard g(st_->m);
    st_->events.clear();
  }

 private:
  struct State {
    std::mutex m;
    std::condition_variable cv;
    std::vector<Event> events;
  };
  // Long: a wait ends as soon as its event comes, and only a failing test waits it out
  // (sanitizer builds on a loaded machine are slow).
  static constexpr std::chrono::milliseconds kPatience{30000};

  std::size_t count_locked(EventType t) const {
    std::size_t n = 0;
    for (const Event& e : st_->events) n += e.type == t;
    return n;
  }

  std::shared_ptr<State> st_ = std::make_shared<State>();
};

// Messages still allocated once the instance settles. Events are delivered before a
// message goes back to its pool, so right after the last event a message may still be
// on its way back: wait (up to 5 s) for the count to reach zero.
inline std::uint64_t settled_msgs_alloc(Instance& lnet) {
  for (int i = 0; i < 500 && lnet.counters().msgs_alloc != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return lnet.counters().msgs_alloc;
}

// Waits for `pred` to hold (what the test asserts; the deadline only stops a hang).
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(30000)) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace lnet::test
