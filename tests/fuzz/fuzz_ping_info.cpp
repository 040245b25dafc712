// Fuzz target: the ping-info decoder and its validation.
#include <cstdlib>

#include <lnet/wire.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::size_t needed = 0;
  auto info = lnet::decode_ping_info(std::span(data, size), 64, &needed);
  if (!info) {
    if (info.code() == -E2BIG && needed <= size) std::abort();
    return 0;
  }
  if (info->nis.empty() || info->nis[0].nid != lnet::Nid::lo()) std::abort();
  info->features &= ~(lnet::kPingFeatLargeAddr | lnet::kPingFeatMetadata);
  auto again = lnet::decode_ping_info(lnet::encode_ping_info(*info), 64);
  if (!again || again->nis != info->nis || again->pid != info->pid) std::abort();
  return 0;
}
