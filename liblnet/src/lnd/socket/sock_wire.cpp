// Codecs of the ksocklnd wire structures.
#include "sock_wire.hpp"

#include <array>
#include <bit>

#include <lnet/lnd/byteorder.hpp>

namespace lnet::sock {

using namespace lnet::wire;

const char* conn_type_name(ConnType t) {
  switch (t) {
    case ConnType::None: return "NONE";
    case ConnType::Any: return "ANY";
    case ConnType::Control: return "CONTROL";
    case ConnType::BulkIn: return "BULK_IN";
    case ConnType::BulkOut: return "BULK_OUT";
  }
  return "<unknown>";
}

ConnType inverse(ConnType t) {
  if (t == ConnType::BulkIn) return ConnType::BulkOut;
  if (t == ConnType::BulkOut) return ConnType::BulkIn;
  return t;
}

namespace {

// A magic read little-endian that arrives swapped: the sender wrote big-endian.
std::endian sender_order(bool flip) { return flip ? std::endian::big : std::endian::little; }

ByteWriter acceptor_version(std::uint8_t* p) {
  ByteWriter w(p);
  w.u32(kAcceptorMagic).u32(kAcceptorVersion);
  return w;
}

void put_ips(ByteWriter w, const std::vector<std::uint32_t>& ips) {
  for (std::uint32_t ip : ips) w.u32(ip);
}

}  // namespace

void encode_acceptor_version(std::span<std::uint8_t, kAcceptorVersionSize> out) { acceptor_version(out.data()); }

void encode_connreq(Nid target, std::span<std::uint8_t, kConnReqSize> out) {
  acceptor_version(out.data()).u64(target.value());
}

void encode_connreq_v2(Nid target, std::span<std::uint8_t, kConnReqV2Size> out) {
  ByteWriter w(out.data());
  w.u32(kAcceptorMagic).u32(kAcceptorVersion2);
  std::uint8_t nid[Nid::kWireBytes];
  target.to_wire(nid);
  w.bytes(nid, sizeof nid);
}

std::size_t connreq_size(std::span<const std::uint8_t, 8> head, bool flip) {
  ByteReader r(head.data(), sender_order(flip));
  r.u32();
  std::uint32_t version = r.u32();
  return version == kAcceptorVersion ? kConnReqSize : version == kAcceptorVersion2 ? kConnReqV2Size : 0;
}

Result<ConnReq> decode_connreq_v2(std::span<const std::uint8_t, kConnReqV2Size> in, bool flip) {
  ByteReader r(in.data(), sender_order(flip));
  if (r.u32() != kAcceptorMagic) return Failure{-EPROTO, "not an acceptor connection request"};
  ConnReq req;
  req.version = r.u32();
  if (req.version != kAcceptorVersion2)
    return Failure{-EPROTONOSUPPORT, "acceptor request version " + std::to_string(req.version) + " (this is 2)"};
  auto target = Nid::from_wire(in.data() + 8, Nid::kWireBytes);
  if (!target) return Failure{-EPROTO, "acceptor request v2: " + target.message()};
  req.target = *target;
  return req;
}

FirstWord classify_first_word(std::span<const std::uint8_t, 4> word, bool* flip) {
  std::uint32_t w = ByteReader(word.data()).u32();
  *flip = false;
  if (w == kAcceptorMagic) return FirstWord::Acceptor;
  if (w == swab32(kAcceptorMagic)) {
    *flip = true;
    return FirstWord::Acceptor;
  }
  if (w == kProtoMagic || w == swab32(kProtoMagic)) {
    *flip = w != kProtoMagic;
    return FirstWord::Proto;
  }
  if (w == kTcpMagic) return FirstWord::TcpV1;
  return FirstWord::Unknown;
}

Result<ConnReq> decode_connreq(std::span<const std::uint8_t, kConnReqSize> in, bool flip) {
  ByteReader r(in.data(), sender_order(flip));
  if (r.u32() != kAcceptorMagic) return Failure{-EPROTO, "not an acceptor connection request"};
  ConnReq req;
  req.version = r.u32();
  if (req.version != kAcceptorVersion) {
    return Failure{-EPROTONOSUPPORT, "acceptor request version " + std::to_string(req.version) + " (we speak 1)"};
  }
  std::uint64_t target = r.u64();
  if (!Nid::fits_nid4(target)) return Failure{-EPROTO, "acceptor request for a NID whose top byte is set"};
  req.target = Nid(target);
  return req;
}

std::vector<std::uint8_t> encode_hello(const Hello& h) {
  std::vector<std::uint8_t> out;
  std::size_t nips = h.ips.size();
  if (h.version == kProtoV1) {
    // The V1 HELLO is shaped like an LNet header: dest_nid holds magic and version, the
    // type is LNET_MSG_HELLO (4), the payload the IPs; the header's last 28 bytes are unused.
    out.assign(kHelloPrefixSize + kHelloV1BodySize + 4 * nips, 0);
    ByteWriter w(out.data());
    w.u32(kTcpMagic).u16(1).u16(0).u64(h.src_nid.value()).u32(h.dst_pid).u32(h.src_pid);
    w.u32(4).u32(static_cast<std::uint32_t>(4 * nips)).u64(h.src_incarnation).i32(static_cast<std::int32_t>(h.ctype));
    w.skip(28);
    put_ips(w, h.ips);
    return out;
  }
  if (h.version == kProtoV4) {
    // 20-byte NIDs (struct lnet_nid, big-endian fields), no IP list.
    out.assign(kHelloPrefixSize + kHelloV4BodySize, 0);
    ByteWriter w(out.data());
    w.u32(kProtoMagic).u32(h.version);
    std::uint8_t nid[Nid::kWireBytes];
    h.src_nid.to_wire(nid);
    w.bytes(nid, sizeof nid);
    h.dst_nid.to_wire(nid);
    w.bytes(nid, sizeof nid);
    w.u32(h.src_pid).u32(h.dst_pid).u64(h.src_incarnation).u64(h.dst_incarnation);
    w.i32(static_cast<std::int32_t>(h.ctype)).u32(0);
    return out;
  }
  out.assign(kHelloPrefixSize + kHelloV2BodySize + 4 * nips, 0);
  ByteWriter w(out.data());
  w.u32(kProtoMagic).u32(h.version).u64(h.src_nid.value()).u64(h.dst_nid.value()).u32(h.src_pid).u32(h.dst_pid);
  w.u64(h.src_incarnation).u64(h.dst_incarnation).i32(static_cast<std::int32_t>(h.ctype));
  w.u32(static_cast<std::uint32_t>(nips));
  put_ips(w, h.ips);
  return out;
}

Result<HelloPrefix> decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize> in) {
  ByteReader r(in.data());
  std::uint32_t magic = r.u32();
  HelloPrefix p;
  if (magic == kTcpMagic) {
    std::uint16_t major = r.u16(), minor = r.u16();
    if (major != 1 || minor != 0) {
      return Failure{-EPROTO, "V1 HELLO with version " + std::to_string(major) + "." + std::to_string(minor)};
    }
    p.version = kProtoV1;
    return p;
  }
  if (magic == kProtoMagic || magic == swab32(kProtoMagic)) {
    p.flip = magic != kProtoMagic;
    p.version = ByteReader(r.pos(), sender_order(p.flip)).u32();
    if (p.version < kProtoV2 || p.version > kProtoV4) {
      return Failure{-EPROTO, "HELLO version " + std::to_string(p.version) + " is not 2, 3 or 4"};
    }
    return p;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "bad HELLO magic 0x%08x", magic);
  return Failure{-EPROTO, buf};
}

std::size_t hello_body_size(const HelloPrefix& p) {
  return p.version == kProtoV1 ? kHelloV1BodySize : p.version == kProtoV4 ? kHelloV4BodySize : kHelloV2BodySize;
}

namespace {

Result<Hello> decode_hello_v4(const HelloPrefix& p, std::span<const std::uint8_t> body, std::uint32_t* nips) {
  Hello h;
  h.version = kProtoV4;
  auto src = Nid::from_wire(body.data(), Nid::kWireBytes);
  auto dst = Nid::from_wire(body.data() + Nid::kWireBytes, Nid::kWireBytes);
  if (!src) return Failure{-EPROTO, "V4 HELLO: its source: " + src.message()};
  if (!dst) return Failure{-EPROTO, "V4 HELLO: its destination: " + dst.message()};
  h.src_nid = *src;
  h.dst_nid = *dst;
  ByteReader r(body.data() + 2 * Nid::kWireBytes, sender_order(p.flip));
  h.src_pid = r.u32();
  h.dst_pid = r.u32();
  h.src_incarnation = r.u64();
  h.dst_incarnation = r.u64();
  h.ctype = static_cast<ConnType>(r.i32());
  *nips = r.u32();
  if (*nips != 0) return Failure{-EPROTO, "V4 HELLO announces " + std::to_string(*nips) + " IPs (V4 has no IP list)"};
  return h;
}

}  // namespace

Result<Hello> decode_hello_body(const HelloPrefix& p, std::span<const std::uint8_t> body, std::uint32_t* nips) {
  if (body.size() < hello_body_size(p)) return Failure{-EPROTO, "short HELLO"};
  Hello h;
  h.version = p.version;
  if (p.version == kProtoV4) {
    auto v4 = decode_hello_v4(p, body, nips);
    if (!v4) return v4;
    h = std::move(*v4);
  } else if (p.version == kProtoV1) {
    // The rest of the 72-byte LNet header, from src_nid on (little-endian).
    ByteReader r(body.data());
    std::uint64_t src = r.u64();
    if (!Nid::fits_nid4(src)) return Failure{-EPROTO, "V1 HELLO from a NID whose top byte is set"};
    h.src_nid = Nid(src);
    h.dst_pid = r.u32();
    h.src_pid = r.u32();
    if (std::uint32_t type = r.u32(); type != 4)
      return Failure{-EPROTO, "V1 HELLO with message type " + std::to_string(type)};
    std::uint32_t plen = r.u32();
    if (plen % 4 != 0 || plen / 4 > kMaxHelloIps) {
      return Failure{-EPROTO, "V1 HELLO announces a " + std::to_string(plen) + "-byte IP list"};
    }
    *nips = plen / 4;
    h.src_incarnation = r.u64();
    h.ctype = static_cast<ConnType>(r.i32());
  } else {
    ByteReader r(body.data(), sender_order(p.flip));
    std::uint64_t src = r.u64(), dst = r.u64();
    if (!Nid::fits_nid4(src) || !Nid::fits_nid4(dst))
      return Failure{-EPROTO, "V" + std::to_string(p.version) + " HELLO with a NID whose top byte is set"};
    h.src_nid = Nid(src);
    h.dst_nid = Nid(dst);
    h.src_pid = r.u32();
    h.dst_pid = r.u32();
    h.src_incarnation = r.u64();
    h.dst_incarnation = r.u64();
    h.ctype = static_cast<ConnType>(r.i32());
    *nips = r.u32();
    if (*nips > kMaxHelloIps) return Failure{-EPROTO, "HELLO announces " + std::to_string(*nips) + " IPs (max 16)"};
  }
  std::int32_t ct = static_cast<std::int32_t>(h.ctype);
  if (ct < -1 || ct > 3) return Failure{-EPROTO, "HELLO with connection type " + std::to_string(ct)};
  if (h.src_nid.is_any()) return Failure{-EPROTO, "HELLO from NID ANY"};
  return h;
}

void decode_hello_ips(const HelloPrefix& p, std::span<const std::uint8_t> in, Hello& h) {
  h.ips.clear();
  ByteReader r(in.data(), sender_order(p.flip));
  for (std::size_t n = in.size() / 4; n > 0; --n) h.ips.push_back(r.u32());
}

void encode_msg_hdr(const MsgHdr& h, std::span<std::uint8_t, kMsgHdrSize> out) {
  ByteWriter(out.data()).u32(h.type).u32(h.csum).u64(h.zc_req).u64(h.zc_ack);
}

void set_msg_hdr_csum(std::span<std::uint8_t, kMsgHdrSize> hdr, std::uint32_t csum) {
  ByteWriter(hdr.data()).skip(4).u32(csum);  // after the type
}

int decode_msg_hdr(std::span<const std::uint8_t, kMsgHdrSize> in, bool flip, MsgHdr& out) {
  ByteReader r(in.data(), sender_order(flip));
  out.type = r.u32();
  out.csum = r.u32();
  out.zc_req = r.u64();
  out.zc_ack = r.u64();
  return out.type == kMsgNoop || out.type == kMsgLnet ? 0 : -EPROTO;
}

namespace {
constexpr std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kCrcTable = make_crc_table();
}  // namespace

std::uint32_t crc32_le(std::uint32_t crc, const void* data, std::size_t len) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  for (std::size_t i = 0; i < len; ++i) crc = kCrcTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

}  // namespace lnet::sock
