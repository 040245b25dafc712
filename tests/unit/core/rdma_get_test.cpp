// Optimised GET through the driver SPI: the initiator's driver asks the core for the
// REPLY (LndHost::create_reply) and the target's driver moves the data straight into
// the sink, as the MPI LND does with a ready-send; no REPLY message travels.
#include <gtest/gtest.h>

#include <numeric>

#include <lnet/lnet.hpp>

#include "support/event_log.hpp"
#include "support/fabric.hpp"

namespace lnet {
namespace {

using test::EventLog;
using test::Fabric;

constexpr unsigned kPortal = 9;

Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }

class RdmaGet : public ::testing::Test {
 protected:
  void SetUp() override {
    Fabric::instance().rdma_get(true);
    a = Instance::create(test::fabric_config({31}), kPidLustre).value();
    b = Instance::create(test::fabric_config({32}), kPidLustre).value();
    std::iota(source.begin(), source.end(), 0);
  }
  void TearDown() override {
    Fabric::instance().rdma_get(false);
    a.reset();
    b.reset();
  }
  // b exposes `source` for GETs on kPortal, match bits 7.
  void expose() {
    auto me = b->me_attach(kPortal, ProcessId::any(), 7, 0, Unlink::Retain, InsPos::After);
    ASSERT_TRUE(me);
    MdDesc d;
    d.start = source.data();
    d.length = source.size();
    d.options = kMdOpGet | kMdManageRemote | kMdTruncate;
    d.handler = target_log.handler();
    ASSERT_TRUE(b->md_attach(*me, d, Unlink::Retain));
  }
  // a GETs into `sink` (all of it) from b at `offset`.
  void get(std::uint32_t offset) {
    MdDesc d;
    d.start = sink.data();
    d.length = sink.size();
    d.threshold = 2;
    d.options = kMdTruncate;
    d.handler = log.handler();
    auto md = a->md_bind(d, Unlink::Unlink);
    ASSERT_TRUE(md);
    ASSERT_EQ(a->get(Nid::any(), *md, ProcessId{gni(32), kPidLustre}, kPortal, 7, offset), 0);
  }
  std::unique_ptr<Instance> a, b;
  std::vector<unsigned char> source = std::vector<unsigned char>(3000);
  std::vector<unsigned char> sink = std::vector<unsigned char>(1000, 0xee);
  EventLog log, target_log;
};

TEST_F(RdmaGet, ReplyArrivesWithoutAReplyMessage) {
  expose();
  Fabric::instance().clear_sent();
  get(100);
  auto reply = log.find(EventType::Reply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 0);
  EXPECT_EQ(reply->mlength, 1000u);
  EXPECT_EQ(reply->rlength, 1000u);
  EXPECT_EQ(reply->initiator.nid, gni(32));
  EXPECT_EQ(std::vector<unsigned char>(source.begin() + 100, source.begin() + 1100), sink);
  auto on_target = target_log.find(EventType::Get);
  ASSERT_TRUE(on_target);
  EXPECT_EQ(on_target->mlength, 1000u);
  EXPECT_EQ(on_target->offset, 100u);
  auto sent = Fabric::instance().sent();
  ASSERT_EQ(sent.size(), 1u) << "only the GET travels";
  EXPECT_EQ(sent[0].type, MsgType::Get);
  EXPECT_EQ(a->counters().recv_count, 1u) << "the REPLY counts as received";
  EXPECT_EQ(b->counters().send_count, 1u) << "and as sent by the target";
  EXPECT_EQ(test::settled_msgs_alloc(*a), 0u);
  EXPECT_EQ(test::settled_msgs_alloc(*b), 0u);
}

TEST_F(RdmaGet, ShortSourceGivesAShortReply) {
  expose();
  get(2500);  // 500 bytes left in the source
  auto reply = log.find(EventType::Reply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 0);
  EXPECT_EQ(reply->mlength, 500u);
  EXPECT_EQ(sink[499], source[2999]);
  EXPECT_EQ(sink[500], 0xee);
}

TEST_F(RdmaGet, UnmatchedGetFailsTheReply) {
  get(0);  // b exposes nothing
  auto reply = log.find(EventType::Reply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, -ENODATA);
  EXPECT_TRUE(reply->unlinked);
  EXPECT_EQ(test::settled_msgs_alloc(*a), 0u);
}

// The REPLY of an optimised GET is hearing from the peer NI, as a REPLY message would
// be: its health rises. (Without that, a gateway reached over such a driver, once blamed
// for a lost reply, stayed below router_sensitivity: its recovery pings, answered, never
// raised it, and its routes stayed unused.)
TEST_F(RdmaGet, TheReplyRaisesThePeerNisHealth) {
  expose();
  get(0);  // b is a peer now
  ASSERT_TRUE(log.find(EventType::Reply));
  ASSERT_TRUE(a->control().set_global("recovery_interval", 60));  // only our GET speaks
  ASSERT_TRUE(a->control().set_peer_ni_health(gni(32), 500));
  auto health = [&] {
    for (const PeerInfo& p : a->control().peer_info())
      for (const PeerNiInfo& n : p.nis)
        if (n.nid == gni(32)) return n.health;
    return -1;
  };
  ASSERT_EQ(health(), 500);
  log.clear();
  get(0);
  ASSERT_TRUE(log.find(EventType::Reply));
  EXPECT_GT(health(), 500) << "the REPLY moved by the driver did not count as hearing from b";
}

}  // namespace
}  // namespace lnet
