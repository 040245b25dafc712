// Fuzz target: self-test messages and id lists from the network. Whatever the bytes, the
// decoder refuses or returns a message that encodes and decodes back to itself.
#include <cstdlib>

#include <selftest/wire.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lnet::selftest;
  std::span<const std::uint8_t> in(data, size);
  if (auto m = decode(in.first(std::min(size, kMsgSize)))) {
    auto again = decode(encode(*m));
    if (!again || again->body != m->body || again->feats != m->feats || again->version != m->version) std::abort();
  }
  if (size > 2) {
    std::size_t n = data[0] | (data[1] & 0x3) << 8;  // up to 1023 ids
    (void)decode_ids(in.subspan(2), n, data[1] & 0x80);
  }
  return 0;
}
