// The o2ib driver's registration cache (o2iblnd/src/reg_cache.hpp) under liblnet's core on
// the fake RDMA fabric: a source in memory of an MD that takes operation after operation
// is registered once and reused (a PUT's on the initiator, a GET's on the target), with
// every byte checked, while sinks are registered per transfer; the registrations go once
// the MD is unlinked; memory of an MD that ends with its message is registered for that
// transfer only; LNET_O2IB_REG_CACHE_MB bounds the idle ones and 0 turns the cache off; a
// registration that fails leaves the transfer to register its piece alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "o2ib_fixture.hpp"
#include "support/scoped_env.hpp"

namespace lnet::o2ib {
namespace {

using namespace test_o2ib;
using namespace std::chrono_literals;

constexpr std::size_t kSize = std::size_t{1} << 20;  // RDMA, not IMMEDIATE

class O2ibRegCache : public O2ibDriver {
 protected:
  // b's target: an MD over `target` that takes any number of PUTs and GETs on kPortal.
  void expose() {
    auto me = b->me_attach(kPortal, ProcessId::any(), 0, 0, Unlink::Retain, InsPos::After);
    ASSERT_TRUE(me);
    target_me = *me;
    MdDesc d;
    d.start = target.data();
    d.length = kSize;
    d.options = kMdOpPut | kMdOpGet | kMdManageRemote;
    d.handler = tlog.handler();
    ASSERT_TRUE(b->md_attach(*me, d, Unlink::Retain));
  }
  // An MD of a's over `buf` that takes any number of operations (threshold infinite).
  MdHandle lasting_md(std::vector<char>& buf) {
    MdDesc d;
    d.start = buf.data();
    d.length = kSize;
    d.handler = log.handler();
    auto md = a->md_bind(d, Unlink::Retain);
    EXPECT_TRUE(md) << md.message();
    return md ? *md : MdHandle{};
  }
  // A PUT (with ACK) of all of `md` into b's target; `buf` is what it holds. Once its SEND
  // event is there the driver has let go of the memory (it does before it finalizes).
  void put(MdHandle md, const std::vector<char>& buf) {
    std::size_t acks = log.count(EventType::Ack), sends = log.count(EventType::Send);
    ASSERT_EQ(a->put(Nid::any(), md, AckReq::Ack, ProcessId{nid(kIpB), kPidLustre}, kPortal, 0, 0, 0), 0);
    ASSERT_EQ(log.wait(EventType::Ack, acks + 1), acks + 1);
    ASSERT_EQ(log.wait(EventType::Send, sends + 1), sends + 1);
    EXPECT_EQ(std::memcmp(target.data(), buf.data(), kSize), 0);
  }
  // A GET of all of b's target into `md`; `buf` is its memory.
  void get(MdHandle md, const std::vector<char>& buf) {
    std::size_t replies = log.count(EventType::Reply);
    ASSERT_EQ(a->get(Nid::any(), md, ProcessId{nid(kIpB), kPidLustre}, kPortal, 0, 0), 0);
    ASSERT_EQ(log.wait(EventType::Reply, replies + 1), replies + 1);
    EXPECT_EQ(std::memcmp(buf.data(), target.data(), kSize), 0);
  }
  // Waits (10 s at most) until `lnet` holds no cached registration.
  static bool cache_empties(Instance& lnet) {
    for (auto end = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < end;) {
      if (counter(lnet, "reg_cache_entries") == 0) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  void remake() {
    a.reset();
    b.reset();
    a = make(kIpA);
    b = make(kIpB);
    ASSERT_TRUE(a && b);
  }

  std::vector<char> target = std::vector<char>(kSize);
  MeHandle target_me;
  test::EventLog log, tlog;
};

TEST_F(O2ibRegCache, ASourceInAnMdThatLastsIsRegisteredOnceAndSinksPerTransfer) {
  expose();
  std::vector<char> src = pattern(kSize, 1), sink(kSize);
  MdHandle smd = lasting_md(src), gmd = lasting_md(sink);
  for (int i = 0; i < 3; ++i) {
    auto bytes = pattern(kSize, i + 2);  // new bytes in the same memory
    std::copy(bytes.begin(), bytes.end(), src.begin());
    put(smd, src);
  }
  // a: its source, once; b: its target as a sink, per transfer (its key lets a write
  // there and only for that PUT).
  EXPECT_EQ(counter(*a, "registrations"), 1u);
  EXPECT_EQ(counter(*a, "reg_cache_hits"), 2u);
  EXPECT_EQ(counter(*b, "registrations"), 3u);
  EXPECT_EQ(counter(*b, "reg_cache_hits"), 0u);
  for (int i = 0; i < 2; ++i) {
    std::memset(sink.data(), 0, kSize);
    get(gmd, sink);
  }
  // a: its sink, per transfer; b: its target as a source, once.
  EXPECT_EQ(counter(*a, "registrations"), 3u);
  EXPECT_EQ(counter(*a, "reg_cache_hits"), 2u);
  EXPECT_EQ(counter(*b, "registrations"), 4u);
  EXPECT_EQ(counter(*b, "reg_cache_hits"), 1u);
  EXPECT_EQ(counter(*a, "reg_cache_entries"), 1u);
  EXPECT_EQ(counter(*b, "reg_cache_entries"), 1u);

  // Unlinked, the MDs' memory may be freed: their registrations go.
  std::uint64_t live = fabric.stats().live_mrs;
  ASSERT_EQ(a->md_unlink(smd), 0);
  ASSERT_EQ(a->md_unlink(gmd), 0);
  EXPECT_TRUE(cache_empties(*a));
  ASSERT_EQ(b->me_unlink(target_me), 0);
  EXPECT_TRUE(cache_empties(*b));
  EXPECT_EQ(fabric.stats().live_mrs, live - 2);
  a.reset();
  b.reset();
  EXPECT_EQ(fabric.stats().live_mrs, 0u);  // nothing left registered
}

TEST_F(O2ibRegCache, MemoryOfAnMdThatEndsWithItsMessageIsRegisteredForThatTransferOnly) {
  expose();
  for (int i = 0; i < 3; ++i) {
    std::vector<char> src = pattern(kSize, i);
    test::EventLog one;
    MdHandle md = put_to(*a, nid(kIpB), src.data(), kSize, one);  // threshold 1
    ASSERT_TRUE(one.wait_unlinked(md));
    ASSERT_TRUE(tlog.wait(EventType::Put, i + 1u));
    EXPECT_EQ(std::memcmp(target.data(), src.data(), kSize), 0);
  }
  EXPECT_EQ(counter(*a, "registrations"), 3u);
  EXPECT_EQ(counter(*a, "reg_cache_hits"), 0u);
  EXPECT_EQ(counter(*a, "reg_cache_entries"), 0u);
}

TEST_F(O2ibRegCache, ZeroTurnsTheCacheOffAndABadValueIsNamed) {
  {
    test::ScopedEnv env{{"LNET_O2IB_REG_CACHE_MB", "0"}};
    remake();
  }
  expose();
  std::vector<char> src = pattern(kSize, 1);
  MdHandle smd = lasting_md(src);
  for (int i = 0; i < 3; ++i) put(smd, src);
  EXPECT_EQ(counter(*a, "registrations"), 3u);
  EXPECT_EQ(counter(*b, "registrations"), 3u);
  EXPECT_EQ(counter(*a, "reg_cache_entries"), 0u);
  EXPECT_EQ(counter(*b, "reg_cache_entries"), 0u);

  test::ScopedEnv env{{"LNET_O2IB_REG_CACHE_MB", "lots"}};
  Config cfg;
  NetConfig nc;
  nc.net = kNet;
  nc.nid = nid(kIpC);
  cfg.nets.push_back(nc);
  auto r = Instance::create(cfg, kPidLustre, {make_o2ib_lnd([this](std::uint32_t ip) { return fabric.open(ip); })});
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("LNET_O2IB_REG_CACHE_MB"), std::string::npos) << r.message();
}

TEST_F(O2ibRegCache, IdleRegistrationsBeyondTheBoundAreDroppedLeastRecentlyUsedFirst) {
  {
    test::ScopedEnv env{{"LNET_O2IB_REG_CACHE_MB", "1"}};  // one 1 MiB fragment
    remake();
  }
  expose();
  std::vector<char> one = pattern(kSize, 1), two = pattern(kSize, 2);
  MdHandle md1 = lasting_md(one), md2 = lasting_md(two);
  put(md1, one);
  put(md2, two);  // md1's registration goes to make room
  put(md1, one);
  put(md1, one);  // and now it stays
  EXPECT_EQ(counter(*a, "registrations"), 3u);
  EXPECT_EQ(counter(*a, "reg_cache_hits"), 1u);
  EXPECT_EQ(counter(*a, "reg_cache_entries"), 1u);
}

TEST_F(O2ibRegCache, ARegistrationThatFailsDropsTheIdleOnesAndTheTransferRegistersItsPiece) {
  expose();
  std::vector<char> one = pattern(kSize, 1), two = pattern(kSize, 2);
  MdHandle md1 = lasting_md(one), md2 = lasting_md(two);
  put(md1, one);  // cached, idle
  ASSERT_EQ(counter(*a, "reg_cache_entries"), 1u);
  fabric.fail_registrations(kIpA, 1);           // md2's whole fragment cannot be registered
  put(md2, two);                                // every byte there all the same
  EXPECT_EQ(counter(*a, "registrations"), 2u);  // md1's miss, md2's piece
  EXPECT_EQ(counter(*a, "reg_cache_entries"), 0u);
}

}  // namespace
}  // namespace lnet::o2ib
