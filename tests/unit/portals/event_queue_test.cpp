// Event queues: order, sequence numbers, overflow, timeouts, several queues, callbacks.
#include <gtest/gtest.h>

#include <thread>

#include <lnet/event.hpp>

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

}  // namespace
}  // namespace lnet
