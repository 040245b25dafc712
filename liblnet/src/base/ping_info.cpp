// Encoding, decoding and validation of the ping-info buffer (ping replies and pushes).
#include <lnet/wire.hpp>

#include <lnet/lnd/byteorder.hpp>

namespace lnet {

using namespace wire;

void encode_ping_info(const PingInfo& info, std::span<std::uint8_t> out) {
  std::uint8_t* p = out.data();
  put_le32(p, kPingMagic);
  put_le32(p + 4, info.features);
  put_le32(p + 8, info.pid);
  put_le32(p + 12, static_cast<std::uint32_t>(info.nis.size()));
  p += kPingInfoHeaderSize;
  for (const NiStatus& ns : info.nis) {
    put_le64(p, ns.nid.value());
    put_le32(p + 8, ns.status);
    put_le32(p + 12, ns.msg_size);
    p += kNiStatusSize;
  }
}

std::vector<std::uint8_t> encode_ping_info(const PingInfo& info) {
  std::vector<std::uint8_t> out(info.wire_size());
  encode_ping_info(info, out);
  return out;
}

namespace {
std::uint32_t swab32(std::uint32_t v) { return __builtin_bswap32(v); }
}  // namespace

Result<PingInfo> decode_ping_info(std::span<const std::uint8_t> in, std::uint32_t max_interfaces, std::size_t* needed) {
  if (in.size() < kPingInfoHeaderSize) {
    if (needed) *needed = kPingInfoMinSize;
    return Failure{-EPROTO, "ping info of " + std::to_string(in.size()) + " bytes is shorter than its " +
                                std::to_string(kPingInfoHeaderSize) + "-byte header"};
  }
  const std::uint8_t* p = in.data();
  std::uint32_t magic = get_le32(p);
  bool swap = false;
  if (magic == swab32(kPingMagic)) {
    swap = true;
  } else if (magic != kPingMagic) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "bad ping info magic 0x%08x", magic);
    return Failure{-EPROTO, buf};
  }
  auto u32 = [swap](const std::uint8_t* q) { return swap ? get_be32(q) : get_le32(q); };
  auto u64 = [swap](const std::uint8_t* q) { return swap ? get_be64(q) : get_le64(q); };

  PingInfo info;
  info.features = u32(p + 4);
  info.pid = u32(p + 8);
  std::uint32_t nnis = u32(p + 12);
  if (!(info.features & kPingFeatNiStatus)) {
    return Failure{-EPROTO,
                   "ping info without the NI_STATUS feature (features 0x" + std::to_string(info.features) + ")"};
  }
  if (nnis < 1 || nnis > max_interfaces) {
    return Failure{-EPROTO, "ping info announces " + std::to_string(nnis) + " interfaces, not 1.." +
                                std::to_string(max_interfaces)};
  }
  std::size_t size = kPingInfoHeaderSize + std::size_t{nnis} * kNiStatusSize;
  if (in.size() < size) {
    if (needed) *needed = size;
    return Failure{-E2BIG, "ping info truncated: " + std::to_string(nnis) + " interfaces need " + std::to_string(size) +
                               " bytes, got " + std::to_string(in.size())};
  }
  info.nis.reserve(nnis);
  for (std::uint32_t i = 0; i < nnis; ++i) {
    const std::uint8_t* e = p + kPingInfoHeaderSize + i * kNiStatusSize;
    info.nis.push_back(NiStatus{Nid(u64(e)), u32(e + 8), u32(e + 12)});
  }
  if (info.nis[0].nid != Nid::lo()) {
    return Failure{-EPROTO, "ping info entry 0 is " + info.nis[0].nid.to_string() + ", not 0@lo"};
  }
  if (info.features & kPingFeatLargeAddr) {
    // Entry 0's msg_size holds the size of the whole buffer, large-address entries included.
    std::size_t total = info.nis[0].msg_size;
    if (total < size || total % 4 != 0) {
      return Failure{-EPROTO, "ping info with large addresses has a bad total size " + std::to_string(total)};
    }
    if (in.size() < total) {
      if (needed) *needed = total;
      return Failure{
          -E2BIG, "ping info truncated: needs " + std::to_string(total) + " bytes, got " + std::to_string(in.size())};
    }
  }
  return info;
}

}  // namespace lnet
