// Fuzz target: the 72-byte header decoder. A decoded header re-encodes to bytes that
// decode to the same header.
#include <cstdlib>
#include <cstring>

#include <lnet/lnd/header.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  lnet::Header h;
  if (lnet::decode_header(std::span(data, size), h) != 0) return 0;
  std::uint8_t out[lnet::kHeaderSize];
  lnet::encode_header(h, std::span<std::uint8_t, lnet::kHeaderSize>(out));
  lnet::Header again;
  if (lnet::decode_header(std::span(out, sizeof out), again) != 0) std::abort();
  std::uint8_t out2[lnet::kHeaderSize];
  lnet::encode_header(again, std::span<std::uint8_t, lnet::kHeaderSize>(out2));
  if (std::memcmp(out, out2, sizeof out) != 0) std::abort();
  // Bytes the type defines must survive the round trip unchanged.
  if (std::memcmp(out, data, 32) != 0) std::abort();
  return 0;
}
