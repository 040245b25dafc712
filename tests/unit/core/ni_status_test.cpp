// A local NI's status (net show, our ping info) follows its link and, while health is on,
// its health: down at 0 (LNet 2.17). Selection and routes leave an NI whose link is down.
#include <gtest/gtest.h>

#include <algorithm>

#include <lnet/lnet.hpp>

#include "core/core.hpp"
#include "support/event_log.hpp"
#include "support/fabric.hpp"

namespace lnet {
namespace {

using test::Fabric;

Nid gni(std::uint32_t a, std::uint32_t net = 0) { return Nid::make(NetId::make(kGniLnd, net), a); }

std::unique_ptr<Instance> make(Config cfg) {
  auto r = Instance::create(std::move(cfg), kPidLustre);
  EXPECT_TRUE(r) << r.message();
  return r ? std::move(*r) : nullptr;
}

// The status `lnet` gives its NI `nid` (net show).
bool status_up(Instance& lnet, Nid nid) {
  for (const NiInfo& i : lnet.control().ni_info())
    if (i.nid == nid) return i.up;
  ADD_FAILURE() << "no NI " << nid.to_string();
  return false;
}

// The status `from`'s ping of `to` reports for `nid` (0: not listed or no answer; the
// callers that wait for a status ask again).
std::uint32_t pinged_status(Instance& from, Nid to, Nid nid) {
  auto p = from.ping(ProcessId{to, kPidLustre}, std::chrono::milliseconds(2000));
  if (p)
    for (const NiStatus& s : p->info.nis)
      if (s.nid == nid) return s.status;
  return 0;
}

class NiStatus_ : public ::testing::Test {
 protected:
  void SetUp() override {
    a = make(test::fabric_config({1, 11}));
    b = make(test::fabric_config({2}));
    ASSERT_TRUE(a && b);
  }
  void TearDown() override {
    Fabric::instance().fail(gni(1), std::nullopt);
    a.reset();
    b.reset();
  }
  std::unique_ptr<Instance> a, b;
};

TEST_F(NiStatus_, HealthZeroIsDownWhileHealthIsOn) {
  Fabric::instance().fail(gni(1), HealthStatus::LocalError);  // its recovery pings fail: health stays 0
  ASSERT_TRUE(a->control().set_ni_health(gni(1), 0));
  EXPECT_FALSE(status_up(*a, gni(1)));
  EXPECT_TRUE(status_up(*a, gni(11)));
  EXPECT_TRUE(test::eventually([&] { return pinged_status(*b, gni(11), gni(1)) == kNiStatusDown; }))
      << "peers are told";
  Fabric::instance().fail(gni(1), std::nullopt);
  ASSERT_TRUE(a->control().set_ni_health(gni(1), 1000));
  EXPECT_TRUE(status_up(*a, gni(1)));
  EXPECT_TRUE(test::eventually([&] { return pinged_status(*b, gni(11), gni(1)) == kNiStatusUp; }));
}

TEST_F(NiStatus_, HealthZeroIsNotDownWithHealthOff) {
  ASSERT_TRUE(a->control().set_global("health_sensitivity", 0));
  ASSERT_TRUE(a->control().set_ni_health(gni(1), 0));
  EXPECT_TRUE(status_up(*a, gni(1)));
  EXPECT_TRUE(test::eventually([&] { return pinged_status(*b, gni(11), gni(1)) == kNiStatusUp; }));
}

TEST_F(NiStatus_, ALinkDownIsDownAndNotSelected) {
  auto c = make(test::fabric_config({3, 13}));  // a multi-rail peer to send to (b only pings)
  ASSERT_TRUE(c);
  ASSERT_TRUE(a->control().add_peer(PeerConfig{gni(3), true, {gni(13)}}));
  Fabric::instance().link(gni(1), false);
  EXPECT_FALSE(status_up(*a, gni(1)));
  bool fatal = false;
  for (const NiInfo& i : a->control().ni_info())
    if (i.nid == gni(1)) fatal = i.fatal_error;
  EXPECT_TRUE(fatal) << "net show -v: fatal_error 1";
  EXPECT_TRUE(test::eventually([&] { return pinged_status(*b, gni(11), gni(1)) == kNiStatusDown; }))
      << "the monitor tells the peers";
  Fabric::instance().clear_sent();
  char byte = 'x';
  for (int i = 0; i < 6; ++i) {
    MdDesc d;
    d.start = &byte;
    d.length = 1;
    auto md = a->md_bind(d, Unlink::Unlink);
    ASSERT_TRUE(md);
    ASSERT_EQ(a->put(Nid::any(), *md, AckReq::NoAck, ProcessId{gni(3), kPidLustre}, 7, 1, 0, 0), 0);
  }
  int from1 = 0, from11 = 0;
  for (auto& s : Fabric::instance().sent())
    if (s.type == MsgType::Put) (s.src == gni(1) ? from1 : from11)++;
  EXPECT_EQ(from1, 0) << "an NI whose link is down carries nothing";
  EXPECT_EQ(from11, 6);
  Fabric::instance().link(gni(1), true);
  EXPECT_TRUE(status_up(*a, gni(1)));
  EXPECT_TRUE(test::eventually([&] { return pinged_status(*b, gni(11), gni(1)) == kNiStatusUp; }));
}

// A driver that lost every connection to a peer NI reports it down: that counts against
// the peer NI's health and queues it for recovery, as LNet's notify does; up again only
// marks it alive (its health comes back when it is heard from).
TEST(PeerNiNotify, ADriverReportingAPeerNiDownLowersItsHealth) {
  auto a = make(test::fabric_config({1, 11}));
  auto b = make(test::fabric_config({2, 12}));
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->control().add_peer(PeerConfig{gni(2), true, {gni(12)}}));
  core::Core& c = core::Core::of(*a);
  auto peer_health = [&](Nid n) { return c.state().find_peer_ni(n)->health.load(); };
  Fabric::instance().fail(gni(12), HealthStatus::RemoteDropped);  // its recovery pings fail
  c.notify_peer(*c.state().find_ni(gni(11)), gni(12), false);
  EXPECT_EQ(peer_health(gni(12)), 900);
  EXPECT_EQ(peer_health(gni(2)), 1000);
  auto q = a->control().recovery_queue(false);
  EXPECT_NE(std::find(q.begin(), q.end(), gni(12)), q.end()) << "queued for recovery";
  c.notify_peer(*c.state().find_ni(gni(11)), gni(12), true);
  EXPECT_LE(peer_health(gni(12)), 900) << "up again is not heard from";
  Fabric::instance().fail(gni(12), std::nullopt);
  EXPECT_TRUE(test::eventually([&] { return peer_health(gni(12)) == 1000; })) << "recovery pings bring it back";
}

TEST(NiStatusRoutes, ARouteIsDownWhileItsLocalNetHasNoNiUp) {
  // A (1@gni) reaches gni1 through R (2@gni, 3@gni1).
  auto a = make(test::fabric_config({1}));
  auto r = make(test::fabric_config({2}));
  ASSERT_TRUE(a && r);
  ASSERT_TRUE(a->control().add_route(RouteConfig{NetId::make(kGniLnd, 1), gni(2), -1, 0}));
  auto route_up = [&] {
    auto routes = a->control().route_info();
    return !routes.empty() && routes.front().up;
  };
  ASSERT_TRUE(route_up());
  Fabric::instance().link(gni(1), false);
  EXPECT_FALSE(route_up());
  Fabric::instance().link(gni(1), true);
  EXPECT_TRUE(route_up());
}

}  // namespace
}  // namespace lnet
