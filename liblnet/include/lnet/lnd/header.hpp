// The 72-byte LNet message header as drivers put it on the wire and hand it to their
// host: encoded and decoded field by field, little-endian (part of the driver SPI).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <lnet/nid.hpp>
#include <lnet/wire.hpp>

namespace lnet {

inline constexpr std::uint64_t kWireCookieNone = ~0ULL;
inline constexpr std::size_t kHeaderSize = 72;
inline constexpr std::size_t kHeaderLargeSize = 96;  // struct lnet_hdr: the socket LND's V4

// A handle as it travels on the wire; opaque to everyone but its creator.
struct WireHandle {
  std::uint64_t interface_cookie;
  std::uint64_t object_cookie;

  static constexpr WireHandle none() { return {kWireCookieNone, kWireCookieNone}; }
  constexpr bool is_none() const { return object_cookie == kWireCookieNone; }
  friend constexpr bool operator==(const WireHandle&, const WireHandle&) = default;
};

// The classic (4-byte-address NID) LNet header. Only the union member of `type` is valid.
struct Header {
  struct Ack {
    WireHandle dst_wmd;
    std::uint64_t match_bits;
    std::uint32_t mlength;
  };
  struct Put {
    WireHandle ack_wmd;
    std::uint64_t match_bits;
    std::uint64_t hdr_data;
    std::uint32_t ptl_index;
    std::uint32_t offset;
  };
  struct Get {
    WireHandle return_wmd;
    std::uint64_t match_bits;
    std::uint32_t ptl_index;
    std::uint32_t src_offset;
    std::uint32_t sink_length;
  };
  struct Reply {
    WireHandle dst_wmd;
  };
  struct Hello {
    std::uint64_t incarnation;
    std::uint32_t type;
  };

  Nid dest_nid;
  Nid src_nid;
  Pid dest_pid = 0;
  Pid src_pid = 0;
  MsgType type = MsgType::Ack;
  std::uint32_t payload_length = 0;
  union {
    Ack ack;
    Put put;
    Get get;
    Reply reply;
    Hello hello;
  } msg{};
};

// Writes the 72 little-endian bytes of `h`; union bytes not used by its type are zero.
void encode_header(const Header& h, std::span<std::uint8_t, kHeaderSize> out);
// Reads a header. Fails with -EPROTO when fewer than 72 bytes are given or the type is
// not one of ACK/PUT/GET/REPLY/HELLO; the semantic checks are the receive path's.
int decode_header(std::span<const std::uint8_t> in, Header& out);
// The large-NID header (facts §2.3): dest and src as struct lnet_nid (20 bytes each),
// then the pids, type and length (little-endian) and the same union at offset 56.
void encode_header_large(const Header& h, std::span<std::uint8_t, kHeaderLargeSize> out);
// -EPROTO as decode_header, and for a NID struct lnet_nid cannot carry here.
int decode_header_large(std::span<const std::uint8_t> in, Header& out);

}  // namespace lnet
