// Fuzz target: the header decoders, the classic 72 bytes and the large-NID 96. A decoded
// header re-encodes to bytes that decode to the same header.
#include <cstdlib>
#include <cstring>

#include <lnet/lnd/header.hpp>

namespace {

void large(const std::uint8_t* data, std::size_t size) {
  lnet::Header h;
  if (lnet::decode_header_large(std::span(data, size), h) != 0) return;
  std::uint8_t out[lnet::kHeaderLargeSize];
  lnet::encode_header_large(h, std::span<std::uint8_t, lnet::kHeaderLargeSize>(out));
  lnet::Header again;
  if (lnet::decode_header_large(std::span(out, sizeof out), again) != 0) std::abort();
  if (again.dest_nid != h.dest_nid || again.src_nid != h.src_nid || again.type != h.type) std::abort();
  std::uint8_t out2[lnet::kHeaderLargeSize];
  lnet::encode_header_large(again, std::span<std::uint8_t, lnet::kHeaderLargeSize>(out2));
  if (std::memcmp(out, out2, sizeof out) != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  large(data, size);
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
