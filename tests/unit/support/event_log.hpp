// Test helper: an MD event handler that records events, thread-safe, with waiting.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <lnet/lnet.hpp>

namespace lnet::test {

class EventLog {
 public:
  EventHandler handler() {
    return [this](const Event& e) {
      std::lock_guard g(m_);
      events_.push_back(e);
      cv_.notify_all();
    };
  }
  std::vector<Event> events() const {
    std::lock_guard g(m_);
    return events_;
  }
  std::size_t count(EventType t) const {
    std::lock_guard g(m_);
    std::size_t n = 0;
    for (const auto& e : events_) n += e.type == t;
    return n;
  }
  // The first event of type t (waits up to 2 s for it).
  std::optional<Event> find(EventType t) {
    std::unique_lock lk(m_);
    auto has = [&] {
      for (const auto& e : events_)
        if (e.type == t) return true;
      return false;
    };
    cv_.wait_for(lk, std::chrono::seconds(2), has);
    for (const auto& e : events_)
      if (e.type == t) return e;
    return std::nullopt;
  }
  void clear() {
    std::lock_guard g(m_);
    events_.clear();
  }

 private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::vector<Event> events_;
};

// Messages still allocated once the instance settles. Events are delivered before a
// message goes back to its pool, so right after the last event a message may still be
// on its way back: wait (up to 5 s) for the count to reach zero.
inline std::uint64_t settled_msgs_alloc(Instance& lnet) {
  for (int i = 0; i < 500 && lnet.counters().msgs_alloc != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return lnet.counters().msgs_alloc;
}

}  // namespace lnet::test
