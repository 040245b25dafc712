// The fake RDMA device the o2ib driver's tests run on (o2iblnd/src/fake_verbs.hpp): it
// must behave as a device does where the driver relies on it — private data both ways,
// rejects, sends into posted buffers in order, RDMA writes checked by key and bounds,
// broken connections flushing their work, an eventfd that wakes a sleeper.
#include <gtest/gtest.h>
#include <poll.h>

#include <cstring>
#include <vector>

#include "fake_verbs.hpp"

namespace lnet::o2ib {
namespace {

constexpr std::uint32_t kA = 0x0a000001, kB = 0x0a000002, kC = 0x0a000003;

std::vector<CmEvent> events(Provider& p) {
  std::vector<CmEvent> out;
  CmEvent e;
  while (p.next_event(e)) out.push_back(e);
  return out;
}

std::vector<Completion> completions(Provider& p) {
  std::vector<Completion> out(64);
  out.resize(p.poll(out));
  return out;
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

std::span<const std::uint8_t> bytes(const char* s) {
  return {reinterpret_cast<const std::uint8_t*>(s), std::strlen(s)};
}

class FakeDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    a = fabric.open(kA).value();
    b = fabric.open(kB).value();
    ASSERT_TRUE(b->listen(987));
  }
  // A connection A -> B, accepted; its endpoints.
  std::pair<EndpointId, EndpointId> connect() {
    EndpointId ea = a->connect(kB, 987, true, {8, 8}, bytes("CONNREQ"), 11).value();
    auto req = events(*b);
    EXPECT_EQ(req.size(), 1u);
    EndpointId eb = req.at(0).ep;
    EXPECT_TRUE(b->accept(eb, {8, 8}, bytes("CONNACK"), 22));
    events(*a);
    events(*b);
    return {ea, eb};
  }
  Sge sge(Provider& p, std::vector<std::uint8_t>& buf, bool remote = false) {
    MemoryRegion mr = p.reg(buf.data(), buf.size(), remote).value();
    mrs.push_back(mr);
    return Sge{reinterpret_cast<std::uint64_t>(buf.data()), static_cast<std::uint32_t>(buf.size()), mr.lkey};
  }

  FakeFabric fabric;
  std::unique_ptr<Provider> a, b;
  std::vector<MemoryRegion> mrs;
};

TEST_F(FakeDevice, PrivateDataGoesBothWaysAndTheEventFdWakes) {
  a->arm();
  EndpointId ea = a->connect(kB, 987, true, {8, 8}, bytes("CONNREQ"), 11).value();
  EXPECT_TRUE(readable(b->event_fd()));
  auto req = events(*b);
  ASSERT_EQ(req.size(), 1u);
  EXPECT_EQ(req[0].kind, CmEventKind::ConnectRequest);
  EXPECT_EQ(req[0].peer_ip, kA);
  EXPECT_EQ(req[0].peer_port, 1023) << "a privileged port";
  EXPECT_EQ(std::string(req[0].data().begin(), req[0].data().end()), "CONNREQ");
  b->arm();
  EXPECT_FALSE(readable(b->event_fd())) << "arm() consumed the wake-up";
  ASSERT_TRUE(b->accept(req[0].ep, {8, 8}, bytes("CONNACK"), 22));
  auto est = events(*a);
  ASSERT_EQ(est.size(), 1u);
  EXPECT_EQ(est[0].kind, CmEventKind::Established);
  EXPECT_EQ(est[0].ep, ea);
  EXPECT_EQ(est[0].context, 11u);
  EXPECT_EQ(std::string(est[0].data().begin(), est[0].data().end()), "CONNACK");
  auto mine = events(*b);
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].kind, CmEventKind::Established);
  EXPECT_EQ(mine[0].context, 22u);
  EXPECT_FALSE(a->connect(kB, 987, true, {8, 8}, std::vector<std::uint8_t>(57), 0))
      << "a connect request carries 56 bytes at most";
}

TEST_F(FakeDevice, RejectsNoListenerAndNoRoute) {
  EndpointId ea = a->connect(kB, 987, false, {8, 8}, bytes("x"), 1).value();
  auto req = events(*b);
  ASSERT_EQ(req.size(), 1u);
  EXPECT_EQ(req[0].peer_port, 49152);
  ASSERT_TRUE(b->reject(req[0].ep, bytes("REJ")));
  auto rej = events(*a);
  ASSERT_EQ(rej.size(), 1u);
  EXPECT_EQ(rej[0].kind, CmEventKind::Rejected);
  EXPECT_EQ(rej[0].ep, ea);
  EXPECT_TRUE(rej[0].consumer_reject);
  EXPECT_EQ(std::string(rej[0].data().begin(), rej[0].data().end()), "REJ");
  a->destroy(ea);
  a->connect(kB, 988, false, {8, 8}, bytes("x"), 2).value();  // nobody listens there
  auto none = events(*a);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].kind, CmEventKind::Rejected);
  EXPECT_FALSE(none[0].consumer_reject);
  a->connect(kC, 987, false, {8, 8}, bytes("x"), 3).value();  // no such address
  fabric.set_link(kA, kB, false);
  a->connect(kB, 987, false, {8, 8}, bytes("x"), 4).value();
  auto unreachable = events(*a);
  ASSERT_EQ(unreachable.size(), 2u);
  EXPECT_EQ(unreachable[0].kind, CmEventKind::Unreachable);
  EXPECT_EQ(unreachable[1].kind, CmEventKind::Unreachable);
}

TEST_F(FakeDevice, SendsLandInPostedBuffersInOrder) {
  auto [ea, eb] = connect();
  std::vector<std::uint8_t> rx1(64), rx2(64), tx(5);
  ASSERT_TRUE(b->post_recv(eb, sge(*b, rx1), 1));
  ASSERT_TRUE(b->post_recv(eb, sge(*b, rx2), 2));
  std::memcpy(tx.data(), "first", 5);
  Sge s = sge(*a, tx);
  ASSERT_TRUE(a->post_send(ea, s, 100));
  std::memcpy(tx.data(), "again", 5);
  ASSERT_TRUE(a->post_send(ea, s, 101));
  auto got = completions(*b);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 1u);
  EXPECT_EQ(got[0].op, WcOp::Recv);
  EXPECT_EQ(got[0].byte_len, 5u);
  EXPECT_EQ(std::memcmp(rx1.data(), "first", 5), 0);
  EXPECT_EQ(std::memcmp(rx2.data(), "again", 5), 0);
  auto sent = completions(*a);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].wr_id, 101u);
  EXPECT_EQ(sent[1].status, WcStatus::Success);
}

TEST_F(FakeDevice, ASendWithNoReceivePostedBreaksTheConnection) {
  auto [ea, eb] = connect();
  std::vector<std::uint8_t> tx(8), rx(64);
  ASSERT_TRUE(b->post_recv(eb, sge(*b, rx), 7));
  ASSERT_TRUE(a->post_send(ea, sge(*a, tx), 1));  // takes B's only buffer
  ASSERT_TRUE(a->post_send(ea, sge(*a, tx), 2));  // RNR
  auto sent = completions(*a);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].status, WcStatus::RetryExceeded);
  EXPECT_EQ(events(*a).at(0).kind, CmEventKind::Disconnected);
  EXPECT_EQ(events(*b).at(0).kind, CmEventKind::Disconnected);
  EXPECT_EQ(fabric.stats().rnr, 1u);
  EXPECT_FALSE(a->post_send(ea, sge(*a, tx), 3)) << "a broken connection takes no work";
}

TEST_F(FakeDevice, RdmaWritesAreCheckedByKeyRightsAndBounds) {
  auto [ea, eb] = connect();
  std::vector<std::uint8_t> sink(4096, 0), src(1024, 0x5a), local_only(64);
  MemoryRegion smr = b->reg(sink.data(), sink.size(), true).value();
  MemoryRegion lmr = b->reg(local_only.data(), local_only.size(), false).value();
  EXPECT_EQ(lmr.rkey, 0u) << "no remote rights, no remote key";
  Sge s = sge(*a, src);
  auto at = reinterpret_cast<std::uint64_t>(sink.data());
  ASSERT_TRUE(a->post_write(ea, std::span(&s, 1), at + 1024, smr.rkey, 5));
  auto done = completions(*a);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].op, WcOp::RdmaWrite);
  EXPECT_EQ(done[0].status, WcStatus::Success);
  EXPECT_EQ(sink[1024], 0x5a);
  EXPECT_EQ(sink[2047], 0x5a);
  EXPECT_EQ(sink[2048], 0);
  EXPECT_TRUE(completions(*b).empty()) << "a write makes no completion at the target";
  // One byte past the region: refused, and the connection with it.
  ASSERT_TRUE(a->post_write(ea, std::span(&s, 1), at + 3073, smr.rkey, 6));
  auto bad = completions(*a);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].status, WcStatus::RemoteAccess);
  EXPECT_EQ(sink[3073], 0);
  EXPECT_EQ(fabric.stats().remote_access, 1u);
  EXPECT_EQ(events(*b).at(0).kind, CmEventKind::Disconnected);
}

TEST_F(FakeDevice, HeldWorkReadsMemoryWhenDeliveredAndABrokenLinkFlushes) {
  auto [ea, eb] = connect();
  std::vector<std::uint8_t> rx(64), rx2(64), tx(4, 'a');
  ASSERT_TRUE(b->post_recv(eb, sge(*b, rx), 1));
  ASSERT_TRUE(b->post_recv(eb, sge(*b, rx2), 2));
  fabric.hold(true);
  ASSERT_TRUE(a->post_send(ea, sge(*a, tx), 10));
  EXPECT_TRUE(completions(*a).empty());
  std::memset(tx.data(), 'b', 4);  // before the device got to it
  EXPECT_EQ(fabric.deliver_all(), 1u);
  EXPECT_EQ(rx[0], 'b');
  fabric.set_link(kA, kB, false);
  ASSERT_TRUE(a->post_send(ea, sge(*a, tx), 11));
  fabric.deliver_all();
  auto sent = completions(*a);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].status, WcStatus::RetryExceeded);
  auto flushed = completions(*b);
  ASSERT_EQ(flushed.size(), 2u);
  EXPECT_EQ(flushed[1].wr_id, 2u);
  EXPECT_EQ(flushed[1].status, WcStatus::Flushed) << "the posted buffer comes back";
}

TEST_F(FakeDevice, AClosedDeviceIsAPeerThatVanished) {
  auto [ea, eb] = connect();
  (void)eb;
  b.reset();
  auto ev = events(*a);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, CmEventKind::Disconnected);
  EXPECT_EQ(ev[0].ep, ea);
  a->destroy(ea);
  a->connect(kB, 987, false, {8, 8}, bytes("x"), 1).value();
  EXPECT_EQ(events(*a).at(0).kind, CmEventKind::Unreachable);
  EXPECT_TRUE(fabric.open(kB)) << "the address is free again";
  EXPECT_FALSE(fabric.open(kA)) << "one device per address";
}

TEST_F(FakeDevice, FailNextMakesTheNextPostFail) {
  auto [ea, eb] = connect();
  std::vector<std::uint8_t> rx(64), tx(4);
  ASSERT_TRUE(b->post_recv(eb, sge(*b, rx), 1));
  fabric.fail_next(kA, WcStatus::RetryExceeded);
  ASSERT_TRUE(a->post_send(ea, sge(*a, tx), 9));
  auto c = completions(*a);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::RetryExceeded);
  EXPECT_EQ(completions(*b).at(0).status, WcStatus::Flushed);
}

}  // namespace
}  // namespace lnet::o2ib
