// The self-test RPC layer between two instances on the test fabric: request and reply,
// bulk both ways driven by the server, timeouts, versions and types a service does not
// take, and the counters a STAT reply reports.
#include <gtest/gtest.h>

#include <future>

#include <selftest/brw.hpp>
#include <selftest/rpc.hpp>

#include "support/event_log.hpp"
#include "support/fabric.hpp"

namespace lnet::selftest {
namespace {

using namespace std::chrono_literals;

Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }

class Rpc : public ::testing::Test {
 protected:
  void SetUp() override {
    a = Instance::create(test::fabric_config({1}), kPidLustre).value();
    b = Instance::create(test::fabric_config({2}), kPidLustre).value();
    client = std::make_unique<RpcNode>(*a, 500ms);
    server = std::make_unique<RpcNode>(*b, 500ms);
  }
  void TearDown() override {
    client.reset();
    server.reset();
    a.reset();
    b.reset();
  }
  // Calls and waits for the outcome.
  Result<Message> call(Service s, Message m, std::optional<RpcNode::Bulk> bulk = std::nullopt) {
    std::promise<Result<Message>> done;
    client->call(ProcessId{gni(2), kPidLustre}, s, std::move(m), bulk,
                 [&](Result<Message> r) { done.set_value(std::move(r)); });
    return done.get_future().get();
  }
  std::unique_ptr<Instance> a, b;
  std::unique_ptr<RpcNode> client, server;
};

TEST_F(Rpc, ARequestGetsItsReply) {
  std::atomic<int> handled{0};
  ASSERT_TRUE(server->serve(Service::Ping, 4, [&](const RpcNode::Request& r, auto resp) {
    ++handled;
    const auto& q = std::get<PingReq>(r.msg.body);
    EXPECT_EQ(r.peer.nid, gni(1));
    EXPECT_NE(q.rpyid, 0u) << "the layer set it";
    resp->reply(Message{kMsgVersion, r.msg.feats, PingReply{0, q.magic, q.seq}});
  }));
  for (std::uint32_t seq = 1; seq <= 10; ++seq) {  // more than the buffers: they are reposted
    auto r = call(Service::Ping, Message{kMsgVersion, kFeatBulkLen, PingReq{0, kPingTestMagic, seq, 1, 2}});
    ASSERT_TRUE(r) << r.message();
    EXPECT_EQ(std::get<PingReply>(r->body).seq, seq);
  }
  EXPECT_EQ(handled, 10);
  EXPECT_EQ(client->counters().rpcs_sent, 10u);
  EXPECT_EQ(server->counters().rpcs_rcvd, 10u);
}

TEST_F(Rpc, BulkMovesBothWaysBeforeTheReply) {
  std::vector<std::uint8_t> server_buf(3 * kPageSize);
  ASSERT_TRUE(server->serve(Service::Brw, 2, [&](const RpcNode::Request& r, auto resp) {
    const auto& q = std::get<BrwReq>(r.msg.body);
    std::span<std::uint8_t> buf(server_buf.data(), q.len);
    bool write = q.rw == static_cast<std::uint32_t>(BrwOp::Write);
    if (!write) brw_fill(buf, 0, BrwCheck::Full, kBrwMagic);
    resp->bulk(buf, !write, [=, &server_buf](int status) {
      std::uint32_t st = status ? kStatusEbadmsg : 0;
      if (write && !brw_check(std::span(server_buf.data(), q.len), 0, BrwCheck::Full, kBrwMagic)) st = kStatusEbadmsg;
      resp->reply(Message{kMsgVersion, kFeatBulkLen, BrwReply{st}});
    });
  }));
  // Write: the server GETs the client's data and checks it.
  std::vector<std::uint8_t> data(2 * kPageSize + 512);
  brw_fill(data, 0, BrwCheck::Full, kBrwMagic);
  auto w =
      call(Service::Brw,
           Message{kMsgVersion, kFeatBulkLen,
                   BrwReq{0, 0, static_cast<std::uint32_t>(BrwOp::Write), static_cast<std::uint32_t>(data.size()), 3}},
           RpcNode::Bulk{data, false});
  ASSERT_TRUE(w) << w.message();
  EXPECT_EQ(std::get<BrwReply>(w->body).status, 0u);
  EXPECT_EQ(server->counters().bulk_get, data.size());
  // Read: the server PUTs its pattern into the client's sink.
  std::vector<std::uint8_t> sink(data.size(), 0);
  auto r =
      call(Service::Brw,
           Message{kMsgVersion, kFeatBulkLen,
                   BrwReq{0, 0, static_cast<std::uint32_t>(BrwOp::Read), static_cast<std::uint32_t>(sink.size()), 3}},
           RpcNode::Bulk{sink, true});
  ASSERT_TRUE(r) << r.message();
  EXPECT_TRUE(brw_check(sink, 0, BrwCheck::Full, kBrwMagic)) << "the data is there when the call completes";
  EXPECT_EQ(server->counters().bulk_put, sink.size());
}

TEST_F(Rpc, NoReplyTimesOutAndIsCounted) {
  ASSERT_TRUE(server->serve(Service::Ping, 2, [](const RpcNode::Request&, auto resp) { resp->drop(); }));
  auto r = call(Service::Ping, Message{kMsgVersion, 0, PingReq{}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), -ETIMEDOUT);
  EXPECT_EQ(client->counters().rpcs_expired, 1u);
  EXPECT_EQ(server->counters().rpcs_dropped, 1u);
}

TEST_F(Rpc, AnotherVersionIsAnsweredEprotoAndAnotherTypeDropped) {
  std::atomic<int> handled{0};
  ASSERT_TRUE(server->serve(Service::Ping, 2, [&](const RpcNode::Request&, auto resp) {
    ++handled;
    resp->drop();
  }));
  auto v = call(Service::Ping, Message{2, 0, PingReq{}});
  ASSERT_TRUE(v) << v.message();
  EXPECT_EQ(std::get<PingReply>(v->body).status, kStatusEproto);
  EXPECT_EQ(handled, 0);
  // A BRW request sent to the ping service: not its type, dropped (the caller times out).
  std::uint64_t errors = server->counters().errors;
  auto t = call(Service::Ping, Message{kMsgVersion, 0, BrwReq{}});
  EXPECT_EQ(t.code(), -ETIMEDOUT);
  EXPECT_EQ(server->counters().errors, errors + 1);
  EXPECT_EQ(handled, 0);
}

TEST_F(Rpc, AServiceNobodyServesTimesOutAndStoppingEndsWaitingCalls) {
  auto r = call(Service::Ping, Message{kMsgVersion, 0, PingReq{}});
  EXPECT_EQ(r.code(), -ETIMEDOUT) << "the request waits on the lazy portal... of nobody";
  // A call waiting (for a minute) ends when its node is destroyed.
  std::promise<Result<Message>> done;
  auto slow = std::make_unique<RpcNode>(*a, 60s);
  slow->call(ProcessId{gni(2), kPidLustre}, Service::Ping, Message{kMsgVersion, 0, PingReq{}}, std::nullopt,
             [&](Result<Message> m) { done.set_value(std::move(m)); });
  auto fut = done.get_future();
  EXPECT_EQ(fut.wait_for(0ms), std::future_status::timeout);
  slow.reset();
  EXPECT_EQ(fut.get().code(), -ESHUTDOWN);
}

}  // namespace
}  // namespace lnet::selftest
