// The test services a node serves on portal 50 (docs/design/selftest-wire.md §4.6-4.7):
// ping answers a PING request with its sequence number; brw moves a BRW request's bulk
// (GETs the client's data and checks it for a write, PUTs the pattern for a read) and
// answers with the outcome.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include <selftest/rpc.hpp>

namespace lnet::selftest {

class TestServices {
 public:
  explicit TestServices(RpcNode& rpc) : rpc_(rpc), shared_(std::make_shared<Shared>()) {}
  // Stops serving; the transfers still running finish without it.
  ~TestServices();
  TestServices(const TestServices&) = delete;
  TestServices& operator=(const TestServices&) = delete;
  // Serves ping and brw with `buffers` request buffers each.
  Status start(unsigned buffers = 64);

  // Requests answered with an error status or dropped, per service.
  std::uint32_t ping_errors() const { return shared_->ping_errors.load(); }
  std::uint32_t brw_errors() const { return shared_->brw_errors.load(); }

 private:
  void ping(const RpcNode::Request& r, const std::shared_ptr<RpcNode::Responder>& resp);
  void brw(const RpcNode::Request& r, const std::shared_ptr<RpcNode::Responder>& resp);

  // What the RPCs in flight share with the services, which they may outlive (a bulk
  // transfer completes after the services are gone): the bulk buffers of kMaxPayload
  // bytes, kept for the next RPC (neither allocated nor cleared per RPC), and the counts.
  struct Shared {
    std::mutex mu;
    std::vector<std::unique_ptr<std::uint8_t[]>> free;
    std::atomic<std::uint32_t> ping_errors{0}, brw_errors{0};
  };
  std::shared_ptr<std::uint8_t> buffer();

  RpcNode& rpc_;
  std::shared_ptr<Shared> shared_;
  bool serving_ = false;
};

}  // namespace lnet::selftest
