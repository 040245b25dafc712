// Codecs of the MPI LND messages (mpi_wire.hpp).
#include "mpi_wire.hpp"

#include <cerrno>
#include <cstdio>

#include <lnet/lnd/byteorder.hpp>

namespace lnet::mpi {

namespace {

// A bad message: the reason is only put into words when someone asked for it (the
// arguments are built on the failure path alone).
bool bad(std::string* why, const std::string& what) {
  if (why) *why = "bad MPI LND message: " + what;
  return false;
}

template <class F>
Result<Decoded> as_result(F decode) {
  Decoded d;
  std::string why;
  if (!decode(d, &why)) return Failure{-EPROTO, std::move(why)};
  return d;
}

}  // namespace

const char* kind_name(MsgKind k) {
  switch (k) {
    case MsgKind::Query: return "QUERY";
    case MsgKind::Response: return "RESPONSE";
    case MsgKind::Immediate: return "IMMEDIATE";
    case MsgKind::Bulk: return "BULK";
    case MsgKind::GetReq: return "GET_REQ";
    case MsgKind::GetNak: return "GET_NAK";
    case MsgKind::Noop: return "NOOP";
    case MsgKind::Packed: return "PACKED";
  }
  return "?";
}

// Layout: magic u32 @0, version u16 @4, kind u8 @6, credits u8 @7, nob u32 @8,
// tag u32 @12, stamp u64 @16, status i32 @24, reserved u32 @28 (0).
void encode_msg_hdr(const MsgHdr& h, std::span<std::uint8_t, kMsgHdrSize> out) {
  std::uint8_t* p = out.data();
  wire::put_le32(p, kMagic);
  wire::put_le16(p + 4, kVersion);
  p[6] = static_cast<std::uint8_t>(h.kind);
  p[7] = h.credits;
  wire::put_le32(p + 8, h.nob);
  wire::put_le32(p + 12, h.tag);
  wire::put_le64(p + 16, h.stamp);
  wire::put_le32(p + 24, static_cast<std::uint32_t>(h.status));
  wire::put_le32(p + 28, 0);
}

// Layout: proto_version, short_max, pool_depth, credits, pid, rank, chunk (u32 each),
// reserved u32 (0).
void encode_hello(const Hello& h, std::span<std::uint8_t, kHelloSize> out) {
  std::uint8_t* p = out.data();
  wire::put_le32(p, h.proto_version);
  wire::put_le32(p + 4, h.short_max);
  wire::put_le32(p + 8, h.pool_depth);
  wire::put_le32(p + 12, h.credits);
  wire::put_le32(p + 16, h.pid);
  wire::put_le32(p + 20, h.rank);
  wire::put_le32(p + 24, h.chunk);
  wire::put_le32(p + 28, 0);
}

bool decode_msg(std::span<const std::uint8_t> in, Decoded& d, std::string* why) {
  if (in.size() < kMsgHdrSize) return bad(why, std::to_string(in.size()) + " bytes, shorter than its header");
  const std::uint8_t* p = in.data();
  if (wire::get_le32(p) != kMagic) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", wire::get_le32(p));
    return bad(why, std::string("magic ") + hex);
  }
  if (wire::get_le16(p + 4) != kVersion) return bad(why, "version " + std::to_string(wire::get_le16(p + 4)));
  MsgHdr& h = d.hdr;
  std::uint8_t kind = p[6];
  if (kind < static_cast<std::uint8_t>(MsgKind::Query) || kind > static_cast<std::uint8_t>(MsgKind::Packed))
    return bad(why, "unknown kind " + std::to_string(kind));
  h.kind = static_cast<MsgKind>(kind);
  h.credits = p[7];
  h.nob = wire::get_le32(p + 8);
  h.tag = wire::get_le32(p + 12);
  h.stamp = wire::get_le64(p + 16);
  h.status = static_cast<std::int32_t>(wire::get_le32(p + 24));
  if (h.nob != in.size())
    return bad(why, std::string(kind_name(h.kind)) + " says " + std::to_string(h.nob) + " bytes, " +
                        std::to_string(in.size()) + " arrived");
  std::span<const std::uint8_t> body = in.subspan(kMsgHdrSize);
  switch (h.kind) {
    case MsgKind::Query:
    case MsgKind::Response: {
      if (body.size() < kHelloSize) return bad(why, std::string(kind_name(h.kind)) + " without its hello");
      const std::uint8_t* b = body.data();
      d.hello = Hello{wire::get_le32(b),      wire::get_le32(b + 4),  wire::get_le32(b + 8), wire::get_le32(b + 12),
                      wire::get_le32(b + 16), wire::get_le32(b + 20), wire::get_le32(b + 24)};
      if (d.hello.proto_version != kVersion)
        return bad(why, "hello of protocol version " + std::to_string(d.hello.proto_version));
      if (d.hello.chunk == 0) return bad(why, "hello with a chunk size of 0");
      break;
    }
    case MsgKind::Immediate:
    case MsgKind::Bulk:
    case MsgKind::GetReq: {
      if (body.size() < kHeaderSize) return bad(why, std::string(kind_name(h.kind)) + " without its LNet header");
      if (int rc = decode_header(body.first(kHeaderSize), d.lnet); rc < 0)
        return bad(why, std::string(kind_name(h.kind)) + " with a bad LNet header");
      std::span<const std::uint8_t> rest = body.subspan(kHeaderSize);
      if (h.kind == MsgKind::Immediate) {
        if (rest.size() != d.lnet.payload_length)
          return bad(why, "IMMEDIATE with " + std::to_string(rest.size()) + " payload bytes for a payload_length of " +
                              std::to_string(d.lnet.payload_length));
        d.payload = rest;
      } else if (!rest.empty()) {
        return bad(why, std::string(kind_name(h.kind)) + " with bytes after its LNet header");
      }
      if (h.kind == MsgKind::GetReq && d.lnet.type != MsgType::Get) return bad(why, "GET_REQ that is not a GET");
      if (h.kind != MsgKind::Immediate && h.tag == 0) return bad(why, std::string(kind_name(h.kind)) + " with tag 0");
      break;
    }
    case MsgKind::GetNak:
      if (h.tag == 0) return bad(why, "GET_NAK with tag 0");
      if (h.status >= 0) return bad(why, "GET_NAK with status " + std::to_string(h.status));
      break;
    case MsgKind::Noop: break;
    case MsgKind::Packed:
      if (body.size() < kMsgHdrSize) return bad(why, "PACKED with nothing packed");
      d.payload = body;
      break;
  }
  return true;
}

Result<Decoded> decode_msg(std::span<const std::uint8_t> in) {
  return as_result([&](Decoded& d, std::string* why) { return decode_msg(in, d, why); });
}

bool next_packed(std::span<const std::uint8_t>& rest, Decoded& d, std::string* why) {
  if (rest.size() < kMsgHdrSize) return bad(why, "PACKED ending in " + std::to_string(rest.size()) + " stray bytes");
  std::uint32_t nob = wire::get_le32(rest.data() + 8);
  if (nob < kMsgHdrSize || nob > rest.size())
    return bad(why,
               "packed message of " + std::to_string(nob) + " bytes where " + std::to_string(rest.size()) + " remain");
  if (!decode_msg(rest.first(nob), d, why)) return false;
  if (d.hdr.kind != MsgKind::Immediate)
    return bad(why, std::string("a ") + kind_name(d.hdr.kind) + " packed in a PACKED");
  if (d.hdr.credits) return bad(why, "a packed IMMEDIATE returning credits");
  rest = rest.subspan(nob);
  return true;
}

Result<Decoded> next_packed(std::span<const std::uint8_t>& rest) {
  return as_result([&](Decoded& d, std::string* why) { return next_packed(rest, d, why); });
}

}  // namespace lnet::mpi
