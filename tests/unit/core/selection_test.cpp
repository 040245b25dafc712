// Selection of the local NI and the peer NI: the criteria in order as pure comparisons,
// then through real sends between multi-NI instances on the test fabric.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>
#include <thread>

#include <lnet/lnet.hpp>

#include "core/core.hpp"
#include "net/selection.hpp"
#include "support/event_log.hpp"
#include "support/fabric.hpp"

namespace lnet {
namespace {

using net::LocalNiScore;
using net::PeerNiScore;
using test::Fabric;

TEST(LocalNiOrder, EachCriterionOutranksTheNext) {
  LocalNiScore base;
  base.credits = 10;
  auto better = [](LocalNiScore a, LocalNiScore b, int range = 0) { return net::compare_local_ni(a, b, range) < 0; };
  LocalNiScore x = base, y = base;
  // fatal error beats everything else
  y.fatal = true;
  y.health = 1000;
  x.health = 1;
  EXPECT_TRUE(better(x, y));
  // health beats priority
  x = base, y = base;
  x.health = 900;
  y.priority = 0;
  EXPECT_TRUE(better(base, x));
  EXPECT_TRUE(better(y, base));
  EXPECT_TRUE(better(LocalNiScore{false, 1000, 5, 0, 0, 0, 0}, LocalNiScore{false, 999, 0, 0, 0, 100, 0}));
  // priority beats device priority
  EXPECT_TRUE(better(LocalNiScore{false, 1000, 1, 9, 0, 0, 0}, LocalNiScore{false, 1000, 2, 0, 0, 0, 0}));
  // device priority beats NUMA distance
  EXPECT_TRUE(better(LocalNiScore{false, 1000, 1, 0, 90, 0, 0}, LocalNiScore{false, 1000, 1, 1, 10, 0, 0}));
  // NUMA distance beats credits
  EXPECT_TRUE(better(LocalNiScore{false, 1000, 1, 0, 10, 0, 0}, LocalNiScore{false, 1000, 1, 0, 20, 50, 0}));
  // ... unless both are within numa_range
  EXPECT_FALSE(better(LocalNiScore{false, 1000, 1, 0, 10, 0, 0}, LocalNiScore{false, 1000, 1, 0, 20, 50, 0}, 30));
  EXPECT_TRUE(better(LocalNiScore{false, 1000, 1, 0, 20, 50, 0}, LocalNiScore{false, 1000, 1, 0, 10, 0, 0}, 30));
  // credits beat the round-robin sequence
  EXPECT_TRUE(better(LocalNiScore{false, 1000, 1, 0, 0, 5, 9}, LocalNiScore{false, 1000, 1, 0, 0, 4, 0}));
  // the lower sequence breaks a tie
  EXPECT_TRUE(better(LocalNiScore{false, 1000, 1, 0, 0, 5, 1}, LocalNiScore{false, 1000, 1, 0, 0, 5, 2}));
  EXPECT_EQ(net::compare_local_ni(base, base, 0), 0);
}

TEST(PeerNiOrder, EachCriterionOutranksTheNext) {
  auto better = [](PeerNiScore a, PeerNiScore b) { return net::compare_peer_ni(a, b) < 0; };
  EXPECT_TRUE(better(PeerNiScore{1000, 9, false, 0, 9}, PeerNiScore{999, 0, true, 99, 0}));
  EXPECT_TRUE(better(PeerNiScore{1000, 1, false, 0, 9}, PeerNiScore{1000, 2, true, 99, 0}));
  EXPECT_TRUE(better(PeerNiScore{1000, 1, true, 0, 9}, PeerNiScore{1000, 1, false, 99, 0}));
  EXPECT_TRUE(better(PeerNiScore{1000, 1, true, 5, 9}, PeerNiScore{1000, 1, true, 4, 0}));
  EXPECT_TRUE(better(PeerNiScore{1000, 1, true, 5, 1}, PeerNiScore{1000, 1, true, 5, 2}));
}

TEST(BestOf, PicksTheBestAndKeepsTheFirstOnTies) {
  std::vector<LocalNiScore> v(3);
  v[0].credits = 1;
  v[1].credits = 3;
  v[2].credits = 3;
  EXPECT_EQ(net::best_local_ni(
                3, [&](int i) { return v[static_cast<std::size_t>(i)]; }, 0),
            1);
  EXPECT_EQ(net::best_local_ni(
                0, [&](int i) { return v[static_cast<std::size_t>(i)]; }, 0),
            -1);
}

Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }

// A with NIs 1@gni and 11@gni; B with 2@gni and 12@gni.
class MultiRail : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ra = Instance::create(test::fabric_config({1, 11}), kPidLustre);
    ASSERT_TRUE(ra) << ra.message();
    a = std::move(*ra);
    auto rb = Instance::create(test::fabric_config({2, 12}), kPidLustre);
    ASSERT_TRUE(rb) << rb.message();
    b = std::move(*rb);
    auto me = b->me_attach(7, ProcessId::any(), 0, ~0ULL, Unlink::Unlink, InsPos::After);
    MdDesc d;
    d.start = sink;
    d.length = sizeof sink;
    d.options = kMdOpPut | kMdOpGet | kMdTruncate | kMdManageRemote;
    d.handler = blog.handler();
    ASSERT_TRUE(b->md_attach(*me, d, Unlink::Retain));
    Fabric::instance().clear_sent();
  }
  void TearDown() override {
    Fabric::instance().hold(false);
    Fabric::instance().deliver_all();
    a.reset();
    b.reset();
  }
  void send(Nid to, Nid self = Nid::any(), AckReq ack = AckReq::NoAck) {
    MdDesc d;
    d.start = byte;
    d.length = 1;
    d.threshold = ack == AckReq::Ack ? 2 : 1;
    auto md = a->md_bind(d, Unlink::Unlink);
    ASSERT_TRUE(md);
    ASSERT_EQ(a->put(self, *md, ack, ProcessId{to, kPidLustre}, 7, 1, 0, 0), 0);
  }
  // How often each (local NI, peer NI) pair carried a PUT.
  std::map<std::pair<Nid, Nid>, int> pairs() {
    std::map<std::pair<Nid, Nid>, int> m;
    for (auto& s : Fabric::instance().sent())
      if (s.type == MsgType::Put) m[{s.src, s.next_hop}]++;
    return m;
  }
  core::Ni* ni(Instance& i, Nid n) { return core::Core::of(i).state().find_ni(n); }

  std::unique_ptr<Instance> a, b;
  char sink[64] = {};
  char byte[1] = {'x'};
  test::EventLog blog;
};

TEST_F(MultiRail, NonMultiRailPeerAlwaysUsesOnePath) {
  for (int i = 0; i < 8; ++i) send(gni(2));
  auto p = pairs();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p.begin()->first.second, gni(2));
  EXPECT_EQ(p.begin()->second, 8);
}

TEST_F(MultiRail, MultiRailPeerRoundRobinsOverBothRails) {
  ASSERT_EQ(a->control().add_peer(PeerConfig{gni(2), true, {gni(12)}}).code(), 0);
  for (int i = 0; i < 8; ++i) send(gni(2));
  auto p = pairs();
  int from1 = 0, from11 = 0, to2 = 0, to12 = 0;
  for (auto& [k, n] : p) {
    (k.first == gni(1) ? from1 : from11) += n;
    (k.second == gni(2) ? to2 : to12) += n;
  }
  EXPECT_EQ(from1, 4);
  EXPECT_EQ(from11, 4);
  EXPECT_EQ(to2, 4);
  EXPECT_EQ(to12, 4);
  EXPECT_EQ(blog.count(EventType::Put), 8u);
}

// A recovery GET (Instance::get's `recovery`, LNetGet's last argument) probes exactly
// the NID it names; a plain GET to the same NID may go to any NI of the peer.
TEST_F(MultiRail, RecoveryGetsGoToExactlyTheirNid) {
  ASSERT_EQ(a->control().add_peer(PeerConfig{gni(2), true, {gni(12)}}).code(), 0);
  test::EventLog alog;
  auto get = [&](bool recovery) {
    MdDesc d;
    d.start = byte;
    d.length = 1;
    d.threshold = 2;  // SEND and REPLY
    d.handler = alog.handler();
    auto md = a->md_bind(d, Unlink::Unlink);
    ASSERT_TRUE(md);
    ASSERT_EQ(a->get(Nid::any(), *md, ProcessId{gni(12), kPidLustre}, 7, 1, 0, recovery), 0);
  };
  auto to = [](Nid n) {
    int k = 0;
    for (auto& s : Fabric::instance().sent())
      if (s.type == MsgType::Get && s.next_hop == n) ++k;
    return k;
  };
  for (int i = 0; i < 4; ++i) get(true);
  EXPECT_EQ(to(gni(12)), 4);
  EXPECT_EQ(to(gni(2)), 0);
  for (int i = 0; i < 4; ++i) get(false);
  EXPECT_EQ(to(gni(2)), 2) << "a plain GET round-robins over the peer's NIs";
  EXPECT_EQ(alog.count(EventType::Reply), 8u);
}

TEST_F(MultiRail, ReceiverNamesTheInitiatorByItsPrimaryNid) {
  ASSERT_EQ(a->control().add_peer(PeerConfig{gni(2), true, {gni(12)}}).code(), 0);
  ASSERT_EQ(b->control().add_peer(PeerConfig{gni(1), true, {gni(11)}}).code(), 0);
  for (int i = 0; i < 4; ++i) send(gni(2));
  std::set<Nid> sources;
  for (auto& e : blog.events()) {
    EXPECT_EQ(e.initiator.nid, gni(1));
    sources.insert(e.source.nid);
  }
  EXPECT_EQ(sources, (std::set<Nid>{gni(1), gni(11)}));
}

TEST_F(MultiRail, HealthierLocalNiWins) {
  ASSERT_EQ(a->control().add_peer(PeerConfig{gni(2), true, {gni(12)}}).code(), 0);
  ni(*a, gni(1))->health = 500;
  for (int i = 0; i < 6; ++i) send(gni(2));
  for (auto& [k, n] : pairs()) EXPECT_EQ(k.first, gni(11));
}

TEST_F(MultiRail, SelectionPriorityOutranksCredits) {
  ASSERT_EQ(a->control().add_peer(PeerConfig{gni(2), true, {gni(12)}}).code(), 0);
  ni(*a, gni(11))->sel_priority = 0;
  core::Core::of(*a).state().find_peer_ni(gni(2))->sel_priority = 1;
  core::Core::of(*a).state().find_peer_ni(gni(12))->sel_priority = 2;
  for (int i = 0; i < 6; ++i) send(gni(2));
  auto p = pairs();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p.begin()->first, std::make_pair(gni(11), gni(2)));
}

TEST_F(MultiRail, MoreCreditsWinBeforeRoundRobin) {
  ASSERT_EQ(a->control().add_peer(PeerConfig{gni(2), true, {gni(12)}}).code(), 0);
  Fabric::instance().hold(true);
  send(gni(2), gni(1));  // occupies a credit of 1@gni (and of one peer NI)
  Fabric::instance().clear_sent();
  for (int i = 0; i < 3; ++i) send(gni(2));
  // 11@gni has one credit more than 1@gni until they even out, then they alternate.
  auto sent = Fabric::instance().sent();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[0].src, gni(11));
}

TEST_F(MultiRail, PreferredLocalNidSteersThePeerNi) {
  ASSERT_EQ(a->control().add_peer(PeerConfig{gni(2), true, {gni(12)}}).code(), 0);
  core::Core::of(*a).state().find_peer_ni(gni(12))->pref_local = {gni(11)};
  for (int i = 0; i < 6; ++i) send(gni(2), gni(11));
  for (auto& [k, n] : pairs()) EXPECT_EQ(k.second, gni(12));
}

TEST_F(MultiRail, ExplicitSourceNid) {
  for (int i = 0; i < 4; ++i) send(gni(2), gni(11));
  auto p = pairs();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p.begin()->first.first, gni(11));
  MdDesc d;
  d.start = byte;
  d.length = 1;
  d.threshold = 1;
  test::EventLog log;
  d.handler = log.handler();
  auto md = a->md_bind(d, Unlink::Unlink);
  ASSERT_EQ(a->put(gni(99), *md, AckReq::NoAck, ProcessId{gni(2), kPidLustre}, 7, 1, 0, 0), 0);
  auto ev = log.find(EventType::Send);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->status, -EINVAL) << "the source must be one of our NIDs";
}

TEST_F(MultiRail, ResponsesReturnOnTheReceivingNi) {
  send(gni(12), gni(11), AckReq::Ack);
  bool acked = false;
  for (auto& s : Fabric::instance().sent()) {
    if (s.type == MsgType::Ack) {
      acked = true;
      EXPECT_EQ(s.src, gni(12));
      EXPECT_EQ(s.next_hop, gni(11));
    }
  }
  EXPECT_TRUE(acked);
}

TEST_F(MultiRail, UnreachableNetFailsTheSend) {
  MdDesc d;
  d.start = byte;
  d.length = 1;
  d.threshold = 1;
  test::EventLog log;
  d.handler = log.handler();
  auto md = a->md_bind(d, Unlink::Unlink);
  ASSERT_EQ(a->put(Nid::any(), *md, AckReq::NoAck, ProcessId{*Nid::parse("10.0.0.1@tcp"), kPidLustre}, 7, 1, 0, 0), 0);
  auto ev = log.find(EventType::Send);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->status, -EHOSTUNREACH);
}

// ---------------------------------------------------------------- health (facts §5.3)

// Failures move the health of the NI they blame by health_sensitivity (100), successes
// move it back; selection then avoids the less healthy NI.
class Health : public MultiRail {
 protected:
  void SetUp() override {
    MultiRail::SetUp();
    ASSERT_EQ(a->control().add_peer(PeerConfig{gni(2), true, {gni(12)}}).code(), 0);
  }
  void TearDown() override {
    for (std::uint32_t n : {1, 11, 2, 12, 3}) Fabric::instance().fail(gni(n), std::nullopt);
    MultiRail::TearDown();
  }
  int health(Nid local) { return ni(*a, local)->health.load(); }
  int peer_health(Nid n) { return core::Core::of(*a).state().find_peer_ni(n)->health.load(); }
  NiInfo info(Nid n) {
    for (const NiInfo& i : a->control().ni_info())
      if (i.nid == n) return i;
    return {};
  }
  PeerNiInfo peer_info(Nid n) {
    for (const PeerInfo& p : a->control().peer_info())
      for (const PeerNiInfo& i : p.nis)
        if (i.nid == n) return i;
    return {};
  }
};

TEST_F(Health, ALocalFailureLowersTheLocalNiAndSelectionAvoidsIt) {
  Fabric::instance().fail(gni(1), HealthStatus::LocalDropped);
  for (int i = 0; i < 2; ++i) send(gni(2));  // round robin: one of them leaves 1@gni
  EXPECT_EQ(health(gni(1)), 900);
  EXPECT_EQ(health(gni(11)), 1000);
  EXPECT_EQ(peer_health(gni(2)), 1000);
  EXPECT_EQ(peer_health(gni(12)), 1000);
  EXPECT_EQ(info(gni(1)).hs_dropped, 1u);
  EXPECT_EQ(a->control().counters().local_dropped_count, 1u);
  // The failed PUT went again from 11@gni (resend): every PUT arrived.
  EXPECT_EQ(blog.count(EventType::Put), 2u);
  EXPECT_EQ(a->control().counters().resend_count, 1u);
  EXPECT_EQ(a->control().counters().successful_resends, 1u);
  Fabric::instance().clear_sent();
  for (int i = 0; i < 6; ++i) send(gni(2));
  for (auto& [k, n] : pairs()) EXPECT_EQ(k.first, gni(11));
  EXPECT_EQ(blog.count(EventType::Put), 8u);
}

TEST_F(Health, EachLocalStatusCountsUnderItsOwnName) {
  const std::pair<HealthStatus, std::uint64_t NiInfo::*> cases[] = {
      {HealthStatus::LocalInterrupt, &NiInfo::hs_interrupts}, {HealthStatus::LocalAborted, &NiInfo::hs_aborted},
      {HealthStatus::LocalNoRoute, &NiInfo::hs_no_route},     {HealthStatus::LocalTimeout, &NiInfo::hs_timeouts},
      {HealthStatus::LocalError, &NiInfo::hs_error},
  };
  ASSERT_TRUE(a->control().set_global("retry_count", 0));  // one failure each
  int want = 1000;
  for (auto [status, field] : cases) {
    Fabric::instance().fail(gni(1), status);
    send(gni(2), gni(1));
    want -= 100;
    EXPECT_EQ(health(gni(1)), want) << health_status_name(status);
    EXPECT_EQ(info(gni(1)).*field, 1u) << health_status_name(status);
  }
}

TEST_F(Health, ARemoteDropLowersThePeerNiAndSelectionAvoidsIt) {
  Fabric::instance().fail(gni(12), HealthStatus::RemoteDropped);
  for (int i = 0; i < 4; ++i) send(gni(2));
  EXPECT_EQ(peer_health(gni(12)), 900);  // lowered once: then it is avoided
  EXPECT_EQ(peer_health(gni(2)), 1000);
  EXPECT_EQ(health(gni(1)), 1000);
  EXPECT_EQ(health(gni(11)), 1000);
  EXPECT_EQ(peer_info(gni(12)).hs_dropped, 1u);
  EXPECT_EQ(blog.count(EventType::Put), 4u);  // the dropped one was resent to 2@gni
  EXPECT_EQ(a->control().counters().successful_resends, 1u);
}

TEST_F(Health, ANetworkTimeoutLowersBothAndRemoteErrorsOnlyThePeer) {
  Fabric::instance().fail(gni(12), HealthStatus::NetworkTimeout);
  send(gni(2), gni(11));  // 11@gni -> the best peer NI: 2@gni first (round robin)
  send(gni(2), gni(11));  // then 12@gni, which times out
  EXPECT_EQ(health(gni(11)), 900);
  EXPECT_EQ(peer_health(gni(12)), 900);
  EXPECT_EQ(peer_info(gni(12)).hs_network_timeout, 1u);
  Fabric::instance().fail(gni(12), std::nullopt);
  Fabric::instance().fail(gni(2), HealthStatus::RemoteTimeout);
  send(gni(2), gni(1));
  EXPECT_EQ(peer_health(gni(2)), 900);
  EXPECT_EQ(peer_info(gni(2)).hs_timeout, 1u);
  EXPECT_EQ(health(gni(1)), 1000);
  // Both peer NIs at 900 now: whichever is picked, a remote error is the peer's alone.
  Fabric::instance().fail(gni(2), HealthStatus::RemoteError);
  Fabric::instance().fail(gni(12), HealthStatus::RemoteError);
  send(gni(2), gni(1));
  EXPECT_EQ(peer_info(gni(2)).hs_error + peer_info(gni(12)).hs_error, 1u);
  EXPECT_EQ(health(gni(1)), 1000);
  EXPECT_EQ(a->control().counters().remote_error_count, 1u);
}

TEST_F(Health, SuccessesRaiseHealthBackToTheMaximum) {
  ni(*a, gni(1))->health = 750;
  core::Core::of(*a).state().find_peer_ni(gni(2))->health = 950;
  core::Core::of(*a).state().find_peer_ni(gni(12))->health = 0;  // so that 2@gni carries them
  send(gni(2), gni(1));
  EXPECT_EQ(health(gni(1)), 850);
  send(gni(2), gni(1));
  send(gni(2), gni(1));
  EXPECT_EQ(health(gni(1)), 1000);  // capped
  // A completed send says nothing about the peer NI (the driver may have written into a
  // dead connection); hearing from it does: the ACK.
  EXPECT_EQ(peer_health(gni(2)), 950);
  send(gni(2), gni(1), AckReq::Ack);
  EXPECT_EQ(peer_health(gni(2)), 1000);
}

TEST_F(Health, ASingleNiPeerKeepsItsHealthUnlessThisNodeRoutes) {
  // 3@gni is a peer of one NI: nothing to prefer over it, so a remote failure is only
  // counted (facts §5.3).
  Fabric::instance().fail(gni(3), HealthStatus::RemoteDropped);
  MdDesc d;
  d.start = byte;
  d.length = 1;
  auto md = a->md_bind(d, Unlink::Unlink);
  ASSERT_TRUE(md);
  ASSERT_EQ(a->put(Nid::any(), *md, AckReq::NoAck, ProcessId{gni(3), kPidLustre}, 7, 1, 0, 0), 0);
  EXPECT_EQ(peer_health(gni(3)), 1000);
  EXPECT_EQ(peer_info(gni(3)).hs_dropped, 1u);
  ASSERT_TRUE(a->control().set_routing(true));
  md = a->md_bind(d, Unlink::Unlink);
  ASSERT_EQ(a->put(Nid::any(), *md, AckReq::NoAck, ProcessId{gni(3), kPidLustre}, 7, 1, 0, 0), 0);
  EXPECT_EQ(peer_health(gni(3)), 900);
}

// Resend (facts §5.3): a failure that another path may avoid sends the request again,
// at most retry_count times; its SEND event reports the last attempt.
TEST_F(Health, AResendFromAnExplicitSourceFailsAfterRetryCountAttempts) {
  Fabric::instance().fail(gni(1), HealthStatus::LocalDropped);
  test::EventLog alog;
  MdDesc d;
  d.start = byte;
  d.length = 1;
  d.threshold = 1;
  d.handler = alog.handler();
  auto md = a->md_bind(d, Unlink::Unlink);
  ASSERT_TRUE(md);
  ASSERT_EQ(a->put(gni(1), *md, AckReq::NoAck, ProcessId{gni(2), kPidLustre}, 7, 1, 0, 0), 0);
  ASSERT_TRUE(alog.wait_unlinked(*md));
  EXPECT_EQ(alog.find(EventType::Send)->status, -EIO);
  Counters c = a->control().counters();
  EXPECT_EQ(c.resend_count, 2u);  // retry_count 2: three attempts, all from 1@gni
  EXPECT_EQ(c.failed_resends, 1u);
  EXPECT_EQ(c.local_dropped_count, 3u);
  EXPECT_EQ(health(gni(1)), 700);
}

TEST_F(Health, NoResendForLocalErrorsOrWithRetryCountZero) {
  Fabric::instance().fail(gni(1), HealthStatus::LocalError);  // not one another path avoids
  send(gni(2), gni(1));
  EXPECT_EQ(a->control().counters().resend_count, 0u);
  Fabric::instance().fail(gni(1), HealthStatus::LocalDropped);
  ASSERT_TRUE(a->control().set_global("retry_count", 0));
  send(gni(2), gni(1));
  EXPECT_EQ(a->control().counters().resend_count, 0u);
  ASSERT_TRUE(a->control().set_global("retry_count", 2));
  ASSERT_TRUE(a->control().set_global("health_sensitivity", 0));  // no health: no resend
  send(gni(2), gni(1));
  EXPECT_EQ(a->control().counters().resend_count, 0u);
  EXPECT_EQ(a->control().counters().local_dropped_count, 2u);
  EXPECT_EQ(blog.count(EventType::Put), 0u);
  EXPECT_EQ(a->control().set_global("retry_count", 150).code(), -EINVAL);
}

TEST_F(Health, SensitivityZeroFreezesHealth) {
  ASSERT_TRUE(a->control().set_global("health_sensitivity", 0));
  Fabric::instance().fail(gni(1), HealthStatus::LocalError);
  send(gni(2), gni(1));
  EXPECT_EQ(health(gni(1)), 1000);
  EXPECT_EQ(info(gni(1)).hs_error, 1u);  // still counted
  ASSERT_TRUE(a->control().set_global("health_sensitivity", 300));
  send(gni(2), gni(1));
  EXPECT_EQ(health(gni(1)), 700);
  EXPECT_EQ(a->control().set_global("health_sensitivity", 1001).code(), -EINVAL);
}

// ---------------------------------------------------------------- recovery

TEST(RecoveryBackoff, DoublesFromOneSecondUpToTheCap) {
  const int want[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 512, 512};
  for (unsigned k = 0; k < std::size(want); ++k) EXPECT_EQ(health::recovery_backoff(k, 900), want[k]) << k;
  EXPECT_EQ(health::recovery_backoff(6, 60), 60);  // max_recovery_ping_interval
  EXPECT_EQ(health::recovery_backoff(0, 1), 1);
  EXPECT_EQ(health::recovery_backoff(30, 900), 512);
}

class Recovery : public Health {
 protected:
  // Waits (up to 30 s: recovery pings come a second apart) for `done`.
  template <class F>
  bool eventually(F done) {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done()) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  std::vector<Nid> queue(bool local) { return a->control().recovery_queue(local); }
  // GETs of the ping buffer that went from `src` (any: anywhere) to `dst`.
  int pings(Nid src, Nid dst) {
    int n = 0;
    for (auto& s : Fabric::instance().sent())
      if (s.type == MsgType::Get && s.hdr.msg.get.ptl_index == kReservedPortal && s.next_hop == dst &&
          (src.is_any() || s.src == src))
        ++n;
    return n;
  }
};

TEST_F(Recovery, APeerNiThatFailedIsPingedBackToFullHealth) {
  Fabric::instance().fail(gni(12), HealthStatus::RemoteDropped);
  for (int i = 0; i < 4; ++i) send(gni(2));
  EXPECT_EQ(peer_health(gni(12)), 900);
  EXPECT_EQ(queue(false), std::vector<Nid>{gni(12)});
  EXPECT_GT(peer_info(gni(12)).next_ping, 0);
  Fabric::instance().fail(gni(12), std::nullopt);  // the link is back
  ASSERT_TRUE(eventually([&] { return peer_health(gni(12)) == 1000 && queue(false).empty(); }));
  EXPECT_GE(pings(Nid::any(), gni(12)), 1) << "recovery pings go to exactly 12@gni";
  EXPECT_EQ(peer_info(gni(12)).next_ping, 0) << "out of recovery";
  // Traffic uses both peer NIs again.
  Fabric::instance().clear_sent();
  for (int i = 0; i < 8; ++i) send(gni(2));
  std::set<Nid> peers;
  for (auto& [k, n] : pairs()) peers.insert(k.second);
  EXPECT_EQ(peers, (std::set<Nid>{gni(2), gni(12)}));
}

TEST_F(Recovery, PingsBackOffWhileTheyFailAndStopAtTheRecoveryLimit) {
  Fabric::instance().fail(gni(12), HealthStatus::RemoteDropped);
  ASSERT_TRUE(a->control().set_peer_ni_health(gni(12), 300));
  EXPECT_EQ(peer_health(gni(12)), 300);
  EXPECT_EQ(queue(false), std::vector<Nid>{gni(12)});
  // Each failed ping counts; the next waits 2^count seconds.
  ASSERT_TRUE(eventually([&] { return peer_info(gni(12)).ping_count >= 2; }));
  EXPECT_LT(peer_health(gni(12)), 300) << "failed pings lower it further";
  // recovery_limit: a peer NI leaves the queue after that many seconds in recovery.
  ASSERT_TRUE(a->control().set_global("recovery_limit", 1));
  ASSERT_TRUE(a->control().set_global("max_recovery_ping_interval", 1));
  ASSERT_TRUE(eventually([&] { return queue(false).empty(); }));
  EXPECT_LT(peer_health(gni(12)), 1000);
  EXPECT_EQ(peer_info(gni(12)).next_ping, 0);
}

TEST_F(Recovery, ALocalNiIsPingedFromItselfToAPeerOnItsNet) {
  Fabric::instance().fail(gni(1), HealthStatus::LocalDropped);
  for (int i = 0; i < 2; ++i) send(gni(2));
  EXPECT_EQ(health(gni(1)), 900);
  EXPECT_EQ(queue(true), std::vector<Nid>{gni(1)});
  EXPECT_GT(info(gni(1)).next_ping, 0);
  Fabric::instance().fail(gni(1), std::nullopt);
  ASSERT_TRUE(eventually([&] { return health(gni(1)) == 1000 && queue(true).empty(); }));
  EXPECT_GE(pings(gni(1), gni(2)) + pings(gni(1), gni(12)), 1);
  EXPECT_EQ(info(gni(1)).ping_count, 0u);
}

TEST_F(Recovery, HealthSetByHandGoesIntoRecoveryAndIsChecked) {
  EXPECT_EQ(a->control().set_ni_health(gni(11), 1001).code(), -EINVAL);
  EXPECT_EQ(a->control().set_ni_health(gni(99), 10).code(), -ENOENT);
  EXPECT_EQ(a->control().set_peer_ni_health(gni(99), 10).code(), -ENOENT);
  // Each success gives back half the health: two recovery pings bring it back, not ten.
  ASSERT_TRUE(a->control().set_global("health_sensitivity", 500));
  ASSERT_TRUE(a->control().set_ni_health(gni(11), 0));
  EXPECT_EQ(health(gni(11)), 0);
  EXPECT_EQ(queue(true), std::vector<Nid>{gni(11)});
  // Selection avoids it meanwhile; recovery pings bring it back (nothing fails now).
  ASSERT_TRUE(eventually([&] { return health(gni(11)) == 1000 && queue(true).empty(); }));
}

TEST(MultiNet, TrafficUsesBothNetsUnlessOnesPeerNisAreUnhealthy) {
  Config ca = test::fabric_config({71}, 0, {}, 2);
  Config cb = test::fabric_config({72}, 0, {}, 2);
  Config ca1 = test::fabric_config({71}, 1, {}, 2), cb1 = test::fabric_config({72}, 1, {}, 2);
  ca.nets.push_back(ca1.nets[0]);
  cb.nets.push_back(cb1.nets[0]);
  auto a = Instance::create(ca, kPidLustre).value();
  auto b = Instance::create(cb, kPidLustre).value();
  Nid b1 = Nid::make(NetId::make(kGniLnd, 1), 72);
  ASSERT_TRUE(a->control().add_peer(PeerConfig{gni(72), true, {b1}}));
  auto me = b->me_attach(7, ProcessId::any(), 0, ~0ULL, Unlink::Retain, InsPos::After);
  char sink[8];
  MdDesc t;
  t.start = sink;
  t.length = sizeof sink;
  t.options = kMdOpPut | kMdTruncate;
  ASSERT_TRUE(b->md_attach(*me, t, Unlink::Retain));
  Fabric::instance().clear_sent();
  char byte = 1;
  auto put8 = [&] {
    for (int i = 0; i < 8; ++i) {
      MdDesc d;
      d.start = &byte;
      d.length = 1;
      d.threshold = 1;
      auto md = a->md_bind(d, Unlink::Unlink);
      ASSERT_EQ(a->put(Nid::any(), *md, AckReq::NoAck, ProcessId{gni(72), kPidLustre}, 7, 1, 0, 0), 0);
    }
  };
  put8();
  auto by_src = [] {
    std::map<Nid, int> m;
    for (auto& s : Fabric::instance().sent())
      if (s.type == MsgType::Put) m[s.src]++;
    return m;
  };
  EXPECT_EQ(by_src().size(), 2u);
  // The peer's only NI on gni1 is unhealthy: every message goes over gni, although the
  // local NI on gni1 is as healthy as ever.
  ASSERT_TRUE(a->control().set_peer_ni_health(b1, 500));
  Fabric::instance().clear_sent();
  put8();
  EXPECT_EQ(by_src(), (std::map<Nid, int>{{gni(71), 8}}));
}

}  // namespace
}  // namespace lnet
