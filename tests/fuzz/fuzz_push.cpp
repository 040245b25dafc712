// Fuzz target: discovery pushes through the core. Instance a (1@gni, discovery on) has
// discovered b (2@gni and 12@gni, a live multi-rail peer); the input is a push that
// claims to come from b: its first byte chooses the source NID (bit 0: 12@gni) and
// whether the header announces more bytes than come (bit 1: a truncated push), the rest
// is the ping info. Whatever it says, a must not crash, hang or leak a message, and a
// real discovery of b must work after it. Then a forgets its peers for the next input.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include <lnet/lnet.hpp>
#include <lnet/wire.hpp>

#include "core/core.hpp"
#include "support/fabric.hpp"

namespace {

using namespace lnet;

Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }

[[noreturn]] void die(const char* what, const std::string& why = {}) {
  std::fprintf(stderr, "fuzz_push: %s%s%s\n", what, why.empty() ? "" : ": ", why.c_str());
  std::abort();
}

std::unique_ptr<Instance> make(std::initializer_list<std::uint32_t> addrs) {
  Config c = test::fabric_config(addrs);
  c.globals.discovery = 1;
  auto r = Instance::create(c, kPidLustre);
  if (!r) die("cannot create an instance", r.message());
  return std::move(*r);
}

struct Target {
  std::unique_ptr<Instance> a = make({1}), b = make({2, 12});
  // Until neither side's discovery has anything left to do (bounded: a hang aborts).
  void settle() {
    core::Core& ca = core::Core::of(*a);
    core::Core& cb = core::Core::of(*b);
    for (int i = 0; i < 20000; ++i) {
      if (ca.discovery().idle() && cb.discovery().idle() && ca.discovery().idle()) return;
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    die("discovery did not settle within 10 s");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Target t;
  if (size < 1) return 0;
  auto known = t.a->control().discover(gni(2), false, std::chrono::seconds(10));
  if (!known) die("a real discovery of b failed", known.message());
  t.settle();

  std::uint8_t flags = data[0];
  std::vector<std::uint8_t> payload(data + 1, data + size);
  Nid from = flags & 1 ? gni(12) : gni(2);
  Header h;
  h.type = MsgType::Put;
  h.src_nid = from;
  h.src_pid = kPidLustre;
  h.dest_nid = gni(1);
  h.dest_pid = kPidLustre;
  h.payload_length = static_cast<std::uint32_t>(payload.size() + (flags & 2 ? 64 : 0));
  h.msg.put.ack_wmd = WireHandle::none();
  h.msg.put.match_bits = kPingMatchBits;
  h.msg.put.ptl_index = kReservedPortal;
  (void)test::Fabric::instance().inject(gni(1), h, from, std::move(payload));
  t.settle();
  if (t.a->counters().msgs_alloc != 0) die("a message leaked");

  // The next input starts from a peer table without b.
  for (const PeerInfo& p : t.a->control().peer_info())
    if (Status s = t.a->control().del_peer(p.primary_nid, {}, true); !s && s.code() != -ENOENT)
      die("peer del failed", s.message());
  if (!t.a->control().peer_info().empty()) die("peers left after peer del --force");
  return 0;
}
