// Encoding and decoding of the LNet message header: the classic 72 little-endian bytes,
// and the 96 of the large-NID form (20-byte NIDs first).
#include <lnet/lnd/header.hpp>

#include <cstring>

#include <lnet/lnd/byteorder.hpp>

namespace lnet {

using namespace wire;

const char* msg_type_name(MsgType t) {
  switch (t) {
    case MsgType::Ack: return "ACK";
    case MsgType::Put: return "PUT";
    case MsgType::Get: return "GET";
    case MsgType::Reply: return "REPLY";
    case MsgType::Hello: return "HELLO";
  }
  return "<unknown>";
}

// Per message: the cursors are inline with a constant order, so each field compiles to
// one store or load at a fixed offset, as hand-written offsets would.
namespace {
void put_wh(ByteWriter& w, const WireHandle& h) { w.u64(h.interface_cookie).u64(h.object_cookie); }
WireHandle get_wh(ByteReader& r) {
  WireHandle h;
  h.interface_cookie = r.u64();
  h.object_cookie = r.u64();
  return h;
}

void put_union(ByteWriter& w, const Header& h) {
  switch (h.type) {
    case MsgType::Ack:
      put_wh(w, h.msg.ack.dst_wmd);
      w.u64(h.msg.ack.match_bits).u32(h.msg.ack.mlength);
      break;
    case MsgType::Put:
      put_wh(w, h.msg.put.ack_wmd);
      w.u64(h.msg.put.match_bits).u64(h.msg.put.hdr_data).u32(h.msg.put.ptl_index).u32(h.msg.put.offset);
      break;
    case MsgType::Get:
      put_wh(w, h.msg.get.return_wmd);
      w.u64(h.msg.get.match_bits).u32(h.msg.get.ptl_index).u32(h.msg.get.src_offset).u32(h.msg.get.sink_length);
      break;
    case MsgType::Reply: put_wh(w, h.msg.reply.dst_wmd); break;
    case MsgType::Hello: w.u64(h.msg.hello.incarnation).u32(h.msg.hello.type); break;
  }
}

void get_union(ByteReader& r, Header& h) {
  switch (h.type) {
    case MsgType::Ack:
      h.msg.ack.dst_wmd = get_wh(r);
      h.msg.ack.match_bits = r.u64();
      h.msg.ack.mlength = r.u32();
      break;
    case MsgType::Put:
      h.msg.put.ack_wmd = get_wh(r);
      h.msg.put.match_bits = r.u64();
      h.msg.put.hdr_data = r.u64();
      h.msg.put.ptl_index = r.u32();
      h.msg.put.offset = r.u32();
      break;
    case MsgType::Get:
      h.msg.get.return_wmd = get_wh(r);
      h.msg.get.match_bits = r.u64();
      h.msg.get.ptl_index = r.u32();
      h.msg.get.src_offset = r.u32();
      h.msg.get.sink_length = r.u32();
      break;
    case MsgType::Reply: h.msg.reply.dst_wmd = get_wh(r); break;
    case MsgType::Hello:
      h.msg.hello.incarnation = r.u64();
      h.msg.hello.type = r.u32();
      break;
  }
}
}  // namespace

void encode_header(const Header& h, std::span<std::uint8_t, kHeaderSize> out) {
  std::memset(out.data(), 0, kHeaderSize);
  ByteWriter w(out.data());
  w.u64(h.dest_nid.value()).u64(h.src_nid.value()).u32(h.dest_pid).u32(h.src_pid);
  w.u32(static_cast<std::uint32_t>(h.type)).u32(h.payload_length);
  put_union(w, h);
}

int decode_header(std::span<const std::uint8_t> in, Header& h) {
  if (in.size() < kHeaderSize) return -EPROTO;
  ByteReader r(in.data());
  std::uint64_t dest = r.u64(), src = r.u64();
  Nid dest_nid(dest), src_nid(src);
  std::uint32_t dest_pid = r.u32(), src_pid = r.u32(), type = r.u32();
  if (type > static_cast<std::uint32_t>(MsgType::Hello)) return -EPROTO;  // h untouched
  if (!Nid::fits_nid4(dest) || !Nid::fits_nid4(src)) return -EPROTO;      // no classic NID has its top byte set
  h = Header{};
  h.dest_nid = dest_nid;
  h.src_nid = src_nid;
  h.dest_pid = dest_pid;
  h.src_pid = src_pid;
  h.type = static_cast<MsgType>(type);
  h.payload_length = r.u32();
  get_union(r, h);
  return 0;
}

void encode_header_large(const Header& h, std::span<std::uint8_t, kHeaderLargeSize> out) {
  std::memset(out.data(), 0, kHeaderLargeSize);
  std::uint8_t nid[Nid::kWireBytes];
  h.dest_nid.to_wire(nid);
  std::memcpy(out.data(), nid, Nid::kWireBytes);
  h.src_nid.to_wire(nid);
  std::memcpy(out.data() + Nid::kWireBytes, nid, Nid::kWireBytes);
  ByteWriter w(out.data() + 2 * Nid::kWireBytes);
  w.u32(h.dest_pid).u32(h.src_pid).u32(static_cast<std::uint32_t>(h.type)).u32(h.payload_length);
  put_union(w, h);
}

int decode_header_large(std::span<const std::uint8_t> in, Header& h) {
  if (in.size() < kHeaderLargeSize) return -EPROTO;
  auto dest = Nid::from_wire(in.data(), Nid::kWireBytes);
  auto src = Nid::from_wire(in.data() + Nid::kWireBytes, Nid::kWireBytes);
  if (!dest || !src) return -EPROTO;
  ByteReader r(in.data() + 2 * Nid::kWireBytes);
  std::uint32_t dest_pid = r.u32(), src_pid = r.u32(), type = r.u32();
  if (type > static_cast<std::uint32_t>(MsgType::Hello)) return -EPROTO;  // h untouched
  h = Header{};
  h.dest_nid = *dest;
  h.src_nid = *src;
  h.dest_pid = dest_pid;
  h.src_pid = src_pid;
  h.type = static_cast<MsgType>(type);
  h.payload_length = r.u32();
  get_union(r, h);
  return 0;
}

}  // namespace lnet
