// The o2ib driver's test fixture: instances with one o2ib NI each on the fake RDMA fabric
// (o2iblnd/src/fake_verbs.hpp), and helpers the o2ib tests share.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <lnet/lnet.hpp>
#include <lnet/o2ib/o2iblnd.hpp>

#include "fake_verbs.hpp"
#include "support/event_log.hpp"
#include "support/lnd_counter.hpp"
#include "support/put_get.hpp"

namespace lnet::o2ib::test_o2ib {

using namespace std::chrono_literals;

inline constexpr unsigned kPortal = 21;
inline constexpr std::uint32_t kIpA = 0x0a000001, kIpB = 0x0a000002, kIpC = 0x0a000003;  // 10.0.0.x
inline const NetId kNet = NetId::make(kO2ibLnd, 0);

inline Nid nid(std::uint32_t ip) { return Nid::make(kNet, ip); }

inline std::vector<char> pattern(std::size_t n, int seed) {
  std::vector<char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<char>(i * 7 + static_cast<std::size_t>(seed));
  return v;
}

inline std::uint64_t counter(Instance& lnet, const std::string& name) { return test::lnd_counter(lnet, name, "o2ib"); }

// A PUT without ACK of `len` bytes at `data` from `from` to portal kPortal of `to`, its
// MD's events in `log`; the MD (it unlinks after its one operation).
inline MdHandle put_to(Instance& from, Nid to, void* data, std::size_t len, test::EventLog& log) {
  MdDesc sd;
  sd.start = data;
  sd.length = len;
  sd.threshold = 1;
  sd.handler = log.handler();
  auto md = from.md_bind(sd, Unlink::Unlink);
  EXPECT_TRUE(md) << md.message();
  if (!md) return MdHandle{};
  EXPECT_EQ(from.put(Nid::any(), *md, AckReq::NoAck, ProcessId{to, kPidLustre}, kPortal, 0, 0, 0), 0);
  return *md;
}

class O2ibDriver : public ::testing::Test {
 protected:
  std::unique_ptr<Instance> make(std::uint32_t ip, int timeout = 0, const NetConfig& tweak = {}) {
    auto lnd = make_o2ib_lnd([this](std::uint32_t addr) { return fabric.open(addr); });
    Config cfg;
    NetConfig nc = tweak;
    nc.net = kNet;
    nc.nid = nid(ip);
    cfg.nets.push_back(nc);
    auto r = Instance::create(cfg, kPidLustre, {lnd});
    EXPECT_TRUE(r) << r.message();
    if (r && timeout) {
      EXPECT_TRUE((*r)->control().set_lnd_timeout(kNet, timeout));
    }
    return r ? std::move(*r) : nullptr;
  }
  void SetUp() override {
    a = make(kIpA);
    b = make(kIpB);
    ASSERT_TRUE(a && b);
  }
  void TearDown() override {
    a.reset();
    b.reset();
  }
  FakeFabric fabric;
  std::unique_ptr<Instance> a, b;
};

inline void put_get(Instance& from, Instance& to, Nid to_nid, std::size_t size, unsigned frags = 1) {
  test::put_get(from, to, to_nid, size, kPortal, frags);
}

}  // namespace lnet::o2ib::test_o2ib
