// Portals semantics over the loopback NI: every matching rule, truncation, offsets,
// thresholds and auto-unlink, ACK handling, lazy portals, GET, iovecs and event contents.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <string>

#include <lnet/lnet.hpp>

#include "core/core.hpp"
#include "support/event_log.hpp"

namespace lnet {
namespace {

using test::EventLog;

constexpr unsigned kPortal = 9;

class Matching : public ::testing::Test {
 protected:
  void SetUp() override {
    Config cfg;
    cfg.ncpts = 2;
    auto r = Instance::create(cfg, 4242);
    ASSERT_TRUE(r) << r.message();
    lnet = std::move(*r);
    self = ProcessId{Nid::lo(), 4242};
  }
  void TearDown() override { lnet.reset(); }  // its last events go to the logs below

  // Attaches an ME + MD over `buf` on `portal` and returns the MD handle.
  MdHandle target(void* buf, std::size_t len, unsigned options, std::uint64_t bits = 0x77, int threshold = kMdThreshInf,
                  ProcessId match = ProcessId::any(), std::uint64_t ignore = 0, Unlink me_unlink = Unlink::Unlink,
                  Unlink md_unlink = Unlink::Retain, unsigned portal = kPortal) {
    auto me = lnet->me_attach(portal, match, bits, ignore, me_unlink, InsPos::After);
    EXPECT_TRUE(me) << me.message();
    MdDesc d;
    d.start = buf;
    d.length = len;
    d.options = options;
    d.threshold = threshold;
    d.handler = tlog.handler();
    auto md = lnet->md_attach(*me, d, md_unlink);
    EXPECT_TRUE(md) << md.message();
    return md ? *md : MdHandle{};
  }

  // PUTs `data` to ourselves; returns put()'s status.
  int put(const std::string& data, std::uint64_t bits = 0x77, std::uint32_t offset = 0, AckReq ack = AckReq::NoAck,
          std::uint64_t hdr_data = 0, unsigned portal = kPortal) {
    std::string& buf = sources.emplace_back(data);  // stable: a lazy portal may hold it
    MdDesc d;
    d.start = buf.data();
    d.length = buf.size();
    d.threshold = ack == AckReq::Ack ? 2 : 1;
    d.handler = ilog.handler();
    auto md = lnet->md_bind(d, Unlink::Unlink);
    EXPECT_TRUE(md) << md.message();
    return lnet->put(Nid::any(), *md, ack, self, portal, bits, offset, hdr_data);
  }

  std::uint64_t drops() const { return lnet->counters().drop_count; }

  std::unique_ptr<Instance> lnet;
  ProcessId self;
  EventLog tlog;  // target side
  EventLog ilog;  // initiator side
  std::deque<std::string> sources;
};

TEST_F(Matching, ExactBitsMatch) {
  char buf[16] = {};
  target(buf, sizeof buf, kMdOpPut);
  ASSERT_EQ(put("abc"), 0);
  auto ev = tlog.find(EventType::Put);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->status, 0);
  EXPECT_EQ(ev->mlength, 3u);
  EXPECT_STREQ(buf, "abc");
}

TEST_F(Matching, IgnoreBitsMaskTheComparison) {
  char buf[16] = {};
  target(buf, sizeof buf, kMdOpPut, 0x10, kMdThreshInf, ProcessId::any(), 0x0F);
  ASSERT_EQ(put("x", 0x1A), 0);
  EXPECT_EQ(tlog.count(EventType::Put), 1u);
  std::uint64_t before = drops();
  ASSERT_EQ(put("y", 0x20), 0);
  EXPECT_EQ(tlog.count(EventType::Put), 1u);
  EXPECT_EQ(drops(), before + 1);
}

TEST_F(Matching, PidMustMatchUnlessAny) {
  char buf[16] = {};
  target(buf, sizeof buf, kMdOpPut, 0x77, kMdThreshInf, ProcessId{Nid::any(), 999});
  std::uint64_t before = drops();
  ASSERT_EQ(put("x"), 0);
  EXPECT_EQ(tlog.count(EventType::Put), 0u);
  EXPECT_EQ(drops(), before + 1);
  target(buf, sizeof buf, kMdOpPut, 0x77, kMdThreshInf, ProcessId{Nid::any(), 4242});
  ASSERT_EQ(put("x"), 0);
  EXPECT_EQ(tlog.count(EventType::Put), 1u);
}

TEST_F(Matching, NidMustMatchUnlessAny) {
  char buf[16] = {};
  target(buf, sizeof buf, kMdOpPut, 0x77, kMdThreshInf, ProcessId{*Nid::parse("5@mpi"), kPidAny});
  ASSERT_EQ(put("x"), 0);
  EXPECT_EQ(tlog.count(EventType::Put), 0u);
  target(buf, sizeof buf, kMdOpPut, 0x77, kMdThreshInf, ProcessId{Nid::lo(), kPidAny});
  ASSERT_EQ(put("x"), 0);
  EXPECT_EQ(tlog.count(EventType::Put), 1u);
}

TEST_F(Matching, OperationMustBeAllowed) {
  char buf[16] = {};
  target(buf, sizeof buf, kMdOpGet);
  std::uint64_t before = drops();
  ASSERT_EQ(put("x"), 0);
  EXPECT_EQ(tlog.count(EventType::Put), 0u);
  EXPECT_EQ(drops(), before + 1);
}

TEST_F(Matching, ExhaustedMdIsSkippedForTheNextMe) {
  char a[16] = {}, b[16] = {};
  target(a, sizeof a, kMdOpPut, 0x77, 1, ProcessId::any(), 0, Unlink::Retain, Unlink::Retain);
  target(b, sizeof b, kMdOpPut);
  ASSERT_EQ(put("first"), 0);
  ASSERT_EQ(put("second"), 0);
  EXPECT_STREQ(a, "first");
  EXPECT_STREQ(b, "second");
}

TEST_F(Matching, MaxSizeExhaustsWhenTooLittleRemains) {
  char a[100] = {}, b[100] = {};
  auto me = lnet->me_attach(kPortal, ProcessId::any(), 0x77, 0, Unlink::Unlink, InsPos::After);
  MdDesc d;
  d.start = a;
  d.length = sizeof a;
  d.options = kMdOpPut | kMdMaxSize;
  d.max_size = 60;
  d.handler = tlog.handler();
  ASSERT_TRUE(lnet->md_attach(*me, d, Unlink::Retain));
  target(b, sizeof b, kMdOpPut);
  ASSERT_EQ(put(std::string(50, 'x')), 0);  // lands in a; 50 + 60 > 100: a is exhausted
  ASSERT_EQ(put(std::string(10, 'y')), 0);  // goes to b
  EXPECT_EQ(a[0], 'x');
  EXPECT_EQ(a[50], 0);
  EXPECT_EQ(b[0], 'y');
}

TEST_F(Matching, TooBigIsDroppedWithoutTruncate) {
  char buf[10] = {};
  target(buf, sizeof buf, kMdOpPut);
  std::uint64_t before = drops();
  ASSERT_EQ(put(std::string(20, 'z')), 0);
  EXPECT_EQ(tlog.count(EventType::Put), 0u);
  EXPECT_EQ(drops(), before + 1);
  EXPECT_EQ(buf[0], 0);
}

TEST_F(Matching, TruncateDeliversWhatFits) {
  char buf[10] = {};
  target(buf, sizeof buf, kMdOpPut | kMdTruncate);
  ASSERT_EQ(put(std::string(20, 'z')), 0);
  auto ev = tlog.find(EventType::Put);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->rlength, 20u);
  EXPECT_EQ(ev->mlength, 10u);
  EXPECT_EQ(std::string(buf, 10), std::string(10, 'z'));
}

TEST_F(Matching, LocalOffsetAdvances) {
  char buf[32] = {};
  target(buf, sizeof buf, kMdOpPut);
  ASSERT_EQ(put("aaaa", 0x77, 20), 0);  // remote offset ignored without MANAGE_REMOTE
  ASSERT_EQ(put("bbbb", 0x77, 20), 0);
  EXPECT_EQ(std::string(buf, 8), "aaaabbbb");
  auto evs = tlog.events();
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0].offset, 0u);
  EXPECT_EQ(evs[1].offset, 4u);
}

TEST_F(Matching, ManageRemoteUsesTheRequestOffset) {
  char buf[32] = {};
  target(buf, sizeof buf, kMdOpPut | kMdManageRemote);
  ASSERT_EQ(put("zz", 0x77, 16), 0);
  ASSERT_EQ(put("yy", 0x77, 16), 0);
  EXPECT_EQ(buf[16], 'y');
  EXPECT_EQ(buf[0], 0);
  EXPECT_EQ(tlog.events().back().offset, 16u);
}

TEST_F(Matching, ThresholdAndAutoUnlink) {
  char buf[32] = {};
  std::size_t mes = core::Core::of(*lnet).portals().live_mes();
  std::size_t mds = core::Core::of(*lnet).portals().live_mds();
  target(buf, sizeof buf, kMdOpPut, 0x77, 2, ProcessId::any(), 0, Unlink::Unlink, Unlink::Unlink);
  EXPECT_EQ(core::Core::of(*lnet).portals().live_mes(), mes + 1);
  ASSERT_EQ(put("1"), 0);
  ASSERT_EQ(put("2"), 0);
  auto evs = tlog.events();
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_FALSE(evs[0].unlinked);
  EXPECT_TRUE(evs[1].unlinked);
  EXPECT_EQ(evs[1].md_threshold, 0);
  EXPECT_EQ(core::Core::of(*lnet).portals().live_mes(), mes);
  EXPECT_EQ(core::Core::of(*lnet).portals().live_mds(), mds);
  std::uint64_t before = drops();
  ASSERT_EQ(put("3"), 0);
  EXPECT_EQ(drops(), before + 1);
}

TEST_F(Matching, RetainedMeOutlivesItsMd) {
  char buf[8] = {}, buf2[8] = {};
  auto me = lnet->me_attach(kPortal, ProcessId::any(), 0x77, 0, Unlink::Retain, InsPos::After);
  MdDesc d;
  d.start = buf;
  d.length = sizeof buf;
  d.options = kMdOpPut;
  d.threshold = 1;
  d.handler = tlog.handler();
  ASSERT_TRUE(lnet->md_attach(*me, d, Unlink::Unlink));
  ASSERT_EQ(put("a"), 0);
  EXPECT_TRUE(tlog.events().back().unlinked);
  d.start = buf2;
  ASSERT_TRUE(lnet->md_attach(*me, d, Unlink::Unlink)) << "the retained ME takes a new MD";
  ASSERT_EQ(put("b"), 0);
  EXPECT_EQ(buf2[0], 'b');
  EXPECT_EQ(lnet->me_unlink(*me), 0);
}

TEST_F(Matching, AckCarriesTheDeliveredLength) {
  char buf[8] = {};
  target(buf, sizeof buf, kMdOpPut | kMdTruncate);
  ASSERT_EQ(put("0123456789", 0x77, 0, AckReq::Ack), 0);
  auto ack = ilog.find(EventType::Ack);
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->mlength, 8u);
  EXPECT_EQ(ack->match_bits, 0x77u);
  EXPECT_EQ(ack->status, 0);
  EXPECT_TRUE(ack->unlinked);  // threshold 2: SEND + ACK
  EXPECT_EQ(ilog.count(EventType::Send), 1u);
}

TEST_F(Matching, AckDisableSuppressesTheAck) {
  char buf[8] = {};
  target(buf, sizeof buf, kMdOpPut | kMdAckDisable);
  ASSERT_EQ(put("x", 0x77, 0, AckReq::Ack), 0);
  EXPECT_EQ(tlog.count(EventType::Put), 1u);
  EXPECT_EQ(ilog.count(EventType::Send), 1u);
  EXPECT_EQ(ilog.count(EventType::Ack), 0u);
}

TEST_F(Matching, LazyPortalQueuesUntilAnMdArrives) {
  const unsigned lazy = 11;
  ASSERT_EQ(lnet->set_lazy_portal(lazy), 0);
  ASSERT_EQ(put("early1", 0x5, 0, AckReq::NoAck, 0, lazy), 0);
  ASSERT_EQ(put("early2", 0x5, 0, AckReq::NoAck, 0, lazy), 0);
  EXPECT_EQ(ilog.count(EventType::Send), 0u) << "loopback sends complete only once received";
  char buf[32] = {};
  target(buf, sizeof buf, kMdOpPut, 0x5, kMdThreshInf, ProcessId::any(), 0, Unlink::Unlink, Unlink::Retain, lazy);
  EXPECT_EQ(std::string(buf, 12), "early1early2");
  EXPECT_EQ(tlog.count(EventType::Put), 2u);
  EXPECT_EQ(ilog.count(EventType::Send), 2u);
}

TEST_F(Matching, ClearingALazyPortalDropsWhatWaits) {
  const unsigned lazy = 12;
  ASSERT_EQ(lnet->set_lazy_portal(lazy), 0);
  ASSERT_EQ(put("waits", 0x5, 0, AckReq::NoAck, 0, lazy), 0);
  std::uint64_t before = drops();
  ASSERT_EQ(lnet->clear_lazy_portal(lazy), 0);
  EXPECT_EQ(drops(), before + 1);
  EXPECT_EQ(ilog.count(EventType::Send), 1u);
  std::uint64_t before2 = drops();
  ASSERT_EQ(put("gone", 0x5, 0, AckReq::NoAck, 0, lazy), 0);
  EXPECT_EQ(drops(), before2 + 1) << "no longer lazy: dropped at once";
}

TEST_F(Matching, GetWithManageRemoteOffset) {
  char src[] = "0123456789";
  target(src, 10, kMdOpGet | kMdManageRemote);
  char sink[4] = {};
  MdDesc d;
  d.start = sink;
  d.length = sizeof sink;
  d.threshold = 2;
  d.handler = ilog.handler();
  auto md = lnet->md_bind(d, Unlink::Unlink);
  ASSERT_TRUE(md);
  ASSERT_EQ(lnet->get(Nid::any(), *md, self, kPortal, 0x77, 3), 0);
  EXPECT_EQ(std::string(sink, 4), "3456");
  auto get = tlog.find(EventType::Get);
  ASSERT_TRUE(get);
  EXPECT_EQ(get->offset, 3u);
  EXPECT_EQ(get->mlength, 4u);
  auto reply = ilog.find(EventType::Reply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->mlength, 4u);
  EXPECT_TRUE(reply->unlinked);
}

TEST_F(Matching, GetReadsAtMostTheSinkLength) {
  char src[16] = "abcdefghijklmno";
  target(src, sizeof src, kMdOpGet | kMdManageRemote);
  for (unsigned opts : {0u, kMdTruncate}) {
    ilog.clear();
    char sink[4] = {};
    MdDesc d;
    d.start = sink;
    d.length = 4;
    d.threshold = 2;
    d.options = opts;
    d.handler = ilog.handler();
    auto md = lnet->md_bind(d, Unlink::Unlink);
    ASSERT_TRUE(md);
    // The GET asks for 4 bytes (its sink length): the target sends 4, which fits either way.
    ASSERT_EQ(lnet->get(Nid::any(), *md, self, kPortal, 0x77, 0), 0);
    EXPECT_EQ(std::string(sink, 4), "abcd");
    EXPECT_EQ(ilog.count(EventType::Reply), 1u);
    EXPECT_EQ(lnet->md_unlink(*md), -ENOENT) << "auto-unlinked after SEND + REPLY";
  }
}

TEST_F(Matching, IovecScatterGather) {
  char t1[5] = {}, t2[7] = {}, t3[20] = {};
  iovec tiov[] = {{t1, sizeof t1}, {t2, sizeof t2}, {t3, sizeof t3}};
  auto me = lnet->me_attach(kPortal, ProcessId::any(), 0x77, 0, Unlink::Unlink, InsPos::After);
  MdDesc td;
  td.iov = tiov;
  td.options = kMdOpPut | kMdOpGet | kMdIovec | kMdManageRemote;
  td.handler = tlog.handler();
  ASSERT_TRUE(lnet->md_attach(*me, td, Unlink::Retain));

  std::string text = "the quick brown fox jumps";  // 25 bytes over 3 source fragments
  iovec siov[] = {{text.data(), 3}, {text.data() + 3, 13}, {text.data() + 16, 9}};
  MdDesc sd;
  sd.iov = siov;
  sd.options = kMdIovec;
  sd.threshold = 1;
  sd.handler = ilog.handler();
  auto smd = lnet->md_bind(sd, Unlink::Unlink);
  ASSERT_TRUE(smd) << smd.message();
  ASSERT_EQ(lnet->put(Nid::any(), *smd, AckReq::NoAck, self, kPortal, 0x77, 2, 0), 0);
  std::string got = std::string(t1, 5) + std::string(t2, 7) + std::string(t3, 20);
  EXPECT_EQ(got.substr(2, 25), text);
  auto ev = tlog.find(EventType::Put);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->md_niov, 3u);
  EXPECT_EQ(ev->md_length, 32u);

  char s1[10] = {}, s2[6] = {};
  iovec giov[] = {{s1, sizeof s1}, {s2, sizeof s2}};
  MdDesc gd;
  gd.iov = giov;
  gd.options = kMdIovec;
  gd.threshold = 2;
  auto gmd = lnet->md_bind(gd, Unlink::Unlink);
  ASSERT_TRUE(gmd);
  ASSERT_EQ(lnet->get(Nid::any(), *gmd, self, kPortal, 0x77, 6), 0);
  EXPECT_EQ(std::string(s1, 10) + std::string(s2, 6), text.substr(4, 16));
}

TEST_F(Matching, EventContents) {
  char buf[16] = {};
  int cookie = 0;
  auto me = lnet->me_attach(kPortal, ProcessId::any(), 0x77, 0, Unlink::Unlink, InsPos::After);
  MdDesc d;
  d.start = buf;
  d.length = sizeof buf;
  d.options = kMdOpPut;
  d.user_ptr = &cookie;
  d.handler = tlog.handler();
  auto md = lnet->md_attach(*me, d, Unlink::Retain);
  ASSERT_TRUE(md);
  ASSERT_EQ(put("hello", 0x77, 0, AckReq::NoAck, 0xfeedULL), 0);
  auto ev = tlog.find(EventType::Put);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->target, self);
  EXPECT_EQ(ev->initiator, self);
  EXPECT_EQ(ev->source, self);
  EXPECT_EQ(ev->sender, Nid::lo());
  EXPECT_EQ(ev->pt_index, kPortal);
  EXPECT_EQ(ev->match_bits, 0x77u);
  EXPECT_EQ(ev->rlength, 5u);
  EXPECT_EQ(ev->mlength, 5u);
  EXPECT_EQ(ev->offset, 0u);
  EXPECT_EQ(ev->md_handle, *md);
  EXPECT_EQ(ev->md_start, buf);
  EXPECT_EQ(ev->md_length, 16u);
  EXPECT_EQ(ev->md_user_ptr, &cookie);
  EXPECT_EQ(ev->md_options, kMdOpPut);
  EXPECT_EQ(ev->hdr_data, 0xfeedu);
  EXPECT_EQ(ev->msg_type, MsgType::Put);
  EXPECT_EQ(ev->status, 0);
  EXPECT_FALSE(ev->unlinked);
  auto send = ilog.find(EventType::Send);
  ASSERT_TRUE(send);
  EXPECT_EQ(send->target, self);
  EXPECT_EQ(send->initiator, self);
  EXPECT_EQ(send->mlength, 5u);
  EXPECT_EQ(send->hdr_data, 0xfeedu);
  EXPECT_EQ(send->msg_type, MsgType::Put);
  EXPECT_TRUE(send->unlinked);
}

TEST_F(Matching, ExplicitUnlinkGivesAnUnlinkEvent) {
  char buf[8] = {};
  MdHandle md = target(buf, sizeof buf, kMdOpPut);
  ASSERT_EQ(lnet->md_unlink(md), 0);
  auto ev = tlog.find(EventType::Unlink);
  ASSERT_TRUE(ev);
  EXPECT_TRUE(ev->unlinked);
  EXPECT_EQ(ev->md_handle, md);
  EXPECT_EQ(lnet->md_unlink(md), -ENOENT);
  std::uint64_t before = drops();
  ASSERT_EQ(put("x"), 0);
  EXPECT_EQ(drops(), before + 1) << "the ME went with its MD";
}

TEST_F(Matching, InsertBeforeAndAfterOnARequestPortal) {
  char a[8] = {}, b[8] = {}, c[8] = {};
  MdDesc d;
  d.options = kMdOpPut;
  d.threshold = 1;
  auto mea = lnet->me_attach(kPortal, ProcessId::any(), 0x1, 0, Unlink::Unlink, InsPos::After);
  d.start = a;
  d.length = 8;
  ASSERT_TRUE(lnet->md_attach(*mea, d, Unlink::Unlink));
  auto meb = lnet->me_insert(*mea, ProcessId::any(), 0x1, 0, Unlink::Unlink, InsPos::Before);
  ASSERT_TRUE(meb) << meb.message();
  d.start = b;
  ASSERT_TRUE(lnet->md_attach(*meb, d, Unlink::Unlink));
  auto mec = lnet->me_attach(kPortal, ProcessId::any(), 0x1, 0, Unlink::Unlink, InsPos::Before);
  d.start = c;
  ASSERT_TRUE(lnet->md_attach(*mec, d, Unlink::Unlink));
  ASSERT_EQ(put("1", 0x1), 0);
  ASSERT_EQ(put("2", 0x1), 0);
  ASSERT_EQ(put("3", 0x1), 0);
  EXPECT_EQ(c[0], '1');
  EXPECT_EQ(b[0], '2');
  EXPECT_EQ(a[0], '3');
}

TEST_F(Matching, PortalKindIsFixedByItsFirstMe) {
  ProcessId unique{*Nid::parse("7@mpi"), 12345};
  const unsigned request = 20, rdma = 21;
  ASSERT_TRUE(lnet->me_attach(request, ProcessId::any(), 1, 0, Unlink::Unlink, InsPos::After));
  auto bad = lnet->me_attach(request, unique, 1, 0, Unlink::Unlink, InsPos::After);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.code(), -EPERM);
  EXPECT_NE(bad.message().find("request portal"), std::string::npos) << bad.message();

  auto first = lnet->me_attach(rdma, unique, 1, 0, Unlink::Unlink, InsPos::After);
  ASSERT_TRUE(first);
  EXPECT_EQ(lnet->me_attach(rdma, ProcessId::any(), 1, 0, Unlink::Unlink, InsPos::After).code(), -EPERM);
  EXPECT_EQ(lnet->me_attach(rdma, unique, 1, 0xF, Unlink::Unlink, InsPos::After).code(), -EPERM)
      << "ignore bits make an ME wildcard";
  EXPECT_EQ(lnet->me_attach(rdma, unique, 2, 0, Unlink::Unlink, InsPos::Before).code(), -EPERM);
  EXPECT_EQ(lnet->me_insert(*first, unique, 2, 0, Unlink::Unlink, InsPos::After).code(), -EPERM);
  EXPECT_TRUE(lnet->me_attach(rdma, unique, 2, 0, Unlink::Unlink, InsPos::Local));
}

TEST_F(Matching, RdmaPortalMatchesThroughTheHash) {
  const unsigned rdma = 30;
  MdDesc d;
  d.options = kMdOpPut;
  char sink[8] = {};
  for (std::uint32_t i = 1; i <= 5000; ++i) {
    auto me = lnet->me_attach(rdma, ProcessId{Nid::make(NetId::make(kMpiLnd, 0), i), 4242}, 0x77, 0, Unlink::Unlink,
                              InsPos::After);
    ASSERT_TRUE(me);
    d.start = sink;
    d.length = sizeof sink;
    ASSERT_TRUE(lnet->md_attach(*me, d, Unlink::Retain));
  }
  char a[8] = {}, b[8] = {};
  target(a, sizeof a, kMdOpPut, 0x1, 1, self, 0, Unlink::Unlink, Unlink::Unlink, rdma);
  target(b, sizeof b, kMdOpPut, 0x1, 1, self, 0, Unlink::Unlink, Unlink::Unlink, rdma);
  ASSERT_EQ(put("A", 0x1, 0, AckReq::NoAck, 0, rdma), 0);
  ASSERT_EQ(put("B", 0x1, 0, AckReq::NoAck, 0, rdma), 0);
  EXPECT_EQ(a[0], 'A') << "MEs of one peer match in posting order";
  EXPECT_EQ(b[0], 'B');
  EXPECT_EQ(sink[0], 0);
}

TEST_F(Matching, BadArguments) {
  char buf[8];
  EXPECT_EQ(lnet->me_attach(64, ProcessId::any(), 0, 0, Unlink::Unlink, InsPos::After).code(), -EINVAL);
  MdDesc d;
  d.start = buf;
  d.length = sizeof buf;
  d.options = kMdOpPut;
  EXPECT_EQ(lnet->md_bind(d, Unlink::Unlink).code(), -EINVAL) << "bind takes no OP_PUT/OP_GET";
  d.options = kMdKiov;
  EXPECT_EQ(lnet->md_bind(d, Unlink::Unlink).code(), -EINVAL);
  d.options = kMdMaxSize;
  d.max_size = 9;
  EXPECT_EQ(lnet->md_bind(d, Unlink::Unlink).code(), -EINVAL);
  d.options = 0;
  d.threshold = -2;
  EXPECT_EQ(lnet->md_bind(d, Unlink::Unlink).code(), -EINVAL);
  d.threshold = 1;
  d.start = nullptr;
  EXPECT_EQ(lnet->md_bind(d, Unlink::Unlink).code(), -EINVAL);
  std::vector<iovec> many(257, iovec{buf, 1});
  MdDesc v;
  v.iov = many;
  v.options = kMdIovec;
  EXPECT_EQ(lnet->md_bind(v, Unlink::Unlink).code(), -EINVAL);
  EXPECT_EQ(lnet->put(Nid::any(), MdHandle{}, AckReq::NoAck, self, kPortal, 0, 0, 0), -ENOENT);
  EXPECT_EQ(lnet->put(Nid::any(), MdHandle{12345}, AckReq::NoAck, self, kPortal, 0, 0, 0), -ENOENT);
  d.start = buf;
  auto md = lnet->md_bind(d, Unlink::Unlink);
  ASSERT_TRUE(md);
  EXPECT_EQ(lnet->put(Nid::any(), *md, AckReq::NoAck, self, 64, 0, 0, 0), -EINVAL);
  EXPECT_EQ(lnet->put(Nid::any(), *md, AckReq::NoAck, ProcessId::any(), 1, 0, 0, 0), -EINVAL);
  auto me = lnet->me_attach(kPortal, ProcessId::any(), 0, 0, Unlink::Unlink, InsPos::After);
  MdDesc t;
  t.start = buf;
  t.length = sizeof buf;
  t.options = kMdOpPut;
  ASSERT_TRUE(lnet->md_attach(*me, t, Unlink::Retain));
  EXPECT_EQ(lnet->md_attach(*me, t, Unlink::Retain).code(), -EBUSY);
  EXPECT_EQ(lnet->me_unlink(MeHandle{}), -ENOENT);
  EXPECT_EQ(lnet->md_unlink(MdHandle{}), -ENOENT);
}

TEST_F(Matching, StaleHandlesNeverFindAReusedSlot) {
  char buf[8] = {};
  MdDesc d;
  d.start = buf;
  d.length = sizeof buf;
  auto first = lnet->md_bind(d, Unlink::Unlink);
  ASSERT_TRUE(first);
  ASSERT_EQ(lnet->md_unlink(*first), 0);
  auto second = lnet->md_bind(d, Unlink::Unlink);
  ASSERT_TRUE(second);
  EXPECT_NE(*first, *second);
  EXPECT_EQ(lnet->md_unlink(*first), -ENOENT);
  EXPECT_EQ(lnet->md_unlink(*second), 0);
}

TEST_F(Matching, PingOfSelf) {
  auto r = lnet->ping(self, std::chrono::milliseconds(1000));
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->info.pid, 4242u);
  ASSERT_GE(r->info.nis.size(), 1u);
  EXPECT_EQ(r->info.nis[0].nid, Nid::lo());
  EXPECT_TRUE(r->info.features & kPingFeatNiStatus);
  EXPECT_TRUE(r->info.features & kPingFeatMultiRail);
}

TEST_F(Matching, HandlersMayCallBackIntoLnetWithoutRecursing) {
  // A PUT event handler that PUTs again: 20000 round trips on one thread must not grow
  // the stack (nested finalizations are queued, not recursed into).
  char buf[8] = {};
  int remaining = 20000;
  std::string payload = "p";
  MdDesc src;
  src.start = payload.data();
  src.length = 1;
  auto smd = lnet->md_bind(src, Unlink::Retain);
  ASSERT_TRUE(smd);
  auto me = lnet->me_attach(kPortal, ProcessId::any(), 0x99, 0, Unlink::Unlink, InsPos::After);
  MdDesc d;
  d.start = buf;
  d.length = sizeof buf;
  d.options = kMdOpPut | kMdManageRemote;
  d.handler = [&](const Event& e) {
    if (e.type == EventType::Put && --remaining > 0) {
      EXPECT_EQ(lnet->put(Nid::any(), *smd, AckReq::NoAck, self, kPortal, 0x99, 0, 0), 0);
    }
  };
  auto tmd = lnet->md_attach(*me, d, Unlink::Retain);
  ASSERT_TRUE(tmd);
  ASSERT_EQ(lnet->put(Nid::any(), *smd, AckReq::NoAck, self, kPortal, 0x99, 0, 0), 0);
  EXPECT_EQ(remaining, 0);
  EXPECT_EQ(lnet->md_unlink(*smd), 0);
  EXPECT_EQ(lnet->md_unlink(*tmd), 0);
}

TEST_F(Matching, OnlyZeroIsALoopbackNid) {
  MdDesc d;
  char b = 'x';
  d.start = &b;
  d.length = 1;
  d.threshold = 1;
  d.handler = ilog.handler();
  auto md = lnet->md_bind(d, Unlink::Unlink);
  ASSERT_TRUE(md);
  ASSERT_EQ(lnet->put(Nid::any(), *md, AckReq::NoAck, ProcessId{Nid::make(NetId::make(kLoLnd, 0), 1), 4242}, kPortal, 0,
                      0, 0),
            0);
  auto ev = ilog.find(EventType::Send);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->status, -EHOSTUNREACH);
  EXPECT_EQ(lnet->dist(Nid::make(NetId::make(kLoLnd, 0), 1), nullptr, nullptr), -EHOSTUNREACH);
  EXPECT_FALSE(lnet->ping(ProcessId{Nid::make(NetId::make(kLoLnd, 0), 7), 4242}, std::chrono::milliseconds(200)));
}

TEST_F(Matching, PayloadAboveTheMtuIsRefusedLocally) {
  std::vector<char> big(kMaxPayload + 1);
  MdDesc d;
  d.start = big.data();
  d.length = big.size();
  auto md = lnet->md_bind(d, Unlink::Unlink);
  ASSERT_TRUE(md);
  EXPECT_EQ(lnet->put(Nid::any(), *md, AckReq::NoAck, self, kPortal, 0, 0, 0), -EMSGSIZE);
  EXPECT_EQ(lnet->get(Nid::any(), *md, self, kPortal, 0, 0), -EMSGSIZE);
  EXPECT_EQ(lnet->md_unlink(*md), 0);
}

TEST_F(Matching, EventQueueCountsItsMds) {
  auto eq = lnet->make_event_queue(8);
  char buf[8] = {};
  auto me = lnet->me_attach(kPortal, ProcessId::any(), 0x77, 0, Unlink::Unlink, InsPos::After);
  MdDesc d;
  d.start = buf;
  d.length = sizeof buf;
  d.options = kMdOpPut;
  d.threshold = 1;
  d.eq = eq;
  ASSERT_TRUE(lnet->md_attach(*me, d, Unlink::Unlink));
  EXPECT_EQ(eq->attached_mds(), 1);
  ASSERT_EQ(put("x"), 0);
  Event ev;
  ASSERT_EQ(eq->get(ev), 1);
  EXPECT_TRUE(ev.unlinked);
  EXPECT_EQ(eq->attached_mds(), 0) << "counted out before its last event is seen";
}

TEST_F(Matching, AHandlerMayOwnLnetObjects) {
  // MD A's handler owns MD B (RAII). When A is freed its handler is destroyed, which
  // unlinks B: that must happen outside LNet's locks.
  char a[4] = {}, b[4] = {};
  MdDesc db;
  db.start = b;
  db.length = sizeof b;
  auto bound = lnet->md_bind(db, Unlink::Retain);
  ASSERT_TRUE(bound);
  MdHandle hb = *bound;
  auto mdb = std::make_shared<Md>(*lnet, hb);
  auto me = lnet->me_attach(kPortal, ProcessId::any(), 0x77, 0, Unlink::Unlink, InsPos::After);
  MdDesc da;
  da.start = a;
  da.length = sizeof a;
  da.options = kMdOpPut;
  da.threshold = 1;
  da.handler = [owned = std::move(mdb)](const Event&) {};
  ASSERT_TRUE(lnet->md_attach(*me, da, Unlink::Unlink));
  da.handler = nullptr;  // the MD keeps the only copy
  ASSERT_EQ(put("x"), 0);
  EXPECT_EQ(lnet->md_unlink(hb), -ENOENT) << "B went with A's handler";
}

TEST_F(Matching, RaiiHandlesFollowTheMeUnlinkMode) {
  char buf[4] = {};
  std::size_t mes = core::Core::of(*lnet).portals().live_mes();
  {
    auto me = Me::attach(*lnet, kPortal, ProcessId::any(), 0x5, 0, Unlink::Retain).value();
    MdDesc d;
    d.start = buf;
    d.length = sizeof buf;
    d.options = kMdOpPut;
    auto md = Md::attach(*lnet, me, d, Unlink::Retain).value();
    EXPECT_TRUE(me.handle().is_valid()) << "a Retain ME stays with its owner";
    md.reset();
    EXPECT_EQ(core::Core::of(*lnet).portals().live_mes(), mes + 1);
  }
  EXPECT_EQ(core::Core::of(*lnet).portals().live_mes(), mes) << "and goes when the owner does";
}

TEST_F(Matching, CountersFollowTraffic) {
  char buf[8] = {};
  target(buf, sizeof buf, kMdOpPut);
  Counters before = lnet->counters();
  ASSERT_EQ(put("1234"), 0);
  Counters after = lnet->counters();
  EXPECT_EQ(after.send_count, before.send_count + 1);
  EXPECT_EQ(after.recv_count, before.recv_count + 1);
  EXPECT_EQ(after.send_length, before.send_length + 4);
  EXPECT_EQ(after.recv_length, before.recv_length + 4);
  EXPECT_EQ(after.msgs_alloc, 0u) << "every message went back to the pool";
  EXPECT_GE(after.msgs_max, 1u);
  lnet->reset_counters();
  EXPECT_EQ(lnet->counters().send_count, 0u);
}

}  // namespace
}  // namespace lnet
