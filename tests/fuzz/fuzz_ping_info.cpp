// Fuzz target: the ping-info decoder and its validation, large entries (LARGE_ADDR)
// included. What decodes re-encodes to the same entries.
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
  // The node's view (one list, 0@lo first) holds every entry; split again, the large
  // NIDs are the large entries (a classic NID sent as a large entry comes back classic).
  lnet::PingInfo merged = *info;
  lnet::merge_large(merged);
  if (!merged.large_nis.empty() || merged.nis.size() != info->nis.size() + info->large_nis.size() ||
      merged.nis[0].nid != lnet::Nid::lo())
    std::abort();
  lnet::split_large(merged);
  if (merged.nis.size() + merged.large_nis.size() != info->nis.size() + info->large_nis.size()) std::abort();
  for (const lnet::NiStatus& s : merged.nis)
    if (s.nid.is_large()) std::abort();
  for (const lnet::NiStatus& s : merged.large_nis)
    if (!s.nid.is_large()) std::abort();
  info->features &= ~(lnet::kPingFeatLargeAddr | lnet::kPingFeatMetadata);
  if (!info->large_nis.empty()) info->nis[0].msg_size = 0;  // the encoder writes the total there
  auto again = lnet::decode_ping_info(lnet::encode_ping_info(*info), 64);
  if (!again || again->pid != info->pid || again->large_nis.size() != info->large_nis.size()) std::abort();
  for (std::size_t i = 0; i < info->large_nis.size(); ++i)
    if (again->large_nis[i].nid != info->large_nis[i].nid || again->large_nis[i].status != info->large_nis[i].status)
      std::abort();
  for (std::size_t i = 1; i < info->nis.size(); ++i)
    if (again->nis[i] != info->nis[i]) std::abort();
  return 0;
}
