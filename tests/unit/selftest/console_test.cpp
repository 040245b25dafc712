// The console driving node frameworks over the test fabric as `lst` would: a session,
// groups, a batch of brw and ping tests installed with their destination windows, run,
// queried, watched with STAT, and nodes that go away reported down.
#include <gtest/gtest.h>

#include <selftest/console.hpp>
#include <selftest/framework.hpp>
#include <selftest/services.hpp>

#include "support/event_log.hpp"
#include "support/fabric.hpp"
#include "test_node.hpp"

namespace lnet::selftest {
namespace {

using namespace std::chrono_literals;

Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }
ProcessId node_id(std::uint32_t a) { return ProcessId{gni(a), kPidLustre}; }

using TestNode = fixture::TestNode;

class ConsoleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lnet = Instance::create(test::fabric_config({1}), kPidLustre).value();
    rpc = std::make_unique<RpcNode>(*lnet, 5s);
    console = std::make_unique<Console>(*rpc, gni(1));
    for (std::uint32_t a : {2, 3, 4, 5}) nodes[a] = std::make_unique<TestNode>(a);
  }
  void TearDown() override {
    console.reset();
    nodes.clear();
    rpc.reset();
    lnet.reset();
  }
  // Waits until no client of the batch runs a test.
  bool idle(const std::string& batch) {
    return test::eventually(
        [&] {
          auto q = console->query_batch(batch, 0, false, 5s);
          if (!q) return false;
          for (auto& r : *q)
            if (r.rc != 0 || std::get<BatchReply>(r.msg.body).active != 0) return false;
          return true;
        },
        30s);
  }
  std::unique_ptr<Instance> lnet;
  std::unique_ptr<RpcNode> rpc;
  std::unique_ptr<Console> console;
  std::map<std::uint32_t, std::unique_ptr<TestNode>> nodes;
};

TEST_F(ConsoleTest, AnLstScriptRunsBrwAndPingBatchesWithConsistentCounters) {
  ASSERT_TRUE(console->new_session("read-write", 42, 300s, false));
  EXPECT_EQ(console->new_session("again", 42, 300s, false).code(), -EEXIST);
  auto clients = console->add_group("clients", {node_id(2), node_id(3)});
  ASSERT_TRUE(clients) << clients.message();
  for (auto& n : *clients) EXPECT_EQ(n.state, NodeState::Active) << n.id.to_string();
  auto servers = console->add_group("servers", {node_id(4), node_id(5)});
  ASSERT_TRUE(servers) << servers.message();
  EXPECT_EQ(nodes[4]->fw->session()->name, "read-write") << "MKSN made the session on the node";

  ASSERT_TRUE(console->add_batch("bulk"));
  TestSpec w;
  w.service = Service::Brw;
  w.loop = 8;
  w.concurrency = 2;
  w.from = "clients";
  w.to = "servers";
  w.op = BrwOp::Write;
  w.check = BrwCheck::Full;
  w.size = 1 << 20;
  std::vector<NodeReply> failed;
  auto idx = console->add_test("bulk", w, &failed);
  ASSERT_TRUE(idx) << idx.message();
  EXPECT_EQ(*idx, 1u);
  TestSpec r = w;
  r.op = BrwOp::Read;
  r.size = 4096;
  r.span = 2;  // each client reads from both servers
  ASSERT_EQ(*console->add_test("bulk", r, &failed), 2u);
  TestSpec p;
  p.loop = 20;
  p.from = "clients";
  p.to = "servers";
  ASSERT_EQ(*console->add_test("bulk", p, &failed), 3u);
  EXPECT_TRUE(failed.empty());

  auto run = console->run_batch("bulk", 0s);
  ASSERT_TRUE(run) << run.message();
  for (auto& n : *run) EXPECT_EQ(n.status, 0u);
  ASSERT_TRUE(idle("bulk"));

  auto all = console->resolve({"clients", "servers"}, {});
  ASSERT_TRUE(all);
  auto st = console->stat(*all, 5s);
  std::uint64_t sent = 0, rcvd = 0, errors = 0, get = 0, put = 0;
  for (auto& n : st) {
    ASSERT_EQ(n.rc, 0);
    ASSERT_EQ(n.status, 0u);
    const auto& s = std::get<StatReply>(n.msg.body);
    EXPECT_EQ(s.fw.brw_errors, 0u);
    EXPECT_EQ(s.fw.ping_errors, 0u);
    bool is_client = n.id == node_id(2) || n.id == node_id(3);
    if (is_client) sent += s.rpc.rpcs_sent;
    if (!is_client) {
      rcvd += s.rpc.rpcs_rcvd;
      errors += s.rpc.errors;
      get += s.rpc.bulk_get;
      put += s.rpc.bulk_put;
    }
  }
  // Clients sent: 2 x (8 x 2 writes + 8 x 2 x 2 reads + 20 pings); the servers got them
  // and the console's TEST / BATCH / STAT requests too.
  const std::uint64_t tests = 2 * (8 * 2 + 8 * 2 * 2 + 20);
  EXPECT_EQ(sent, tests);
  EXPECT_GE(rcvd + errors, tests);
  EXPECT_EQ(get, 2u * 8 * 2 * (1 << 20)) << "every write's MiB";
  EXPECT_EQ(put, 2u * 8 * 2 * 2 * 4096) << "every read's 4 KiB";
  EXPECT_GT(std::get<StatReply>(st[0].msg.body).lnet.send_length, 0u);

  ASSERT_TRUE(console->end_session(42));
  EXPECT_FALSE(nodes[2]->fw->session()) << "RMSN ended it on the nodes";
  EXPECT_EQ(console->check_key(42).code(), -ESRCH);
}

TEST_F(ConsoleTest, ADistributedTestGivesEachClientItsWindow) {
  ASSERT_TRUE(console->new_session("dist", 1, 300s, false));
  ASSERT_TRUE(console->add_group("c", {node_id(2), node_id(3)}));
  ASSERT_TRUE(console->add_group("s", {node_id(4), node_id(5)}));
  TestSpec p;
  p.loop = 10;
  p.from = "c";
  p.to = "s";
  p.dist = 1;
  p.span = 1;  // client 0 -> server 0, client 1 -> server 1
  ASSERT_TRUE(console->add_test("batch", p, nullptr));
  auto before4 = nodes[4]->rpc->counters().rpcs_rcvd, before5 = nodes[5]->rpc->counters().rpcs_rcvd;
  ASSERT_TRUE(console->run_batch("batch", 0s));
  ASSERT_TRUE(idle("batch"));
  // Each server got one client's 10 pings (and the console's TEST; no BATCH: servers
  // are not run).
  EXPECT_EQ(nodes[4]->rpc->counters().rpcs_rcvd - before4, 10u);
  EXPECT_EQ(nodes[5]->rpc->counters().rpcs_rcvd - before5, 10u);
  TestSpec wide = p;
  wide.span = 3;
  EXPECT_EQ(console->add_test("batch", wide, nullptr).code(), -EINVAL) << "a span beyond the group";
}

TEST_F(ConsoleTest, ANodeKilledMidBatchIsReportedDownWithItsErrors) {
  ASSERT_TRUE(console->new_session("kill", 7, 300s, false));
  ASSERT_TRUE(console->add_group("c", {node_id(2)}));
  ASSERT_TRUE(console->add_group("s", {node_id(4), node_id(5)}));
  TestSpec p;
  p.loop = kLoopForever;
  p.from = "c";
  p.to = "s";
  p.span = 2;
  ASSERT_TRUE(console->add_test("batch", p, nullptr));
  ASSERT_TRUE(console->run_batch("batch", 0s));
  EXPECT_TRUE(test::eventually([&] { return nodes[5]->rpc->counters().rpcs_rcvd > 50; }, 20s));
  nodes.erase(5);  // killed: its NI goes with it
  // The client's pings to 5 fail; with stop_onerr its units stop, those to 4 go on.
  EXPECT_TRUE(test::eventually(
      [&] {
        auto st = console->stat({node_id(2)}, 5s);
        return st[0].rc == 0 && std::get<StatReply>(st[0].msg.body).fw.ping_errors > 0;
      },
      30s));
  auto pinged = console->ping({node_id(2), node_id(4), node_id(5)}, 3s);
  EXPECT_EQ(pinged[0].rc, 0);
  EXPECT_NE(pinged[2].rc, 0);
  EXPECT_EQ(console->state(node_id(2)), NodeState::Active);
  EXPECT_EQ(console->state(node_id(5)), NodeState::Down);
  auto stop = console->stop_batch("batch", true);
  ASSERT_TRUE(stop);
  ASSERT_TRUE(idle("batch"));
  // A test cannot go on nodes that are not all active.
  EXPECT_EQ(console->add_test("batch", p, nullptr).code(), -ENETDOWN);
}

TEST_F(ConsoleTest, CommandsNeedTheSessionsKeyAndNodesOfOthersAreBusy) {
  ASSERT_TRUE(console->new_session("mine", 5, 300s, false));
  EXPECT_EQ(console->check_key(6).code(), -EACCES);
  EXPECT_EQ(console->end_session(6).code(), -EACCES);
  // Another console holds node 3.
  auto other_lnet = Instance::create(test::fabric_config({9}), kPidLustre).value();
  auto other_rpc = std::make_unique<RpcNode>(*other_lnet, 5s);
  {
    auto other = std::make_unique<Console>(*other_rpc, gni(9));
    ASSERT_TRUE(other->new_session("theirs", 1, 300s, false));
    ASSERT_TRUE(other->add_group("g", {node_id(3)}));
    auto mine = console->add_group("g", {node_id(2), node_id(3)});
    ASSERT_TRUE(mine);
    EXPECT_EQ((*mine)[0].state, NodeState::Active);
    EXPECT_EQ((*mine)[1].state, NodeState::Busy);
    ASSERT_TRUE(other->end_session(1));
  }
  auto again = console->refresh_group("g");
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)[1].state, NodeState::Active) << "free once the other session ended";
  EXPECT_EQ(console->del_group("nope").code(), -ENOENT);
  ASSERT_TRUE(console->del_group("g"));
  EXPECT_FALSE(nodes[2]->fw->session()) << "removed from the session with its group";
  other_rpc.reset();
  other_lnet.reset();
}

TEST_F(ConsoleTest, NodesJoinAGroupOfTheSession) {
  ASSERT_TRUE(console->serve_join(4));
  const ProcessId at{gni(1), kPidLustre};
  EXPECT_EQ(nodes[2]->fw->join(at, "joined").code(), -ESRCH) << "no session yet";
  ASSERT_TRUE(console->new_session("joinable", 3, 300s, false));
  ASSERT_TRUE(nodes[2]->fw->join(at, "joined"));
  ASSERT_TRUE(nodes[3]->fw->join(at, "joined"));
  EXPECT_EQ(nodes[2]->fw->session()->name, "joinable") << "the node is in the console's session";
  auto g = console->group_nodes("joined");
  ASSERT_TRUE(g) << "the group was made";
  ASSERT_EQ(g->size(), 2u);
  EXPECT_EQ((*g)[0].id, node_id(2));
  EXPECT_EQ((*g)[0].state, NodeState::Active);
  EXPECT_EQ(nodes[2]->fw->join(at, "joined").code(), -EBUSY) << "in a session already";
  // The console drives joined nodes like any: a test between them runs.
  ASSERT_TRUE(console->add_group("s", {node_id(4)}));
  TestSpec p;
  p.loop = 5;
  p.from = "joined";
  p.to = "s";
  ASSERT_TRUE(console->add_test("batch", p, nullptr));
  ASSERT_TRUE(console->run_batch("batch", 0s));
  ASSERT_TRUE(idle("batch"));
  EXPECT_EQ(nodes[5]->fw->join(at, "joined").code(), -EBUSY) << "the group is in use by a test";
  ASSERT_TRUE(console->end_session(3));
  EXPECT_FALSE(nodes[2]->fw->session()) << "ended with the console's session";
}

}  // namespace
}  // namespace lnet::selftest
