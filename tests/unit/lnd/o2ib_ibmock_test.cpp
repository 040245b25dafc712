// The o2ib driver over its rdma-core layer (o2iblnd/src/rdma_verbs.cpp), with ibmock in
// place of libibverbs and librdmacm (unit/lnd/ibmock): the layer's own code runs as it
// would on a device — the CM's events driven to connections, queue pairs made and sized,
// completions through the completion channel, registrations — and everything it made is
// gone once its NIs are. What a device itself does (timing, losses, its limits) only a
// device shows: the device tests (tests/integration/o2ib.sh) are for that.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include <lnet/lnet.hpp>
#include <lnet/o2ib/o2iblnd.hpp>
#include <lnet/o2ib/wire.hpp>

#include "ibmock/ibmock.hpp"
#include "support/event_log.hpp"
#include "support/lnd_counter.hpp"
#include "support/put_get.hpp"
#include "verbs.hpp"

namespace lnet::o2ib {
namespace {

using namespace std::chrono_literals;

constexpr unsigned kPortal = 21;
constexpr std::uint32_t kIpA = 0x0a000101, kIpB = 0x0a000102, kIpC = 0x0a000103;  // 10.0.1.x
const NetId kNet = NetId::make(kO2ibLnd, 0);

Nid nid(std::uint32_t ip) { return Nid::make(kNet, ip); }
std::uint64_t counter(Instance& lnet, const std::string& name) { return test::lnd_counter(lnet, name, "o2ib"); }

std::unique_ptr<Instance> make(std::uint32_t ip, long peer_credits = 0) {
  Config cfg;
  NetConfig nc;
  nc.net = kNet;
  nc.nid = nid(ip);
  nc.tunables.peer_credits = peer_credits;
  cfg.nets.push_back(nc);
  auto r = Instance::create(cfg, kPidLustre, {make_o2ib_lnd([](std::uint32_t addr) { return open_rdma(addr); })});
  EXPECT_TRUE(r) << r.message();
  return r ? std::move(*r) : nullptr;
}

class O2ibOnIbmock : public ::testing::Test {
 protected:
  void SetUp() override {
    ibmock::reset();
    for (std::uint32_t ip : {kIpA, kIpB, kIpC}) ibmock::add_device(ip);
  }
  void TearDown() override {
    // Nothing the layer made is left: ids, channels, queue pairs, CQs, registrations.
    ibmock::Stats s = ibmock::stats();
    EXPECT_EQ(s.ids, 0u);
    EXPECT_EQ(s.channels, 0u);
    EXPECT_EQ(s.qps, 0u);
    EXPECT_EQ(s.cqs, 0u);
    EXPECT_EQ(s.mrs, 0u);
    EXPECT_EQ(s.pds, 0u);
    EXPECT_EQ(s.comp_channels, 0u);
    EXPECT_EQ(s.cq_overflows, 0u);
    EXPECT_EQ(s.misuse, 0u);
    ibmock::reset();
  }
};

TEST_F(O2ibOnIbmock, OpeningADeviceNeedsOneWithTheAddress) {
  auto p = open_rdma(0x0a000109);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.code(), -ENODEV);
  EXPECT_EQ(p.message(), "no RDMA device has address 10.0.1.9");
  ibmock::reset();
  EXPECT_EQ(rdma_device_count(), 0);
  auto none = open_rdma(kIpA);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.message(), "no RDMA device on this machine");
}

TEST_F(O2ibOnIbmock, PingPutAndGetOfEverySizeBothWays) {
  EXPECT_EQ(rdma_device_count(), 3);
  auto a = make(kIpA), b = make(kIpB);
  ASSERT_TRUE(a && b);
  auto r = a->ping(ProcessId{nid(kIpB), kPidLustre}, 5000ms);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->info.nis.back().nid, nid(kIpB));
  for (std::size_t size :
       {std::size_t{0}, std::size_t{1}, kMaxImmediatePayload, kMaxImmediatePayload + 1, std::size_t{1} << 20}) {
    SCOPED_TRACE(size);
    test::put_get(*a, *b, nid(kIpB), size, kPortal);
    test::put_get(*b, *a, nid(kIpA), size, kPortal);
  }
  test::put_get(*a, *b, nid(kIpB), 300000, kPortal, 7);  // a sink of several fragments: a bounce buffer
  EXPECT_EQ(counter(*a, "conns_established"), 1u);
  EXPECT_EQ(counter(*b, "conns_established"), 1u);
  EXPECT_EQ(counter(*a, "bad_messages"), 0u);
  EXPECT_GE(counter(*a, "rdma_put"), 2u);
  EXPECT_GE(counter(*a, "rdma_get"), 2u);
  EXPECT_GE(counter(*a, "rdma_bytes"), 2u << 20);  // counted from what was written: a completion says nothing
  ibmock::Stats s = ibmock::stats();
  EXPECT_GE(s.writes, 4u);
  EXPECT_EQ(s.remote_access, 0u);
  // The CQ is armed again after each wake-up: every round trip above woke the progress
  // threads through the completion channel (not their once-a-second tick).
  EXPECT_GE(s.notifications, 20u);
  EXPECT_EQ(s.last_retry_count, 5);  // ko2iblnd's defaults, carried in the CM's parameters
  EXPECT_EQ(s.last_rnr_retry_count, 6);
}

TEST_F(O2ibOnIbmock, ANodeWithoutListenerIsTriedRetryCountTimesThenFails) {
  auto a = make(kIpA);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->ping(ProcessId{nid(kIpC), kPidLustre}, 5000ms));  // a device, no lnetd
  EXPECT_EQ(ibmock::stats().rejects, 6u);                           // the first and 5 more
  EXPECT_EQ(counter(*a, "connect_failed"), 1u);
  auto c = make(kIpC);
  ASSERT_TRUE(c);
  EXPECT_TRUE(a->ping(ProcessId{nid(kIpC), kPidLustre}, 5000ms));
}

TEST_F(O2ibOnIbmock, APeerThatGoesIsNoticedAndANewOneIsConnected) {
  auto a = make(kIpA), b = make(kIpB);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->ping(ProcessId{nid(kIpB), kPidLustre}, 5000ms));
  b.reset();  // its connection is disconnected as it goes
  // A hears it, disconnects its side (the CM leaves A's queue pair alone until then),
  // gets its receives back flushed, and frees the connection: no queue pair is left.
  for (auto end = std::chrono::steady_clock::now() + 10s;
       ibmock::stats().qps > 0 && std::chrono::steady_clock::now() < end;)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(counter(*a, "conns_closed"), 1u);
  EXPECT_EQ(ibmock::stats().qps, 0u) << "A's side of the connection B closed was never freed";
  b = make(kIpB);
  ASSERT_TRUE(b);
  auto r = a->ping(ProcessId{nid(kIpB), kPidLustre}, 5000ms);
  EXPECT_TRUE(r) << r.message();
  test::put_get(*a, *b, nid(kIpB), 100000, kPortal);
  EXPECT_EQ(counter(*a, "conns_established"), 2u);
}

// B takes a queue 8 deep, A asks 16: B's reject carries its depth in its private data
// (status 28 on the CM), and A asks again with it.
TEST_F(O2ibOnIbmock, ARejectCarriesItsParametersAndTheConnectionIsMadeAgainWithThem) {
  auto a = make(kIpA, 16), b = make(kIpB, 8);
  ASSERT_TRUE(a && b);
  auto r = a->ping(ProcessId{nid(kIpB), kPidLustre}, 5000ms);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(ibmock::stats().rejects, 1u);
  EXPECT_EQ(counter(*b, "conns_rejected"), 1u);
  EXPECT_EQ(counter(*a, "conns_established"), 1u);
  test::put_get(*a, *b, nid(kIpB), 100000, kPortal);
}

// Both ends dial at once: the CM carries both requests, the driver keeps one connection
// per pair (the higher NID's), and both pings and the traffic after them go through.
TEST_F(O2ibOnIbmock, BothEndsDialingAtOnceGetThrough) {
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    auto a = make(kIpA), b = make(kIpB);
    ASSERT_TRUE(a && b);
    Result<PingResult> from_b = Failure{-EINVAL, "not run"};
    std::thread t([&] { from_b = b->ping(ProcessId{nid(kIpA), kPidLustre}, 5000ms); });
    auto from_a = a->ping(ProcessId{nid(kIpB), kPidLustre}, 5000ms);
    t.join();
    EXPECT_TRUE(from_a) << from_a.message();
    EXPECT_TRUE(from_b) << from_b.message();
    test::put_get(*a, *b, nid(kIpB), 100000, kPortal);
    test::put_get(*b, *a, nid(kIpA), 100000, kPortal);
    EXPECT_EQ(counter(*a, "bad_messages") + counter(*b, "bad_messages"), 0u);
  }
}

}  // namespace
}  // namespace lnet::o2ib
