// Portals semantics over the loopback NI: every matching rule, truncation, offsets,
// thresholds and auto-unlink, ACK handling, lazy portals, GET and iovecs.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <lnet/lnet.hpp>

#include "core/core.hpp"
#include "matching_fixture.hpp"

namespace lnet {
namespace {

using test::kPortal;
using test::Matching;

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

}  // namespace
}  // namespace lnet
