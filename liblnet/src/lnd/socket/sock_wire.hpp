// Wire structures of the kernel's socket LND (ksocklnd): the acceptor connection
// request, HELLO (V1, V2/V3), and the 24-byte message header, with explicit codecs.
// Everything we send is little-endian (our native order); what we receive may be in
// the sender's order, told by its magic (the "flip").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <lnet/nid.hpp>
#include <lnet/result.hpp>

namespace lnet::sock {

inline constexpr std::uint32_t kAcceptorMagic = 0xacce7100;
inline constexpr std::uint32_t kAcceptorVersion = 1;
inline constexpr std::uint32_t kAcceptorVersion2 = 2;     // a 20-byte target NID (large NIDs)
inline constexpr std::uint32_t kProtoMagic = 0x45726963;  // LNET_PROTO_MAGIC
inline constexpr std::uint32_t kTcpMagic = 0xeebc0ded;    // LNET_PROTO_TCP_MAGIC (V1)
inline constexpr std::uint32_t kProtoV1 = 1;
inline constexpr std::uint32_t kProtoV2 = 2;
inline constexpr std::uint32_t kProtoV3 = 3;
inline constexpr std::uint32_t kProtoV4 = 4;
inline constexpr std::uint32_t kMsgNoop = 0xc0;
inline constexpr std::uint32_t kMsgLnet = 0xc1;
inline constexpr std::uint64_t kKeepalivePing = 1;  // reserved ZC cookie of keepalive NOOPs
inline constexpr std::size_t kConnReqSize = 16;
inline constexpr std::size_t kConnReqV2Size = 28;
inline constexpr std::size_t kHelloPrefixSize = 8;   // magic + version
inline constexpr std::size_t kHelloV2BodySize = 48;  // after the prefix, before the IPs
inline constexpr std::size_t kHelloV4BodySize = 72;  // 20-byte NIDs, nips always 0
inline constexpr std::size_t kHelloV1BodySize = 64;  // rest of the 72-byte header
inline constexpr std::size_t kMsgHdrSize = 24;
inline constexpr std::uint32_t kMaxHelloIps = 16;

enum class ConnType : std::int32_t { None = -1, Any = 0, Control = 1, BulkIn = 2, BulkOut = 3 };
const char* conn_type_name(ConnType t);
// The type the other end records for a connection (BULK_IN <-> BULK_OUT).
ConnType inverse(ConnType t);

inline std::uint32_t swab32(std::uint32_t v) { return __builtin_bswap32(v); }

// ---- acceptor connection request ----
// Our acceptor magic and version alone: the answer to a probe or to another version.
inline constexpr std::size_t kAcceptorVersionSize = 8;
void encode_acceptor_version(std::span<std::uint8_t, kAcceptorVersionSize> out);
void encode_connreq(Nid target, std::span<std::uint8_t, kConnReqSize> out);

// What the first four bytes on an accepted socket announce.
enum class FirstWord { Acceptor, Proto, TcpV1, Unknown };
FirstWord classify_first_word(std::span<const std::uint8_t, 4> word, bool* flip);

struct ConnReq {
  std::uint32_t version = 0;
  Nid target;
};
// Decodes the 16 bytes of a connection request (first word already classified as
// Acceptor). Fails with -EPROTO naming the bad field; version != 1 is reported as
// -EPROTONOSUPPORT (the caller answers with its own version and closes).
Result<ConnReq> decode_connreq(std::span<const std::uint8_t, kConnReqSize> in, bool flip);
// Version 2 (lnet_acceptor_connreq_v2): magic, version 2, the target as struct lnet_nid.
void encode_connreq_v2(Nid target, std::span<std::uint8_t, kConnReqV2Size> out);
Result<ConnReq> decode_connreq_v2(std::span<const std::uint8_t, kConnReqV2Size> in, bool flip);
// The size of the request whose magic and version are `head`: 16 (version 1), 28
// (version 2), 0 for another version.
std::size_t connreq_size(std::span<const std::uint8_t, 8> head, bool flip);

// ---- HELLO ----
struct Hello {
  std::uint32_t version = kProtoV3;
  Nid src_nid;
  Nid dst_nid;
  Pid src_pid = 0;
  Pid dst_pid = 0;
  std::uint64_t src_incarnation = 0;
  std::uint64_t dst_incarnation = 0;
  ConnType ctype = ConnType::Any;
  std::vector<std::uint32_t> ips;
};

// V2/V3: 56 bytes + 4 per IP; V1: the 72-byte LNet-header form + 4 per IP; V4: 80 bytes
// (20-byte NIDs, no IPs).
std::vector<std::uint8_t> encode_hello(const Hello& h);

struct HelloPrefix {
  std::uint32_t version = 0;
  bool flip = false;
};
// The first 8 bytes: LNET_PROTO_MAGIC (either order) + version 2/3/4, or the V1 magic
// with major 1 minor 0. -EPROTO for anything else.
Result<HelloPrefix> decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize> in);
std::size_t hello_body_size(const HelloPrefix& p);
// Decodes the body (hello_body_size bytes); *nips gets the count of IPs that follow.
Result<Hello> decode_hello_body(const HelloPrefix& p, std::span<const std::uint8_t> body, std::uint32_t* nips);
// Reads the IP list that follows the body.
void decode_hello_ips(const HelloPrefix& p, std::span<const std::uint8_t> in, Hello& h);

// ---- message header (V2/V3) ----
struct MsgHdr {
  std::uint32_t type = kMsgLnet;
  std::uint32_t csum = 0;
  std::uint64_t zc_req = 0;  // cookie the sender wants acknowledged (0: none)
  std::uint64_t zc_ack = 0;  // cookie(s) acknowledged
};
void encode_msg_hdr(const MsgHdr& h, std::span<std::uint8_t, kMsgHdrSize> out);
// Fills in the checksum of an encoded header (V2 checksums cover the header with csum 0).
void set_msg_hdr_csum(std::span<std::uint8_t, kMsgHdrSize> hdr, std::uint32_t csum);
// -EPROTO for a type other than NOOP and LNET.
int decode_msg_hdr(std::span<const std::uint8_t, kMsgHdrSize> in, bool flip, MsgHdr& out);

// crc32_le as ksocklnd computes message checksums (reflected 0xEDB88320, seed ~0).
std::uint32_t crc32_le(std::uint32_t crc, const void* data, std::size_t len);

}  // namespace lnet::sock
