// The node side of self-test answering a console's session RPCs with the kernel's
// status codes (docs/design/selftest-wire.md §4.3), over the test fabric.
#include <gtest/gtest.h>

#include <future>

#include <selftest/framework.hpp>

#include "support/event_log.hpp"
#include "support/fabric.hpp"

namespace lnet::selftest {
namespace {

using namespace std::chrono_literals;

Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }

class SelftestNode : public ::testing::Test {
 protected:
  void make(std::chrono::seconds timeout = 100s) {
    a = Instance::create(test::fabric_config({1}), kPidLustre).value();
    b = Instance::create(test::fabric_config({2}), kPidLustre).value();
    console = std::make_unique<RpcNode>(*a, 5s);
    node_rpc = std::make_unique<RpcNode>(*b, 5s);
    node = std::make_unique<Framework>(*node_rpc, timeout);
    ASSERT_TRUE(node->start(4));
  }
  void TearDown() override {
    console.reset();
    node.reset();
    node_rpc.reset();
    a.reset();
    b.reset();
  }
  template <typename Reply>
  Reply call(Service s, Body body, std::uint32_t feats = kFeatBulkLen) {
    std::promise<Result<Message>> done;
    console->call(ProcessId{gni(2), kPidLustre}, s, Message{kMsgVersion, feats, std::move(body)}, std::nullopt,
                  [&](Result<Message> r) { done.set_value(std::move(r)); });
    auto r = done.get_future().get();
    EXPECT_TRUE(r) << r.message();
    last_feats = r ? r->feats : 0;
    return r ? std::get<Reply>(r->body) : Reply{};
  }
  std::unique_ptr<Instance> a, b;
  std::unique_ptr<RpcNode> console, node_rpc;
  std::unique_ptr<Framework> node;
  std::uint32_t last_feats = 0;
  const SessionId mine{gni(1).value(), 1000}, theirs{gni(7).value(), 2000};
};

TEST_F(SelftestNode, ASessionIsMadeQueriedAndRemoved) {
  make();
  auto q = call<DebugReply>(Service::Debug, DebugReq{0, mine, 0});
  EXPECT_EQ(q.status, kStatusEsrch) << "no session yet";
  EXPECT_TRUE(q.sid.is_invalid());
  auto mk = call<MksnReply>(Service::MakeSession, MksnReq{0, mine, 0, "read-test"});
  EXPECT_EQ(mk.status, 0u);
  EXPECT_EQ(mk.sid, mine);
  EXPECT_EQ(mk.timeout, 100u);
  EXPECT_EQ(last_feats, kFeatBulkLen) << "the session's features";
  q = call<DebugReply>(Service::Debug, DebugReq{0, theirs, 0});
  EXPECT_EQ(q.status, 0u) << "DEBUG does not compare the session id";
  EXPECT_EQ(q.sid, mine);
  EXPECT_EQ(q.name, "read-test");
  // Another console: busy unless it forces.
  auto busy = call<MksnReply>(Service::MakeSession, MksnReq{0, theirs, 0, "other"});
  EXPECT_EQ(busy.status, kStatusEbusy);
  EXPECT_EQ(busy.sid, mine);
  EXPECT_EQ(busy.name, "read-test") << "the reply names the session in the way";
  EXPECT_EQ(call<RmsnReply>(Service::RemoveSession, RmsnReq{0, theirs}).status, kStatusEbusy);
  auto rm = call<RmsnReply>(Service::RemoveSession, RmsnReq{0, mine});
  EXPECT_EQ(rm.status, 0u);
  EXPECT_TRUE(rm.sid.is_invalid()) << "no session left";
  EXPECT_EQ(call<RmsnReply>(Service::RemoveSession, RmsnReq{0, mine}).status, kStatusEsrch);
  EXPECT_FALSE(node->session());
  // Forced, a new session replaces the old one.
  ASSERT_EQ(call<MksnReply>(Service::MakeSession, MksnReq{0, mine, 0, "one"}).status, 0u);
  auto forced = call<MksnReply>(Service::MakeSession, MksnReq{0, theirs, 1, "two"});
  EXPECT_EQ(forced.status, 0u);
  EXPECT_EQ(node->session()->name, "two");
}

TEST_F(SelftestNode, BadSessionRequestsGetTheKernelsCodes) {
  make();
  EXPECT_EQ(call<MksnReply>(Service::MakeSession, MksnReq{0, SessionId::invalid(), 0, "x"}).status, kStatusEinval);
  auto unknown = call<MksnReply>(Service::MakeSession, MksnReq{0, mine, 0, "x"}, 0x6);
  EXPECT_EQ(unknown.status, kStatusEproto) << "feature bits it does not know";
  ASSERT_EQ(call<MksnReply>(Service::MakeSession, MksnReq{0, mine, 0, "x"}).status, 0u);
  EXPECT_EQ(call<StatReply>(Service::QueryStat, StatReq{0, theirs, 0}).status, kStatusEsrch);
  EXPECT_EQ(call<StatReply>(Service::QueryStat, StatReq{0, SessionId::invalid(), 0}).status, kStatusEinval);
  auto other_feats = call<StatReply>(Service::QueryStat, StatReq{0, mine, 0}, 0);
  EXPECT_EQ(other_feats.status, kStatusEproto) << "not the session's features";
  EXPECT_EQ(other_feats.sid, mine);
}

TEST_F(SelftestNode, StatReportsTheNodesCounters) {
  make();
  ASSERT_EQ(call<MksnReply>(Service::MakeSession, MksnReq{0, mine, 0, "s"}).status, 0u);
  auto s1 = call<StatReply>(Service::QueryStat, StatReq{0, mine, 0});
  ASSERT_EQ(s1.status, 0u);
  EXPECT_EQ(s1.sid, mine);
  EXPECT_GE(s1.rpc.rpcs_rcvd, 2u) << "the MKSN and this STAT";
  EXPECT_GT(s1.lnet.recv_count, 0u);
  EXPECT_GT(s1.lnet.send_length, 0u);
  auto s2 = call<StatReply>(Service::QueryStat, StatReq{0, mine, 0});
  EXPECT_GE(s2.fw.running_ms, s1.fw.running_ms);
  EXPECT_GT(s2.lnet.recv_count, s1.lnet.recv_count);
  EXPECT_GT(s2.rpc.rpcs_rcvd, s1.rpc.rpcs_rcvd);
}

TEST_F(SelftestNode, AnIdleSessionEnds) {
  make(1s);
  ASSERT_EQ(call<MksnReply>(Service::MakeSession, MksnReq{0, mine, 0, "s"}).status, 0u);
  ASSERT_TRUE(node->session());
  EXPECT_TRUE(test::eventually([&] { return !node->session(); }, 10s)) << "1 s without an RPC";
  EXPECT_EQ(call<DebugReply>(Service::Debug, DebugReq{0, mine, 0}).status, kStatusEsrch);
}

}  // namespace
}  // namespace lnet::selftest
