// Routing through a router instance on the test fabric: A (1@gni) - R (2@gni, 3@gni1) -
// B (4@gni1). Forwarding with router buffers and credits, route selection, the router
// checker, and configuration changes at run time.
#include <gtest/gtest.h>

#include <optional>

#include <array>
#include <deque>
#include <map>
#include <thread>

#include <lnet/lnet.hpp>

#include "core/core.hpp"
#include "support/event_log.hpp"
#include "support/fabric.hpp"

namespace lnet {
namespace {

using test::EventLog;
using test::Fabric;
using test::SentRecord;

Nid gni(std::uint32_t a, unsigned net = 0) { return Nid::make(NetId::make(kGniLnd, net), a); }
NetId gninet(unsigned n) { return NetId::make(kGniLnd, n); }

Config two_nets(std::uint32_t a0, std::uint32_t a1, NetTunables t = {}) {
  Config c = test::fabric_config({a0}, 0, t);
  Config c1 = test::fabric_config({a1}, 1, t);
  c.nets.push_back(c1.nets[0]);
  return c;
}

constexpr unsigned kPortal = 8;

class Routing : public ::testing::Test {
 protected:
  void SetUp() override { build({}); }
  // `buffers`: the router's buffer pools, when not the default ones.
  void build(NetTunables rt, std::optional<BufferConfig> buffers = {}) {
    a = Instance::create(test::fabric_config({1}, 0), kPidLustre).value();
    r = Instance::create(two_nets(2, 3, rt), kPidLustre).value();
    if (buffers) {
      ASSERT_TRUE(r->control().set_buffers(*buffers));
    }
    b = Instance::create(test::fabric_config({4}, 1), kPidLustre).value();
    for (auto* i : {&a, &r, &b}) (*i)->control().set_global("alive_router_check_interval", 0).or_throw();
    ASSERT_TRUE(a->control().add_route(RouteConfig{gninet(1), gni(2), -1, 0}));
    ASSERT_TRUE(b->control().add_route(RouteConfig{gninet(0), gni(3, 1), -1, 0}));
    ASSERT_TRUE(r->control().set_routing(true));
    auto me = b->me_attach(kPortal, ProcessId::any(), 0, ~0ULL, Unlink::Unlink, InsPos::After);
    MdDesc d;
    d.start = sink.data();
    d.length = sink.size();
    d.options = kMdOpPut | kMdOpGet | kMdManageRemote | kMdTruncate;
    d.handler = blog.handler();
    ASSERT_TRUE(b->md_attach(*me, d, Unlink::Retain));
  }
  void TearDown() override {
    Fabric::instance().hold(false);
    Fabric::instance().deliver_all();
    a.reset();
    r.reset();
    b.reset();
  }
  void put(const std::string& data, AckReq ack = AckReq::Ack, std::uint32_t offset = 0) {
    std::string& s = payloads.emplace_back(data);
    MdDesc d;
    d.start = s.data();
    d.length = s.size();
    d.threshold = ack == AckReq::Ack ? 2 : 1;
    d.handler = alog.handler();
    auto md = a->md_bind(d, Unlink::Unlink);
    ASSERT_TRUE(md);
    ASSERT_EQ(a->put(Nid::any(), *md, ack, ProcessId{gni(4, 1), kPidLustre}, kPortal, 1, offset, 0), 0);
  }
  std::unique_ptr<Instance> a, r, b;
  std::vector<char> sink = std::vector<char>(1 << 20);
  std::deque<std::string> payloads;
  EventLog alog, blog;
};

TEST_F(Routing, PutAndGetThroughTheRouter) {
  put(std::string(5000, 'r'));
  auto ack = alog.find(EventType::Ack);
  ASSERT_TRUE(ack) << "ACK came back through the router";
  EXPECT_EQ(ack->mlength, 5000u);
  EXPECT_EQ(std::string(sink.data(), 5000), std::string(5000, 'r'));
  auto ev = blog.find(EventType::Put);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->initiator.nid, gni(1)) << "the source NID survives forwarding";
  EXPECT_EQ(ev->sender, gni(3, 1)) << "the last hop is the router";
  EXPECT_EQ(r->counters().route_count, 2u) << "the PUT one way, the ACK the other";
  EXPECT_EQ(r->counters().route_length, 5000u);

  std::vector<char> back(5000);
  MdDesc d;
  d.start = back.data();
  d.length = back.size();
  d.threshold = 2;
  d.handler = alog.handler();
  auto md = a->md_bind(d, Unlink::Unlink);
  ASSERT_EQ(a->get(Nid::any(), *md, ProcessId{gni(4, 1), kPidLustre}, kPortal, 1, 0), 0);
  auto reply = alog.find(EventType::Reply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->mlength, 5000u);
  EXPECT_EQ(std::string(back.begin(), back.end()), std::string(5000, 'r'));
  for (auto* i : {&a, &r, &b}) EXPECT_EQ(test::settled_msgs_alloc(**i), 0u);
}

// What a driver may cache for a message's memory (LndMessage::memory): an MD that takes any
// number of operations names itself until it is unlinked; one that ends with its message
// names nothing; a forwarded message names the router's buffers, alive as long as it.
TEST_F(Routing, MessagesSayWhoKeepsTheirMemory) {
  Fabric::instance().clear_sent();
  put("once");  // threshold 2: ends with its ACK
  ASSERT_TRUE(alog.find(EventType::Ack));
  std::string lasting(3000, 'l');
  MdDesc d;
  d.start = lasting.data();
  d.length = lasting.size();
  d.handler = alog.handler();
  auto md = a->md_bind(d, Unlink::Retain);
  ASSERT_TRUE(md);
  ASSERT_EQ(a->put(Nid::any(), *md, AckReq::Ack, ProcessId{gni(4, 1), kPidLustre}, kPortal, 1, 0, 0), 0);
  ASSERT_EQ(alog.wait(EventType::Ack, 2), 2u);
  ASSERT_EQ(alog.wait(EventType::Send, 2), 2u);  // the MD is idle: unlinking retires it
  std::vector<SentRecord> from_a, forwarded;
  for (const SentRecord& s : Fabric::instance().sent()) {
    if (s.type == MsgType::Ack && s.src == gni(4, 1)) {
      EXPECT_EQ(s.memory, 0u) << "an ACK carries no memory";
    }
    if (s.type != MsgType::Put || s.hdr.msg.put.ptl_index != kPortal) continue;
    if (s.src == gni(1)) from_a.push_back(s);
    if (s.src == gni(3, 1)) forwarded.push_back(s);
  }
  ASSERT_EQ(from_a.size(), 2u);
  EXPECT_EQ(from_a[0].memory, 0u);
  EXPECT_NE(from_a[1].memory, 0u);
  EXPECT_TRUE(from_a[1].memory_alive);
  ASSERT_EQ(forwarded.size(), 2u);
  for (const SentRecord& s : forwarded) {
    EXPECT_EQ(s.memory, kHostMemory);
    EXPECT_TRUE(s.memory_alive);
  }
  EXPECT_TRUE(Fabric::instance().memory_alive(gni(1), from_a[1].memory));
  ASSERT_EQ(a->md_unlink(*md), 0);
  EXPECT_FALSE(Fabric::instance().memory_alive(gni(1), from_a[1].memory)) << "an unlinked MD's memory may be freed";
  EXPECT_FALSE(Fabric::instance().memory_alive(gni(1), 0));
  EXPECT_TRUE(Fabric::instance().memory_alive(gni(3, 1), kHostMemory));
}

TEST_F(Routing, PingAcrossTheRouter) {
  auto p = a->ping(ProcessId{gni(4, 1), kPidLustre}, std::chrono::milliseconds(2000));
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(p->info.nis[1].nid, gni(4, 1));
  Nid src;
  std::uint32_t order;
  EXPECT_EQ(a->dist(gni(4, 1), &src, &order), 2);
  EXPECT_EQ(src, gni(1));
}

TEST_F(Routing, ANodeThatDoesNotRouteDrops) {
  ASSERT_TRUE(r->control().set_routing(false));
  ASSERT_TRUE(test::eventually([&] { return !r->control().routing_draining(); })) << "the drain never ended";
  std::uint64_t drops = r->counters().drop_count;
  put("x", AckReq::NoAck);
  EXPECT_EQ(r->counters().drop_count, drops + 1);
  EXPECT_EQ(blog.count(EventType::Put), 0u);
  EXPECT_TRUE(r->ping_info().features & kPingFeatRteDisabled);
}

// Routing off drains (2.17): the ping info says RTE_DISABLED at once and routing show says
// off, while what arrives is still forwarded; once nothing was forwarded for the quiet
// interval (alive_router_check_interval 0 here: 1 s) it stops, and a PUT is dropped.
// Routing on during the drain calls it off.
TEST_F(Routing, RoutingOffDrainsFirst) {
  put("a", AckReq::NoAck);
  ASSERT_TRUE(blog.find(EventType::Put));
  ASSERT_TRUE(r->control().set_routing(false));
  EXPECT_FALSE(r->control().routing()) << "the setting is off at once";
  EXPECT_TRUE(r->control().routing_draining());
  EXPECT_TRUE(r->ping_info().features & kPingFeatRteDisabled) << "announced at once";
  std::uint64_t routed = r->counters().route_count;
  put("b", AckReq::NoAck, 1);
  ASSERT_TRUE(test::eventually([&] { return blog.count(EventType::Put) == 2; })) << "not forwarded while draining";
  EXPECT_EQ(sink[1], 'b');
  EXPECT_EQ(r->counters().route_count, routed + 1);

  // On again: the announcement is taken back, nothing stopped.
  ASSERT_TRUE(r->control().set_routing(true));
  EXPECT_TRUE(r->control().routing());
  EXPECT_FALSE(r->control().routing_draining());
  EXPECT_FALSE(r->ping_info().features & kPingFeatRteDisabled);

  ASSERT_TRUE(r->control().set_routing(false));
  ASSERT_TRUE(test::eventually([&] { return !r->control().routing_draining(); })) << "the drain never ended";
  EXPECT_TRUE(r->ping_info().features & kPingFeatRteDisabled);
  std::uint64_t drops = r->counters().drop_count;
  put("c", AckReq::NoAck, 2);
  EXPECT_EQ(r->counters().drop_count, drops + 1) << "forwarded after the drain";
  EXPECT_EQ(blog.count(EventType::Put), 2u);
}

TEST_F(Routing, RouterCreditsQueueForwardedMessages) {
  TearDown();
  NetTunables t;
  t.peer_buffer_credits = 1;
  build(t);
  Fabric::instance().hold(true);
  for (int i = 0; i < 3; ++i)
    put(std::string(1, static_cast<char>('0' + i)), AckReq::NoAck, static_cast<std::uint32_t>(i));
  // A's three PUTs are on the wire to R; deliver them one by one.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Fabric::instance().deliver_one());
  PeerNiInfo from_a;
  for (auto& p : r->peers())
    for (auto& n : p.nis)
      if (n.nid == gni(1)) from_a = n;
  EXPECT_EQ(from_a.min_rtr_credits, -2) << "two forwarded messages waited for A's router credit";
  Fabric::instance().hold(false);
  Fabric::instance().deliver_all();
  EXPECT_EQ(std::string(sink.data(), 3), "012");
  EXPECT_EQ(blog.count(EventType::Put), 3u);
  for (auto& p : r->peers())
    for (auto& n : p.nis)
      if (n.nid == gni(1)) {
        EXPECT_EQ(n.rtr_credits, 1);
      }
  EXPECT_EQ(test::settled_msgs_alloc(*r), 0u);
}

// The router's buffer pools run dry under a flood of routed traffic (one buffer of each
// size): what does not find a buffer waits for one, in order, and nothing is dropped or
// corrupted when they come back.
TEST_F(Routing, RouterBuffersRunningDryQueueAndLoseNothing) {
  TearDown();
  build({}, BufferConfig{1, 1, 1});
  // 60 PUTs of every pool's size (tiny, a page, more), held on the wire then let go at once.
  constexpr int kPuts = 60;
  const std::size_t sizes[] = {16, 4000, 12000};
  std::uint32_t offset = 0;
  std::vector<std::pair<std::uint32_t, std::string>> sent;
  Fabric::instance().hold(true);
  for (int i = 0; i < kPuts; ++i) {
    std::string data(sizes[i % 3], static_cast<char>('a' + i % 26));
    sent.emplace_back(offset, data);
    put(data, AckReq::NoAck, offset);
    offset += static_cast<std::uint32_t>(data.size());
  }
  Fabric::instance().hold(false);
  Fabric::instance().deliver_all();
  ASSERT_EQ(blog.wait(EventType::Put, kPuts), static_cast<std::size_t>(kPuts)) << "routed PUTs were lost";
  for (const auto& [at, data] : sent)
    EXPECT_TRUE(std::string(sink.data() + at, data.size()) == data) << "the PUT at offset " << at << " differs";
  int least = 0;
  for (const RouterCptInfo& c : r->control().router_pools())
    for (const RouterPoolInfo& p : c.pools) least = std::min(least, p.min_credits);
  EXPECT_LT(least, 0) << "no message ever waited for a buffer: the pools never ran dry";
  for (const RouterCptInfo& c : r->control().router_pools())
    for (const RouterPoolInfo& p : c.pools) EXPECT_EQ(p.credits, p.nbuffers) << "a buffer was not given back";
  EXPECT_EQ(r->counters().drop_count, 0u);
  EXPECT_EQ(test::settled_msgs_alloc(*r), 0u);
}

TEST_F(Routing, RouteSelectionFollowsPriorityAndTheChecker) {
  // A second router R2 (5@gni, 6@gni1) with a worse priority.
  auto r2 = Instance::create(two_nets(5, 6), kPidLustre).value();
  r2->control().set_global("alive_router_check_interval", 0).or_throw();
  ASSERT_TRUE(r2->control().set_routing(true));
  ASSERT_TRUE(a->control().add_route(RouteConfig{gninet(1), gni(5), -1, 1}));
  Fabric::instance().clear_sent();
  put("p", AckReq::NoAck);
  auto sent = Fabric::instance().sent();
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(sent[0].next_hop, gni(2)) << "priority 0 wins";

  // R stops routing: the checker's ping sees RTE_DISABLED and takes the route down.
  ASSERT_TRUE(r->control().set_routing(false));
  core::Core::of(*a).router().check_routers();
  auto routes = a->control().route_info();
  ASSERT_EQ(routes.size(), 2u);
  EXPECT_FALSE(routes[0].up);
  EXPECT_TRUE(routes[1].up);
  Fabric::instance().clear_sent();
  put("q", AckReq::NoAck);
  sent = Fabric::instance().sent();
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(sent[0].next_hop, gni(5)) << "the route through R2 takes over";

  // R comes back.
  ASSERT_TRUE(r->control().set_routing(true));
  core::Core::of(*a).router().check_routers();
  EXPECT_TRUE(a->control().route_info()[0].up);
  r2.reset();
  core::Core::of(*a).router().check_routers();
  EXPECT_FALSE(a->control().route_info()[1].up) << "a gateway that does not answer is down";
}

// LNet's peer aliveness on routers (peer_timeout): a forwarded PUT for a next hop that
// has sent the router nothing for peer_timeout seconds and that its driver reports down
// is dropped at the router; one that spoke within the timeout, or is up, is not.
TEST_F(Routing, ARouterDropsForSilentPeersItsDriverReportsDown) {
  NetTunables t;
  t.peer_timeout = 1000;
  TearDown();
  build(t);
  core::Core& rc = core::Core::of(*r);
  auto down = [&](bool alive) { rc.notify_peer(*rc.state().find_ni(gni(3, 1)), gni(4, 1), alive); };
  put("first");  // B answers with an ACK: R has heard from B since
  ASSERT_TRUE(alog.find(EventType::Ack)) << "routed before B is reported down";
  down(false);
  blog.clear();
  alog.clear();
  put("within", AckReq::Ack, 8);
  EXPECT_TRUE(alog.find(EventType::Ack)) << "B spoke within its peer_timeout: still forwarded to";

  // With a timeout of 0 aliveness is off; with the last word from B older than the
  // timeout (none at all on a fresh router), what its driver says decides.
  TearDown();
  t.peer_timeout = 1;
  build(t);
  blog.clear();
  alog.clear();
  core::Core& rc2 = core::Core::of(*r);
  ASSERT_TRUE(r->control().add_peer(PeerConfig{gni(4, 1), false, {}}, false));  // known, never heard from
  rc2.notify_peer(*rc2.state().find_ni(gni(3, 1)), gni(4, 1), false);
  std::uint64_t drops = r->counters().drop_count;
  put("dropped", AckReq::NoAck);
  auto sent = alog.find(EventType::Send);
  ASSERT_TRUE(sent);
  EXPECT_EQ(sent->status, 0) << "A's send to R succeeded";
  EXPECT_EQ(blog.count(EventType::Put), 0u) << "R did not forward to a silent peer reported down";
  EXPECT_EQ(r->counters().drop_count, drops + 1);
  rc2.notify_peer(*rc2.state().find_ni(gni(3, 1)), gni(4, 1), true);
  put("up again", AckReq::NoAck, 16);
  EXPECT_TRUE(blog.find(EventType::Put)) << "forwarded once its driver says it is up";
}

TEST_F(Routing, RoutesAreValidated) {
  EXPECT_EQ(a->control().add_route(RouteConfig{gninet(0), gni(2), -1, 0}).code(), -EINVAL) << "local net";
  EXPECT_EQ(a->control().add_route(RouteConfig{gninet(5), gni(9, 7), -1, 0}).code(), -EHOSTUNREACH);
  EXPECT_EQ(a->control().add_route(RouteConfig{gninet(1), gni(2), -1, 0}).code(), -EEXIST);
  EXPECT_EQ(a->control().add_route(RouteConfig{gninet(5), gni(2), 300, 0}).code(), -EINVAL);
  EXPECT_EQ(a->control().del_route(gninet(7), Nid::any()).code(), -ENOENT);
  EXPECT_EQ(a->control().del_route(gninet(1), gni(2)).code(), 0);
  EXPECT_TRUE(a->control().route_info().empty());
  put("z", AckReq::NoAck);
  auto send = alog.find(EventType::Send);
  ASSERT_TRUE(send);
  EXPECT_EQ(send->status, -EHOSTUNREACH);
}

TEST(RunTimeConfig, NisComeAndGo) {
  auto a = Instance::create(test::fabric_config({11}, 0), kPidLustre).value();
  auto b = Instance::create(test::fabric_config({12}, 0), kPidLustre).value();
  std::uint32_t seq = a->ping_info().nis[0].status;
  NetConfig nc;
  nc.net = gninet(2);
  nc.nid = gni(13, 2);
  auto added = a->control().add_ni(nc);
  ASSERT_TRUE(added) << added.message();
  EXPECT_EQ(a->nids().size(), 3u);
  EXPECT_GT(a->ping_info().nis[0].status, seq) << "the ping buffer's sequence moved on";
  EXPECT_EQ(a->ping_info().nis.size(), 3u);
  EXPECT_EQ(a->control().add_ni(nc).code(), -EEXIST);
  EXPECT_TRUE(b->ping(ProcessId{gni(11), kPidLustre}, std::chrono::milliseconds(1000)));
  ASSERT_EQ(a->control().del_ni(gni(13, 2)).code(), 0);
  EXPECT_EQ(a->nids().size(), 2u);
  EXPECT_EQ(a->control().del_ni(gni(13, 2)).code(), -ENOENT);
  EXPECT_EQ(a->control().del_ni(Nid::lo()).code(), -EINVAL);
  EXPECT_TRUE(b->ping(ProcessId{gni(11), kPidLustre}, std::chrono::milliseconds(1000))) << "the rest still works";
  ASSERT_TRUE(a->control().add_ni(nc)) << "and it can come back";
}

// A router's NI that hears nothing for router_ping_timeout + alive_router_check_interval
// is reported down (seed 003: status, ping info), and up again when it hears.
TEST_F(Routing, ARoutersSilentNiGoesDownAndComesBackWhenItHears) {
  ASSERT_TRUE(r->control().set_global("router_ping_timeout", 1));
  ASSERT_TRUE(r->control().set_global("alive_router_check_interval", 1));
  auto up = [&](Nid nid) {
    for (const NiInfo& i : r->control().ni_info())
      if (i.nid == nid) return i.up;
    return true;
  };
  // Its link on net 1 is cut: nothing is heard there (the push of its new status to b
  // fails too, where an ACK would have been something heard).
  Fabric::instance().fail(gni(3, 1), HealthStatus::LocalDropped);
  ASSERT_TRUE(test::eventually([&] { return !up(gni(3, 1)); })) << "3@gni1 heard nothing and stayed up";
  // Nothing talks to 2@gni either, so it goes down with 3@gni1 and comes back when a's
  // ping is heard; a ping that crosses r's push of that news may go unanswered (seen
  // on a loaded host): asked again until one is answered.
  auto info = Result<PingResult>::fail(-ETIMEDOUT, "not asked");
  ASSERT_TRUE(test::eventually([&] {
    info = a->ping(ProcessId{gni(2), kPidLustre}, std::chrono::seconds(2), 16);
    return bool(info);
  })) << info.message();
  bool listed_down = false;
  for (const NiStatus& ns : info->info.nis)
    listed_down = listed_down || (ns.nid == gni(3, 1) && ns.status == kNiStatusDown);
  EXPECT_TRUE(listed_down) << "its ping info does not say 3@gni1 is down";
  // The link is back and b speaks to it: up again.
  Fabric::instance().fail(gni(3, 1), std::nullopt);
  ASSERT_TRUE(b->ping(ProcessId{gni(3, 1), kPidLustre}, std::chrono::seconds(5), 16));
  ASSERT_TRUE(test::eventually([&] { return up(gni(3, 1)); }));
  // Routing off (once drained): nothing is judged any more, everything is reported up.
  ASSERT_TRUE(r->control().set_routing(false));
  ASSERT_TRUE(test::eventually([&] { return !r->control().routing_draining(); })) << "the drain never ended";
  EXPECT_TRUE(up(gni(2)) && up(gni(3, 1)));
}

TEST(RunTimeConfig, PeersAndGlobals) {
  auto a = Instance::create(test::fabric_config({21}, 0), kPidLustre).value();
  ASSERT_EQ(a->control().add_peer(PeerConfig{gni(22), true, {gni(23)}}, true).code(), 0);
  auto peers = a->control().configured_peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].primary, gni(22));
  EXPECT_EQ(peers[0].nids, std::vector<Nid>{gni(23)});
  EXPECT_EQ(a->control().del_peer(gni(22), {gni(23)}).code(), 0);
  EXPECT_TRUE(a->control().configured_peers()[0].nids.empty());
  EXPECT_EQ(a->control().del_peer(gni(22), {}).code(), 0);
  EXPECT_TRUE(a->control().configured_peers().empty());
  EXPECT_EQ(a->control().del_peer(gni(22), {}).code(), -ENOENT);

  // Tunables of features not built take only the value that says what the code does.
  ASSERT_TRUE(a->control().set_global("numa_range", 3));
  EXPECT_EQ(a->control().globals().numa_range, 3);
  EXPECT_EQ(a->control().set_global("numa_range", -1).code(), -EINVAL);
  EXPECT_EQ(a->control().set_global("bogus", 1).code(), -EINVAL);
  EXPECT_TRUE(a->control().set_global("retry_count", 0));
  EXPECT_TRUE(a->control().set_global("discovery", 1));
  EXPECT_EQ(a->control().globals().discovery, 1);
  EXPECT_TRUE(a->control().set_global("drop_asym_route", 1));
  EXPECT_TRUE(a->control().set_global("router_sensitivity", 10));
  EXPECT_EQ(a->control().set_global("router_sensitivity", 101).code(), -EINVAL);
  EXPECT_EQ(a->control().globals().retry_count, 0);
  // LNet's rules between tunables: retry_count below transaction_timeout, and no
  // resends without health (health_sensitivity 0 turns retry_count to 0).
  ASSERT_TRUE(a->control().set_global("retry_count", 3));
  Status low = a->control().set_global("transaction_timeout", 3);
  EXPECT_EQ(low.code(), -EINVAL);
  EXPECT_NE(low.message().find("retry_count 3 must be below transaction_timeout 3"), std::string::npos)
      << low.message();
  EXPECT_EQ(a->control().globals().transaction_timeout, 150) << "a refused value changes nothing";
  ASSERT_TRUE(a->control().set_global("health_sensitivity", 0));
  EXPECT_EQ(a->control().globals().retry_count, 0);
  Status no_health = a->control().set_global("retry_count", 1);
  EXPECT_EQ(no_health.code(), -EINVAL);
  EXPECT_NE(no_health.message().find("needs health_sensitivity above 0"), std::string::npos) << no_health.message();
  EXPECT_EQ(a->control().set_global("response_tracking", -1).code(), -EINVAL);
  EXPECT_EQ(a->control().set_global("transaction_timeout", 0).code(), -EINVAL);
}

// Multi-rail routing with discovery on (seed 003): A (1@gni) reaches B (6@gni1) through
// R1 (2, 12 @gni; 3, 13 @gni1) and R2 (4, 14 @gni; 5, 15 @gni1), each a multi-rail peer
// discovered on first use.
class MultiRailRouting : public ::testing::Test {
 protected:
  static Config node(std::initializer_list<std::uint32_t> net0, std::initializer_list<std::uint32_t> net1) {
    Config c = test::fabric_config(net0, 0);
    for (const NetConfig& n : test::fabric_config(net1, 1).nets) c.nets.push_back(n);
    c.globals.discovery = 1;
    c.globals.alive_router_check_interval = 0;
    return c;
  }
  void SetUp() override {
    a = Instance::create(node({1}, {}), kPidLustre).value();
    r1 = Instance::create(node({2, 12}, {3, 13}), kPidLustre).value();
    r2 = Instance::create(node({4, 14}, {5, 15}), kPidLustre).value();
    b = Instance::create(node({}, {6}), kPidLustre).value();
    for (auto* r : {&r1, &r2}) ASSERT_TRUE((*r)->control().set_routing(true));
    ASSERT_TRUE(a->control().add_route(RouteConfig{gninet(1), gni(2), -1, 0}));
    ASSERT_TRUE(a->control().add_route(RouteConfig{gninet(1), gni(4), -1, 0}));
    ASSERT_TRUE(b->control().add_route(RouteConfig{gninet(0), gni(3, 1), -1, 0}));
    ASSERT_TRUE(b->control().add_route(RouteConfig{gninet(0), gni(5, 1), -1, 0}));
    auto me = b->me_attach(kPortal, ProcessId::any(), 0, ~0ULL, Unlink::Unlink, InsPos::After);
    MdDesc d;
    d.start = sink.data();
    d.length = sink.size();
    d.options = kMdOpPut | kMdManageRemote | kMdTruncate;
    d.handler = blog.handler();
    ASSERT_TRUE(b->md_attach(*me, d, Unlink::Retain));
  }
  void TearDown() override {
    for (auto* i : {&a, &r1, &r2, &b}) i->reset();
  }
  // n PUTs from A to B, each awaited; the gateway NIs A handed them to, counted.
  std::map<Nid, int> send(int n) {
    Fabric::instance().clear_sent();
    std::size_t before = blog.count(EventType::Put);
    for (int i = 0; i < n; ++i) {
      MdDesc d;
      d.start = byte;
      d.length = 1;
      auto md = a->md_bind(d, Unlink::Unlink);
      EXPECT_TRUE(md);
      EXPECT_EQ(a->put(Nid::any(), *md, AckReq::NoAck, ProcessId{gni(6, 1), kPidLustre}, kPortal, 0, 0, 0), 0);
      EXPECT_EQ(blog.wait(EventType::Put, before + static_cast<std::size_t>(i) + 1), before + i + 1);
    }
    std::map<Nid, int> hops;
    for (const auto& s : Fabric::instance().sent())
      if (s.src == gni(1) && s.hdr.type == MsgType::Put && s.hdr.msg.put.ptl_index == kPortal) ++hops[s.next_hop];
    return hops;
  }
  // A discovers both gateways and B, and the handshakes end (the gateways push back
  // to A): what follows is the same on every run.
  void settle() {
    for (Nid n : {gni(2), gni(4), gni(6, 1)}) ASSERT_TRUE(a->control().discover(n, false, std::chrono::seconds(10)));
    auto discovered = [](Instance& i, Nid n) {
      net::PeerNi* p = core::Core::of(i).state().find_peer_ni(n);
      return p && p->peer->dc.state.load() == net::DcState::Discovered;
    };
    ASSERT_TRUE(test::eventually([&] {
      return discovered(*a, gni(2)) && discovered(*a, gni(4)) && discovered(*a, gni(6, 1)) && discovered(*r1, gni(1)) &&
             discovered(*r2, gni(1)) && discovered(*b, gni(1));
    }));
  }
  std::unique_ptr<Instance> a, r1, r2, b;
  EventLog blog;
  std::array<char, 64> sink{};
  char byte[1] = {'x'};
};

TEST_F(MultiRailRouting, TrafficSpreadsOverTheGatewaysAndTheirNis) {
  send(1);  // the gateway and B discovered on first use
  settle();
  auto hops = send(16);
  for (Nid n : {gni(2), gni(12), gni(4), gni(14)}) EXPECT_GT(hops[n], 0) << n.to_string() << " carried nothing";
  // Each gateway is one multi-rail peer with all four of its NIs.
  for (Nid gw : {gni(2), gni(4)}) {
    for (const PeerInfo& p : a->control().peer_info()) {
      if (p.primary_nid != gw) continue;
      EXPECT_TRUE(p.multi_rail);
      EXPECT_EQ(p.nis.size(), 4u);
    }
  }
  for (const RouteInfo& ri : a->control().route_info()) EXPECT_TRUE(ri.up);
}

TEST_F(MultiRailRouting, AGatewayWithItsRemoteNisDownLosesItsRouteAndTrafficMoves) {
  settle();
  // R1's side on gni1 goes down: its ping info says so, and A's next check sees it
  // (avoid_asym_router_failure).
  ASSERT_TRUE(core::Core::of(*r1).set_ni_up(gni(3, 1), false));
  ASSERT_TRUE(core::Core::of(*r1).set_ni_up(gni(13, 1), false));
  // A check of A's own (the router checker's rounds go on meanwhile, and the answer to a
  // ping it sent before the change may still come: the state converges, not at once).
  auto route_up = [&](bool want) {
    return test::eventually([&] {
      core::Core::of(*a).router().check_routers();
      return a->control().route_info()[0].up == want;
    });
  };
  EXPECT_TRUE(route_up(false)) << "R1 has no NI up on gni1";
  auto routes = a->control().route_info();
  ASSERT_EQ(routes.size(), 2u);
  EXPECT_TRUE(routes[1].up);
  auto hops = send(8);
  EXPECT_EQ(hops[gni(2)] + hops[gni(12)], 0) << "nothing through R1";
  EXPECT_EQ(hops[gni(4)] + hops[gni(14)], 8);
  // One comes back: R1 is used again.
  ASSERT_TRUE(core::Core::of(*r1).set_ni_up(gni(13, 1), true));
  EXPECT_TRUE(route_up(true));
  hops = send(16);
  EXPECT_GT(hops[gni(2)] + hops[gni(12)], 0);
}

TEST_F(MultiRailRouting, AGatewayThatDoesNotAnswerWithinRouterPingTimeoutIsDown) {
  settle();
  ASSERT_TRUE(a->control().set_global("retry_count", 0));
  ASSERT_TRUE(a->control().set_global("transaction_timeout", 2));
  ASSERT_TRUE(a->control().set_global("router_ping_timeout", 1));
  // R1's answers are lost on the way back to A; R2 answers.
  for (Nid from : {gni(2), gni(12)}) {
    FaultRule lost;
    lost.source = from;
    lost.messages = 1u << static_cast<unsigned>(MsgType::Reply);
    lost.drop_all = true;
    ASSERT_TRUE(a->control().add_fault(lost));
  }
  core::Core& core = core::Core::of(*a);
  core.router().check_routers();  // returns after router_ping_timeout: R1's round goes on
  auto routes = a->control().route_info();
  ASSERT_EQ(routes.size(), 2u);
  EXPECT_FALSE(routes[0].up) << "R1 did not answer within router_ping_timeout";
  EXPECT_TRUE(routes[1].up);
  auto hops = send(4);
  EXPECT_EQ(hops[gni(2)] + hops[gni(12)], 0) << "nothing through R1";
  // It answers again: once the lost ping has timed out, the next check brings it back.
  EXPECT_EQ(a->control().del_faults(false, Nid::any(), Nid::any()), 2);
  EXPECT_TRUE(test::eventually([&] {
    core.router().check_routers();
    return a->control().route_info()[0].up;
  }));
}

// lnetd starts with the defaults and applies its configuration's tunables after: a new
// alive_router_check_interval must take effect then, not after the 60 s (or more) the
// checker was already waiting with the old one.
TEST_F(MultiRailRouting, ANewRouterCheckIntervalTakesEffectAtOnce) {
  settle();
  ASSERT_TRUE(a->control().set_global("router_ping_timeout", 1));
  ASSERT_TRUE(a->control().set_global("alive_router_check_interval", 600));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the checker now waits 600 s
  for (Nid from : {gni(2), gni(12)}) {                          // R1 stops answering
    FaultRule lost;
    lost.source = from;
    lost.messages = 1u << static_cast<unsigned>(MsgType::Reply);
    lost.drop_all = true;
    ASSERT_TRUE(a->control().add_fault(lost));
  }
  ASSERT_TRUE(a->control().set_global("alive_router_check_interval", 1));
  EXPECT_TRUE(test::eventually([&] { return !a->control().route_info()[0].up; }))
      << "R1 was not checked under the new interval";
  EXPECT_TRUE(a->control().route_info()[1].up);
}

TEST_F(MultiRailRouting, GatewayNisBelowRouterSensitivityAreNotUsed) {
  settle();  // no discovery traffic later (a gateway heard from is fully healthy again)
  ASSERT_TRUE(a->control().set_peer_ni_health(gni(2), 900));
  auto hops = send(8);
  EXPECT_EQ(hops[gni(2)], 0) << "900 is below 100 % of the maximum";
  EXPECT_GT(hops[gni(12)], 0);
  ASSERT_TRUE(a->control().set_global("router_sensitivity", 50));
  ASSERT_TRUE(a->control().set_peer_ni_health(gni(12), 400));
  ASSERT_TRUE(a->control().set_peer_ni_health(gni(4), 400));
  ASSERT_TRUE(a->control().set_peer_ni_health(gni(14), 400));
  hops = send(4);
  EXPECT_EQ(hops[gni(2)], 4) << "the one NI at 50 % or more";
}

// A GET through a gateway whose REPLY is lost (it came back another way, which died)
// blames the gateway NI it went to: below router_sensitivity its route is not used. The
// recovery pings of that NI bring it back to full health, and its route with it. The
// failure costs the NI the health_sensitivity of the gateway's route, not the global one.
TEST_F(MultiRailRouting, AGatewayNiBlamedForALostReplyIsPingedBackIntoUse) {
  settle();
  ASSERT_TRUE(a->control().del_route(gninet(1), gni(4)));
  ASSERT_TRUE(a->control().add_route(RouteConfig{gninet(1), gni(4), -1, 0, 250}));
  for (const RouteInfo& ri : a->control().route_info())
    EXPECT_EQ(ri.health_sensitivity, ri.gateway == gni(4) ? 250u : 1u) << ri.gateway.to_string();
  ASSERT_TRUE(a->control().set_global("retry_count", 0));
  ASSERT_TRUE(a->control().set_global("transaction_timeout", 2));
  ASSERT_TRUE(a->control().add_udsp(UdspRule{"", "6@gni1", "4@gni", std::nullopt}, -1));  // through R2
  FaultRule lost;
  lost.messages = 1u << static_cast<unsigned>(MsgType::Reply);
  lost.drop_all = true;
  ASSERT_TRUE(a->control().add_fault(lost));
  EventLog glog;
  MdDesc d;
  d.start = sink.data();
  d.length = 1;
  d.threshold = 2;
  d.handler = glog.handler();
  auto md = a->md_bind(d, Unlink::Unlink);
  ASSERT_TRUE(md);
  ASSERT_EQ(a->get(Nid::any(), *md, ProcessId{gni(6, 1), kPidLustre}, kPortal, 0, 0), 0);
  ASSERT_TRUE(glog.wait_unlinked(*md));
  EXPECT_EQ(glog.count(EventType::Reply), 0u) << "the REPLY was lost: the MD is unlinked";
  EXPECT_EQ(glog.count(EventType::Unlink), 1u);
  EXPECT_EQ(a->control().del_faults(false, Nid::any(), Nid::any()), 1);
  auto health = [&](Nid nid) {
    for (const PeerInfo& p : a->control().peer_info())
      for (const PeerNiInfo& n : p.nis)
        if (n.nid == nid) return n.health;
    return -1;
  };
  int low = std::min(health(gni(4)), health(gni(14)));
  EXPECT_EQ(low, 750) << "the NI the GET went to was not blamed by its route's health_sensitivity";
  EXPECT_TRUE(test::eventually([&] { return health(gni(4)) == 1000 && health(gni(14)) == 1000; }))
      << "no recovery: " << health(gni(4)) << " " << health(gni(14));
  EXPECT_TRUE(test::eventually([&] { return a->control().recovery_queue(false).empty(); }));
}

TEST_F(MultiRailRouting, ARouterRuleSteersTrafficToItsGateway) {
  settle();
  // udsp add --dst 6@gni1 --rte 4@gni: B is reached through R2 (the peer of 4@gni), on
  // either of its NIs.
  ASSERT_TRUE(a->control().add_udsp(UdspRule{"", "6@gni1", "4@gni", std::nullopt}, -1));
  auto hops = send(8);
  EXPECT_EQ(hops[gni(2)] + hops[gni(12)], 0) << "R1 not used";
  EXPECT_EQ(hops[gni(4)] + hops[gni(14)], 8);
  for (const PeerInfo& p : a->control().peer_info())
    for (const PeerNiInfo& n : p.nis)
      if (n.nid == gni(6, 1)) {
        EXPECT_EQ(n.preferred_gateways, std::vector<std::string>{"4@gni"});
      }
  // A pattern that covers both of R1's NIDs; deleting the rule restores the spread.
  ASSERT_TRUE(a->control().del_udsp(0));
  ASSERT_TRUE(a->control().add_udsp(UdspRule{"", "gni1", "*@gni", std::nullopt}, -1));
  ASSERT_TRUE(a->control().del_udsp(-1));
  hops = send(16);
  EXPECT_GT(hops[gni(2)] + hops[gni(12)], 0);
  EXPECT_GT(hops[gni(4)] + hops[gni(14)], 0);
  // Rules that make no sense are refused, nothing applied.
  EXPECT_EQ(a->control().add_udsp(UdspRule{"", "", "4@gni", std::nullopt}, -1).code(), -EINVAL);
  EXPECT_EQ(a->control().add_udsp(UdspRule{"", "6@gni1", "4@gni", 1u}, -1).code(), -EINVAL);
  EXPECT_EQ(a->control().add_udsp(UdspRule{"", "6@gni1", "4@gni[", std::nullopt}, -1).code(), -EINVAL);
  EXPECT_TRUE(a->control().udsp_rules().empty());
}

}  // namespace
}  // namespace lnet
