// Receive validation: malformed headers are refused with -EPROTO and counted; messages
// for nobody are dropped and counted; nothing crashes and the instance keeps working.
#include <gtest/gtest.h>

#include <lnet/lnd/header.hpp>
#include <lnet/lnet.hpp>

#include "support/event_log.hpp"
#include "support/fabric.hpp"

namespace lnet {
namespace {

using test::Fabric;

Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }

class Parse : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = Instance::create(test::fabric_config({1}), kPidLustre);
    ASSERT_TRUE(r) << r.message();
    lnet = std::move(*r);
  }
  Header header(MsgType t, std::uint32_t len = 0) {
    Header h;
    h.dest_nid = gni(1);
    h.src_nid = gni(2);
    h.dest_pid = kPidLustre;
    h.src_pid = kPidLustre;
    h.type = t;
    h.payload_length = len;
    return h;
  }
  int inject(const Header& h, std::vector<std::uint8_t> payload = {}) {
    return Fabric::instance().inject(gni(1), h, gni(2), std::move(payload));
  }
  std::unique_ptr<Instance> lnet;
};

TEST_F(Parse, MalformedHeadersAreRefusedAndCounted) {
  struct Case {
    const char* what;
    Header h;
  };
  std::vector<Case> cases;
  cases.push_back({"ACK with a payload", header(MsgType::Ack, 4)});
  cases.push_back({"GET with a payload", header(MsgType::Get, 1)});
  cases.push_back({"PUT above 1 MiB", header(MsgType::Put, kMaxPayload + 1)});
  cases.push_back({"REPLY above 1 MiB", header(MsgType::Reply, kMaxPayload + 1)});
  cases.push_back({"HELLO", header(MsgType::Hello)});
  Header any_src = header(MsgType::Put);
  any_src.src_nid = Nid::any();
  cases.push_back({"source ANY", any_src});
  Header same_net = header(MsgType::Put);
  same_net.dest_nid = gni(3);
  cases.push_back({"for another NID on our own net", same_net});
  for (const auto& c : cases) {
    Counters before = lnet->counters();
    EXPECT_EQ(inject(c.h), -EPROTO) << c.what;
    Counters after = lnet->counters();
    EXPECT_EQ(after.errors, before.errors + 1) << c.what;
    EXPECT_EQ(after.drop_count, before.drop_count + 1) << c.what;
  }
  EXPECT_EQ(lnet->counters().msgs_alloc, 0u);
  // Still alive and answering.
  EXPECT_TRUE(lnet->ping(ProcessId{Nid::lo(), kPidLustre}, std::chrono::milliseconds(1000)));
}

TEST_F(Parse, NotForUsAndNotARouterDrops) {
  Header h = header(MsgType::Put, 3);
  h.dest_nid = *Nid::parse("10.0.0.1@tcp");
  std::size_t discarded = Fabric::instance().discarded();
  Counters before = lnet->counters();
  EXPECT_EQ(inject(h, {1, 2, 3}), 0);
  EXPECT_EQ(lnet->counters().drop_count, before.drop_count + 1);
  EXPECT_EQ(lnet->counters().errors, before.errors);
  EXPECT_EQ(Fabric::instance().discarded(), discarded + 1) << "the payload is discarded by the driver";
}

TEST_F(Parse, UnmatchedPutIsDroppedWithItsPayload) {
  Header h = header(MsgType::Put, 3);
  h.msg.put = {WireHandle::none(), 1, 0, 40, 0};
  Counters before = lnet->counters();
  EXPECT_EQ(inject(h, {1, 2, 3}), 0);
  EXPECT_EQ(lnet->counters().drop_count, before.drop_count + 1);
  EXPECT_EQ(lnet->counters().drop_length, before.drop_length + 3);
  h.msg.put.ptl_index = 64;
  EXPECT_EQ(inject(h, {1, 2, 3}), 0);
  EXPECT_EQ(lnet->counters().drop_count, before.drop_count + 2) << "portal out of range: dropped";
}

TEST_F(Parse, RepliesAndAcksForUnknownMdsAreDropped) {
  char sink[4] = {};
  MdDesc d;
  d.start = sink;
  d.length = sizeof sink;
  d.threshold = 2;
  test::EventLog log;
  d.handler = log.handler();
  auto md = lnet->md_bind(d, Unlink::Unlink);
  ASSERT_TRUE(md);
  // A GET we never answer ourselves: craft its REPLY by hand.
  ASSERT_EQ(lnet->get(Nid::any(), *md, ProcessId{gni(2), kPidLustre}, 3, 0, 0), 0);
  auto sent = Fabric::instance().sent();
  ASSERT_FALSE(sent.empty());

  Header bogus = header(MsgType::Reply, 2);
  bogus.msg.reply.dst_wmd = WireHandle{1, 2};
  Counters before = lnet->counters();
  EXPECT_EQ(inject(bogus, {7, 7}), 0);
  EXPECT_EQ(lnet->counters().drop_count, before.drop_count + 1);

  Header ack = header(MsgType::Ack);
  ack.msg.ack = {WireHandle{0, md->cookie}, 0, 0};  // wrong interface cookie
  EXPECT_EQ(inject(ack), 0);
  EXPECT_EQ(lnet->counters().drop_count, before.drop_count + 2);
  EXPECT_EQ(log.count(EventType::Reply) + log.count(EventType::Ack), 0u);
  EXPECT_EQ(lnet->md_unlink(*md), 0);
}

// An ACK or REPLY names its MD by the cookie we gave out; a forged one that carries the
// MD type bits with the slot of an ME must find nothing (found by fuzz_receive: the ME
// was taken for an MD).
TEST_F(Parse, ResponsesToAnMeCookieAreDropped) {
  char sink[4] = {};
  MdDesc d;
  d.start = sink;
  d.length = sizeof sink;
  test::EventLog log;
  d.handler = log.handler();
  auto md = lnet->md_bind(d, Unlink::Unlink);
  ASSERT_TRUE(md);
  Fabric::instance().clear_sent();
  ASSERT_EQ(lnet->get(Nid::any(), *md, ProcessId{gni(2), kPidLustre}, 3, 0, 0), 0);  // for the interface cookie
  auto sent = Fabric::instance().sent();
  ASSERT_EQ(sent.size(), 1u);
  std::uint64_t iface = sent[0].hdr.msg.get.return_wmd.interface_cookie;
  auto me = lnet->me_attach(5, ProcessId::any(), 1, 0, Unlink::Retain, InsPos::After);
  ASSERT_TRUE(me);
  std::uint64_t forged = (me->cookie & ~std::uint64_t{3}) | 1;  // the ME's slot, the MD's type
  Counters before = lnet->counters();
  Header ack = header(MsgType::Ack);
  ack.msg.ack = {WireHandle{iface, forged}, 0, 0};
  EXPECT_EQ(inject(ack), 0);
  Header reply = header(MsgType::Reply, 2);
  reply.msg.reply.dst_wmd = WireHandle{iface, forged};
  EXPECT_EQ(inject(reply, {7, 7}), 0);
  EXPECT_EQ(lnet->counters().drop_count, before.drop_count + 2);
  EXPECT_EQ(lnet->counters().msgs_alloc, 0u) << "nothing kept";
  EXPECT_EQ(log.count(EventType::Reply) + log.count(EventType::Ack), 0u);
  EXPECT_EQ(lnet->me_unlink(*me), 0);
  EXPECT_EQ(lnet->md_unlink(*md), 0);
}

TEST_F(Parse, ReplyLongerThanTheSinkNeedsTruncate) {
  for (unsigned opts : {0u, kMdTruncate}) {
    char sink[4] = {};
    MdDesc d;
    d.start = sink;
    d.length = sizeof sink;
    d.threshold = 2;
    d.options = opts;
    test::EventLog log;
    d.handler = log.handler();
    auto md = lnet->md_bind(d, Unlink::Unlink);
    ASSERT_TRUE(md);
    Fabric::instance().clear_sent();
    // 2@gni is not on the fabric, so nobody answers; we answer with a REPLY too long.
    ASSERT_EQ(lnet->get(Nid::any(), *md, ProcessId{gni(2), kPidLustre}, 3, 0, 0), 0);
    auto sent = Fabric::instance().sent();
    ASSERT_EQ(sent.size(), 1u);
    Header r = header(MsgType::Reply, 8);
    r.msg.reply.dst_wmd = sent[0].hdr.msg.get.return_wmd;
    Counters before = lnet->counters();
    EXPECT_EQ(inject(r, {1, 2, 3, 4, 5, 6, 7, 8}), 0);
    if (opts & kMdTruncate) {
      auto ev = log.find(EventType::Reply);
      ASSERT_TRUE(ev);
      EXPECT_EQ(ev->rlength, 8u);
      EXPECT_EQ(ev->mlength, 4u);
      EXPECT_EQ(std::string(sink, 4), std::string("\x01\x02\x03\x04", 4));
    } else {
      EXPECT_EQ(log.count(EventType::Reply), 0u);
      EXPECT_EQ(lnet->counters().drop_count, before.drop_count + 1);
      EXPECT_EQ(lnet->md_unlink(*md), 0);
    }
  }
}

}  // namespace
}  // namespace lnet
