// The MPI LND's own messages between two MPI LND peers, with explicit little-endian
// codecs. Every message starts with a 32-byte header; the short-message pool receives
// whole messages (header + body) of at most 32 + 72 + short_max bytes.
//
//   QUERY, RESPONSE  the version handshake: body Hello (protocol version and usage)
//   IMMEDIATE        body: LNet header + payload (payload_length bytes)
//   BULK             body: LNet header; the payload follows as MPI messages on `tag`
//   GET_REQ          body: LNet header of an optimised GET; the sink waits on `tag`
//   GET_NAK          the GET on `tag` matched nothing; `status` says why
//   NOOP             returns credits, nothing else
//   PACKED           body: several whole IMMEDIATE messages back to back (each with its
//                    own header, credits 0): what waited for a credit goes in one MPI
//                    message, taking one credit
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include <lnet/lnd/header.hpp>
#include <lnet/result.hpp>

namespace lnet::mpi {

inline constexpr std::uint32_t kMagic = 0x4d504c4e;  // "MPLN"
inline constexpr std::uint16_t kVersion = 1;
inline constexpr std::size_t kMsgHdrSize = 32;
inline constexpr std::size_t kHelloSize = 32;

enum class MsgKind : std::uint8_t {
  Query = 1,
  Response = 2,
  Immediate = 3,
  Bulk = 4,
  GetReq = 5,
  GetNak = 6,
  Noop = 7,
  Packed = 8,
};
const char* kind_name(MsgKind k);
// Kinds that take one of the receiver's credits (the handshake and NOOPs do not).
inline bool takes_credit(MsgKind k) {
  return k == MsgKind::Immediate || k == MsgKind::Bulk || k == MsgKind::GetReq || k == MsgKind::GetNak ||
         k == MsgKind::Packed;
}

struct MsgHdr {
  MsgKind kind = MsgKind::Noop;
  std::uint8_t credits = 0;  // credits returned to the receiver of this message
  std::uint32_t nob = 0;     // bytes of the whole message, header included
  std::uint32_t tag = 0;     // BULK, GET_REQ, GET_NAK: the bulk tag
  std::uint64_t stamp = 0;   // the sender's incarnation
  std::int32_t status = 0;   // GET_NAK: a negative errno
};

struct Hello {
  std::uint32_t proto_version = kVersion;
  std::uint32_t short_max = 0;   // largest IMMEDIATE payload the sender receives
  std::uint32_t pool_depth = 0;  // its short-message receives
  std::uint32_t credits = 0;     // what it grants the receiver of this hello
  std::uint32_t pid = 0;         // its LNet pid
  std::uint32_t rank = 0;        // its rank in the LND's communicator
  std::uint32_t chunk = 0;       // largest MPI message of a bulk transfer
};

void encode_msg_hdr(const MsgHdr& h, std::span<std::uint8_t, kMsgHdrSize> out);
void encode_hello(const Hello& h, std::span<std::uint8_t, kHelloSize> out);

// A decoded message as it sits in a receive buffer. `body` points into that buffer.
struct Decoded {
  MsgHdr hdr;
  Hello hello;                            // QUERY, RESPONSE
  Header lnet;                            // IMMEDIATE, BULK, GET_REQ
  std::span<const std::uint8_t> payload;  // IMMEDIATE; PACKED: the packed messages
};

// Checks and decodes a received message of `len` bytes (what MPI said arrived) into
// `out`. A bad message returns false and, when `why` is given, the fault: bad magic or
// version, nob not what arrived, an unknown kind, a body too short for its kind, an LNet
// header that does not decode, or an IMMEDIATE whose payload_length disagrees with its
// size. Fields the kind does not use keep their values: pass a fresh Decoded. Nothing
// is built on the way for a good message (the receive path's form).
bool decode_msg(std::span<const std::uint8_t> in, Decoded& out, std::string* why = nullptr);
// The same as a Result: fails with -EPROTO naming the fault.
Result<Decoded> decode_msg(std::span<const std::uint8_t> in);

// The next message packed in a PACKED body, `rest` (a decoded PACKED's payload), which
// moves past it. Fails when what follows is not a whole IMMEDIATE with no credits of its
// own; then the rest of the body is unusable.
bool next_packed(std::span<const std::uint8_t>& rest, Decoded& out, std::string* why = nullptr);
Result<Decoded> next_packed(std::span<const std::uint8_t>& rest);

// Bulk transfers move at most `chunk` bytes per MPI message (int counts): the number of
// messages for `len` bytes (at least one, so a 0-byte transfer still completes).
inline std::uint32_t chunk_count(std::uint64_t len, std::uint32_t chunk) {
  return len == 0 ? 1u : static_cast<std::uint32_t>((len + chunk - 1) / chunk);
}

}  // namespace lnet::mpi
