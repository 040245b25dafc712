// A self-test node on the test fabric, as lnetd runs one with selftest on: an instance
// with the framework and the ping and brw services.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include <selftest/framework.hpp>
#include <selftest/services.hpp>

#include "support/fabric.hpp"

namespace lnet::selftest::fixture {

struct TestNode {
  explicit TestNode(std::uint32_t addr) {
    lnet = Instance::create(lnet::test::fabric_config({addr}), kPidLustre).value();
    rpc = std::make_unique<RpcNode>(*lnet, std::chrono::seconds(5));
    fw = std::make_unique<Framework>(*rpc);
    services = std::make_unique<TestServices>(*rpc);
    EXPECT_TRUE(fw->start(8));
    EXPECT_TRUE(services->start(16));
  }
  ~TestNode() {
    fw.reset();
    services.reset();
    rpc.reset();
    lnet.reset();
  }
  std::unique_ptr<Instance> lnet;
  std::unique_ptr<RpcNode> rpc;
  std::unique_ptr<Framework> fw;
  std::unique_ptr<TestServices> services;
};

}  // namespace lnet::selftest::fixture
