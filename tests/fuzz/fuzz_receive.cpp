// Fuzz target: the receive path of a live instance. The input is a header (72 bytes,
// decoded as a driver would) and a payload, handed to parse() as if it came off the
// wire; whatever it is, the instance must not crash, leak a message or stop working.
// A push (a PUT to the reserved portal) may start discovery, whose thread pings the
// sender while this thread checks: a message counts as leaked only if it is still there
// once discovery has settled, and a discovery that does not settle within 10 s aborts.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include <lnet/lnd/header.hpp>
#include <lnet/lnet.hpp>

#include "core/core.hpp"
#include "support/fabric.hpp"

namespace {

struct Target {
  std::unique_ptr<lnet::Instance> lnet;
  std::vector<char> buf = std::vector<char>(4096);
  Target() {
    auto r = lnet::Instance::create(lnet::test::fabric_config({1, 11}), lnet::kPidLustre);
    if (!r) {
      std::fprintf(stderr, "fuzz_receive: %s\n", r.message().c_str());
      std::abort();
    }
    lnet = std::move(*r);
    lnet->set_lazy_portal(4);
    for (unsigned portal : {3u, 4u}) {
      auto me = lnet->me_attach(portal, lnet::ProcessId::any(), 0x1, 0xFF, lnet::Unlink::Retain, lnet::InsPos::After);
      lnet::MdDesc d;
      d.start = buf.data();
      d.length = buf.size();
      d.options = lnet::kMdOpPut | lnet::kMdOpGet | lnet::kMdManageRemote | lnet::kMdTruncate;
      auto md = me ? lnet->md_attach(*me, d, lnet::Unlink::Retain) : me.failure();
      if (!md) {
        std::fprintf(stderr, "fuzz_receive: %s\n", (me ? md.message() : me.message()).c_str());
        std::abort();
      }
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Target t;
  lnet::Header h;
  if (lnet::decode_header(std::span(data, size), h) != 0) return 0;
  std::vector<std::uint8_t> payload(data + lnet::kHeaderSize, data + size);
  if (h.payload_length < payload.size()) payload.resize(h.payload_length);
  lnet::Nid from = lnet::Nid::make(lnet::NetId::make(lnet::kGniLnd, 0), 2);
  (void)lnet::test::Fabric::instance().inject(lnet::Nid::make(lnet::NetId::make(lnet::kGniLnd, 0), 1), h, from,
                                              std::move(payload));
  // Lazy-portal messages may wait; everything else is finished once discovery settles.
  lnet::test::Fabric::instance().deliver_all();
  (void)t.lnet->clear_lazy_portal(4);
  (void)t.lnet->set_lazy_portal(4);
  lnet::core::Core& core = lnet::core::Core::of(*t.lnet);
  for (int i = 0; !core.discovery().idle() || t.lnet->counters().msgs_alloc != 0; ++i) {
    if (i == 20000) {
      std::fprintf(stderr, "fuzz_receive: %s\n",
                   core.discovery().idle() ? "a message leaked" : "discovery did not settle within 10 s");
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    lnet::test::Fabric::instance().deliver_all();
  }
  return 0;
}
