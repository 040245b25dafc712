// Event queues: a ring per queue under its own lock; a process-wide epoch wakes callers
// polling several queues at once (LNetEQPoll) without costing single-queue users.
#include <lnet/event.hpp>
#include <lnet/mutex.hpp>
#include <lnet/progress.hpp>

#include <atomic>

namespace lnet {

const char* event_type_name(EventType t) {
  switch (t) {
    case EventType::Get: return "GET";
    case EventType::Put: return "PUT";
    case EventType::Reply: return "REPLY";
    case EventType::Ack: return "ACK";
    case EventType::Send: return "SEND";
    case EventType::Unlink: return "UNLINK";
  }
  return "<unknown>";
}

namespace {
struct MultiWait {
  Mutex mutex;
  std::condition_variable cv;
  std::uint64_t epoch LNET_GUARDED_BY(mutex) = 0;
  std::atomic<int> waiters{0};
};
MultiWait& multi_wait() {
  static MultiWait* w = new MultiWait;  // outlives every queue, also at exit
  return *w;
}
}  // namespace

EventQueue::EventQueue(std::size_t capacity, Callback callback) : callback_(std::move(callback)) {
  if (capacity) {
    std::size_t n = 1;
    while (n < capacity) n <<= 1;
    ring_.resize(n);
  }
}

void EventQueue::post(const Event& ev) {
  std::uint64_t seq;
  {
    MutexLock g(mutex_);
    seq = enq_seq_++;
    if (!ring_.empty()) {
      Event& slot = ring_[seq & (ring_.size() - 1)];
      slot = ev;
      slot.sequence = seq;
      if (waiters_) cv_.notify_all();
    }
  }
  MultiWait& mw = multi_wait();
  if (mw.waiters.load(std::memory_order_seq_cst) > 0) {
    MutexLock g(mw.mutex);
    ++mw.epoch;
    mw.cv.notify_all();
  }
  if (callback_) {
    Event copy = ev;
    copy.sequence = seq;
    callback_(copy);
  }
}

int EventQueue::take_locked(Event& out) {
  if (ring_.empty() || enq_seq_ == deq_seq_) return 0;
  int rc = 1;
  if (enq_seq_ - deq_seq_ > ring_.size()) {
    deq_seq_ = enq_seq_ - ring_.size();  // the oldest events were overwritten
    rc = -EOVERFLOW;
  }
  out = ring_[deq_seq_ & (ring_.size() - 1)];
  ++deq_seq_;
  return rc;
}

int EventQueue::poll(Event& out, std::chrono::milliseconds timeout) {
  MutexLock lk(mutex_);
  if (int rc = take_locked(out)) return rc;
  if (ring_.empty()) return 0;
  if (timeout.count() == 0) {
    // Drives polled drivers once (the MPI LND's MPI_Testsome), then looks again.
    if (!progress_is_polled()) return 0;
    lk.unlock();
    drive_progress();
    lk.lock();
    return take_locked(out);
  }
  ++waiters_;
  auto ready = [&]() LNET_REQUIRES(mutex_) { return enq_seq_ != deq_seq_; };
  auto deadline =
      timeout.count() < 0 ? std::chrono::steady_clock::time_point::max() : std::chrono::steady_clock::now() + timeout;
  wait_with_progress(lk.native(), cv_, deadline, ready);
  --waiters_;
  return take_locked(out);
}

int EventQueue::poll_many(std::span<EventQueue* const> queues, std::chrono::milliseconds timeout, Event& out,
                          int* which) {
  MultiWait& mw = multi_wait();
  mw.waiters.fetch_add(1, std::memory_order_seq_cst);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int rc = 0;
  for (;;) {
    std::uint64_t epoch;
    {
      MutexLock g(mw.mutex);
      epoch = mw.epoch;
    }
    drive_progress();  // polled drivers (nothing when none is registered)
    for (std::size_t i = 0; i < queues.size() && rc == 0; ++i) {
      rc = queues[i]->get(out);
      if (rc && which) *which = static_cast<int>(i);
    }
    if (rc || timeout.count() == 0) break;
    MutexLock lk(mw.mutex);
    auto changed = [&]() LNET_REQUIRES(mw.mutex) { return mw.epoch != epoch; };
    if (timeout.count() < 0) {
      wait_with_progress(lk.native(), mw.cv, std::chrono::steady_clock::time_point::max(), changed);
    } else if (!wait_with_progress(lk.native(), mw.cv, deadline, changed)) {
      lk.unlock();
      for (std::size_t i = 0; i < queues.size() && rc == 0; ++i) {
        rc = queues[i]->get(out);
        if (rc && which) *which = static_cast<int>(i);
      }
      break;
    }
  }
  mw.waiters.fetch_sub(1, std::memory_order_seq_cst);
  return rc;
}

}  // namespace lnet
