// Events (what happened to an MD) and the pollable event queue (the classic LNetEQPoll).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include <lnet/md.hpp>
#include <lnet/mutex.hpp>
#include <lnet/nid.hpp>
#include <lnet/wire.hpp>

namespace lnet {

enum class EventType { Get = 1, Put = 2, Reply = 3, Ack = 4, Send = 5, Unlink = 6 };
const char* event_type_name(EventType t);  // "PUT", "SEND", ...

struct Event {
  ProcessId target;     // whom the operation was addressed to
  ProcessId initiator;  // who started it (primary NID of the peer)
  ProcessId source;     // the NID it actually came from
  Nid sender;           // the last hop (a router when routed)
  EventType type = EventType::Send;
  unsigned pt_index = 0;
  std::uint64_t match_bits = 0;
  std::uint32_t rlength = 0;  // requested length
  std::uint32_t mlength = 0;  // length moved
  std::uint32_t offset = 0;   // where in the MD
  MdHandle md_handle;
  // The MD as it is after this operation.
  void* md_start = nullptr;
  std::uint32_t md_length = 0;  // bytes
  unsigned md_niov = 0;         // fragments (1 for a contiguous MD)
  int md_threshold = 0;
  int md_max_size = 0;
  unsigned md_options = 0;
  void* md_user_ptr = nullptr;
  std::uint64_t hdr_data = 0;
  MsgType msg_type = MsgType::Put;
  int status = 0;         // 0 or a negative errno
  bool unlinked = false;  // the last event of its MD
  std::uint64_t sequence = 0;
};

// A ring of events with a fixed capacity. When the producer laps a slow consumer the
// oldest events are lost and the next poll reports -EOVERFLOW.
class EventQueue {
 public:
  using Callback = std::function<void(const Event&)>;

  // capacity is rounded up to a power of two; 0 means "callback only, nothing stored".
  explicit EventQueue(std::size_t capacity, Callback callback = {});
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // 1: got an event; 0: none within `timeout` (0 = don't wait, negative = wait forever);
  // -EOVERFLOW: got an event but older ones were lost.
  int poll(Event& out, std::chrono::milliseconds timeout);
  int get(Event& out) { return poll(out, std::chrono::milliseconds(0)); }
  // Like poll over several queues; *which gets the index of the queue that had the event.
  static int poll_many(std::span<EventQueue* const> queues, std::chrono::milliseconds timeout, Event& out, int* which);

  std::size_t capacity() const { return ring_.size(); }
  // MDs that name this queue and are not unlinked yet (LNetEQFree refuses while > 0).
  int attached_mds() const { return mds_.load(std::memory_order_acquire); }

  // Called by LNet: for every event of an MD that names this queue, and when such an MD
  // is made and unlinked.
  void post(const Event& ev);
  void md_attached() { mds_.fetch_add(1, std::memory_order_relaxed); }
  void md_detached() { mds_.fetch_sub(1, std::memory_order_release); }

 private:
  int take_locked(Event& out) LNET_REQUIRES(mutex_);

  Callback callback_;
  Mutex mutex_;
  std::condition_variable cv_;
  int waiters_ LNET_GUARDED_BY(mutex_) = 0;
  std::vector<Event> ring_;  // sized at construction; the slots are written and read under mutex_
  std::uint64_t enq_seq_ LNET_GUARDED_BY(mutex_) = 0;
  std::uint64_t deq_seq_ LNET_GUARDED_BY(mutex_) = 0;
  std::atomic<int> mds_{0};
};

}  // namespace lnet
