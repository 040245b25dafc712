// Peer and NI tx credits: messages queue when a credit count goes negative, leave in
// order as credits come back, and the minimum is remembered.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <thread>

#include <lnet/lnd/header.hpp>
#include <lnet/lnet.hpp>

#include "base/cpt.hpp"
#include "support/event_log.hpp"
#include "support/fabric.hpp"

namespace lnet {
namespace {

using test::EventLog;
using test::Fabric;

constexpr unsigned kPortal = 5;

struct Node {
  EventLog log;
  std::vector<char> buf = std::vector<char>(1 << 16);
  std::unique_ptr<Instance> lnet;

  explicit Node(const Config& cfg) {
    auto r = Instance::create(cfg, kPidLustre);
    EXPECT_TRUE(r) << r.message();
    lnet = std::move(*r);
  }
  // Accepts any PUT on kPortal, appending.
  void sink() {
    auto me = lnet->me_attach(kPortal, ProcessId::any(), 0, ~0ULL, Unlink::Unlink, InsPos::After);
    MdDesc d;
    d.start = buf.data();
    d.length = buf.size();
    d.options = kMdOpPut;
    d.handler = log.handler();
    ASSERT_TRUE(lnet->md_attach(*me, d, Unlink::Retain));
  }
};

class Credits : public ::testing::Test {
 protected:
  void TearDown() override {
    Fabric::instance().hold(false);
    Fabric::instance().deliver_all();
  }
  void put(Node& from, Nid to, const std::string& data) {
    std::string& s = payloads.emplace_back(data);
    MdDesc d;
    d.start = s.data();
    d.length = s.size();
    d.threshold = 1;
    d.handler = sends.handler();
    auto md = from.lnet->md_bind(d, Unlink::Unlink);
    ASSERT_TRUE(md);
    ASSERT_EQ(from.lnet->put(Nid::any(), *md, AckReq::NoAck, ProcessId{to, kPidLustre}, kPortal, 1, 0, 0), 0);
  }
  PeerNiInfo peer_ni(Node& n, Nid nid) {
    for (auto& p : n.lnet->peers())
      for (auto& pn : p.nis)
        if (pn.nid == nid) return pn;
    ADD_FAILURE() << "no peer NI " << nid.to_string();
    return {};
  }
  NiInfo ni(Node& n, Nid nid) {
    for (auto& i : n.lnet->nets())
      if (i.nid == nid) return i;
    ADD_FAILURE() << "no NI " << nid.to_string();
    return {};
  }
  std::deque<std::string> payloads;
  EventLog sends;
};

Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }

TEST_F(Credits, PeerCreditsQueueAndDrainInOrder) {
  NetTunables t;
  t.peer_credits = 2;
  t.credits = 64;
  Node a(test::fabric_config({1}, 0, t));
  Node b(test::fabric_config({2}, 0, t));
  b.sink();
  Fabric::instance().hold(true);
  for (int i = 0; i < 5; ++i) put(a, gni(2), std::string(1, static_cast<char>('a' + i)));
  EXPECT_EQ(Fabric::instance().pending(), 2u) << "two peer credits: two on the wire";
  PeerNiInfo p = peer_ni(a, gni(2));
  EXPECT_EQ(p.max_tx_credits, 2);
  EXPECT_EQ(p.tx_credits, -3);
  EXPECT_EQ(p.min_tx_credits, -3);
  EXPECT_EQ(p.tx_q_nob, 5 * (1 + kHeaderSize));
  EXPECT_EQ(sends.count(EventType::Send), 0u);

  ASSERT_TRUE(Fabric::instance().deliver_one());
  EXPECT_EQ(Fabric::instance().pending(), 2u) << "a returned credit releases the next message";
  EXPECT_EQ(peer_ni(a, gni(2)).tx_credits, -2);
  Fabric::instance().deliver_all();
  EXPECT_EQ(std::string(b.buf.data(), 5), "abcde") << "queued messages keep their order";
  p = peer_ni(a, gni(2));
  EXPECT_EQ(p.tx_credits, 2);
  EXPECT_EQ(p.min_tx_credits, -3);
  EXPECT_EQ(p.tx_q_nob, 0u);
  EXPECT_EQ(sends.count(EventType::Send), 5u);
  EXPECT_EQ(test::settled_msgs_alloc(*a.lnet), 0u);
}

TEST_F(Credits, NiCreditsQueueAcrossPeers) {
  NetTunables t;
  t.peer_credits = 8;
  t.credits = 2;
  Node a(test::fabric_config({1}, 0, t));
  Node b(test::fabric_config({2}, 0, t));
  Node c(test::fabric_config({3}, 0, t));
  b.sink();
  c.sink();
  Fabric::instance().hold(true);
  put(a, gni(2), "b1");
  put(a, gni(3), "c1");
  put(a, gni(2), "b2");
  put(a, gni(3), "c2");
  EXPECT_EQ(Fabric::instance().pending(), 2u);
  NiInfo n = ni(a, gni(1));
  EXPECT_EQ(n.tx_credits, -2);
  EXPECT_EQ(n.min_tx_credits, -2);
  PeerNiInfo pb = peer_ni(a, gni(2));
  EXPECT_EQ(pb.max_tx_credits, 2) << "peer credits are capped to the NI's";
  EXPECT_EQ(pb.tx_credits, 0) << "the waiting messages hold their peer credit";
  Fabric::instance().deliver_all();
  EXPECT_EQ(std::string(b.buf.data(), 4), "b1b2");
  EXPECT_EQ(std::string(c.buf.data(), 4), "c1c2");
  n = ni(a, gni(1));
  EXPECT_EQ(n.tx_credits, 2);
  EXPECT_EQ(n.min_tx_credits, -2);
}

// An NI on some CPTs (LNet's `CPT: "[1]"`) has its credits on those only: peers whose
// NIDs hash to different CPTs of the instance share one queue. The same NI on every CPT
// gives each peer's CPT its own queue.
TEST_F(Credits, NiOnOneCptSharesOneQueueAcrossPeersOfEveryCpt) {
  NetTunables t;
  t.peer_credits = 8;
  t.credits = 2;
  ASSERT_NE(CptTable(2).of_nid(gni(2)), CptTable(2).of_nid(gni(3))) << "the peers must be on different CPTs";
  Node b(test::fabric_config({2}, 0, t));
  Node c(test::fabric_config({3}, 0, t));
  b.sink();
  c.sink();
  for (bool some : {true, false}) {
    SCOPED_TRACE(some ? "CPT [1]" : "every CPT");
    Config cfg = test::fabric_config({1}, 0, t, 2);
    if (some) cfg.nets[0].cpts = {1};
    Node a(cfg);
    NiInfo n = ni(a, gni(1));
    EXPECT_EQ(n.cpts, (some ? std::vector<unsigned>{1} : std::vector<unsigned>{0, 1}));
    // LNet's share: credits on one CPT; max(credits/2, 8 * peer_credits) capped at credits on each of two.
    EXPECT_EQ(n.max_tx_credits, some ? 2 : 4);
    Fabric::instance().hold(true);
    put(a, gni(2), "b1");
    put(a, gni(3), "c1");
    put(a, gni(2), "b2");
    put(a, gni(3), "c2");
    EXPECT_EQ(Fabric::instance().pending(), some ? 2u : 4u);
    n = ni(a, gni(1));
    EXPECT_EQ(n.tx_credits, some ? -2 : 0);
    Fabric::instance().deliver_all();  // in order: queued messages leave as credits come back
    Fabric::instance().hold(false);
    n = ni(a, gni(1));
    EXPECT_EQ(n.tx_credits, n.max_tx_credits);
    EXPECT_EQ(test::settled_msgs_alloc(*a.lnet), 0u);
  }
  EXPECT_EQ(std::string(b.buf.data(), 8), "b1b2b1b2");
  EXPECT_EQ(std::string(c.buf.data(), 8), "c1c2c1c2");
}

// Threads sending to peers of both CPTs through an NI on one CPT meet in its one queue
// (the tsan preset checks the locking): everything arrives, every credit comes back.
TEST_F(Credits, NiOnOneCptUnderConcurrentSenders) {
  NetTunables t;
  t.peer_credits = 2;
  t.credits = 3;
  Config cfg = test::fabric_config({1}, 0, t, 2);
  cfg.nets[0].cpts = {0};
  Node a(cfg);
  std::vector<std::unique_ptr<Node>> peers;
  for (std::uint32_t addr : {2U, 3U, 4U, 5U}) {
    peers.push_back(std::make_unique<Node>(test::fabric_config({addr}, 0, t)));
    peers.back()->sink();
  }
  constexpr int kThreads = 4, kPuts = 200;
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      char byte = static_cast<char>('a' + k);
      for (int i = 0; i < kPuts; ++i) {
        MdDesc d;
        d.start = &byte;
        d.length = 1;
        d.threshold = 1;
        auto md = a.lnet->md_bind(d, Unlink::Unlink);
        Nid to = gni(2 + static_cast<std::uint32_t>((k + i) % 4));
        if (!md || a.lnet->put(Nid::any(), *md, AckReq::NoAck, ProcessId{to, kPidLustre}, kPortal, 1, 0, 0) != 0)
          ++refused;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(refused.load(), 0);
  std::size_t got = 0;
  for (auto& p : peers) got += p->log.count(EventType::Put);
  EXPECT_EQ(got, static_cast<std::size_t>(kThreads * kPuts));
  NiInfo n = ni(a, gni(1));
  EXPECT_EQ(n.max_tx_credits, 3);
  EXPECT_EQ(n.tx_credits, 3);
  EXPECT_EQ(test::settled_msgs_alloc(*a.lnet), 0u);
}

TEST_F(Credits, ShutdownFailsQueuedAndInFlightMessages) {
  NetTunables t;
  t.peer_credits = 1;
  Node b(test::fabric_config({2}, 0, t));
  {
    Node a(test::fabric_config({1}, 0, t));
    Fabric::instance().hold(true);
    put(a, gni(2), "x");  // on the wire (held by the driver)
    put(a, gni(2), "y");  // waits for x's peer credit
    EXPECT_EQ(Fabric::instance().pending(), 1u);
  }
  auto evs = sends.events();
  ASSERT_EQ(evs.size(), 2u);
  for (auto& e : evs) EXPECT_EQ(e.status, -ESHUTDOWN);
  EXPECT_EQ(Fabric::instance().pending(), 0u);
}

TEST_F(Credits, TunablesAreValidated) {
  NetTunables t;
  t.credits = 0;
  auto r = Instance::create(test::fabric_config({9}, 0, t), kPidLustre);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), -EINVAL);
  EXPECT_NE(r.message().find("credits 0"), std::string::npos) << r.message();
}

}  // namespace
}  // namespace lnet
