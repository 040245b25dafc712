// The fixture of the portals tests: an instance with 2 CPTs on 0@lo, a target MD maker,
// a self PUT, and the event logs of both sides.
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>

#include <lnet/lnet.hpp>

#include "support/event_log.hpp"

namespace lnet::test {

constexpr unsigned kPortal = 9;

class Matching : public ::testing::Test {
 protected:
  void SetUp() override {
    Config cfg;
    cfg.ncpts = 2;
    auto r = Instance::create(cfg, 4242);
    ASSERT_TRUE(r) << r.message();
    lnet = std::move(*r);
    self = ProcessId{Nid::lo(), 4242};
  }
  void TearDown() override { lnet.reset(); }  // its last events go to the logs below

  // Attaches an ME + MD over `buf` on `portal` and returns the MD handle.
  MdHandle target(void* buf, std::size_t len, unsigned options, std::uint64_t bits = 0x77, int threshold = kMdThreshInf,
                  ProcessId match = ProcessId::any(), std::uint64_t ignore = 0, Unlink me_unlink = Unlink::Unlink,
                  Unlink md_unlink = Unlink::Retain, unsigned portal = kPortal) {
    auto me = lnet->me_attach(portal, match, bits, ignore, me_unlink, InsPos::After);
    EXPECT_TRUE(me) << me.message();
    MdDesc d;
    d.start = buf;
    d.length = len;
    d.options = options;
    d.threshold = threshold;
    d.handler = tlog.handler();
    auto md = lnet->md_attach(*me, d, md_unlink);
    EXPECT_TRUE(md) << md.message();
    return md ? *md : MdHandle{};
  }

  // PUTs `data` to ourselves; returns put()'s status.
  int put(const std::string& data, std::uint64_t bits = 0x77, std::uint32_t offset = 0, AckReq ack = AckReq::NoAck,
          std::uint64_t hdr_data = 0, unsigned portal = kPortal) {
    std::string& buf = sources.emplace_back(data);  // stable: a lazy portal may hold it
    MdDesc d;
    d.start = buf.data();
    d.length = buf.size();
    d.threshold = ack == AckReq::Ack ? 2 : 1;
    d.handler = ilog.handler();
    auto md = lnet->md_bind(d, Unlink::Unlink);
    EXPECT_TRUE(md) << md.message();
    return lnet->put(Nid::any(), *md, ack, self, portal, bits, offset, hdr_data);
  }

  std::uint64_t drops() const { return lnet->counters().drop_count; }

  std::unique_ptr<Instance> lnet;
  ProcessId self;
  EventLog tlog;  // target side
  EventLog ilog;  // initiator side
  std::deque<std::string> sources;
};

}  // namespace lnet::test
