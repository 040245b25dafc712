// Fuzz target: what lnet-proxy and an application read from each other outside LNet (the
// TABLE, a control message, the port file, a doorbell line or answer). Whatever decodes encodes
// back to the same bytes (the TABLE, the control message) or parses again to the same
// value (the port file, the knock).
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <lnet/mpi_proxy.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lnet::mpi::proxy;
  std::span<const std::uint8_t> in(data, size);
  if (auto t = decode_table(in)) {
    auto again = encode(*t);
    // The reserved fields are not kept: compare the rest.
    if (again.size() != size || std::memcmp(again.data(), data, 6) != 0 ||
        std::memcmp(again.data() + 8, data + 8, 20) != 0 ||
        std::memcmp(again.data() + kTableHdrSize, data + kTableHdrSize, size - kTableHdrSize) != 0)
      std::abort();
  }
  if (auto c = decode_control(in)) {
    std::uint8_t b[kControlSize];
    encode(*c, b);
    if (std::memcmp(b, data, kControlSize) != 0) std::abort();
  }
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto p = parse_port_file(text)) {
    auto again = parse_port_file(format_port_file(*p));
    if (!again || !(*again == *p)) std::abort();
  }
  if (auto t = parse_spawn_list(text)) {
    if (t->empty()) std::abort();
    for (const SpawnTarget& x : *t)
      if (x.bridge.empty() || x.bridge[0] != '/') std::abort();
  }
  if (auto a = parse_answer(text)) {
    auto again = parse_answer(format_answer(*a));
    if (!again || !(*again == *a)) std::abort();
  }
  if (auto l = parse_rank_line(text)) {
    auto again = parse_rank_line(format_rank_line(*l));
    if (!again || !(*again == *l)) std::abort();
  }
  if (auto k = parse_knock(text)) {
    auto again = parse_knock(format_knock(*k));
    if (!again || again->kind != k->kind || again->value != k->value || again->secret != k->secret) std::abort();
  }
  return 0;
}
