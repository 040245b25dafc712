// What applications see of LNet's wire: message types, the limits of a message, and
// the ping-info buffer a ping answers with (encoded and decoded explicitly, in
// little-endian byte order). The 72-byte message header is the drivers' business:
// <lnet/lnd/header.hpp>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <lnet/nid.hpp>
#include <lnet/result.hpp>

namespace lnet {

enum class MsgType : std::uint32_t { Ack = 0, Put = 1, Get = 2, Reply = 3, Hello = 4 };
const char* msg_type_name(MsgType t);  // "ACK", "PUT", ...

inline constexpr std::uint32_t kMaxPayload = 1U << 20;  // LNET_MTU
inline constexpr unsigned kMaxIov = 256;                // LNET_MAX_IOV
inline constexpr unsigned kMaxPortals = 64;
inline constexpr unsigned kReservedPortal = 0;
inline constexpr std::uint64_t kPingMatchBits = 0x8000000000000000ULL;

// ---- ping info (what a ping's REPLY and a push's PUT carry) ----------------------------

inline constexpr std::uint32_t kPingMagic = 0x70696E67;  // "ping"
inline constexpr std::uint32_t kNiStatusUp = 0x15aac0de;
inline constexpr std::uint32_t kNiStatusDown = 0xdeadface;
inline constexpr std::uint32_t kPingFeatBase = 0x01;
inline constexpr std::uint32_t kPingFeatNiStatus = 0x02;
inline constexpr std::uint32_t kPingFeatRteDisabled = 0x04;
inline constexpr std::uint32_t kPingFeatMultiRail = 0x08;
inline constexpr std::uint32_t kPingFeatDiscovery = 0x10;
inline constexpr std::uint32_t kPingFeatLargeAddr = 0x20;
inline constexpr std::uint32_t kPingFeatPrimaryLarge = 0x40;
inline constexpr std::uint32_t kPingFeatMetadata = 0x80;
inline constexpr std::uint32_t kPingFeatBits = 0xFF;
inline constexpr std::size_t kPingInfoHeaderSize = 16;
inline constexpr std::size_t kNiStatusSize = 16;
inline constexpr std::size_t kPingInfoMinSize = kPingInfoHeaderSize + 16 * kNiStatusSize;  // 272
inline constexpr std::uint32_t kDefaultMaxInterfaces = 4096;

struct NiStatus {
  Nid nid;
  std::uint32_t status = kNiStatusUp;  // entry 0 (0@lo): the ping-buffer sequence number
  std::uint32_t msg_size = 0;
  friend bool operator==(const NiStatus&, const NiStatus&) = default;
};

// A large-address entry: its status, then the NID as struct lnet_nid (NID_BYTES of it),
// rounded up to 4 bytes: 24 for an IPv6 NID.
constexpr std::size_t large_ni_status_size(const Nid& nid) {
  return 4 + (nid.is_any() ? Nid::kWireBytes : (nid.nid_size() + 8 + 3) & ~std::size_t{3});
}

struct PingInfo {
  std::uint32_t features = 0;
  Pid pid = 0;
  std::vector<NiStatus> nis;  // nis[0] must be 0@lo
  // LARGE_ADDR: the entries after the classic ones (the NIDs that do not fit lnet_nid_t;
  // with PRIMARY_LARGE the first is the primary NID). Their msg_size is not on the wire.
  std::vector<NiStatus> large_nis;

  std::size_t wire_size() const {
    std::size_t n = kPingInfoHeaderSize + kNiStatusSize * nis.size();
    for (const NiStatus& s : large_nis) n += large_ni_status_size(s.nid);
    return n;
  }
};

// Encodes in little-endian order (the responder's native order on our platforms). With
// large entries, LARGE_ADDR is set and entry 0's msg_size holds the total size.
std::vector<std::uint8_t> encode_ping_info(const PingInfo& info);
void encode_ping_info(const PingInfo& info, std::span<std::uint8_t> out);  // out.size() >= wire_size()

// Decodes and validates a ping-info buffer in either byte order: magic, NI_STATUS feature,
// 1 <= nnis <= max_interfaces, entry 0 = 0@lo. A buffer holding fewer entries than it
// announces fails with -E2BIG and `needed` set to the size it needs. With LARGE_ADDR the
// large entries up to the total size entry 0 states are decoded (one that overflows it,
// or a NID struct lnet_nid cannot carry, is refused); a METADATA block is skipped.
Result<PingInfo> decode_ping_info(std::span<const std::uint8_t> in,
                                  std::uint32_t max_interfaces = kDefaultMaxInterfaces, std::size_t* needed = nullptr);

// Between the node's view of a ping info (every NID in `nis`, the primary at nis[1]) and
// the wire's (classic entries, then the large ones; PRIMARY_LARGE when the primary is
// large and so first of those):
// what `nis` lists as the wire carries it (large NIDs moved to large_nis)...
void split_large(PingInfo& info);
// ...and what was decoded as the node sees it (large_nis merged into nis).
void merge_large(PingInfo& info);

}  // namespace lnet
