// Several threads hammer one instance with attach/put/get/unlink at once (run under
// TSan in the tsan preset): every operation completes with the right data.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include <lnet/lnet.hpp>

#include "support/event_log.hpp"
#include "support/fabric.hpp"

namespace lnet {
namespace {

TEST(Threads, ConcurrentAttachPutGetUnlink) {
  Config cfg;
  cfg.ncpts = 4;
  auto r = Instance::create(cfg, 777);
  ASSERT_TRUE(r) << r.message();
  Instance& lnet = **r;
  const ProcessId self{Nid::lo(), 777};
  constexpr int kThreads = 4;
  constexpr int kRounds = 400;
  std::atomic<int> puts{0}, replies{0}, failures{0};

  auto worker = [&](int t) {
    for (int i = 0; i < kRounds; ++i) {
      std::uint64_t bits = (static_cast<std::uint64_t>(t) << 32) | static_cast<std::uint64_t>(i);
      unsigned portal = (i % 2) ? 14 : 15;
      char target[32] = {};
      auto me = Me::attach(lnet, portal, ProcessId::any(), bits, 0, Unlink::Unlink, InsPos::After);
      if (!me) {
        ++failures;
        continue;
      }
      MdDesc td;
      td.start = target;
      td.length = sizeof target;
      td.options = kMdOpPut | kMdOpGet | kMdManageRemote;
      td.handler = [&](const Event& e) {
        if (e.type == EventType::Put && e.status == 0) ++puts;
      };
      auto tmd = Md::attach(lnet, *me, td, Unlink::Retain);
      if (!tmd) {
        ++failures;
        continue;
      }
      std::string msg = "t" + std::to_string(t) + "-" + std::to_string(i);
      MdDesc sd;
      sd.start = msg.data();
      sd.length = msg.size() + 1;
      sd.threshold = 1;
      auto smd = lnet.md_bind(sd, Unlink::Unlink);
      if (!smd || lnet.put(Nid::any(), *smd, AckReq::NoAck, self, portal, bits, 0, 0) != 0) ++failures;

      char back[32] = {};
      MdDesc gd;
      gd.start = back;
      gd.length = msg.size() + 1;
      gd.threshold = 2;
      gd.handler = [&](const Event& e) {
        if (e.type == EventType::Reply && e.status == 0) ++replies;
      };
      auto gmd = lnet.md_bind(gd, Unlink::Unlink);
      if (!gmd || lnet.get(Nid::any(), *gmd, self, portal, bits, 0) != 0) ++failures;
      if (std::string(back) != msg || std::string(target) != msg) ++failures;
      if (i % 50 == 0 && !lnet.ping(self, std::chrono::milliseconds(2000))) ++failures;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(puts.load(), kThreads * kRounds);
  EXPECT_EQ(replies.load(), kThreads * kRounds);
  EXPECT_EQ(test::settled_msgs_alloc(lnet), 0u);
}

TEST(Threads, ConcurrentSendersShareCreditsAcrossInstances) {
  std::atomic<int> got{0};  // outlives the instances: their last events count here
  NetTunables t;
  t.peer_credits = 2;
  t.credits = 4;
  auto ra = Instance::create(test::fabric_config({41}, 0, t, 4), kPidLustre);
  auto rb = Instance::create(test::fabric_config({42}, 0, t, 4), kPidLustre);
  ASSERT_TRUE(ra && rb);
  Instance& a = **ra;
  Instance& b = **rb;
  std::vector<char> sink(1 << 16);
  auto me = b.me_attach(3, ProcessId::any(), 0, ~0ULL, Unlink::Unlink, InsPos::After);
  MdDesc d;
  d.start = sink.data();
  d.length = sink.size();
  d.options = kMdOpPut | kMdManageRemote;
  d.handler = [&](const Event& e) { got += e.type == EventType::Put; };
  ASSERT_TRUE(b.md_attach(*me, d, Unlink::Retain));
  const Nid dst = Nid::make(NetId::make(kGniLnd, 0), 42);
  static char byte = 'x';  // a queued PUT may leave after its thread is gone
  auto worker = [&](std::uint32_t tid) {
    for (std::uint32_t i = 0; i < 500; ++i) {
      MdDesc s;
      s.start = &byte;
      s.length = 1;
      s.threshold = 2;
      auto md = a.md_bind(s, Unlink::Unlink);
      ASSERT_TRUE(md);
      // Each PUT lands on its own byte of the sink.
      ASSERT_EQ(a.put(Nid::any(), *md, AckReq::Ack, ProcessId{dst, kPidLustre}, 3, 1, tid * 500 + i, 0), 0);
    }
  };
  std::vector<std::thread> threads;
  for (std::uint32_t i = 0; i < 4; ++i) threads.emplace_back(worker, i);
  for (auto& th : threads) th.join();
  EXPECT_EQ(got.load(), 2000);
  std::string missing;
  for (std::size_t i = 0; i < 2000; ++i)
    if (sink[i] != 'x') missing += std::to_string(i) + " ";
  EXPECT_EQ(missing, "") << "offsets without their byte";
  EXPECT_EQ(test::settled_msgs_alloc(a), 0u);
  EXPECT_EQ(test::settled_msgs_alloc(b), 0u);
}

}  // namespace
}  // namespace lnet
