// Encoding, decoding and validation of the ping-info buffer (ping replies and pushes).
#include <lnet/wire.hpp>

#include <lnet/lnd/byteorder.hpp>

namespace lnet {

using namespace wire;

void encode_ping_info(const PingInfo& info, std::span<std::uint8_t> out) {
  ByteWriter w(out.data());
  bool large = !info.large_nis.empty();
  std::uint32_t features = large ? info.features | kPingFeatLargeAddr : info.features;
  w.u32(kPingMagic).u32(features).u32(info.pid).u32(static_cast<std::uint32_t>(info.nis.size()));
  for (std::size_t i = 0; i < info.nis.size(); ++i) {
    const NiStatus& ns = info.nis[i];
    std::uint32_t msg_size = i == 0 && large ? static_cast<std::uint32_t>(info.wire_size()) : ns.msg_size;
    w.u64(ns.nid.value()).u32(ns.status).u32(msg_size);
  }
  for (const NiStatus& ns : info.large_nis) {
    std::uint8_t nid[Nid::kWireBytes];
    unsigned len = ns.nid.to_wire(nid);
    w.u32(ns.status).bytes(nid, len);
    w.skip(large_ni_status_size(ns.nid) - 4 - len);
  }
}

namespace {

// LARGE_ADDR: entry 0's msg_size is the size of the whole buffer; the large entries lie
// between the classic ones (`from`) and it.
Status decode_large(std::span<const std::uint8_t> in, std::size_t from, std::endian order, std::uint32_t max_interfaces,
                    PingInfo& info, std::size_t* needed) {
  std::size_t total = info.nis[0].msg_size;
  if (total < from || total % 4 != 0)
    return Failure{-EPROTO, "ping info with large addresses has a bad total size " + std::to_string(total)};
  if (in.size() < total) {
    if (needed) *needed = total;
    return Failure{-E2BIG,
                   "ping info truncated: needs " + std::to_string(total) + " bytes, got " + std::to_string(in.size())};
  }
  std::size_t at = from;
  while (at < total) {
    std::size_t n = info.large_nis.size();
    if (n >= max_interfaces)
      return Failure{-EPROTO, "ping info lists more than " + std::to_string(max_interfaces) + " large entries"};
    auto overflow = [&] {
      return Failure{-EPROTO, "ping info large entry " + std::to_string(n) + " overflows the stated size " +
                                  std::to_string(total)};
    };
    if (total - at < 4 + 8) return overflow();
    std::size_t size = in[at + 4];  // its NID's nid_size (0xFF: ANY, 20 bytes)
    if (4 + (size == 0xFF ? Nid::kWireBytes : (size + 8 + 3) & ~std::size_t{3}) > total - at) return overflow();
    std::uint32_t status = ByteReader(in.data() + at, order).u32();
    std::size_t used = 0;
    auto nid = Nid::from_wire(in.data() + at + 4, total - at - 4, &used);
    if (!nid) return Failure{-EPROTO, "ping info large entry " + std::to_string(n) + ": " + nid.message()};
    if (nid->is_any()) return Failure{-EPROTO, "ping info large entry " + std::to_string(n) + " is LNET_ANY_NID"};
    std::size_t entry = 4 + ((used + 3) & ~std::size_t{3});
    if (entry > total - at) return overflow();
    info.large_nis.push_back(NiStatus{*nid, status, 0});
    at += entry;
  }
  return {};
}

}  // namespace

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
  std::endian order = std::endian::little;
  if (magic == __builtin_bswap32(kPingMagic)) {
    order = std::endian::big;
    r = ByteReader(r.pos(), order);  // a swapped little-endian magic: the sender wrote big-endian
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
  if (info.features & kPingFeatLargeAddr)
    if (Status st = decode_large(in, size, order, max_interfaces, info, needed); !st) return st.failure();
  return info;
}

void split_large(PingInfo& info) {
  std::vector<NiStatus> classic;
  classic.reserve(info.nis.size());
  for (std::size_t i = 0; i < info.nis.size(); ++i) {
    const NiStatus& ns = info.nis[i];
    if (!ns.nid.is_large()) {
      classic.push_back(ns);
      continue;
    }
    if (i == 1) info.features |= kPingFeatPrimaryLarge;
    info.large_nis.push_back(ns);
  }
  info.nis = std::move(classic);
}

void merge_large(PingInfo& info) {
  if (info.large_nis.empty()) return;
  std::size_t at = info.nis.size();
  if ((info.features & kPingFeatPrimaryLarge) && !info.nis.empty()) at = 1;
  info.nis.insert(info.nis.begin() + static_cast<std::ptrdiff_t>(at), info.large_nis.front());
  info.nis.insert(info.nis.end(), info.large_nis.begin() + 1, info.large_nis.end());
  info.large_nis.clear();
}

}  // namespace lnet
