// Dynamic discovery (peer/discovery.cpp) between instances joined by the test fabric:
// lazy discovery on first send, primary NIDs, merging, pushes on NI changes, discovery
// off on either side, failures, bad pushes, and the events each state must ignore.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include <lnet/lnet.hpp>
#include <lnet/wire.hpp>

#include "../support/event_log.hpp"
#include "../support/fabric.hpp"
#include "core/core.hpp"

namespace lnet {
namespace {

using namespace std::chrono_literals;
using net::DcState;
using test::Fabric;
namespace ps = net::peer_state;

Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }

using test::eventually;

Config with_discovery(std::initializer_list<std::uint32_t> addrs, int discovery = 1) {
  Config c = test::fabric_config(addrs);
  c.globals.discovery = discovery;
  return c;
}

class Discovery : public ::testing::Test {
 protected:
  void make(int a_discovery = 1, int b_discovery = 1) {
    a = Instance::create(with_discovery({1}, a_discovery), kPidLustre).value();
    b = Instance::create(with_discovery({2, 12}, b_discovery), kPidLustre).value();
    auto me = b->me_attach(7, ProcessId::any(), 0, ~0ULL, Unlink::Unlink, InsPos::After);
    MdDesc d;
    d.start = sink;
    d.length = sizeof sink;
    d.options = kMdOpPut | kMdTruncate | kMdManageRemote;
    d.handler = blog.handler();
    ASSERT_TRUE(b->md_attach(*me, d, Unlink::Retain));
    Fabric::instance().clear_sent();
  }
  void TearDown() override {
    Fabric::instance().hold(false);
    Fabric::instance().deliver_all();
    for (std::uint32_t n : {1, 2, 12}) Fabric::instance().fail(gni(n), std::nullopt);
    a.reset();
    b.reset();
  }
  // A PUT of one byte from a to `to` on portal 7; its SEND event goes to `log`.
  void put(Nid to, test::EventLog* log = nullptr) {
    MdDesc d;
    d.start = byte;
    d.length = 1;
    d.threshold = 1;
    if (log) d.handler = log->handler();
    auto md = a->md_bind(d, Unlink::Unlink);
    ASSERT_TRUE(md);
    ASSERT_EQ(a->put(Nid::any(), *md, AckReq::NoAck, ProcessId{to, kPidLustre}, 7, 1, 0, 0), 0);
  }
  static net::Peer* peer_of(Instance& i, Nid nid) {
    net::PeerNi* lpni = core::Core::of(i).state().find_peer_ni(nid);
    return lpni ? lpni->peer : nullptr;
  }
  static DcState state_of(Instance& i, Nid nid) {
    net::Peer* p = peer_of(i, nid);
    return p ? p->dc.state.load() : DcState::Merged;
  }
  static PeerInfo info_of(Instance& i, Nid nid) {
    for (const PeerInfo& p : i.control().peer_info())
      for (const PeerNiInfo& n : p.nis)
        if (n.nid == nid) return p;
    return {};
  }
  static std::vector<Nid> nids_of(const PeerInfo& p) {
    std::vector<Nid> v;
    for (const PeerNiInfo& n : p.nis) v.push_back(n.nid);
    std::sort(v.begin(), v.end(), [](Nid x, Nid y) { return x.value() < y.value(); });
    return v;
  }
  // Waits until neither side's discovery has anything left to do (a handshake ends with b
  // pushing back); checked twice in a row, as one side's last step may wake the other.
  bool settle() {
    core::Core& ca = core::Core::of(*a);
    core::Core& cb = core::Core::of(*b);
    return eventually([&] {
      return ca.discovery().idle() && cb.discovery().idle() && ca.discovery().idle() && cb.discovery().idle();
    });
  }
  // Messages a sent on the reserved portal (pings are GETs, pushes PUTs).
  static std::size_t sent_on_portal0(Nid from_net_of, MsgType type) {
    std::size_t n = 0;
    for (const auto& r : Fabric::instance().sent()) {
      if (r.hdr.type != type || r.src != from_net_of) continue;
      unsigned portal = type == MsgType::Get ? r.hdr.msg.get.ptl_index : r.hdr.msg.put.ptl_index;
      if (portal == kReservedPortal) ++n;
    }
    return n;
  }
  std::uint64_t errors(Instance& i) { return i.control().counters().errors; }

  std::unique_ptr<Instance> a, b;
  test::EventLog blog;
  char sink[64] = {};
  char byte[1] = {'d'};
};

TEST_F(Discovery, TheFirstSendDiscoversThePeerWithAllItsNisAndPushesOurs) {
  make();
  test::EventLog alog;
  put(gni(2), &alog);
  ASSERT_EQ(blog.wait(EventType::Put, 1), 1u) << "the message went once discovery ended";
  ASSERT_EQ(alog.wait(EventType::Send, 1), 1u);
  EXPECT_EQ(alog.find(EventType::Send)->status, 0);
  // b pushes its own ping info back once it has learned a is multi-rail (as the kernel does):
  // a's peer is queued again for that, so its state is read once both sides are done.
  ASSERT_TRUE(settle());
  PeerInfo p = info_of(*a, gni(2));
  EXPECT_EQ(state_of(*a, gni(2)), DcState::Discovered);
  EXPECT_TRUE(p.state & ps::kDiscovered);
  EXPECT_EQ(p.primary_nid, gni(2));
  EXPECT_TRUE(p.multi_rail);
  EXPECT_EQ(nids_of(p), (std::vector<Nid>{gni(2), gni(12)}));
  EXPECT_TRUE(p.state & ps::kNidsUptodate);
  EXPECT_EQ(sent_on_portal0(gni(1), MsgType::Get), 1u) << "one ping";
  EXPECT_EQ(sent_on_portal0(gni(1), MsgType::Put), 1u) << "one push";
  // The push told b about a: its peer is multi-rail and discovered, without a ping of its own.
  ASSERT_TRUE(eventually([&] { return state_of(*b, gni(1)) == DcState::Discovered; }));
  EXPECT_TRUE(info_of(*b, gni(1)).multi_rail);
  // Later sends go at once.
  Fabric::instance().clear_sent();
  put(gni(12));
  ASSERT_EQ(blog.wait(EventType::Put, 2), 2u);
  EXPECT_EQ(sent_on_portal0(gni(1), MsgType::Get), 0u);
}

TEST_F(Discovery, ThroughASecondaryNidThePeerEndsWithItsPrimary) {
  make();
  put(gni(12));
  ASSERT_EQ(blog.wait(EventType::Put, 1), 1u);
  PeerInfo p = info_of(*a, gni(12));
  EXPECT_EQ(p.primary_nid, gni(2)) << "the ping info's first NI is the primary";
  EXPECT_EQ(nids_of(p), (std::vector<Nid>{gni(2), gni(12)}));
  EXPECT_EQ(a->control().peer_info().size(), 1u);
}

TEST_F(Discovery, TwoPeersThatAreOneAreMergedWithTheirHeldMessages) {
  make();
  // a meets b through both of its NIs before discovering it: two peers (made on receive).
  for (Nid self : {gni(2), gni(12)}) {
    MdDesc d;
    d.start = byte;
    d.length = 1;
    auto md = b->md_bind(d, Unlink::Unlink);
    ASSERT_TRUE(md);
    ASSERT_EQ(b->put(self, *md, AckReq::NoAck, ProcessId{gni(1), kPidUserFlag | 5}, 9, 0, 0, 0), 0);
  }
  ASSERT_TRUE(eventually([&] { return a->control().peer_info().size() == 2; }));
  // Both get a message while the fabric holds every send: both rounds are under way.
  Fabric::instance().hold(true);
  test::EventLog l1, l2;
  put(gni(12), &l1);
  put(gni(2), &l2);
  ASSERT_TRUE(eventually([] { return Fabric::instance().pending() >= 2; })) << "two pings";
  Fabric::instance().hold(false);
  Fabric::instance().deliver_all();
  ASSERT_EQ(blog.wait(EventType::Put, 2), 2u) << "no held message is lost in the merge";
  ASSERT_EQ(l1.wait(EventType::Send, 1), 1u);
  ASSERT_EQ(l2.wait(EventType::Send, 1), 1u);
  EXPECT_EQ(l1.find(EventType::Send)->status, 0);
  EXPECT_EQ(l2.find(EventType::Send)->status, 0);
  ASSERT_EQ(a->control().peer_info().size(), 1u);
  PeerInfo p = info_of(*a, gni(12));
  EXPECT_EQ(p.primary_nid, gni(2));
  EXPECT_EQ(nids_of(p), (std::vector<Nid>{gni(2), gni(12)}));
  // Every credit comes back once the last of the handshake's messages has gone.
  EXPECT_TRUE(eventually([&] {
    for (const PeerNiInfo& n : info_of(*a, gni(12)).nis)
      if (n.tx_credits != n.max_tx_credits) return false;
    return true;
  })) << "credits lost in the merge";
}

TEST_F(Discovery, ANewNiIsPushedToPeersAndLearnedWithoutAPing) {
  make();
  put(gni(2));
  ASSERT_EQ(blog.wait(EventType::Put, 1), 1u);
  ASSERT_TRUE(settle());
  Fabric::instance().clear_sent();
  NetConfig nc;
  nc.net = NetId::make(kGniLnd, 0);
  nc.nid = gni(22);
  ASSERT_TRUE(b->control().add_ni(nc));
  ASSERT_TRUE(eventually([&] { return info_of(*a, gni(22)).nis.size() == 3; })) << "a learned 22@gni from a push";
  EXPECT_EQ(info_of(*a, gni(2)).primary_nid, gni(2));
  EXPECT_EQ(sent_on_portal0(gni(1), MsgType::Get), 0u) << "without a ping";
  ASSERT_TRUE(eventually([&] { return state_of(*a, gni(2)) == DcState::Discovered; }));
  // b deletes it again: a forgets it (it was not configured).
  ASSERT_TRUE(b->control().del_ni(gni(22)));
  ASSERT_TRUE(eventually([&] { return info_of(*a, gni(2)).nis.size() == 2; }));
}

TEST_F(Discovery, APeerWithDiscoveryOffIsTakenAsItIsAndNotPushed) {
  make(1, 0);
  put(gni(2));
  ASSERT_EQ(blog.wait(EventType::Put, 1), 1u);
  PeerInfo p = info_of(*a, gni(2));
  EXPECT_TRUE(p.state & ps::kNoDiscovery);
  EXPECT_FALSE(p.multi_rail) << "its NIs are not taken without discovery on both sides";
  EXPECT_EQ(nids_of(p), std::vector<Nid>{gni(2)});
  EXPECT_EQ(state_of(*a, gni(2)), DcState::Discovered);
  EXPECT_EQ(sent_on_portal0(gni(1), MsgType::Get), 1u);
  EXPECT_EQ(sent_on_portal0(gni(1), MsgType::Put), 0u) << "no push";
}

TEST_F(Discovery, OffHereASendDoesNotPingButDiscoverDoes) {
  make(0, 1);
  put(gni(2));
  ASSERT_EQ(blog.wait(EventType::Put, 1), 1u);
  EXPECT_EQ(sent_on_portal0(gni(1), MsgType::Get), 0u);
  EXPECT_EQ(state_of(*a, gni(2)), DcState::Undiscovered);
  auto r = a->control().discover(gni(2), false, 10s);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(sent_on_portal0(gni(1), MsgType::Get), 1u);
  EXPECT_TRUE(r->state & ps::kNoDiscovery) << "ours is off";
  EXPECT_EQ(nids_of(*r), std::vector<Nid>{gni(2)});
  // Turned on, the next discover takes every NI and pushes ours.
  ASSERT_TRUE(a->control().set_global("discovery", 1));
  r = a->control().discover(gni(2), false, 10s);
  ASSERT_TRUE(r) << r.message();
  EXPECT_TRUE(r->multi_rail);
  EXPECT_EQ(nids_of(*r), (std::vector<Nid>{gni(2), gni(12)}));
  EXPECT_EQ(sent_on_portal0(gni(1), MsgType::Put), 1u);
}

TEST_F(Discovery, AFailedPingFailsTheHeldMessagesAndTheNextSendTriesAgain) {
  make();
  Fabric::instance().fail(gni(2), HealthStatus::RemoteDropped);
  test::EventLog alog;
  put(gni(2), &alog);
  ASSERT_EQ(alog.wait(EventType::Send, 1), 1u);
  EXPECT_NE(alog.find(EventType::Send)->status, 0);
  EXPECT_EQ(state_of(*a, gni(2)), DcState::Undiscovered);
  EXPECT_TRUE(info_of(*a, gni(2)).state & ps::kRediscover);
  EXPECT_EQ(blog.count(EventType::Put), 0u);
  Fabric::instance().fail(gni(2), std::nullopt);
  put(gni(2));
  ASSERT_EQ(blog.wait(EventType::Put, 1), 1u);
  ASSERT_TRUE(settle());
  EXPECT_EQ(state_of(*a, gni(2)), DcState::Discovered);
  EXPECT_FALSE(info_of(*a, gni(2)).state & ps::kRediscover);
}

// A push as b's discovery would send it, with `payload` as the ping info.
Header push_header(std::uint32_t len) {
  Header h;
  h.type = MsgType::Put;
  h.src_nid = gni(2);
  h.src_pid = kPidLustre;
  h.dest_nid = gni(1);
  h.dest_pid = kPidLustre;
  h.payload_length = len;
  h.msg.put.ack_wmd = WireHandle::none();
  h.msg.put.match_bits = kPingMatchBits;
  h.msg.put.ptl_index = kReservedPortal;
  return h;
}

std::vector<std::uint8_t> ping_info_of(std::uint32_t features, std::initializer_list<std::uint32_t> addrs) {
  PingInfo info;
  info.features = features;
  info.pid = kPidLustre;
  info.nis.push_back(NiStatus{Nid::lo(), 7, 0});
  for (std::uint32_t a : addrs) info.nis.push_back(NiStatus{gni(a), kNiStatusUp, 0});
  return encode_ping_info(info);
}

TEST_F(Discovery, BadPushesAreCountedAndAnsweredWithAPing) {
  make();
  put(gni(2));
  ASSERT_EQ(blog.wait(EventType::Put, 1), 1u);
  // The handshake ends (b pushes back): from here on only the pushes below reach a.
  ASSERT_TRUE(settle());
  constexpr std::uint32_t kMr = kPingFeatNiStatus | kPingFeatMultiRail | kPingFeatDiscovery;

  // Corrupt: a ping follows.
  Fabric::instance().clear_sent();
  std::uint64_t e0 = errors(*a);
  std::vector<std::uint8_t> junk(64, 0xAB);
  ASSERT_EQ(Fabric::instance().inject(gni(1), push_header(64), gni(2), junk), 0);
  ASSERT_TRUE(eventually([&] { return errors(*a) == e0 + 1; }));
  ASSERT_TRUE(eventually([&] { return sent_on_portal0(gni(1), MsgType::Get) == 1; })) << "re-pinged";
  ASSERT_TRUE(eventually([&] { return state_of(*a, gni(2)) == DcState::Discovered; }));
  EXPECT_EQ(nids_of(info_of(*a, gni(2))), (std::vector<Nid>{gni(2), gni(12)})) << "nothing lost";

  // From a peer that is not multi-rail: dropped, nothing changes.
  auto non_mr = ping_info_of(kPingFeatNiStatus, {2, 12, 32});
  ASSERT_EQ(Fabric::instance().inject(gni(1), push_header(non_mr.size()), gni(2), non_mr), 0);
  ASSERT_TRUE(eventually([&] { return errors(*a) == e0 + 2; }));
  EXPECT_EQ(nids_of(info_of(*a, gni(2))), (std::vector<Nid>{gni(2), gni(12)}));

  // Truncated (more NIs than the push target holds): the target grows, a ping follows,
  // and the ping's answer (b's real NIs) is what a keeps.
  Fabric::instance().clear_sent();
  std::vector<std::uint32_t> many{2, 12};
  for (std::uint32_t n = 100; n < 130; ++n) many.push_back(n);
  PingInfo big;
  big.features = kMr;
  big.nis.push_back(NiStatus{Nid::lo(), 9, 0});
  for (std::uint32_t n : many) big.nis.push_back(NiStatus{gni(n), kNiStatusUp, 0});
  auto bytes = encode_ping_info(big);
  ASSERT_GT(bytes.size(), kPingInfoMinSize);
  ASSERT_EQ(Fabric::instance().inject(gni(1), push_header(bytes.size()), gni(2), bytes), 0);
  ASSERT_TRUE(eventually([&] { return sent_on_portal0(gni(1), MsgType::Get) == 1; }));
  ASSERT_TRUE(
      eventually([&] { return state_of(*a, gni(2)) == DcState::Discovered && info_of(*a, gni(2)).nis.size() == 2; }));
  // The next push of that size fits.
  ASSERT_EQ(Fabric::instance().inject(gni(1), push_header(bytes.size()), gni(2), bytes), 0);
  ASSERT_TRUE(eventually([&] { return info_of(*a, gni(2)).nis.size() == many.size(); }));

  // Byte-swapped but valid: taken (its list replaces the one before).
  auto swapped = ping_info_of(kMr, {2, 12, 42});
  for (std::size_t i = 0; i + 4 <= 16; i += 4) std::reverse(swapped.begin() + i, swapped.begin() + i + 4);
  for (std::size_t e = 16; e < swapped.size(); e += 16) {
    std::reverse(swapped.begin() + e, swapped.begin() + e + 8);
    std::reverse(swapped.begin() + e + 8, swapped.begin() + e + 12);
    std::reverse(swapped.begin() + e + 12, swapped.begin() + e + 16);
  }
  ASSERT_EQ(Fabric::instance().inject(gni(1), push_header(swapped.size()), gni(2), swapped), 0);
  ASSERT_TRUE(eventually([&] { return info_of(*a, gni(2)).nis.size() == 3; }));
  EXPECT_EQ(nids_of(info_of(*a, gni(2))), (std::vector<Nid>{gni(2), gni(12), gni(42)}));
}

TEST_F(Discovery, EventsAStateDoesNotExpectAreIgnored) {
  make();
  put(gni(2));
  ASSERT_EQ(blog.wait(EventType::Put, 1), 1u);
  ASSERT_TRUE(settle());
  core::Core& core = core::Core::of(*a);
  net::Peer* peer = peer_of(*a, gni(2));
  auto before = nids_of(info_of(*a, gni(2)));
  // A ping reply or a push ACK while discovered (seed 004: impossible events): ignored.
  std::vector<std::uint8_t> reply = ping_info_of(kPingFeatNiStatus | kPingFeatMultiRail, {2, 12, 52});
  core.discovery().ping_done(peer, 0, reply);
  core.discovery().push_done(peer, 0);
  core.discovery().push_done(peer, -EIO);
  EXPECT_EQ(peer->dc.state.load(), DcState::Discovered);
  EXPECT_EQ(nids_of(info_of(*a, gni(2))), before);
  // The same to an undiscovered peer (made on receive).
  ASSERT_TRUE(a->control().add_peer(PeerConfig{gni(77), true, {}}, false));
  net::Peer* fresh = peer_of(*a, gni(77));
  core.discovery().ping_done(fresh, 0, reply);
  core.discovery().push_done(fresh, 0);
  EXPECT_EQ(fresh->dc.state.load(), DcState::Undiscovered);
  EXPECT_EQ(info_of(*a, gni(77)).nis.size(), 1u);
}

TEST_F(Discovery, ALockedPrimaryStaysAndPeerDelKeepsItWithoutForce) {
  make();
  ASSERT_TRUE(a->control().add_peer(PeerConfig{gni(12), true, {}, true}, true));
  auto r = a->control().discover(gni(12), false, 10s);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->primary_nid, gni(12)) << "locked: b's own primary does not replace it";
  EXPECT_EQ(nids_of(*r), (std::vector<Nid>{gni(2), gni(12)}));
  EXPECT_TRUE(r->state & ps::kLockPrimary);
  // b hears of a through the push and may answer: once both are done, nothing of b's
  // discovery traffic adds its NIs back after the delete (a loaded host let one do so).
  ASSERT_TRUE(eventually([&] { return state_of(*b, gni(1)) == DcState::Discovered; }));
  ASSERT_TRUE(settle());
  ASSERT_TRUE(a->control().del_peer(gni(12), {}));
  EXPECT_EQ(nids_of(info_of(*a, gni(12))), std::vector<Nid>{gni(12)}) << "the locked primary stays";
  ASSERT_TRUE(a->control().del_peer(gni(12), {}, true));
  // Gone with --force (b's discovery traffic may make a new, unlocked peer of it).
  for (const PeerInfo& p : a->control().peer_info()) EXPECT_FALSE(p.state & ps::kLockPrimary);
}

}  // namespace
}  // namespace lnet
