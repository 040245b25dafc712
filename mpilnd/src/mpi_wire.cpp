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

// Layout: magic u32, version u16, kind u8, credits u8, nob u32, tag u32, stamp u64,
// status i32, reserved u32 (0). Little-endian, as every layout here.
void encode_msg_hdr(const MsgHdr& h, std::span<std::uint8_t, kMsgHdrSize> out) {
  wire::ByteWriter w(out.data());
  w.u32(kMagic).u16(kVersion).u8(static_cast<std::uint8_t>(h.kind)).u8(h.credits);
  w.u32(h.nob).u32(h.tag).u64(h.stamp).i32(h.status).u32(0);
}

namespace {

// A hello's fields in wire order (u32 each, then a reserved u32 of 0), for both ways.
template <class H, class F>
void hello_fields(H& h, F&& field) {
  field(h.proto_version);
  field(h.short_max);
  field(h.pool_depth);
  field(h.credits);
  field(h.pid);
  field(h.rank);
  field(h.chunk);
}

// The header's fields up to status (the reserved word is not read).
bool read_msg_hdr(std::span<const std::uint8_t> in, MsgHdr& h, std::string* why) {
  wire::ByteReader r(in.data());
  if (std::uint32_t magic = r.u32(); magic != kMagic) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", magic);
    return bad(why, std::string("magic ") + hex);
  }
  if (std::uint16_t version = r.u16(); version != kVersion) return bad(why, "version " + std::to_string(version));
  std::uint8_t kind = r.u8();
  if (kind < static_cast<std::uint8_t>(MsgKind::Query) || kind > static_cast<std::uint8_t>(MsgKind::Packed))
    return bad(why, "unknown kind " + std::to_string(kind));
  h.kind = static_cast<MsgKind>(kind);
  h.credits = r.u8();
  h.nob = r.u32();
  h.tag = r.u32();
  h.stamp = r.u64();
  h.status = r.i32();
  return true;
}

// A header's nob before the header is checked: after magic u32, version u16, kind and credits u8.
std::uint32_t peek_nob(const std::uint8_t* p) {
  wire::ByteReader r(p);
  r.skip(4 + 2 + 1 + 1);
  return r.u32();
}

// QUERY, RESPONSE: the hello.
bool read_hello_body(std::span<const std::uint8_t> body, Decoded& d, std::string* why) {
  if (body.size() < kHelloSize) return bad(why, std::string(kind_name(d.hdr.kind)) + " without its hello");
  wire::ByteReader r(body.data());
  hello_fields(d.hello, [&r](std::uint32_t& v) { v = r.u32(); });
  if (d.hello.proto_version != kVersion)
    return bad(why, "hello of protocol version " + std::to_string(d.hello.proto_version));
  if (d.hello.chunk == 0) return bad(why, "hello with a chunk size of 0");
  return true;
}

// IMMEDIATE, BULK, GET_REQ: an LNet header, then an IMMEDIATE's payload.
bool read_lnet_body(std::span<const std::uint8_t> body, Decoded& d, std::string* why) {
  const MsgHdr& h = d.hdr;
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
  return true;
}

}  // namespace

void encode_hello(const Hello& h, std::span<std::uint8_t, kHelloSize> out) {
  wire::ByteWriter w(out.data());
  hello_fields(h, [&w](std::uint32_t v) { w.u32(v); });
  w.u32(0);
}

bool decode_msg(std::span<const std::uint8_t> in, Decoded& d, std::string* why) {
  if (in.size() < kMsgHdrSize) return bad(why, std::to_string(in.size()) + " bytes, shorter than its header");
  MsgHdr& h = d.hdr;
  if (!read_msg_hdr(in, h, why)) return false;
  if (h.nob != in.size())
    return bad(why, std::string(kind_name(h.kind)) + " says " + std::to_string(h.nob) + " bytes, " +
                        std::to_string(in.size()) + " arrived");
  std::span<const std::uint8_t> body = in.subspan(kMsgHdrSize);
  switch (h.kind) {
    case MsgKind::Query:
    case MsgKind::Response: return read_hello_body(body, d, why);
    case MsgKind::Immediate:
    case MsgKind::Bulk:
    case MsgKind::GetReq: return read_lnet_body(body, d, why);
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
  std::uint32_t nob = peek_nob(rest.data());
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
