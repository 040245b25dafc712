// Portals over the loopback NI, beyond matching: event contents, unlinking, portal
// kinds, bad arguments, stale handles, handlers that call back into LNet, RAII handles,
// event queues and counters.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <lnet/lnet.hpp>

#include "core/core.hpp"
#include "matching_fixture.hpp"

namespace lnet {
namespace {

using test::EventLog;
using test::kPortal;
using test::Matching;

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
