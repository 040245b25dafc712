// The loopback PUT fast path makes no heap allocation per message once warm: counted by
// replacing the global operator new in this test program.
#include <gtest/gtest.h>

#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include <lnet/lnet.hpp>

namespace {
std::atomic<long> g_allocs{0};
}

void* operator new(std::size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace lnet {
namespace {

class NoAlloc : public ::testing::Test {
 protected:
  void SetUp() override {
    // MDs come from the pool of the CPU's partition: stay on one CPU so the warm-up
    // fills the pool that the measured loop uses.
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof one, &one);
    Config cfg;
    cfg.ncpts = 2;
    auto r = Instance::create(cfg, 99);
    ASSERT_TRUE(r) << r.message();
    lnet = std::move(*r);
    auto me = lnet->me_attach(6, ProcessId::any(), 1, 0, Unlink::Unlink, InsPos::After);
    ASSERT_TRUE(me);
    MdDesc d;
    d.start = target;
    d.length = sizeof target;
    d.options = kMdOpPut | kMdOpGet | kMdManageRemote;
    d.handler = [this](const Event& e) { events += e.type == EventType::Put; };
    ASSERT_TRUE(lnet->md_attach(*me, d, Unlink::Retain));
  }
  void TearDown() override { lnet.reset(); }
  std::unique_ptr<Instance> lnet;
  char target[256] = {};
  char source[64] = "payload";
  long events = 0;
};

TEST_F(NoAlloc, PutWithAReusedMd) {
  MdDesc s;
  s.start = source;
  s.length = sizeof source;
  auto md = lnet->md_bind(s, Unlink::Retain);
  ASSERT_TRUE(md);
  const ProcessId self{Nid::lo(), 99};
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(lnet->put(Nid::any(), *md, AckReq::NoAck, self, 6, 1, 0, 0), 0);
  long before = g_allocs.load();
  for (int i = 0; i < 20000; ++i) (void)lnet->put(Nid::any(), *md, AckReq::NoAck, self, 6, 1, 0, 0);
  long after = g_allocs.load();
  EXPECT_EQ(after - before, 0) << "heap allocations in 20000 PUTs";
  EXPECT_EQ(events, 22000);
}

TEST_F(NoAlloc, PutGetAndAckWithAFreshMdEachTime) {
  const ProcessId self{Nid::lo(), 99};
  long acks = 0;
  auto one = [&] {
    MdDesc s;
    s.start = source;
    s.length = 16;
    s.threshold = 2;
    s.handler = [&acks](const Event& e) { acks += e.type == EventType::Ack; };
    auto md = lnet->md_bind(s, Unlink::Unlink);
    (void)lnet->put(Nid::any(), *md, AckReq::Ack, self, 6, 1, 0, 0);
    auto gmd = lnet->md_bind(s, Unlink::Unlink);
    (void)lnet->get(Nid::any(), *gmd, self, 6, 1, 0);
  };
  for (int i = 0; i < 2000; ++i) one();
  long before = g_allocs.load();
  for (int i = 0; i < 20000; ++i) one();
  long after = g_allocs.load();
  EXPECT_EQ(after - before, 0) << "heap allocations in 20000 PUT+ACK and GET+REPLY";
  EXPECT_EQ(acks, 22000);
}

}  // namespace
}  // namespace lnet
