// How drivers wait between rounds of polling: IdlePolicy (lnet/progress.hpp), the policy
// of the MPI LND's progress thread and lnet-proxy's bridge thread; and the socket LND's
// I/O thread, which follows it only while a handler has a message half-way through its
// socket, and otherwise sleeps in epoll_wait.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <vector>

#include <lnet/progress.hpp>

#include "lnd/socket/io_thread.hpp"
#include "support/event_log.hpp"

namespace lnet {
namespace {

// IdlePolicy, counted in rounds (its clock only decides when it yields, which the return
// value hides).
TEST(IdlePolicy, PollsWhileWorkingThenNapsLongerUpToTheCap) {
  IdlePolicy idle(100);
  auto never = [] { return false; };
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(idle.after_round(true, never), 0);
  int rounds = 0;
  while (idle.after_round(false, never) == 0) ASSERT_LT(++rounds, 1000) << "never naps";
  EXPECT_GE(rounds, 100) << "naps without polling a while first";
  // Naps double from 5 us (the first one was returned above) up to idle_us.
  std::vector<int> naps;
  for (int i = 0; i < 8; ++i) naps.push_back(idle.after_round(false, never));
  EXPECT_EQ(naps, (std::vector<int>{10, 20, 40, 80, 100, 100, 100, 100}));
  // Work starts it over: polling again, then the shortest nap.
  EXPECT_EQ(idle.after_round(true, never), 0);
  rounds = 0;
  int nap = 0;
  while ((nap = idle.after_round(false, never)) == 0) ASSERT_LT(++rounds, 1000);
  EXPECT_EQ(nap, 5);
}

TEST(IdlePolicy, DoesNotNapWhileTransfersOfOursAreInFlight) {
  IdlePolicy idle(1000);
  int asked = 0;
  auto in_flight = [&] {
    ++asked;
    return true;
  };
  // Five times the idle rounds after which it naps otherwise: it polls on, until its
  // second of patience is over (which a loaded machine may reach within these rounds; a
  // nap before that is the failure).
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) {
    if (idle.after_round(false, in_flight) == 0) continue;
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(1)) << "napped at round " << i;
    break;
  }
  EXPECT_GT(asked, 0);
}

// A handler of an eventfd that reports a message half-way when told to.
struct Handler final : sock::IoHandler {
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  std::atomic<bool> halfway{false};
  std::atomic<int> calls{0};
  Handler() = default;
  Handler(const Handler&) = delete;
  Handler& operator=(const Handler&) = delete;
  ~Handler() { close(fd); }
  bool on_events(std::uint32_t) override {
    std::uint64_t v;
    while (read(fd, &v, sizeof v) > 0) {
    }
    ++calls;
    return halfway.load();
  }
  void kick() {
    std::uint64_t one = 1;
    ASSERT_EQ(write(fd, &one, sizeof one), static_cast<ssize_t>(sizeof one));
  }
};

TEST(IoThread, SleepsBetweenWholeMessages) {
  sock::IoThread io([](auto) {});
  Handler h;
  ASSERT_GE(h.fd, 0);
  ASSERT_EQ(io.add(h.fd, &h, EPOLLIN), 0);
  for (int i = 1; i <= 100; ++i) {
    h.kick();
    ASSERT_TRUE(test::eventually([&] { return h.calls.load() >= i; })) << "event " << i << " not handled";
  }
  EXPECT_EQ(io.polls(), 0u) << "it polled with no message half-way";
  io.remove(h.fd);
}

TEST(IoThread, PollsWhileAMessageIsHalfwayThenSleepsAgain) {
  sock::IoThread io([](auto) {});
  Handler h;
  ASSERT_GE(h.fd, 0);
  h.halfway = true;
  ASSERT_EQ(io.add(h.fd, &h, EPOLLIN), 0);
  h.kick();
  ASSERT_TRUE(test::eventually([&] { return io.polls() > 0; })) << "it never polled";
  // No more events: after IdlePolicy's idle rounds it sleeps again.
  ASSERT_TRUE(test::eventually([&] { return !io.polling(); })) << "it never stopped polling";
  std::uint64_t rounds = io.polls();
  EXPECT_GE(rounds, 100u) << "it stopped polling at once";
  // The rest of the message came: it sleeps from then on.
  h.halfway = false;
  h.kick();
  ASSERT_TRUE(test::eventually([&] { return h.calls.load() >= 2; }));
  EXPECT_FALSE(io.polling());
  EXPECT_EQ(io.polls(), rounds);
  io.remove(h.fd);
}

}  // namespace
}  // namespace lnet
