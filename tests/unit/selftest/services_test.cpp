// The ping and brw test services answering a client over the test fabric: sequence
// numbers, the data pattern both ways with its check, and the requests they refuse.
#include <gtest/gtest.h>

#include <future>

#include <selftest/brw.hpp>
#include <selftest/services.hpp>

#include "support/fabric.hpp"

namespace lnet::selftest {
namespace {

using namespace std::chrono_literals;

Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }

class TestServicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a = Instance::create(test::fabric_config({1}), kPidLustre).value();
    b = Instance::create(test::fabric_config({2}), kPidLustre).value();
    client = std::make_unique<RpcNode>(*a, 300ms);
    server_rpc = std::make_unique<RpcNode>(*b, 300ms);
    services = std::make_unique<TestServices>(*server_rpc);
    ASSERT_TRUE(services->start(4));
  }
  void TearDown() override {
    client.reset();
    services.reset();
    server_rpc.reset();
    a.reset();
    b.reset();
  }
  Result<Message> call(Service s, Message m, std::optional<RpcNode::Bulk> bulk = std::nullopt) {
    std::promise<Result<Message>> done;
    client->call(ProcessId{gni(2), kPidLustre}, s, std::move(m), bulk,
                 [&](Result<Message> r) { done.set_value(std::move(r)); });
    return done.get_future().get();
  }
  std::uint32_t brw(BrwOp op, BrwCheck check, std::vector<std::uint8_t>& data, std::uint32_t feats = kFeatBulkLen) {
    auto r = call(Service::Brw,
                  Message{kMsgVersion, feats,
                          BrwReq{0, 0, static_cast<std::uint32_t>(op), static_cast<std::uint32_t>(data.size()),
                                 static_cast<std::uint32_t>(check)}},
                  RpcNode::Bulk{data, op == BrwOp::Read});
    EXPECT_TRUE(r) << r.message();
    return r ? std::get<BrwReply>(r->body).status : ~0u;
  }
  std::unique_ptr<Instance> a, b;
  std::unique_ptr<RpcNode> client, server_rpc;
  std::unique_ptr<TestServices> services;
};

TEST_F(TestServicesTest, PingAnswersItsSequenceAndDropsABadMagic) {
  for (std::uint32_t seq : {1u, 2u, 77u}) {
    auto r = call(Service::Ping, Message{kMsgVersion, kFeatBulkLen, PingReq{0, kPingTestMagic, seq, 1, 2}});
    ASSERT_TRUE(r) << r.message();
    const auto& p = std::get<PingReply>(r->body);
    EXPECT_EQ(p.seq, seq);
    EXPECT_EQ(p.magic, kPingTestMagic);
    EXPECT_EQ(p.status, 0u);
    EXPECT_EQ(r->feats, kFeatBulkLen) << "the request's features echoed";
  }
  auto bad = call(Service::Ping, Message{kMsgVersion, 0, PingReq{0, 0x12345678, 1, 0, 0}});
  EXPECT_EQ(bad.code(), -ETIMEDOUT) << "no reply to a bad magic";
  EXPECT_EQ(services->ping_errors(), 1u);
  auto unknown = call(Service::Ping, Message{kMsgVersion, 0x10, PingReq{0, kPingTestMagic, 5, 0, 0}});
  ASSERT_TRUE(unknown);
  EXPECT_EQ(std::get<PingReply>(unknown->body).status, kStatusEproto);
  EXPECT_EQ(unknown->feats, kFeatsMask);
}

TEST_F(TestServicesTest, BrwMovesAndChecksThePatternBothWays) {
  for (BrwCheck check : {BrwCheck::Simple, BrwCheck::Full}) {
    std::vector<std::uint8_t> out(kPageSize + 1000);
    brw_fill(out, 0, check, kBrwMagic);
    EXPECT_EQ(brw(BrwOp::Write, check, out), 0u);
    std::vector<std::uint8_t> in(3 * kPageSize, 0);
    EXPECT_EQ(brw(BrwOp::Read, check, in), 0u);
    EXPECT_TRUE(brw_check(in, 0, check, kBrwMagic)) << "the server's pattern arrived";
  }
  // Data that is not the pattern: the server says so.
  std::vector<std::uint8_t> junk(kPageSize, 0x11);
  EXPECT_EQ(brw(BrwOp::Write, BrwCheck::Full, junk), kStatusEbadmsg);
  EXPECT_EQ(services->brw_errors(), 1u);
  // Nothing checked: anything goes.
  EXPECT_EQ(brw(BrwOp::Write, BrwCheck::None, junk), 0u);
  EXPECT_EQ(server_rpc->counters().bulk_get, 2 * (kPageSize + 1000) + 2 * kPageSize);
}

TEST_F(TestServicesTest, BrwRefusesWhatTheKernelRefuses) {
  std::vector<std::uint8_t> buf(kPageSize);
  auto status = [&](std::uint32_t rw, std::uint32_t len, std::uint32_t flags, std::uint32_t feats) {
    auto r = call(Service::Brw, Message{kMsgVersion, feats, BrwReq{0, 0, rw, len, flags}}, RpcNode::Bulk{buf, true});
    EXPECT_TRUE(r) << r.message();
    return r ? std::get<BrwReply>(r->body).status : ~0u;
  };
  EXPECT_EQ(status(3, 4096, 1, kFeatBulkLen), kStatusEinval) << "neither read nor write";
  EXPECT_EQ(status(1, 4096, 5, kFeatBulkLen), kStatusEinval) << "an unknown check";
  EXPECT_EQ(status(1, 0, 1, kFeatBulkLen), kStatusEinval) << "nothing to move";
  EXPECT_EQ(status(1, (1u << 20) + 8, 1, kFeatBulkLen), kStatusEinval) << "more than LNet's MTU";
  EXPECT_EQ(status(1, 1000, 1, 0), kStatusEinval) << "without BULK_LEN, whole pages only";
  EXPECT_EQ(status(1, 4096, 1, 0x10), kStatusEproto) << "features it does not know";
  EXPECT_EQ(status(1, 4096, 1, 0), 0u) << "a page without BULK_LEN";
}

}  // namespace
}  // namespace lnet::selftest
