// The o2ib driver under liblnet's core, two (or three) instances on the fake RDMA fabric
// (o2iblnd/src/fake_verbs.hpp): connection set-up, ping, IMMEDIATE and RDMA PUT/GET of
// every size with data checks, sinks of several fragments, NAKs and GETs that match
// nothing, credits returned by NOOPs under a one-way stream, a link that goes down and a
// peer that vanishes, timeouts, and a peer that sends what no ko2iblnd sends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>

#include <lnet/lnet.hpp>
#include <lnet/o2ib/o2iblnd.hpp>

#include "handshake.hpp"
#include "o2ib_fixture.hpp"
#include "support/scoped_env.hpp"

namespace lnet::o2ib {
namespace {

using namespace test_o2ib;
using namespace std::chrono_literals;

TEST_F(O2ibDriver, PingBothWays) {
  auto r = a->ping(ProcessId{nid(kIpB), kPidLustre}, 5000ms);
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->info.nis.size(), 2u);
  EXPECT_EQ(r->info.nis[1].nid, nid(kIpB));
  auto back = b->ping(ProcessId{nid(kIpA), kPidLustre}, 5000ms);
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(back->info.nis[1].nid, nid(kIpA));
  EXPECT_EQ(counter(*a, "conns_established"), 1u);  // one connection serves both directions
  EXPECT_EQ(counter(*b, "conns_established"), 1u);
}

TEST_F(O2ibDriver, PutAndGetOfEverySizeBothWays) {
  for (std::size_t size :
       {std::size_t{0}, std::size_t{1}, kMaxImmediatePayload, kMaxImmediatePayload + 1, std::size_t{1} << 20}) {
    SCOPED_TRACE(size);
    put_get(*a, *b, nid(kIpB), size);
    put_get(*b, *a, nid(kIpA), size);
  }
  EXPECT_GE(counter(*a, "rdma_put"), 2u);
  EXPECT_GE(counter(*a, "rdma_get"), 2u);
  EXPECT_GE(counter(*a, "rdma_bytes"), 2u * (1u << 20));
  EXPECT_EQ(counter(*a, "bad_messages"), 0u);
  EXPECT_EQ(fabric.stats().rnr, 0u);  // a receive was always posted
}

TEST_F(O2ibDriver, SinkOfSeveralFragmentsGoesThroughABounceBuffer) {
  put_get(*a, *b, nid(kIpB), 300000, 7);
  put_get(*a, *b, nid(kIpB), 1u << 20, 3);
}

// A stream of small PUTs one way: the receiver's credits come back on NOOPs (it has
// nothing to send), and nothing is lost or overruns a buffer.
TEST_F(O2ibDriver, OneWayStreamGetsItsCreditsBackByNoops) {
  constexpr int kCount = 300;
  std::vector<char> target(64), src = pattern(64, 1);
  test::EventLog tlog, ilog;
  auto me = b->me_attach(kPortal, ProcessId::any(), 0, 0, Unlink::Retain, InsPos::After);
  MdDesc td;
  td.start = target.data();
  td.length = target.size();
  td.options = kMdOpPut | kMdManageRemote;
  td.handler = tlog.handler();
  auto tmd = b->md_attach(*me, td, Unlink::Retain);
  ASSERT_TRUE(tmd);
  for (int i = 0; i < kCount; ++i) {
    put_to(*a, nid(kIpB), src.data(), src.size(), ilog);
  }
  EXPECT_EQ(tlog.wait(EventType::Put, kCount), static_cast<std::size_t>(kCount));
  EXPECT_EQ(ilog.wait(EventType::Send, kCount), static_cast<std::size_t>(kCount));
  for (const Event& e : ilog.all(EventType::Send)) EXPECT_EQ(e.status, 0);
  EXPECT_GT(counter(*b, "noops"), 0u);
  EXPECT_EQ(fabric.stats().rnr, 0u);
  EXPECT_EQ(b->md_unlink(*tmd), 0);
}

TEST_F(O2ibDriver, PutThatMatchesNothingIsNakedAndGetGetsNoData) {
  std::vector<char> src = pattern(100000, 5), sink(100000);
  test::EventLog log;
  put_to(*a, nid(kIpB), src.data(), src.size(), log);
  auto sent = log.find(EventType::Send);
  ASSERT_TRUE(sent);
  EXPECT_EQ(sent->status, 0);  // as ko2iblnd: the PUT went; the target dropped it
  EXPECT_EQ(counter(*a, "naks"), 1u);
  MdDesc gd;
  gd.start = sink.data();
  gd.length = sink.size();
  gd.threshold = 2;
  gd.handler = log.handler();
  auto gmd = a->md_bind(gd, Unlink::Unlink);
  ASSERT_EQ(a->get(Nid::any(), *gmd, ProcessId{nid(kIpB), kPidLustre}, kPortal, 0, 0), 0);
  EXPECT_TRUE(log.wait_unlinked(*gmd));
  auto reply = log.find(EventType::Reply, 100ms);
  if (reply) {
    EXPECT_NE(reply->status, 0);
  }
  // The connection is fine: a PUT that matches goes through after.
  put_get(*a, *b, nid(kIpB), 200000);
}

TEST_F(O2ibDriver, LinkDownFailsTheMessagesTellsLnetAndHealsOnReconnect) {
  put_get(*a, *b, nid(kIpB), 10);
  fabric.set_link(kIpA, kIpB, false);
  std::vector<char> src = pattern(200000, 9);
  test::EventLog log;
  auto smd = put_to(*a, nid(kIpB), src.data(), src.size(), log);
  auto sent = log.find(EventType::Send);
  ASSERT_TRUE(sent);
  EXPECT_NE(sent->status, 0);
  EXPECT_TRUE(log.wait_unlinked(smd));
  EXPECT_GE(counter(*a, "conns_closed"), 1u);
  fabric.set_link(kIpA, kIpB, true);
  put_get(*a, *b, nid(kIpB), 200000);  // a new connection
  EXPECT_GE(counter(*a, "conns_established"), 2u);
}

TEST_F(O2ibDriver, PeerThatVanishesFailsWhatWasSentToIt) {
  put_get(*a, *b, nid(kIpB), 10);
  b.reset();
  test::EventLog log;
  char byte = 1;
  auto md = put_to(*a, nid(kIpB), &byte, 1, log);
  auto ev = log.find(EventType::Send);
  ASSERT_TRUE(ev);
  EXPECT_NE(ev->status, 0);
  EXPECT_TRUE(log.wait_unlinked(md));
}

TEST_F(O2ibDriver, PutWhoseSinkNeverAnswersTimesOut) {
  a = make(kIpC, 1);  // 10.0.0.3, a one-second timeout
  ASSERT_TRUE(a);
  put_get(*a, *b, nid(kIpB), 10);
  fabric.hold(true);  // the PUT_REQ stays on the wire
  std::vector<char> src = pattern(200000, 2);
  test::EventLog log;
  auto smd = put_to(*a, nid(kIpB), src.data(), src.size(), log);
  // The connection closes at the timeout; the held send then completes flushed.
  auto until = std::chrono::steady_clock::now() + 20s;
  while (counter(*a, "timeouts") == 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(counter(*a, "timeouts"), 1u);
  fabric.hold(false);
  fabric.deliver_all();
  auto sent = log.find(EventType::Send);
  ASSERT_TRUE(sent);
  EXPECT_NE(sent->status, 0);
  EXPECT_TRUE(log.wait_unlinked(smd));
}

// peer_credits, peercredits_hiw and concurrent_sends as ko2iblnd settles them, shown in
// effect (net show -v); a tunable the driver cannot honour is refused, naming it.
TEST_F(O2ibDriver, TunablesTakeEffectAsKo2iblndSettlesThem) {
  register_lnd_tunables(kO2ibLnd, o2ib_tunables());
  NetConfig nc;
  nc.tunables.peer_credits = 16;
  nc.lnd_tunables.set("peercredits_hiw", 2);     // below half: half
  nc.lnd_tunables.set("concurrent_sends", 100);  // above twice: twice
  nc.lnd_tunables.set("ntx", 64);
  auto c = make(kIpC, 0, nc);
  ASSERT_TRUE(c);
  auto nis = c->control().ni_info();
  ASSERT_EQ(nis.size(), 2u);
  EXPECT_EQ(nis[1].tunables.peer_credits, 16);
  EXPECT_EQ(nis[1].lnd_tunables.get("peercredits_hiw"), 8);
  EXPECT_EQ(nis[1].lnd_tunables.get("concurrent_sends"), 32);
  EXPECT_EQ(nis[1].lnd_tunables.get("ntx"), 64);
  EXPECT_EQ(nis[1].lnd_timeout, 49);     // LNet's lnd_timeout: (150 - 1) / (2 + 1)
  put_get(*c, *b, nid(kIpB), 1u << 20);  // B takes queue depth 8 only: C connects again with it
  EXPECT_EQ(counter(*b, "conns_rejected"), 1u);
  c.reset();
  nc.lnd_tunables.set("conns_per_peer", 2);
  Config cfg;
  nc.net = kNet;
  nc.nid = nid(kIpC);
  cfg.nets.push_back(nc);
  auto refused =
      Instance::create(cfg, kPidLustre, {make_o2ib_lnd([this](std::uint32_t ip) { return fabric.open(ip); })});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("conns_per_peer 2 on o2ib is outside 1..1"), std::string::npos) << refused.message();
}

// ko2iblnd's module parameters as LNET_O2IB_* variables, read when an NI comes up: the
// CM port, the queue pair's retry counts, and how often a connect finding no listener is
// made again; a bad value is refused, naming it.
TEST_F(O2ibDriver, ModuleParametersFromTheEnvironmentTakeEffect) {
  constexpr std::uint32_t kIpD = 0x0a000004;
  auto make_plain = [this](std::uint32_t ip) -> Result<std::unique_ptr<Instance>> {
    Config cfg;
    NetConfig nc;
    nc.net = kNet;
    nc.nid = nid(ip);
    cfg.nets.push_back(nc);
    cfg.globals.discovery = 0;    // one ping, one message
    cfg.globals.retry_count = 0;  // and no resend of it by LNet
    return Instance::create(cfg, kPidLustre, {make_o2ib_lnd([this](std::uint32_t addr) { return fabric.open(addr); })});
  };
  std::unique_ptr<Instance> c, d;
  {
    test::ScopedEnv env{
        {"LNET_O2IB_SERVICE", "20987"}, {"LNET_O2IB_RETRY_COUNT", "2"}, {"LNET_O2IB_RNR_RETRY_COUNT", "7"}};
    auto rc = make_plain(kIpC);
    auto rd = make_plain(kIpD);
    ASSERT_TRUE(rc && rd) << (rc ? rd.message() : rc.message());
    c = std::move(*rc);
    d = std::move(*rd);
  }
  put_get(*c, *d, nid(kIpD), 100000);  // both on port 20987
  EXPECT_EQ(fabric.stats().last_qp.retry_count, 2);
  EXPECT_EQ(fabric.stats().last_qp.rnr_retry_count, 7);
  // B listens on 987: C finds no listener there, connects twice more, and gives up.
  std::uint64_t before = fabric.stats().connects;
  EXPECT_FALSE(c->ping(ProcessId{nid(kIpB), kPidLustre}, 5000ms));
  EXPECT_EQ(fabric.stats().connects - before, 3u);
  EXPECT_EQ(counter(*c, "connect_failed"), 1u);
  test::ScopedEnv bad{{"LNET_O2IB_RNR_RETRY_COUNT", "8"}};
  auto refused = make_plain(0x0a000005);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("LNET_O2IB_RNR_RETRY_COUNT='8' is not a number in 0..7"), std::string::npos)
      << refused.message();
}

// An NI that cannot start: the driver's reason is in the error the host returns (what
// lnetctl shows), not only the errno's text.
TEST(O2ibStartup, TheReasonAnNiCannotStartReachesTheCaller) {
  Config cfg;
  NetConfig nc;
  nc.net = kNet;
  nc.nid = nid(kIpA);
  cfg.nets.push_back(nc);
  auto lnd = make_o2ib_lnd([](std::uint32_t) -> Result<std::unique_ptr<Provider>> {
    return Failure{-ENODEV, "no RDMA device on this machine"};
  });
  auto r = Instance::create(cfg, kPidLustre, {lnd});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), -ENODEV);
  EXPECT_NE(r.message().find("cannot start network o2ib: no RDMA device on this machine"), std::string::npos)
      << r.message();
}

// ---- a peer that sends what no ko2iblnd sends (a raw device at 10.0.0.3 speaking to A)

class O2ibRoguePeer : public O2ibDriver {
 protected:
  void SetUp() override {
    O2ibDriver::SetUp();
    rogue = fabric.open(kIpC).value();
    buf.resize(64 * kMsgSize);
    mr = rogue->reg(buf.data(), buf.size(), false).value();
  }
  void TearDown() override {
    rogue.reset();
    O2ibDriver::TearDown();
  }
  CmEvent next_event() {
    CmEvent e;
    auto until = std::chrono::steady_clock::now() + 10s;
    while (!rogue->next_event(e) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    return e;
  }
  // Connects to A with `private_data`; the CM event that answers.
  CmEvent connect(std::span<const std::uint8_t> private_data) {
    auto r = rogue->connect(kIpA, kService, false, {64, 64}, private_data, 1);
    EXPECT_TRUE(r);
    ep = r ? *r : 0;
    for (unsigned i = 0; i < 32; ++i)  // buffers for what A sends (NOOPs)
      EXPECT_TRUE(rogue->post_recv(ep, Sge{addr(32 + i), kMsgSize, mr.lkey}, 100 + i));
    return next_event();
  }
  // A well-formed connection offering `max_frags`; A's incarnation from its CONNACK.
  bool connect_properly(std::uint16_t max_frags = kMaxFrags) {
    std::uint8_t req[kMaxPrivateData];
    LocalNi me{nid(kIpC).value(), 77, 8, max_frags};
    std::size_t n = make_connreq(req, me, nid(kIpA).value(), 0, ConnParams{8, max_frags, kMsgSize});
    CmEvent e = connect({req, n});
    if (e.kind != CmEventKind::Established) return false;
    auto ack = unpack(e.data());
    a_stamp = ack ? ack->h.src_stamp : 0;
    return static_cast<bool>(ack);
  }
  std::uint64_t addr(unsigned slot) { return reinterpret_cast<std::uint64_t>(buf.data() + slot * kMsgSize); }
  std::span<std::uint8_t> slot(unsigned i) { return {buf.data() + i * kMsgSize, kMsgSize}; }
  MsgHeader header(MsgType t, std::size_t nob) {
    MsgHeader h;
    h.type = t;
    h.nob = static_cast<std::uint32_t>(nob);
    h.src_nid = nid(kIpC).value();
    h.src_stamp = 77;
    h.dst_nid = nid(kIpA).value();
    h.dst_stamp = a_stamp;
    return h;
  }
  // Sends slot 0's first `nob` bytes; waits until A counted a bad message and the
  // connection went.
  void send_and_expect_closed(std::size_t nob) {
    std::uint64_t before = counter(*a, "bad_messages");
    ASSERT_TRUE(rogue->post_send(ep, Sge{addr(0), static_cast<std::uint32_t>(nob), mr.lkey}, 1));
    CmEvent e = next_event();
    EXPECT_EQ(e.kind, CmEventKind::Disconnected);
    EXPECT_EQ(counter(*a, "bad_messages"), before + 1);
    rogue->destroy(ep);
  }
  std::unique_ptr<Provider> rogue;
  std::vector<std::uint8_t> buf;
  MemoryRegion mr;
  EndpointId ep = 0;
  std::uint64_t a_stamp = 0;
};

TEST_F(O2ibRoguePeer, MalformedPrivateDataIsRejectedAndCounted) {
  const std::uint8_t junk[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  CmEvent e = connect(junk);
  EXPECT_EQ(e.kind, CmEventKind::Rejected);
  EXPECT_TRUE(e.consumer_reject);
  auto rej = unpack_reject(e.data());
  ASSERT_TRUE(rej) << rej.message();
  EXPECT_EQ(rej->why, RejectReason::Fatal);
  EXPECT_EQ(counter(*a, "conns_rejected"), 1u);
  put_get(*a, *b, nid(kIpB), 200000);  // the NI goes on
}

TEST_F(O2ibRoguePeer, TooManyCreditsClosesTheConnectionOnly) {
  put_get(*a, *b, nid(kIpB), 10);
  ASSERT_TRUE(connect_properly());
  MsgHeader h = header(MsgType::Noop, put_noop(slot(0)));
  h.credits = 200;  // it was granted 8
  finish(slot(0), h, false);
  send_and_expect_closed(h.nob);
  put_get(*a, *b, nid(kIpB), 200000);  // the other peer is unaffected
}

TEST_F(O2ibRoguePeer, DescriptorOfMoreFragmentsThanNegotiatedClosesTheConnection) {
  ASSERT_TRUE(connect_properly(4));
  Header lnet;
  lnet.type = lnet::MsgType::Get;
  lnet.dest_nid = nid(kIpA);
  lnet.src_nid = nid(kIpC);
  std::vector<RdmaFrag> frags(5, RdmaFrag{4096, 0x1000});
  MsgHeader h = header(MsgType::GetReq, put_get_req(slot(0), lnet, 1, 0x77, frags));
  finish(slot(0), h, false);
  send_and_expect_closed(h.nob);
  put_get(*a, *b, nid(kIpB), 200000);
}

TEST_F(O2ibRoguePeer, UnknownTypeAndStaleIncarnationCloseTheConnection) {
  ASSERT_TRUE(connect_properly());
  MsgHeader h = header(MsgType::Noop, put_noop(slot(0)));
  finish(slot(0), h, false);
  buf[6] = 0xd9;  // no such type
  send_and_expect_closed(h.nob);
  ASSERT_TRUE(connect_properly());
  h = header(MsgType::Noop, put_noop(slot(0)));
  h.dst_stamp = a_stamp - 1;  // for an earlier incarnation of A
  finish(slot(0), h, false);
  send_and_expect_closed(h.nob);
  EXPECT_EQ(counter(*a, "bad_messages"), 2u);
}

TEST_F(O2ibRoguePeer, ReplyToNoMessageClosesTheConnection) {
  ASSERT_TRUE(connect_properly());
  MsgHeader h = header(MsgType::PutDone, put_completion(slot(0), 12345, 100));
  finish(slot(0), h, false);
  send_and_expect_closed(h.nob);
}

// The key A's PUT_ACK gives the peer lets it write the sink and nothing more, also when
// the MD lasts (its memory's registration is cached for sources only): a write past the
// sink is refused by the device and A's memory beyond it stays as it was.
TEST_F(O2ibRoguePeer, AWritePastTheSinkIsRefusedAlsoIntoAnMdThatLasts) {
  constexpr std::size_t kPut = 64 * 1024, kMd = 2 * kPut;
  std::vector<char> mem(kMd, 'm');
  test::EventLog log;
  auto me = a->me_attach(kPortal, ProcessId::any(), 0, 0, Unlink::Retain, InsPos::After);
  ASSERT_TRUE(me);
  MdDesc d;
  d.start = mem.data();
  d.length = kMd;
  d.options = kMdOpPut;  // threshold infinite
  d.handler = log.handler();
  ASSERT_TRUE(a->md_attach(*me, d, Unlink::Retain));
  ASSERT_TRUE(connect_properly());
  Header lnet;
  lnet.type = lnet::MsgType::Put;
  lnet.dest_nid = nid(kIpA);
  lnet.src_nid = nid(kIpC);
  lnet.dest_pid = kPidLustre;
  lnet.payload_length = kPut;
  lnet.msg.put.ack_wmd = WireHandle::none();
  lnet.msg.put.ptl_index = kPortal;
  MsgHeader h = header(MsgType::PutReq, put_put_req(slot(0), lnet, 5));
  finish(slot(0), h, false);
  ASSERT_TRUE(rogue->post_send(ep, Sge{addr(0), h.nob, mr.lkey}, 1));
  std::optional<Msg> ack;  // A's PUT_ACK, naming the sink
  for (auto end = std::chrono::steady_clock::now() + 10s; !ack && std::chrono::steady_clock::now() < end;) {
    Completion wc[8];
    std::size_t k = rogue->poll(wc);
    for (std::size_t i = 0; i < k; ++i) {
      if (wc[i].op != WcOp::Recv || wc[i].status != WcStatus::Success) continue;
      auto m = unpack({buf.data() + (32 + wc[i].wr_id - 100) * kMsgSize, wc[i].byte_len});
      if (m && m->h.type == MsgType::PutAck) ack = *m;
    }
    if (k == 0) std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(ack) << "no PUT_ACK";
  ASSERT_EQ(ack->rd_nfrags, 1u);
  RdmaFrag sink = ack->frag(0);
  EXPECT_EQ(sink.nob, kPut);
  std::vector<std::uint8_t> src(kPut + 4096, 'x');
  MemoryRegion smr = rogue->reg(src.data(), src.size(), false).value();
  Sge sge{reinterpret_cast<std::uint64_t>(src.data()), static_cast<std::uint32_t>(src.size()), smr.lkey};
  ASSERT_TRUE(rogue->post_write(ep, {&sge, 1}, sink.addr, ack->rd_key, 2));
  std::optional<Completion> done;
  for (auto end = std::chrono::steady_clock::now() + 10s; !done && std::chrono::steady_clock::now() < end;) {
    Completion wc[8];
    std::size_t k = rogue->poll(wc);
    for (std::size_t i = 0; i < k; ++i)
      if (wc[i].wr_id == 2) done = wc[i];
    if (k == 0) std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, WcStatus::RemoteAccess);
  EXPECT_EQ(std::count(mem.begin() + kPut, mem.end(), 'm'), static_cast<long>(kMd - kPut)) << "written past the sink";
  rogue->dereg(smr);
}

}  // namespace
}  // namespace lnet::o2ib

namespace lnet::o2ib {
namespace {

// A's CM is slower than the data: the peer it dialled accepts and sends at once, and A
// sees the message before it has heard the connection is up. It keeps it until then.
TEST_F(O2ibRoguePeer, MessageBeforeTheEstablishedEventIsKeptUntilItComes) {
  ASSERT_TRUE(rogue->listen(kService));
  std::vector<char> target(100), data = pattern(100, 4);
  test::EventLog tlog, slog;
  auto me = a->me_attach(kPortal, ProcessId::any(), 0, 0, Unlink::Retain, InsPos::After);
  MdDesc td;
  td.start = target.data();
  td.length = target.size();
  td.options = kMdOpPut | kMdManageRemote;
  td.handler = tlog.handler();
  auto tmd = a->md_attach(*me, td, Unlink::Retain);
  ASSERT_TRUE(tmd);
  fabric.withhold_events(kIpA, true);
  char byte = 1;  // A sends to the rogue: A dials it
  put_to(*a, nid(kIpC), &byte, 1, slog);
  CmEvent req = next_event();
  ASSERT_EQ(req.kind, CmEventKind::ConnectRequest);
  auto creq = unpack(req.data());
  ASSERT_TRUE(creq);
  a_stamp = creq->h.src_stamp;
  ep = req.ep;
  for (unsigned i = 0; i < 32; ++i) ASSERT_TRUE(rogue->post_recv(ep, Sge{addr(32 + i), kMsgSize, mr.lkey}, 100 + i));
  std::uint8_t ack[kMaxPrivateData];
  LocalNi me_c{nid(kIpC).value(), 77, 8, kMaxFrags};
  std::size_t n = make_connack(ack, me_c, nid(kIpA).value(), a_stamp, creq->params, kVersion2);
  ASSERT_TRUE(rogue->accept(ep, {64, 64}, {ack, n}, 1));
  ASSERT_EQ(next_event().kind, CmEventKind::Established);
  Header lnet;  // a PUT of 100 bytes to A's portal
  lnet.type = lnet::MsgType::Put;
  lnet.dest_nid = nid(kIpA);
  lnet.src_nid = nid(kIpC);
  lnet.dest_pid = kPidLustre;
  lnet.src_pid = kPidLustre;
  lnet.payload_length = 100;
  lnet.msg.put.ack_wmd = WireHandle::none();
  lnet.msg.put.ptl_index = kPortal;
  MsgHeader h = header(MsgType::Immediate, put_immediate(slot(0), lnet, 100));
  std::memcpy(buf.data() + kImmediatePayloadOffset, data.data(), 100);
  finish(slot(0), h, false);
  ASSERT_TRUE(rogue->post_send(ep, Sge{addr(0), h.nob, mr.lkey}, 1));
  EXPECT_EQ(tlog.wait(EventType::Put, 1, 200ms), 0u) << "taken before the connection was up";
  fabric.withhold_events(kIpA, false);
  ASSERT_TRUE(tlog.find(EventType::Put));
  EXPECT_EQ(std::memcmp(target.data(), data.data(), 100), 0);
  EXPECT_EQ(counter(*a, "bad_messages"), 0u);
  // And what A had for the rogue (its discovery ping first) went on the connection.
  bool got = false;
  auto until = std::chrono::steady_clock::now() + 10s;
  while (!got && std::chrono::steady_clock::now() < until) {
    Completion wc[8];
    std::size_t k = rogue->poll(wc);
    for (std::size_t i = 0; i < k; ++i) got = got || (wc[i].op == WcOp::Recv && wc[i].status == WcStatus::Success);
    if (!got) std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(got) << "A sent nothing on the connection";
  EXPECT_EQ(a->md_unlink(*tmd), 0);
}

// The peer holds our PUT_REQs unanswered until no reserved credit is left: the next
// PUT_REQ waits for one, and an IMMEDIATE behind it still goes (ko2iblnd's reserved queue).
TEST_F(O2ibRoguePeer, RequestWaitingForAReservedCreditHoldsUpNothingBehindIt) {
  ASSERT_TRUE(rogue->listen(kService));
  Config cfg;
  NetConfig nc;
  nc.net = kNet;
  nc.nid = nid(0x0a000004);
  nc.tunables.peer_credits = 16;  // LNet lets 16 messages go to the rogue; its connection takes 8
  cfg.nets.push_back(nc);
  cfg.globals.discovery = 0;  // the rogue answers no ping
  auto d = Instance::create(cfg, kPidLustre, {make_o2ib_lnd([this](std::uint32_t ip) { return fabric.open(ip); })});
  ASSERT_TRUE(d) << d.message();
  std::vector<char> big = pattern(100000, 1);
  test::EventLog log;
  auto put = [&](std::size_t len) { put_to(**d, nid(kIpC), big.data(), len, log); };
  for (int i = 0; i < 9; ++i) put(big.size());  // PUT_REQs: 8 take the 8 reserved credits
  put(10);                                      // an IMMEDIATE
  CmEvent req = next_event();
  ASSERT_EQ(req.kind, CmEventKind::ConnectRequest);
  auto creq = unpack(req.data());
  ASSERT_TRUE(creq);
  a_stamp = creq->h.src_stamp;
  ep = req.ep;
  for (unsigned i = 0; i < 32; ++i) ASSERT_TRUE(rogue->post_recv(ep, Sge{addr(32 + i), kMsgSize, mr.lkey}, i));
  std::uint8_t ack[kMaxPrivateData];
  LocalNi me_c{nid(kIpC).value(), 77, 8, kMaxFrags};
  ConnParams granted = creq->params;
  granted.queue_depth = 8;
  std::size_t n = make_connack(ack, me_c, creq->h.src_nid, a_stamp, granted, kVersion2);
  ASSERT_TRUE(rogue->accept(ep, {64, 64}, {ack, n}, 1));
  ASSERT_EQ(next_event().kind, CmEventKind::Established);
  // What arrives: message types in order, until `count` came.
  std::vector<MsgType> types;
  auto until = [&](std::size_t count, std::chrono::milliseconds window = 10s) {
    auto end = std::chrono::steady_clock::now() + window;
    while (types.size() < count && std::chrono::steady_clock::now() < end) {
      Completion wc[8];
      std::size_t k = rogue->poll(wc);
      for (std::size_t i = 0; i < k; ++i)
        if (wc[i].op == WcOp::Recv && wc[i].status == WcStatus::Success) {
          auto m = unpack({buf.data() + (32 + wc[i].wr_id) * kMsgSize, wc[i].byte_len});
          types.push_back(m ? m->h.type : MsgType::Noop);
        }
      if (k == 0) std::this_thread::sleep_for(1ms);
    }
    return types.size();
  };
  ASSERT_EQ(until(8), 8u);  // the connection's 8 credits
  // The rogue gives its 8 credits back (NOOPs take none in V2).
  MsgHeader h;
  h.type = MsgType::Noop;
  h.nob = static_cast<std::uint32_t>(put_noop(slot(0)));
  h.credits = 8;
  h.src_nid = nid(kIpC).value();
  h.src_stamp = 77;
  h.dst_nid = creq->h.src_nid;
  h.dst_stamp = a_stamp;
  finish(slot(0), h, false);
  ASSERT_TRUE(rogue->post_send(ep, Sge{addr(0), h.nob, mr.lkey}, 1000));
  ASSERT_EQ(until(9), 9u) << "the IMMEDIATE stayed behind the PUT_REQ waiting for a reserved credit";
  EXPECT_EQ(until(10, 300ms), 9u) << "the 9th PUT_REQ went without a reserved credit";
  EXPECT_EQ(std::count(types.begin(), types.end(), MsgType::PutReq), 8);
  EXPECT_EQ(std::count(types.begin(), types.end(), MsgType::Immediate), 1);
  d->reset();
}

// A's keepalive and checksum from the environment: after a second of silence A sends a
// NOOP on the connection, its checksum set (and right: unpack() checks it).
TEST_F(O2ibRoguePeer, KeepaliveNoopCarriesTheChecksumWhenAsked) {
  {
    test::ScopedEnv env{{"LNET_O2IB_CKSUM", "1"}, {"LNET_O2IB_KEEPALIVE", "1"}};
    a.reset();
    a = make(kIpA);
  }
  ASSERT_TRUE(a);
  ASSERT_TRUE(connect_properly());
  Result<Msg> m = Failure{-ETIMEDOUT, "no message from A within 10 s"};
  for (auto end = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < end;) {
    Completion wc[8];
    std::size_t k = rogue->poll(wc);
    auto got = std::find_if(wc, wc + k, [](const Completion& c) { return c.op == WcOp::Recv; });
    if (got != wc + k) {
      ASSERT_EQ(got->status, WcStatus::Success);
      m = unpack({buf.data() + (32 + got->wr_id - 100) * kMsgSize, got->byte_len});
      break;
    }
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(m) << m.message();
  EXPECT_EQ(m->h.type, MsgType::Noop);
  EXPECT_NE(m->h.cksum, 0u);
}

}  // namespace
}  // namespace lnet::o2ib
