// Event queues: order, sequence numbers, overflow, timeouts, several queues, callbacks,
// and waits that drive polled drivers.
#include <gtest/gtest.h>

#include <thread>

#include <lnet/event.hpp>
#include <lnet/progress.hpp>

#include "base/progress_registry.hpp"

namespace lnet {
namespace {

using std::chrono::milliseconds;

Event ev(std::uint64_t bits) {
  Event e;
  e.type = EventType::Put;
  e.match_bits = bits;
  return e;
}

TEST(EventQueue, FifoWithSequenceNumbers) {
  EventQueue q(4);
  EXPECT_EQ(q.capacity(), 4u);
  q.post(ev(1));
  q.post(ev(2));
  Event out;
  ASSERT_EQ(q.get(out), 1);
  EXPECT_EQ(out.match_bits, 1u);
  EXPECT_EQ(out.sequence, 0u);
  ASSERT_EQ(q.get(out), 1);
  EXPECT_EQ(out.match_bits, 2u);
  EXPECT_EQ(out.sequence, 1u);
  EXPECT_EQ(q.get(out), 0);
}

TEST(EventQueue, CapacityRoundsUpToAPowerOfTwo) { EXPECT_EQ(EventQueue(5).capacity(), 8u); }

TEST(EventQueue, OverflowLosesTheOldestAndSaysSo) {
  EventQueue q(4);
  for (int i = 0; i < 6; ++i) q.post(ev(static_cast<std::uint64_t>(i)));
  Event out;
  ASSERT_EQ(q.get(out), -EOVERFLOW);
  EXPECT_EQ(out.match_bits, 2u);
  ASSERT_EQ(q.get(out), 1);
  EXPECT_EQ(out.match_bits, 3u);
}

TEST(EventQueue, PollTimesOutAndWakesUp) {
  EventQueue q(4);
  Event out;
  EXPECT_EQ(q.poll(out, milliseconds(20)), 0);
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(20));
    q.post(ev(9));
  });
  EXPECT_EQ(q.poll(out, milliseconds(-1)), 1);
  EXPECT_EQ(out.match_bits, 9u);
  t.join();
}

TEST(EventQueue, PollManyReportsWhichQueue) {
  EventQueue a(4), b(4);
  EventQueue* qs[] = {&a, &b};
  Event out;
  int which = -1;
  EXPECT_EQ(EventQueue::poll_many(qs, milliseconds(0), out, &which), 0);
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(20));
    b.post(ev(5));
  });
  ASSERT_EQ(EventQueue::poll_many(qs, milliseconds(5000), out, &which), 1);
  EXPECT_EQ(which, 1);
  EXPECT_EQ(out.match_bits, 5u);
  t.join();
  EXPECT_EQ(EventQueue::poll_many(qs, milliseconds(10), out, &which), 0);
}

TEST(EventQueue, CallbackSeesEveryEventEvenWithoutStorage) {
  int seen = 0;
  EventQueue q(0, [&](const Event& e) { seen += static_cast<int>(e.match_bits); });
  q.post(ev(2));
  q.post(ev(3));
  EXPECT_EQ(seen, 5);
  Event out;
  EXPECT_EQ(q.get(out), 0);
}

// A polled "driver": posts an event to its queue on the n-th call.
struct FakeDriver {
  EventQueue* eq = nullptr;
  int calls = 0;
  int post_at = 0;
  int nested = 0;
  static bool run(void* ctx) {
    auto* d = static_cast<FakeDriver*>(ctx);
    ++d->calls;
    if (drive_progress()) ++d->nested;  // must be refused: not re-entrant
    if (d->calls == d->post_at) {
      d->eq->post(ev(d->calls));
      return true;
    }
    return false;
  }
};

TEST(Progress, WaitsDrivePolledDrivers) {
  EventQueue q(8);
  FakeDriver d{&q, 0, 500, 0};
  int id = add_progress(&FakeDriver::run, &d);
  ASSERT_GE(id, 0);
  EXPECT_TRUE(progress_is_polled());
  Event out;
  EXPECT_EQ(q.poll(out, milliseconds(0)), 0);
  EXPECT_EQ(d.calls, 1) << "poll(0) drives once";
  EXPECT_EQ(q.poll(out, milliseconds(10000)), 1) << "a waiting poll drives until the event comes";
  EXPECT_EQ(out.match_bits, 500u);
  EXPECT_EQ(d.nested, 0);
  d.post_at = -1;
  EXPECT_EQ(q.poll(out, milliseconds(20)), 0) << "and still times out";
  remove_progress(id);
  EXPECT_FALSE(progress_is_polled());
  int before = d.calls;
  EXPECT_EQ(q.poll(out, milliseconds(1)), 0);
  EXPECT_EQ(d.calls, before) << "removed drivers are not called";
}

TEST(Progress, IdleWaitsBackOff) {
  EventQueue q(8);
  FakeDriver d{&q, 0, -1, 0};
  int id = add_progress(&FakeDriver::run, &d);
  Event out;
  EXPECT_EQ(q.poll(out, milliseconds(200)), 0);
  remove_progress(id);
  // Spinning would make millions of calls in 200 ms; backing off to 1 ms naps makes
  // a few hundred (bounded generously: this is not a timing test).
  EXPECT_LT(d.calls, 20000);
  EXPECT_GT(d.calls, 64);
}

}  // namespace
}  // namespace lnet
