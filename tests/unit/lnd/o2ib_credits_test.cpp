// One o2ib connection's flow control (o2iblnd/src/credits.hpp), ko2iblnd's rules: credits
// spent and returned, the reserved credits of PUT_REQs and GET_REQs, NOOPs that carry
// credits back, sends in flight; and two sides walked through a PUT and a GET.
#include <gtest/gtest.h>

#include "credits.hpp"

namespace lnet::o2ib {
namespace {

TEST(O2ibCredits, MessagesSpendTheCreditsThePeerGranted) {
  Credits c(4, 3, 8);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(c.can_send(MsgType::Immediate));
    c.on_send(MsgType::Immediate);
  }
  EXPECT_EQ(c.credits(), 0u);
  EXPECT_FALSE(c.can_send(MsgType::Immediate));
  EXPECT_TRUE(c.can_send(MsgType::Noop)) << "a V2 NOOP goes out of band";
  EXPECT_TRUE(c.can_send(MsgType::PutDone)) << "replies need no credit";
  ASSERT_TRUE(c.on_recv(2));
  EXPECT_EQ(c.credits(), 2u);
  EXPECT_FALSE(c.on_recv(3)) << "more back than ever granted: a protocol error";
  EXPECT_EQ(c.credits(), 2u);
}

TEST(O2ibCredits, OwedCreditsRideOnTheNextMessageOrANoop) {
  Credits c(8, 4, 8);
  for (int i = 0; i < 3; ++i) c.on_repost(c.repost_of(MsgType::Immediate));
  EXPECT_EQ(c.owed(), 3u);
  EXPECT_FALSE(c.need_noop(false, false, false)) << "below the high-water mark";
  EXPECT_TRUE(c.need_noop(false, false, true)) << "but the keepalive is due";
  c.on_repost(Repost::PeerCredit);
  EXPECT_TRUE(c.need_noop(false, false, false)) << "4 owed, nothing to carry them";
  EXPECT_FALSE(c.need_noop(true, false, false)) << "a queued reply carries them";
  EXPECT_FALSE(c.need_noop(false, true, false)) << "so does a queued request with a credit";
  EXPECT_EQ(c.on_send(MsgType::Immediate), 4) << "all owed, on the next message";
  EXPECT_EQ(c.owed(), 0u);
  EXPECT_EQ(c.on_send(MsgType::Noop), 0);
  EXPECT_EQ(c.repost_of(MsgType::Noop), Repost::NoCredit) << "a V2 NOOP took no credit";
}

TEST(O2ibCredits, ANoopGoesWhenTheQueuedRequestCannot) {
  Credits c(2, 1, 8);
  c.on_send(MsgType::Immediate);
  c.on_send(MsgType::Immediate);
  c.on_repost(Repost::PeerCredit);
  EXPECT_TRUE(c.need_noop(false, true, false)) << "the request has no credit to go with";
}

TEST(O2ibCredits, RequestsAwaitingRepliesAreBoundedByReservedCredits) {
  Credits c(2, 1, 8);
  c.on_send(MsgType::PutReq);
  c.on_send(MsgType::GetReq);
  ASSERT_TRUE(c.on_recv(2));
  EXPECT_EQ(c.credits(), 2u);
  EXPECT_FALSE(c.can_send(MsgType::PutReq)) << "two requests await their replies";
  EXPECT_TRUE(c.can_send(MsgType::Immediate));
  c.on_repost(c.repost_of(MsgType::PutAck));
  EXPECT_EQ(c.reserved(), 1u);
  EXPECT_TRUE(c.can_send(MsgType::GetReq));
}

TEST(O2ibCredits, SendsInFlightAreBounded) {
  Credits c(8, 4, 2);
  c.on_send(MsgType::Immediate);
  c.on_send(MsgType::PutDone);
  EXPECT_FALSE(c.can_send(MsgType::Immediate));
  EXPECT_FALSE(c.can_send(MsgType::Noop));
  c.on_send_done();
  EXPECT_TRUE(c.can_send(MsgType::Immediate));
}

TEST(O2ibCredits, VersionOneKeepsTheLastCreditForANoop) {
  Credits c(2, 1, 8, kVersion1);
  EXPECT_TRUE(c.takes_credit(MsgType::Noop));
  c.on_send(MsgType::Immediate);
  EXPECT_FALSE(c.can_send(MsgType::Immediate)) << "the last credit";
  EXPECT_TRUE(c.can_send(MsgType::Noop));
  EXPECT_FALSE(c.need_noop(false, false, false)) << "nothing owed";
  c.on_repost(Repost::PeerCredit);
  EXPECT_TRUE(c.need_noop(false, true, false)) << "the queued request cannot take the last credit";
  EXPECT_EQ(c.repost_of(MsgType::Noop), Repost::PeerCredit);
}

// A (source) PUTs to B (sink) with RDMA, then GETs from it: every credit comes home.
TEST(O2ibCredits, APutAndAGetLeaveBothSidesAsTheyStarted) {
  Credits a(4, 3, 8), b(4, 3, 8);
  auto deliver = [](Credits& from, Credits& to, MsgType t) {
    ASSERT_TRUE(from.can_send(t)) << msg_type_name(t);
    std::uint8_t back = from.on_send(t);
    from.on_send_done();
    ASSERT_TRUE(to.on_recv(back)) << msg_type_name(t);
  };
  deliver(a, b, MsgType::PutReq);
  deliver(b, a, MsgType::PutAck);  // B keeps the PUT_REQ's buffer for the PUT_DONE
  b.on_repost(b.repost_of(MsgType::PutReq, true));
  a.on_repost(a.repost_of(MsgType::PutAck));
  deliver(a, b, MsgType::PutDone);
  b.on_repost(b.repost_of(MsgType::PutDone));
  deliver(a, b, MsgType::GetReq);
  b.on_repost(b.repost_of(MsgType::GetReq));
  deliver(b, a, MsgType::GetDone);  // carries B's two owed credits home
  a.on_repost(a.repost_of(MsgType::GetDone));
  EXPECT_EQ(a.credits(), 4u);
  EXPECT_EQ(a.reserved(), 4u);
  EXPECT_EQ(a.owed(), 0u);
  EXPECT_EQ(b.credits(), 4u);
  EXPECT_EQ(b.owed(), 0u);
  EXPECT_EQ(b.reserved(), 4u);
}

}  // namespace
}  // namespace lnet::o2ib
