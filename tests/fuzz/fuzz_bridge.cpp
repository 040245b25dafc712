// Fuzz target: the bridge protocol's decoder (what a proxy, or anything that connects to
// lnetd's bridge socket, can send). A frame that decodes encodes to a frame that decodes
// to the same encoding (fields survive; padding and unused bytes are normalised).
#include <cstdlib>
#include <cstring>

#include <lnet/up/bridge.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lnet::up;
  auto m = decode(std::span(data, size));
  if (!m) {
    if (m.code() != -EPROTO || m.message().empty()) std::abort();
    return 0;
  }
  if (size > kMaxFrame) std::abort();
  std::uint8_t once[kMaxFrame], twice[kMaxFrame];
  std::size_t n1 = encode(*m, std::span<std::uint8_t, kMaxFrame>(once, kMaxFrame));
  auto again = decode(std::span<const std::uint8_t>(once, n1));
  if (!again || type_of(*again) != type_of(*m)) std::abort();
  std::size_t n2 = encode(*again, std::span<std::uint8_t, kMaxFrame>(twice, kMaxFrame));
  if (n1 != n2 || std::memcmp(once, twice, n1) != 0) std::abort();
  return 0;
}
