// Codecs of the ksocklnd wire structures.
#include "sock_wire.hpp"

#include <array>

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

void encode_connreq(Nid target, std::span<std::uint8_t, kConnReqSize> out) {
  put_le32(out.data(), kAcceptorMagic);
  put_le32(out.data() + 4, kAcceptorVersion);
  put_le64(out.data() + 8, target.value());
}

FirstWord classify_first_word(std::span<const std::uint8_t, 4> word, bool* flip) {
  std::uint32_t w = get_le32(word.data());
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
  auto u32 = [&](std::size_t o) { return flip ? swab32(get_le32(in.data() + o)) : get_le32(in.data() + o); };
  auto u64 = [&](std::size_t o) { return flip ? swab64(get_le64(in.data() + o)) : get_le64(in.data() + o); };
  if (u32(0) != kAcceptorMagic) return Failure{-EPROTO, "not an acceptor connection request"};
  ConnReq r;
  r.version = u32(4);
  if (r.version != kAcceptorVersion) {
    return Failure{-EPROTONOSUPPORT, "acceptor request version " + std::to_string(r.version) + " (we speak 1)"};
  }
  r.target = Nid(u64(8));
  return r;
}

std::vector<std::uint8_t> encode_hello(const Hello& h) {
  std::vector<std::uint8_t> out;
  std::size_t nips = h.ips.size();
  if (h.version == kProtoV1) {
    // The V1 HELLO is shaped like an LNet header: dest_nid holds magic and version.
    out.assign(72 + 4 * nips, 0);
    std::uint8_t* p = out.data();
    put_le32(p, kTcpMagic);
    put_le16(p + 4, 1);
    put_le16(p + 6, 0);
    put_le64(p + 8, h.src_nid.value());
    put_le32(p + 16, h.dst_pid);
    put_le32(p + 20, h.src_pid);
    put_le32(p + 24, 4);  // LNET_MSG_HELLO
    put_le32(p + 28, static_cast<std::uint32_t>(4 * nips));
    put_le64(p + 32, h.src_incarnation);
    put_le32(p + 40, static_cast<std::uint32_t>(h.ctype));
    for (std::size_t i = 0; i < nips; ++i) put_le32(p + 72 + 4 * i, h.ips[i]);
    return out;
  }
  out.assign(kHelloPrefixSize + kHelloV2BodySize + 4 * nips, 0);
  std::uint8_t* p = out.data();
  put_le32(p, kProtoMagic);
  put_le32(p + 4, h.version);
  put_le64(p + 8, h.src_nid.value());
  put_le64(p + 16, h.dst_nid.value());
  put_le32(p + 24, h.src_pid);
  put_le32(p + 28, h.dst_pid);
  put_le64(p + 32, h.src_incarnation);
  put_le64(p + 40, h.dst_incarnation);
  put_le32(p + 48, static_cast<std::uint32_t>(h.ctype));
  put_le32(p + 52, static_cast<std::uint32_t>(nips));
  for (std::size_t i = 0; i < nips; ++i) put_le32(p + 56 + 4 * i, h.ips[i]);
  return out;
}

Result<HelloPrefix> decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize> in) {
  std::uint32_t magic = get_le32(in.data());
  HelloPrefix p;
  if (magic == kTcpMagic) {
    std::uint16_t major = get_le16(in.data() + 4), minor = get_le16(in.data() + 6);
    if (major != 1 || minor != 0) {
      return Failure{-EPROTO, "V1 HELLO with version " + std::to_string(major) + "." + std::to_string(minor)};
    }
    p.version = kProtoV1;
    return p;
  }
  if (magic == kProtoMagic || magic == swab32(kProtoMagic)) {
    p.flip = magic != kProtoMagic;
    std::uint32_t v = get_le32(in.data() + 4);
    p.version = p.flip ? swab32(v) : v;
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
  return p.version == kProtoV1 ? kHelloV1BodySize : kHelloV2BodySize;
}

Result<Hello> decode_hello_body(const HelloPrefix& p, std::span<const std::uint8_t> body, std::uint32_t* nips) {
  if (body.size() < hello_body_size(p)) return Failure{-EPROTO, "short HELLO"};
  Hello h;
  h.version = p.version;
  const std::uint8_t* b = body.data();
  if (p.version == kProtoV1) {
    // Offsets within the 72-byte header, minus the 8-byte prefix.
    h.src_nid = Nid(get_le64(b + 0));
    h.dst_pid = get_le32(b + 8);
    h.src_pid = get_le32(b + 12);
    if (get_le32(b + 16) != 4)
      return Failure{-EPROTO, "V1 HELLO with message type " + std::to_string(get_le32(b + 16))};
    std::uint32_t plen = get_le32(b + 20);
    if (plen % 4 != 0 || plen / 4 > kMaxHelloIps) {
      return Failure{-EPROTO, "V1 HELLO announces a " + std::to_string(plen) + "-byte IP list"};
    }
    *nips = plen / 4;
    h.src_incarnation = get_le64(b + 24);
    h.ctype = static_cast<ConnType>(static_cast<std::int32_t>(get_le32(b + 32)));
  } else {
    auto u32 = [&](std::size_t o) { return p.flip ? swab32(get_le32(b + o)) : get_le32(b + o); };
    auto u64 = [&](std::size_t o) { return p.flip ? swab64(get_le64(b + o)) : get_le64(b + o); };
    h.src_nid = Nid(u64(0));
    h.dst_nid = Nid(u64(8));
    h.src_pid = u32(16);
    h.dst_pid = u32(20);
    h.src_incarnation = u64(24);
    h.dst_incarnation = u64(32);
    h.ctype = static_cast<ConnType>(static_cast<std::int32_t>(u32(40)));
    *nips = u32(44);
    if (*nips > kMaxHelloIps) return Failure{-EPROTO, "HELLO announces " + std::to_string(*nips) + " IPs (max 16)"};
  }
  std::int32_t ct = static_cast<std::int32_t>(h.ctype);
  if (ct < -1 || ct > 3) return Failure{-EPROTO, "HELLO with connection type " + std::to_string(ct)};
  if (h.src_nid.is_any()) return Failure{-EPROTO, "HELLO from NID ANY"};
  return h;
}

void decode_hello_ips(const HelloPrefix& p, std::span<const std::uint8_t> in, Hello& h) {
  h.ips.clear();
  for (std::size_t o = 0; o + 4 <= in.size(); o += 4) {
    std::uint32_t v = get_le32(in.data() + o);
    h.ips.push_back(p.flip ? swab32(v) : v);
  }
}

void encode_msg_hdr(const MsgHdr& h, std::span<std::uint8_t, kMsgHdrSize> out) {
  put_le32(out.data(), h.type);
  put_le32(out.data() + 4, h.csum);
  put_le64(out.data() + 8, h.zc_req);
  put_le64(out.data() + 16, h.zc_ack);
}

int decode_msg_hdr(std::span<const std::uint8_t, kMsgHdrSize> in, bool flip, MsgHdr& out) {
  auto u32 = [&](std::size_t o) { return flip ? swab32(get_le32(in.data() + o)) : get_le32(in.data() + o); };
  auto u64 = [&](std::size_t o) { return flip ? swab64(get_le64(in.data() + o)) : get_le64(in.data() + o); };
  out.type = u32(0);
  out.csum = u32(4);
  out.zc_req = u64(8);
  out.zc_ack = u64(16);
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
