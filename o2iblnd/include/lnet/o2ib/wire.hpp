// The o2ib LND's wire: ko2iblnd's messages, connection parameters and rejects
// (docs/design/o2iblnd.md §1), encoded field by field in little-endian order and
// decoded in either order, checked as a kernel receiver checks them. Needs no rdma-core.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include <lnet/lnd/header.hpp>
#include <lnet/result.hpp>

namespace lnet::o2ib {

inline constexpr std::uint32_t kMagic = 0x0be91b91;  // LNET_PROTO_IB_MAGIC
inline constexpr std::uint16_t kVersion1 = 0x11;
inline constexpr std::uint16_t kVersion2 = 0x12;
inline constexpr std::size_t kMsgSize = 4096;      // the largest message (IBLND_MSG_SIZE)
inline constexpr std::size_t kMsgHeaderSize = 48;  // up to the body
inline constexpr std::size_t kConnParamsSize = 8;
inline constexpr std::size_t kRejectSize = 24;
inline constexpr std::size_t kFragSize = 12;  // bytes u32, address u64 (unaligned)
inline constexpr unsigned kMaxFrags = 256;    // IBLND_MAX_RDMA_FRAGS
inline constexpr std::size_t kImmediatePayloadOffset = kMsgHeaderSize + kHeaderSize;     // 120
inline constexpr std::size_t kMaxImmediatePayload = kMsgSize - kImmediatePayloadOffset;  // 3976
inline constexpr std::uint16_t kService = 987;  // the RDMA CM port (tunable `service`)

enum class MsgType : std::uint8_t {
  ConnReq = 0xc0,
  ConnAck = 0xc1,
  Noop = 0xd0,
  Immediate = 0xd1,
  PutReq = 0xd2,
  PutNak = 0xd3,
  PutAck = 0xd4,
  PutDone = 0xd5,
  GetReq = 0xd6,
  GetDone = 0xd7,
};
const char* msg_type_name(MsgType t);  // "CONNREQ", ..., "???"
// The smallest message of type `t` (with a descriptor: of no fragment); 0: no such type.
std::size_t min_size(MsgType t);

enum class RejectReason : std::uint8_t {
  ConnRace = 1,
  NoResources = 2,
  Fatal = 3,
  ConnUncompat = 4,
  ConnStale = 5,
  RdmaFrags = 6,
  MsgQueueSize = 7,
  InvalidServiceId = 8,
  Early = 9,
};
const char* reject_reason_name(RejectReason r);

struct ConnParams {
  std::uint16_t queue_depth = 0;
  std::uint16_t max_frags = 0;
  std::uint32_t max_msg_size = 0;
  friend bool operator==(const ConnParams&, const ConnParams&) = default;
};

struct RdmaFrag {
  std::uint32_t nob = 0;
  std::uint64_t addr = 0;
  friend bool operator==(const RdmaFrag&, const RdmaFrag&) = default;
};

// The fields every message has. NIDs are classic 64-bit ones (ko2iblnd's wire).
struct MsgHeader {
  std::uint16_t version = kVersion2;
  MsgType type = MsgType::Noop;
  std::uint8_t credits = 0;  // returned to the receiver
  std::uint32_t nob = 0;     // the whole message
  std::uint32_t cksum = 0;   // 0: none
  std::uint64_t src_nid = 0;
  std::uint64_t src_stamp = 0;  // the sender's incarnation
  std::uint64_t dst_nid = 0;
  std::uint64_t dst_stamp = 0;  // the destination's, as the sender knows it (0: unknown)
};

// A received message, decoded where it lies: the fixed fields by value, the payload and
// the fragments as views into the buffer (valid while it is).
struct Msg {
  MsgHeader h;
  bool swapped = false;                   // the sender's byte order is not little-endian
  ConnParams params;                      // CONNREQ, CONNACK
  Header lnet;                            // IMMEDIATE, PUT_REQ, GET_REQ: the LNet header
  std::span<const std::uint8_t> payload;  // IMMEDIATE
  std::uint64_t cookie = 0;               // PUT_REQ, GET_REQ: the sender's; PUT_ACK: the sink's;
                                          // PUT_NAK, PUT_DONE, GET_DONE: the receiver's
  std::uint64_t src_cookie = 0;           // PUT_ACK: the PUT_REQ's cookie it answers
  std::int32_t status = 0;                // PUT_NAK, PUT_DONE, GET_DONE: < 0 failure, >= 0 bytes
  std::uint32_t rd_key = 0;               // PUT_ACK, GET_REQ: the descriptor
  std::uint32_t rd_nfrags = 0;
  RdmaFrag frag(std::uint32_t i) const;  // i < rd_nfrags

  const std::uint8_t* frags_ = nullptr;
};

// ko2iblnd's checksum of a message: over `msg` with its checksum field taken as 0, each
// byte a signed char, sum = rotl(sum, 1) + byte; never 0.
std::uint32_t checksum(std::span<const std::uint8_t> msg);

// Decodes what arrived (`in`: every byte received), checking what a kernel receiver
// checks (docs/design/o2iblnd.md §1.3): -EPROTO with a message naming the fault.
// `max_frags`: the most fragments a descriptor may name (the connection's).
Result<Msg> unpack(std::span<const std::uint8_t> in, unsigned max_frags = kMaxFrags);

// Encoding into a buffer of kMsgSize bytes (or at least the message's size): the body
// first (each returns the message's size), then finish() the header.
std::size_t put_conn_params(std::span<std::uint8_t> msg, const ConnParams& p);
std::size_t put_noop(std::span<std::uint8_t> msg);
// The payload (`payload_len` <= kMaxImmediatePayload bytes) is the caller's to write at
// kImmediatePayloadOffset.
std::size_t put_immediate(std::span<std::uint8_t> msg, const Header& lnet, std::size_t payload_len);
std::size_t put_put_req(std::span<std::uint8_t> msg, const Header& lnet, std::uint64_t cookie);
std::size_t put_put_ack(std::span<std::uint8_t> msg, std::uint64_t src_cookie, std::uint64_t dst_cookie,
                        std::uint32_t key, std::span<const RdmaFrag> frags);
std::size_t put_get_req(std::span<std::uint8_t> msg, const Header& lnet, std::uint64_t cookie, std::uint32_t key,
                        std::span<const RdmaFrag> frags);
std::size_t put_completion(std::span<std::uint8_t> msg, std::uint64_t cookie, std::int32_t status);
// Writes the 48-byte header of h (h.nob bytes in all; its cksum ignored) and, with
// `with_checksum`, the checksum over the message.
void finish(std::span<std::uint8_t> msg, const MsgHeader& h, bool with_checksum);

// A connection reject's private data.
struct Reject {
  std::uint32_t magic = kMagic;  // LNET_PROTO_MAGIC: a peer speaking a newer protocol
  std::uint16_t version = kVersion2;
  RejectReason why = RejectReason::Fatal;
  std::uint64_t incarnation = 0;  // the rejecter's (0: unknown)
  ConnParams params;              // what the rejecter takes
  bool full = true;               // incarnation and params were there (24 bytes)
};
std::array<std::uint8_t, kRejectSize> pack_reject(const Reject& r);
// At least magic, version, reason and padding (8 bytes), in either order; the rest when
// all 24 bytes came. -EPROTO when it is no o2ib reject.
Result<Reject> unpack_reject(std::span<const std::uint8_t> in);

}  // namespace lnet::o2ib
