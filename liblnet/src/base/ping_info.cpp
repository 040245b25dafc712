// Encoding, decoding and validation of the ping-info buffer (ping replies and pushes).
#include <lnet/wire.hpp>

#include <lnet/lnd/byteorder.hpp>

namespace lnet {

using namespace wire;

void encode_ping_info(const PingInfo& info, std::span<std::uint8_t> out) {
  ByteWriter w(out.data());
  w.u32(kPingMagic).u32(info.features).u32(info.pid).u32(static_cast<std::uint32_t>(info.nis.size()));
  for (const NiStatus& ns : info.nis) w.u64(ns.nid.value()).u32(ns.status).u32(ns.msg_size);
}

std::vector<std::uint8_t> encode_ping_info(const PingInfo& info) {
  std::vector<std::uint8_t> out(info.wire_size());
  encode_ping_info(info, out);
  return out;
}

Result<PingInfo> decode_ping_info(std::span<const std::uint8_t> in, std::uint32_t max_interfaces, std::size_t* needed) {
  if (in.size() < kPingInfoHeaderSize) {
    if (needed) *needed = kPingInfoMinSize;
    return Failure{-EPROTO, "ping info of " + std::to_string(in.size()) + " bytes is shorter than its " +
                                std::to_string(kPingInfoHeaderSize) + "-byte header"};
  }
  ByteReader r(in.data());
  std::uint32_t magic = r.u32();
  if (magic == __builtin_bswap32(kPingMagic)) {
    r = ByteReader(r.pos(), std::endian::big);  // a swapped little-endian magic: the sender wrote big-endian
  } else if (magic != kPingMagic) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "bad ping info magic 0x%08x", magic);
    return Failure{-EPROTO, buf};
  }

  PingInfo info;
  info.features = r.u32();
  info.pid = r.u32();
  std::uint32_t nnis = r.u32();
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
    std::uint64_t v = r.u64();
    if (!Nid::fits_nid4(v))
      return Failure{-EPROTO, "ping info entry " + std::to_string(i) + " is not a classic NID (its top byte is set)"};
    Nid nid(v);
    std::uint32_t status = r.u32();
    info.nis.push_back(NiStatus{nid, status, r.u32()});
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
