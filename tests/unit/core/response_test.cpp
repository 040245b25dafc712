// Message deadlines and response tracking (lnet-facts §5.1): a GET whose REPLY or a PUT
// whose ACK does not come by transaction_timeout has its MD unlinked as LNetMDUnlink does
// (an UNLINK event when idle, else -ETIMEDOUT on its SEND's event); a response after that
// is dropped; response_tracking says what is awaited;
// a request that waited for credits past its deadline fails. The test fabric holds sends
// so that nothing answers; the tests wait for events, never for a time to pass.
#include <gtest/gtest.h>

#include <thread>

#include <lnet/lnet.hpp>

#include "core/core.hpp"
#include "support/event_log.hpp"
#include "support/fabric.hpp"

namespace lnet {
namespace {

using test::Fabric;

Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }

constexpr unsigned kPortal = 9;

class Responses : public ::testing::Test {
 protected:
  void SetUp() override {
    a = Instance::create(test::fabric_config({31, 41}), kPidLustre).value();
    b = Instance::create(test::fabric_config({32, 42}), kPidLustre).value();
    ASSERT_TRUE(a->control().add_peer(PeerConfig{gni(32), true, {gni(42)}}));
    auto me = b->me_attach(kPortal, ProcessId::any(), 0, ~0ULL, Unlink::Retain, InsPos::After);
    ASSERT_TRUE(me);
    MdDesc d;
    d.start = target;
    d.length = sizeof target;
    d.options = kMdOpPut | kMdOpGet | kMdManageRemote;
    ASSERT_TRUE(b->md_attach(*me, d, Unlink::Retain));
    // Short deadlines: the waits below end with the timeout events.
    ASSERT_TRUE(a->control().set_global("retry_count", 0));
    ASSERT_TRUE(a->control().set_global("transaction_timeout", 1));
    Fabric::instance().clear_sent();
  }
  void TearDown() override {
    Fabric::instance().hold(false);
    Fabric::instance().deliver_all();
    a.reset();
    b.reset();
  }
  MdHandle bind(int threshold = 2) {
    MdDesc d;
    d.start = buf;
    d.length = sizeof buf;
    d.threshold = threshold;
    d.handler = alog.handler();
    auto md = a->md_bind(d, Unlink::Unlink);
    EXPECT_TRUE(md) << md.message();
    return md ? *md : MdHandle{};
  }
  int get(MdHandle md, unsigned portal = kPortal, std::uint64_t bits = 0) {
    return a->get(Nid::any(), md, ProcessId{gni(32), kPidLustre}, portal, bits, 0);
  }
  int put_ack(MdHandle md) {
    return a->put(Nid::any(), md, AckReq::Ack, ProcessId{gni(32), kPidLustre}, kPortal, 0, 0, 0);
  }
  std::size_t tracked() { return core::Core::of(*a).portals().tracked_responses(); }
  int peer_health(Nid n) { return core::Core::of(*a).state().find_peer_ni(n)->health.load(); }

  std::unique_ptr<Instance> a, b;
  char target[64] = "the target's bytes";
  char buf[64] = {};
  test::EventLog alog;
};

// LNet's account (LNetMDUnlink on a response timeout): no REPLY event is made up; the
// MD is unlinked under the GET still using it, so the GET's SEND event, when it comes,
// is the last, says unlinked and reports -ETIMEDOUT though the send itself went well.
TEST_F(Responses, AReplyThatDoesNotComeUnlinksTheMdUnderItsSendAndALateOneIsDropped) {
  Fabric::instance().hold(true);  // the GET stays on the wire: nothing answers
  MdHandle md = bind();
  ASSERT_EQ(get(md), 0);
  EXPECT_EQ(tracked(), 1u);
  ASSERT_TRUE(test::eventually([&] { return a->control().counters().response_timeout_count == 1; }))
      << "no timeout within the test's patience";
  EXPECT_EQ(tracked(), 0u);
  EXPECT_TRUE(alog.events().empty()) << "the MD is busy: its event waits for the SEND";
  EXPECT_EQ(a->md_unlink(md), -ENOENT) << "the handle is gone at once";
  std::uint64_t drops = a->control().counters().drop_count;
  // The next hop it went to is less healthy now (a multi-rail peer).
  auto sent = Fabric::instance().sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(peer_health(sent[0].next_hop), 900);
  // Now the GET arrives and B answers: too late, the REPLY finds no MD.
  Fabric::instance().hold(false);
  Fabric::instance().deliver_all();
  ASSERT_TRUE(alog.wait_unlinked(md));
  auto events = alog.events();
  ASSERT_EQ(events.size(), 1u) << "one event: the SEND";
  EXPECT_EQ(events[0].type, EventType::Send);
  EXPECT_EQ(events[0].status, -ETIMEDOUT);
  EXPECT_TRUE(events[0].unlinked);
  EXPECT_TRUE(test::eventually([&] { return a->control().counters().drop_count == drops + 1; }))
      << "the late REPLY is dropped";
  EXPECT_EQ(alog.count(EventType::Reply), 0u) << "and not delivered";
  EXPECT_EQ(std::string(buf), "") << "nor written into the buffer";
}

TEST_F(Responses, AnAckThatDoesNotComeUnlinksAnIdleMdWithAnUnlinkEvent) {
  Fabric::instance().hold(true);
  MdHandle md = bind();
  ASSERT_EQ(put_ack(md), 0);
  ASSERT_TRUE(Fabric::instance().deliver_one());  // the PUT: delivered and sent
  ASSERT_EQ(alog.wait(EventType::Send, 1), 1u);
  EXPECT_EQ(alog.all(EventType::Send)[0].status, 0);
  EXPECT_FALSE(alog.all(EventType::Send)[0].unlinked) << "the MD awaits its ACK";
  EXPECT_EQ(Fabric::instance().pending(), 1u) << "B's ACK, held: lost as far as A can tell";
  auto ev = alog.find(EventType::Unlink);
  ASSERT_TRUE(ev) << "no timeout within the test's patience";
  EXPECT_EQ(ev->status, 0);
  EXPECT_EQ(ev->md_handle, md);
  EXPECT_TRUE(ev->unlinked);
  EXPECT_EQ(a->control().counters().response_timeout_count, 1u);
  Fabric::instance().hold(false);
  Fabric::instance().deliver_all();  // the late ACK
  EXPECT_EQ(alog.count(EventType::Ack), 0u);
  EXPECT_EQ(alog.events().size(), 2u) << "SEND and UNLINK, nothing after";
}

// LNetMDUnlink of an MD a message still uses: the message's event ends it, unlinked,
// with -ETIMEDOUT in place of the success it would have reported.
TEST_F(Responses, AnMdUnlinkedUnderItsSendEndsWithTimedOut) {
  ASSERT_TRUE(a->control().set_global("transaction_timeout", 150));
  Fabric::instance().hold(true);
  MdHandle md = bind();
  ASSERT_EQ(put_ack(md), 0);
  ASSERT_EQ(a->md_unlink(md), 0);
  EXPECT_TRUE(alog.events().empty()) << "busy: no UNLINK event";
  EXPECT_EQ(tracked(), 0u);
  Fabric::instance().hold(false);
  Fabric::instance().deliver_all();
  ASSERT_TRUE(alog.wait_unlinked(md));
  auto events = alog.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::Send);
  EXPECT_EQ(events[0].status, -ETIMEDOUT);
  EXPECT_EQ(alog.count(EventType::Ack), 0u) << "the ACK finds no MD";
  EXPECT_EQ(a->control().counters().response_timeout_count, 0u) << "no response timed out";
}

TEST_F(Responses, AResponseInTimeEndsTheTracking) {
  ASSERT_TRUE(a->control().set_global("transaction_timeout", 150));
  MdHandle md = bind();
  ASSERT_EQ(get(md), 0);
  ASSERT_EQ(alog.wait(EventType::Reply, 1), 1u);
  EXPECT_EQ(alog.all(EventType::Reply)[0].status, 0);
  EXPECT_EQ(std::string(buf), "the target's bytes");
  MdHandle md2 = bind();
  ASSERT_EQ(put_ack(md2), 0);
  ASSERT_EQ(alog.wait(EventType::Ack, 1), 1u);
  EXPECT_EQ(alog.all(EventType::Ack)[0].status, 0);
  EXPECT_EQ(tracked(), 0u);
  EXPECT_EQ(a->control().counters().response_timeout_count, 0u);
}

TEST_F(Responses, TrackingModesSayWhatIsAwaited) {
  ASSERT_TRUE(a->control().set_global("transaction_timeout", 150));
  Fabric::instance().hold(true);
  // mode: {GET tracked, PUT+ACK tracked}
  const std::pair<int, std::pair<bool, bool>> modes[] = {
      {0, {false, false}}, {1, {true, false}}, {2, {false, true}}, {3, {true, true}}};
  std::vector<MdHandle> mds;
  for (auto [mode, want] : modes) {
    ASSERT_TRUE(a->control().set_global("response_tracking", mode));
    std::size_t before = tracked();
    mds.push_back(bind());
    ASSERT_EQ(get(mds.back()), 0);
    EXPECT_EQ(tracked(), before + want.first) << "GET, mode " << mode;
    mds.push_back(bind());
    ASSERT_EQ(put_ack(mds.back()), 0);
    EXPECT_EQ(tracked(), before + want.first + want.second) << "PUT, mode " << mode;
  }
  // Pings (GETs on the reserved portal) are awaited whatever the mode.
  ASSERT_TRUE(a->control().set_global("response_tracking", 0));
  std::size_t before = tracked();
  mds.push_back(bind());
  ASSERT_EQ(get(mds.back(), kReservedPortal, kPingMatchBits), 0);
  EXPECT_EQ(tracked(), before + 1);
  // A PUT without an ACK awaits nothing.
  mds.push_back(bind(1));
  ASSERT_EQ(a->put(Nid::any(), mds.back(), AckReq::NoAck, ProcessId{gni(32), kPidLustre}, kPortal, 0, 0, 0), 0);
  EXPECT_EQ(tracked(), before + 1);
  // Unlinking an MD stops its tracking.
  ASSERT_EQ(a->md_unlink(mds[mds.size() - 2]), 0);
  EXPECT_EQ(tracked(), before);
}

TEST_F(Responses, ARequestThatWaitedForCreditsPastItsDeadlineFails) {
  // One peer NI (B as a peer of one NID), 8 peer credits: the ninth PUT waits for one.
  ASSERT_TRUE(a->control().del_peer(gni(32), {}));
  ASSERT_TRUE(a->control().set_global("response_tracking", 0));
  Fabric::instance().hold(true);
  std::vector<MdHandle> mds;
  for (int i = 0; i < 9; ++i) {
    mds.push_back(bind(1));
    ASSERT_EQ(a->put(gni(31), mds.back(), AckReq::NoAck, ProcessId{gni(32), kPidLustre}, kPortal, 0, 0, 0), 0);
  }
  EXPECT_EQ(Fabric::instance().pending(), 8u);
  // Past the 1 s deadline of the waiting one; then a credit comes back.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ASSERT_TRUE(Fabric::instance().deliver_one());
  ASSERT_TRUE(alog.wait_unlinked(mds.back()));
  int late = 0;
  for (const Event& e : alog.all(EventType::Send)) {
    if (e.md_handle != mds.back()) continue;
    EXPECT_EQ(e.status, -ETIMEDOUT);
    ++late;
  }
  EXPECT_EQ(late, 1);
  EXPECT_EQ(a->control().counters().local_timeout_count, 1u);
  EXPECT_EQ(Fabric::instance().pending(), 7u) << "it never reached the driver";
}

}  // namespace
}  // namespace lnet
