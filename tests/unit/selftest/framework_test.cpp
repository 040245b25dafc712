// The node side of self-test answering a console's session RPCs with the kernel's
// status codes (docs/design/selftest-wire.md §4.3), over the test fabric.
#include <gtest/gtest.h>

#include <future>

#include <selftest/framework.hpp>
#include <selftest/services.hpp>

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
  // A third node the tests of b talk to: the test services only.
  void make_server() {
    c = Instance::create(test::fabric_config({3}), kPidLustre).value();
    server_rpc = std::make_unique<RpcNode>(*c, 5s);
    services = std::make_unique<TestServices>(*server_rpc);
    ASSERT_TRUE(services->start(8));
  }
  void TearDown() override {
    console.reset();
    node.reset();
    node_rpc.reset();
    services.reset();
    server_rpc.reset();
    a.reset();
    b.reset();
    c.reset();
  }
  template <typename Reply>
  Reply call(Service s, Body body, std::uint32_t feats = kFeatBulkLen, std::optional<RpcNode::Bulk> bulk = {}) {
    std::promise<Result<Message>> done;
    console->call(ProcessId{gni(2), kPidLustre}, s, Message{kMsgVersion, feats, std::move(body)}, bulk,
                  [&](Result<Message> r) { done.set_value(std::move(r)); });
    auto r = done.get_future().get();
    EXPECT_TRUE(r) << r.message();
    last_feats = r ? r->feats : 0;
    return r ? std::get<Reply>(r->body) : Reply{};
  }
  // Adds a client test to batch `bid` of b whose destinations are `dests`, as a console
  // does: the TEST request with the id list as its bulk.
  std::uint32_t add_client_test(std::uint64_t bid, Service service, std::uint32_t loop, std::uint32_t concur,
                                TestParams params, std::vector<ProcessIdPacked> dests) {
    std::vector<std::uint8_t> ids(id_list_bytes(dests.size()));
    encode_ids(dests, ids);
    TestReq q;
    q.sid = mine;
    q.bid = BatchId{bid};
    q.service = static_cast<std::uint32_t>(service);
    q.loop = loop;
    q.concur = concur;
    q.is_client = 1;
    q.stop_onerr = 1;
    q.ndest = static_cast<std::uint32_t>(dests.size());
    q.params = params;
    return call<TestReply>(Service::Test, q, kFeatBulkLen, RpcNode::Bulk{ids, false}).status;
  }
  BatchReply batch(std::uint64_t bid, BatchOp op, std::uint32_t testidx = 0, std::uint32_t arg = 0) {
    return call<BatchReply>(Service::Batch,
                            BatchReq{0, mine, BatchId{bid}, static_cast<std::uint32_t>(op), testidx, arg});
  }
  // Waits until batch `bid` has no test running.
  bool batch_ends(std::uint64_t bid) {
    return test::eventually([&] { return batch(bid, BatchOp::Query).active == 0; }, 20s);
  }
  std::unique_ptr<Instance> a, b, c;
  std::unique_ptr<RpcNode> console, node_rpc, server_rpc;
  std::unique_ptr<Framework> node;
  std::unique_ptr<TestServices> services;
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
  EXPECT_EQ(node->sessions_ended(), 1u) << "counted, for a node that serves one session and missed it";
  // Forced, a new session replaces the old one.
  ASSERT_EQ(call<MksnReply>(Service::MakeSession, MksnReq{0, mine, 0, "one"}).status, 0u);
  auto forced = call<MksnReply>(Service::MakeSession, MksnReq{0, theirs, 1, "two"});
  EXPECT_EQ(forced.status, 0u);
  EXPECT_EQ(node->session()->name, "two");
  EXPECT_EQ(node->sessions_ended(), 2u) << "the replaced one ended";
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
  EXPECT_EQ(node->rejected(), 5u) << "every refusal counted";
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

TEST_F(SelftestNode, ABatchOfPingAndBrwTestsRunsItsLoopsAndCountsNoErrors) {
  make();
  make_server();
  ASSERT_EQ(call<MksnReply>(Service::MakeSession, MksnReq{0, mine, 0, "s"}).status, 0u);
  const ProcessIdPacked server{gni(3).value(), kPidLustre};
  ASSERT_EQ(add_client_test(7, Service::Ping, 10, 2, PingParams{}, {server}), 0u);
  ASSERT_EQ(add_client_test(7, Service::Brw, 5, 3,
                            BulkParamsV1{static_cast<std::uint16_t>(BrwOp::Write),
                                         static_cast<std::uint16_t>(BrwCheck::Full), 65536, 8},
                            {server}),
            0u);
  ASSERT_EQ(add_client_test(7, Service::Brw, 4, 1,
                            BulkParamsV1{static_cast<std::uint16_t>(BrwOp::Read),
                                         static_cast<std::uint16_t>(BrwCheck::Simple), 4096 * 3 + 16, 0},
                            {server}),
            0u);
  EXPECT_EQ(batch(7, BatchOp::Query, 4).status, kStatusEnoent) << "three tests";
  EXPECT_EQ(batch(8, BatchOp::Run).status, kStatusEnoent) << "no such batch";
  auto before = server_rpc->counters();
  ASSERT_EQ(batch(7, BatchOp::Run).status, 0u);
  ASSERT_TRUE(batch_ends(7));
  auto after = server_rpc->counters();
  // 10 x 2 pings, 5 x 3 writes, 4 reads, and nothing else reached the server.
  EXPECT_EQ(after.rpcs_rcvd - before.rpcs_rcvd, 20u + 15u + 4u);
  EXPECT_EQ(after.bulk_get - before.bulk_get, 15u * 65536);
  EXPECT_EQ(after.bulk_put - before.bulk_put, 4u * (4096 * 3 + 16));
  auto st = call<StatReply>(Service::QueryStat, StatReq{0, mine, 0});
  EXPECT_EQ(st.fw.brw_errors, 0u);
  EXPECT_EQ(st.fw.ping_errors, 0u);
  EXPECT_EQ(st.fw.active_batches, 0u);
  EXPECT_EQ(services->brw_errors(), 0u) << "the writes' full check passed on the server";
  // Run again: the same loops once more.
  ASSERT_EQ(batch(7, BatchOp::Run).status, 0u);
  ASSERT_TRUE(batch_ends(7));
  EXPECT_EQ(server_rpc->counters().rpcs_rcvd - after.rpcs_rcvd, 39u);
}

TEST_F(SelftestNode, AnEndlessTestRunsUntilStoppedAndABusyBatchTakesNoTests) {
  make();
  make_server();
  ASSERT_EQ(call<MksnReply>(Service::MakeSession, MksnReq{0, mine, 0, "s"}).status, 0u);
  const ProcessIdPacked server{gni(3).value(), kPidLustre};
  ASSERT_EQ(add_client_test(1, Service::Ping, kLoopForever, 4, PingParams{}, {server}), 0u);
  ASSERT_EQ(batch(1, BatchOp::Run).status, 0u);
  auto q = batch(1, BatchOp::Query, 1);
  EXPECT_EQ(q.status, 0u);
  EXPECT_EQ(q.active, 4u) << "four units of the first test";
  EXPECT_EQ(batch(1, BatchOp::Query).active, 1u) << "one test running";
  EXPECT_EQ(call<StatReply>(Service::QueryStat, StatReq{0, mine, 0}).fw.active_batches, 1u);
  EXPECT_EQ(add_client_test(1, Service::Ping, 1, 1, PingParams{}, {server}), kStatusEbusy);
  EXPECT_TRUE(test::eventually([&] { return server_rpc->counters().rpcs_rcvd > 100; }, 20s));
  ASSERT_EQ(batch(1, BatchOp::Stop).status, 0u);
  ASSERT_TRUE(batch_ends(1));
  auto st = call<StatReply>(Service::QueryStat, StatReq{0, mine, 0});
  EXPECT_EQ(st.fw.ping_errors, 0u) << "a stop without force lets the RPCs in flight end";
  EXPECT_EQ(st.fw.active_batches, 0u);
}

TEST_F(SelftestNode, AStopWithoutForceLetsTheRpcBeingSentFinish) {
  // A STOP that lands while a unit is sending its next RPC used to abort that RPC, as
  // only a forced stop may; the ping then counted as an error (about one lst session in
  // two between two lnetds). The fabric delivers inline, so a server that stops the
  // batch from inside the request's delivery lands the STOP in that very moment; it
  // answers afterwards, and the ping must pass.
  make();
  c = Instance::create(test::fabric_config({3}), kPidLustre).value();
  server_rpc = std::make_unique<RpcNode>(*c, 5s);
  std::mutex mu;
  std::vector<std::pair<std::uint32_t, std::shared_ptr<RpcNode::Responder>>> held;
  std::atomic<int> seen{0};
  ASSERT_TRUE(server_rpc->serve(Service::Ping, 8, [&](const RpcNode::Request& r, auto resp) {
    auto seq = std::get<PingReq>(r.msg.body).seq;
    if (seen.fetch_add(1) == 10) {
      ASSERT_TRUE(node->batch(Message{kMsgVersion, kFeatBulkLen,
                                      BatchReq{0, mine, BatchId{1}, static_cast<std::uint32_t>(BatchOp::Stop), 0, 0}}));
      std::lock_guard g(mu);
      held.emplace_back(seq, resp);  // answered once the client's call has returned
      return;
    }
    resp->reply(Message{kMsgVersion, r.msg.feats, PingReply{0, kPingTestMagic, seq}});
  }));
  ASSERT_EQ(call<MksnReply>(Service::MakeSession, MksnReq{0, mine, 0, "s"}).status, 0u);
  const ProcessIdPacked server{gni(3).value(), kPidLustre};
  ASSERT_EQ(add_client_test(1, Service::Ping, kLoopForever, 1, PingParams{}, {server}), 0u);
  ASSERT_EQ(batch(1, BatchOp::Run).status, 0u);
  ASSERT_TRUE(test::eventually(
      [&] {
        std::lock_guard g(mu);
        return !held.empty();
      },
      20s));
  ASSERT_EQ(batch(1, BatchOp::Query).active, 1u) << "the unit waits for its last ping";
  {
    std::lock_guard g(mu);
    held[0].second->reply(Message{kMsgVersion, kFeatBulkLen, PingReply{0, kPingTestMagic, held[0].first}});
  }
  ASSERT_TRUE(batch_ends(1));
  EXPECT_EQ(call<StatReply>(Service::QueryStat, StatReq{0, mine, 0}).fw.ping_errors, 0u);
  EXPECT_EQ(node_rpc->counters().errors, 0u);
  EXPECT_EQ(seen.load(), 11) << "no ping after the stop";
}

TEST_F(SelftestNode, ErrorsAreCountedAndStopTheUnitThatHadThem) {
  make();
  make_server();
  ASSERT_EQ(call<MksnReply>(Service::MakeSession, MksnReq{0, mine, 0, "s"}).status, 0u);
  // Nobody at 9: every ping fails and, with stop_onerr, each unit stops after one.
  const ProcessIdPacked nobody{gni(9).value(), kPidLustre};
  ASSERT_EQ(add_client_test(2, Service::Ping, 100, 3, PingParams{}, {nobody}), 0u);
  ASSERT_EQ(batch(2, BatchOp::Run).status, 0u);
  ASSERT_TRUE(batch_ends(2));
  EXPECT_EQ(call<StatReply>(Service::QueryStat, StatReq{0, mine, 0}).fw.ping_errors, 3u);
}

TEST_F(SelftestNode, ForcedStopAbortsTheRpcsInFlight) {
  make();
  // A node that serves nothing: the pings wait for replies that never come.
  c = Instance::create(test::fabric_config({3}), kPidLustre).value();
  ASSERT_EQ(call<MksnReply>(Service::MakeSession, MksnReq{0, mine, 0, "s"}).status, 0u);
  const ProcessIdPacked silent{gni(3).value(), kPidLustre};
  ASSERT_EQ(add_client_test(3, Service::Ping, kLoopForever, 2, PingParams{}, {silent}), 0u);
  ASSERT_EQ(batch(3, BatchOp::Run).status, 0u);
  ASSERT_EQ(batch(3, BatchOp::Query, 1).active, 2u);
  ASSERT_TRUE(test::eventually([&] { return node_rpc->counters().rpcs_sent == 2; }, 20s)) << "both pings sent";
  ASSERT_EQ(batch(3, BatchOp::Stop, 0, 1).status, 0u);
  ASSERT_TRUE(batch_ends(3));
  EXPECT_EQ(call<StatReply>(Service::QueryStat, StatReq{0, mine, 0}).fw.ping_errors, 2u) << "two aborted";
  EXPECT_EQ(node_rpc->counters().rpcs_expired, 0u) << "ended by the abort, not by the RPC timeout";
}

TEST_F(SelftestNode, BadTestsAreRefusedWithTheKernelsCodes) {
  make();
  const ProcessIdPacked server{gni(3).value(), kPidLustre};
  EXPECT_EQ(add_client_test(1, Service::Ping, 1, 1, PingParams{}, {server}), kStatusEnoent) << "no session";
  ASSERT_EQ(call<MksnReply>(Service::MakeSession, MksnReq{0, mine, 0, "s"}).status, 0u);
  EXPECT_EQ(add_client_test(1, Service::Ping, 0, 1, PingParams{}, {server}), kStatusEinval) << "loop 0";
  EXPECT_EQ(add_client_test(1, Service::Ping, 1, 0, PingParams{}, {server}), kStatusEinval) << "concurrency 0";
  EXPECT_EQ(add_client_test(1, Service::Ping, 1, 1025, PingParams{}, {server}), kStatusEinval);
  EXPECT_EQ(add_client_test(1, Service::Ping, 1, 1, PingParams{}, {}), kStatusEinval) << "a client, no dests";
  EXPECT_EQ(add_client_test(1, Service::Debug, 1, 1, PingParams{}, {server}), kStatusEinval) << "not a test";
  auto brw = [&](std::uint16_t op, std::uint16_t check, std::uint32_t len, std::uint32_t off) {
    return add_client_test(1, Service::Brw, 1, 1, BulkParamsV1{op, check, len, off}, {server});
  };
  EXPECT_EQ(brw(3, 1, 4096, 0), kStatusEinval) << "opcode";
  EXPECT_EQ(brw(1, 5, 4096, 0), kStatusEinval) << "check";
  EXPECT_EQ(brw(1, 1, (1u << 20) + 8, 0), kStatusEinval) << "over 1 MiB";
  EXPECT_EQ(brw(1, 1, 4096, 4), kStatusEinval) << "an offset not a multiple of 8";
  EXPECT_EQ(brw(1, 1, 4096, 8), 0u);
  EXPECT_EQ(batch(1, BatchOp::Query, 1).active, 0u);
  EXPECT_EQ(batch(1, BatchOp::Query, 0x80000000u).status, kStatusEinval);
  TestReq other;
  other.sid = theirs;
  other.service = static_cast<std::uint32_t>(Service::Ping);
  other.loop = other.concur = 1;
  EXPECT_EQ(call<TestReply>(Service::Test, other).status, kStatusEnoent) << "another session";
}

TEST_F(SelftestNode, EndingTheSessionStopsItsTests) {
  make();
  make_server();
  ASSERT_EQ(call<MksnReply>(Service::MakeSession, MksnReq{0, mine, 0, "s"}).status, 0u);
  const ProcessIdPacked server{gni(3).value(), kPidLustre};
  ASSERT_EQ(add_client_test(1, Service::Ping, kLoopForever, 2, PingParams{}, {server}), 0u);
  ASSERT_EQ(batch(1, BatchOp::Run).status, 0u);
  ASSERT_EQ(call<RmsnReply>(Service::RemoveSession, RmsnReq{0, mine}).status, 0u);
  EXPECT_TRUE(test::eventually([&] { return node->fw_counters().zombie_sessions == 0; }, 20s));
  auto seen = server_rpc->counters().rpcs_rcvd;
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(server_rpc->counters().rpcs_rcvd, seen) << "no ping after the session ended";
}

}  // namespace
}  // namespace lnet::selftest
