// The o2ib connection handshake's decisions (o2iblnd/src/handshake.hpp): what the passive
// side answers a request and what the active side does with the answer, ko2iblnd's rules.
#include <gtest/gtest.h>

#include <cerrno>
#include <vector>

#include "handshake.hpp"

namespace lnet::o2ib {
namespace {

constexpr std::uint64_t kA = 0x000500000a000001ULL;  // 10.0.0.1@o2ib
constexpr std::uint64_t kB = 0x000500000a000002ULL;  // 10.0.0.2@o2ib

LocalNi ni(std::uint64_t nid, std::uint64_t stamp, std::uint16_t depth = 8) { return LocalNi{nid, stamp, depth, 256}; }

std::vector<std::uint8_t> connreq(const LocalNi& from, std::uint64_t to, std::uint64_t to_stamp, ConnParams p,
                                  std::uint16_t version = kVersion2) {
  std::vector<std::uint8_t> out(kMsgSize);
  out.resize(make_connreq(out, from, to, to_stamp, p, version));
  return out;
}

const LocalNi a = ni(kA, 111), b = ni(kB, 222);
const ConnParams ask{8, 256, 4096};

TEST(O2ibHandshake, ARequestWithinOurLimitsIsAcceptedAndItsReplyChecked) {
  auto req = connreq(a, kB, 0, ConnParams{4, 16, 4096});
  ASSERT_EQ(req.size(), 56u);
  Verdict v = judge_connreq(req, b, KnownPeer{});
  ASSERT_TRUE(v.accept) << v.why;
  EXPECT_EQ(v.granted, (ConnParams{4, 16, 4096})) << "the peer's own limits, validated";
  EXPECT_EQ(v.peer_nid, kA);
  EXPECT_EQ(v.peer_stamp, 111u);
  std::vector<std::uint8_t> ack(kMsgSize);
  ack.resize(make_connack(ack, b, v.peer_nid, v.peer_stamp, v.granted, v.version));
  auto got = check_connack(ack, a, kB, ConnParams{4, 16, 4096});
  ASSERT_TRUE(got) << got.message();
  EXPECT_EQ(*got, (ConnParams{4, 16, 4096}));
}

TEST(O2ibHandshake, TooDeepAQueueIsNegotiatedDown) {
  LocalNi small = ni(kB, 222, 4);
  Verdict v = judge_connreq(connreq(a, kB, 0, ask), small, KnownPeer{});
  ASSERT_FALSE(v.accept);
  EXPECT_EQ(v.reject.why, RejectReason::MsgQueueSize);
  EXPECT_EQ(v.why, "queue depth 8 too large (at most 4)");
  EXPECT_EQ(v.reject.params.queue_depth, 4);
  EXPECT_EQ(v.reject.incarnation, 222u);
  auto rej = pack_reject(v.reject);
  Retry r = after_reject(rej, true, ask, 0, 5);
  ASSERT_TRUE(r.reconnect) << r.why;
  EXPECT_EQ(r.offer.queue_depth, 4);
  EXPECT_TRUE(judge_connreq(connreq(a, kB, 0, r.offer), small, KnownPeer{}).accept);
  // A V1 peer is not told what to ask instead: it is a fatal reject.
  EXPECT_EQ(judge_connreq(connreq(a, kB, 0, ask, kVersion1), small, KnownPeer{}).reject.why, RejectReason::Fatal);
}

TEST(O2ibHandshake, TooManyFragmentsAreNegotiatedDownAndNoFurther) {
  LocalNi few{kB, 222, 8, 32};
  Verdict v = judge_connreq(connreq(a, kB, 0, ask), few, KnownPeer{});
  ASSERT_FALSE(v.accept);
  EXPECT_EQ(v.reject.why, RejectReason::RdmaFrags);
  Retry r = after_reject(pack_reject(v.reject), true, ask, 0, 5);
  ASSERT_TRUE(r.reconnect);
  EXPECT_EQ(r.offer.max_frags, 32);
  // Asked no more than the peer takes and still refused: nothing left to negotiate.
  Reject odd = v.reject;
  odd.params.max_frags = 64;
  EXPECT_FALSE(after_reject(pack_reject(odd), true, r.offer, 1, 5).reconnect);
}

TEST(O2ibHandshake, WrongDestinationStaleStampAndRestartedPeers) {
  Verdict wrong = judge_connreq(connreq(a, kA, 0, ask), b, KnownPeer{});
  EXPECT_FALSE(wrong.accept);
  EXPECT_EQ(wrong.reject.why, RejectReason::Fatal);
  EXPECT_EQ(wrong.why, "bad destination NID 10.0.0.1@o2ib (we are 10.0.0.2@o2ib)");
  EXPECT_FALSE(after_reject(pack_reject(wrong.reject), true, ask, 0, 5).reconnect) << "a fatal reject ends it";
  Verdict stale = judge_connreq(connreq(a, kB, 221, ask), b, KnownPeer{});
  EXPECT_EQ(stale.reject.why, RejectReason::ConnStale);
  EXPECT_TRUE(after_reject(pack_reject(stale.reject), true, ask, 0, 5).reconnect);
  EXPECT_TRUE(judge_connreq(connreq(a, kB, 222, ask), b, KnownPeer{}).accept) << "our current stamp is fine";
  Verdict restarted = judge_connreq(connreq(a, kB, 0, ask), b, KnownPeer{true, 110, kVersion2, false, 0});
  EXPECT_FALSE(restarted.accept);
  EXPECT_TRUE(restarted.stale_peer) << "its old connections go";
  EXPECT_EQ(restarted.reject.why, RejectReason::ConnStale);
  EXPECT_TRUE(judge_connreq(connreq(a, kB, 0, ask), b, KnownPeer{true, 111, kVersion2, false, 0}).accept);
}

TEST(O2ibHandshake, ARaceIsWonByTheHigherNid) {
  // B (higher) is connecting to A too: A's request loses, a limited number of times.
  KnownPeer racing{true, 111, kVersion2, true, 0};
  Verdict v = judge_connreq(connreq(a, kB, 0, ask), b, racing);
  EXPECT_FALSE(v.accept);
  EXPECT_TRUE(v.race);
  EXPECT_EQ(v.reject.why, RejectReason::ConnRace);
  EXPECT_TRUE(after_reject(pack_reject(v.reject), true, ask, 0, 5).reconnect);
  racing.races = kMaxConnRaces;
  EXPECT_TRUE(judge_connreq(connreq(a, kB, 0, ask), b, racing).accept) << "after that, the lower NID goes through";
  // A (lower) connecting to B while B's request comes: B's wins.
  EXPECT_TRUE(judge_connreq(connreq(b, kA, 0, ask), a, KnownPeer{true, 222, kVersion2, true, 0}).accept);
  // The first contact too: neither knows the other yet, both dial at once.
  Verdict first = judge_connreq(connreq(a, kB, 0, ask), b, KnownPeer{false, 0, 0, true, 0});
  EXPECT_TRUE(first.race);
  EXPECT_EQ(first.reject.why, RejectReason::ConnRace);
  EXPECT_TRUE(judge_connreq(connreq(b, kA, 0, ask), a, KnownPeer{false, 0, 0, true, 0}).accept);
}

TEST(O2ibHandshake, WhatIsNoConnectionRequestIsRefused) {
  std::vector<std::uint8_t> lnet = {0xed, 0x0d, 0xbc, 0xee, 1, 0, 0, 0};  // LNET_PROTO_MAGIC
  Verdict newer = judge_connreq(lnet, b, KnownPeer{});
  EXPECT_EQ(newer.reject.why, RejectReason::Fatal);
  EXPECT_EQ(newer.why, "a peer speaking a newer protocol (LNET_PROTO_MAGIC)");
  Verdict junk = judge_connreq(std::vector<std::uint8_t>(56, 0x41), b, KnownPeer{});
  EXPECT_FALSE(junk.accept);
  EXPECT_EQ(junk.why, "cannot parse the connection request: bad magic 0x41414141");
  std::vector<std::uint8_t> ack(kMsgSize);
  ack.resize(make_connack(ack, a, kB, 0, ask, kVersion2));
  EXPECT_EQ(judge_connreq(ack, b, KnownPeer{}).why, "a CONNACK as connection request");
  Verdict none = judge_connreq(connreq(a, kB, 0, ConnParams{0, 256, 4096}), b, KnownPeer{});
  EXPECT_EQ(none.why, "queue depth 0");
  Verdict big = judge_connreq(connreq(a, kB, 0, ConnParams{8, 256, 8192}), b, KnownPeer{});
  EXPECT_EQ(big.why, "message size 8192 too big (4096 max)");
}

// No listener on the port (IB: invalid service id): the connect is made again
// retry_count times, as ko2iblnd, then given up.
TEST(O2ibHandshake, NoListenerIsTriedAgainRetryCountTimes) {
  EXPECT_TRUE(after_reject({}, false, ask, 0, 5).reconnect);
  EXPECT_TRUE(after_reject({}, false, ask, 4, 5).reconnect);
  Retry r = after_reject({}, false, ask, 5, 5);
  EXPECT_FALSE(r.reconnect);
  EXPECT_EQ(r.why, "retry count exceeded: no listener");
  EXPECT_FALSE(after_reject({}, false, ask, 0, 0).reconnect) << "retry_count 0: one try";
  EXPECT_FALSE(after_reject(std::vector<std::uint8_t>{1, 2, 3}, true, ask, 0, 5).reconnect) << "garbage";
  Reject early;
  early.why = RejectReason::Early;
  EXPECT_FALSE(after_reject(pack_reject(early), true, ask, 0, 5).reconnect);
}

TEST(O2ibHandshake, AConnectionReplyIsChecked) {
  auto reply = [](const LocalNi& from, std::uint64_t to, std::uint64_t stamp, ConnParams p) {
    std::vector<std::uint8_t> out(kMsgSize);
    out.resize(make_connack(out, from, to, stamp, p, kVersion2));
    return out;
  };
  EXPECT_EQ(check_connack(reply(b, kA, 110, ask), a, kB, ask).code(), -ESTALE);
  EXPECT_EQ(check_connack(reply(b, kA, 111, ConnParams{16, 256, 4096}), a, kB, ask).message(),
            "connection reply with queue depth 16 (asked 8)");
  EXPECT_EQ(check_connack(reply(b, kA, 111, ConnParams{8, 300, 4096}), a, kB, ask).message(),
            "connection reply with max_frags 300 (asked 256)");
  EXPECT_EQ(check_connack(reply(a, kA, 111, ask), a, kB, ask).message(),
            "connection reply from 10.0.0.1@o2ib, not 10.0.0.2@o2ib");
  EXPECT_EQ(check_connack(connreq(b, kA, 111, ask), a, kB, ask).message(), "a CONNREQ as connection reply");
  EXPECT_EQ(check_connack(std::vector<std::uint8_t>(3), a, kB, ask).code(), -EPROTO);
}

}  // namespace
}  // namespace lnet::o2ib
