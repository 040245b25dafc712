// rdma-core's verbs layer (o2iblnd/src/rdma_verbs.cpp) where the machine has no RDMA
// device: opening one fails clearly, naming why. With a device, the device tests run it.
#include <gtest/gtest.h>

#include <cerrno>

#include "verbs.hpp"

namespace lnet::o2ib {
namespace {

TEST(O2ibRdma, WithoutADeviceOpeningOneFailsSayingSo) {
  if (rdma_device_count() > 0) GTEST_SKIP() << "this machine has an RDMA device: the device tests cover it";
  auto p = open_rdma(0x7f000001);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.code(), -ENODEV);
  EXPECT_EQ(p.message(), "no RDMA device on this machine");
}

}  // namespace
}  // namespace lnet::o2ib
