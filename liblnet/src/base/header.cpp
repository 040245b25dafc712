// Encoding and decoding of the 72-byte little-endian LNet message header.
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

namespace {
void put_wh(std::uint8_t* p, const WireHandle& h) {
  put_le64(p, h.interface_cookie);
  put_le64(p + 8, h.object_cookie);
}
WireHandle get_wh(const std::uint8_t* p) { return {get_le64(p), get_le64(p + 8)}; }
}  // namespace

void encode_header(const Header& h, std::span<std::uint8_t, kHeaderSize> out) {
  std::uint8_t* p = out.data();
  std::memset(p, 0, kHeaderSize);
  put_le64(p + 0, h.dest_nid.value());
  put_le64(p + 8, h.src_nid.value());
  put_le32(p + 16, h.dest_pid);
  put_le32(p + 20, h.src_pid);
  put_le32(p + 24, static_cast<std::uint32_t>(h.type));
  put_le32(p + 28, h.payload_length);
  switch (h.type) {
    case MsgType::Ack:
      put_wh(p + 32, h.msg.ack.dst_wmd);
      put_le64(p + 48, h.msg.ack.match_bits);
      put_le32(p + 56, h.msg.ack.mlength);
      break;
    case MsgType::Put:
      put_wh(p + 32, h.msg.put.ack_wmd);
      put_le64(p + 48, h.msg.put.match_bits);
      put_le64(p + 56, h.msg.put.hdr_data);
      put_le32(p + 64, h.msg.put.ptl_index);
      put_le32(p + 68, h.msg.put.offset);
      break;
    case MsgType::Get:
      put_wh(p + 32, h.msg.get.return_wmd);
      put_le64(p + 48, h.msg.get.match_bits);
      put_le32(p + 56, h.msg.get.ptl_index);
      put_le32(p + 60, h.msg.get.src_offset);
      put_le32(p + 64, h.msg.get.sink_length);
      break;
    case MsgType::Reply: put_wh(p + 32, h.msg.reply.dst_wmd); break;
    case MsgType::Hello:
      put_le64(p + 32, h.msg.hello.incarnation);
      put_le32(p + 40, h.msg.hello.type);
      break;
  }
}

int decode_header(std::span<const std::uint8_t> in, Header& h) {
  if (in.size() < kHeaderSize) return -EPROTO;
  const std::uint8_t* p = in.data();
  std::uint32_t type = get_le32(p + 24);
  if (type > static_cast<std::uint32_t>(MsgType::Hello)) return -EPROTO;
  h = Header{};
  h.dest_nid = Nid(get_le64(p + 0));
  h.src_nid = Nid(get_le64(p + 8));
  h.dest_pid = get_le32(p + 16);
  h.src_pid = get_le32(p + 20);
  h.type = static_cast<MsgType>(type);
  h.payload_length = get_le32(p + 28);
  switch (h.type) {
    case MsgType::Ack:
      h.msg.ack.dst_wmd = get_wh(p + 32);
      h.msg.ack.match_bits = get_le64(p + 48);
      h.msg.ack.mlength = get_le32(p + 56);
      break;
    case MsgType::Put:
      h.msg.put.ack_wmd = get_wh(p + 32);
      h.msg.put.match_bits = get_le64(p + 48);
      h.msg.put.hdr_data = get_le64(p + 56);
      h.msg.put.ptl_index = get_le32(p + 64);
      h.msg.put.offset = get_le32(p + 68);
      break;
    case MsgType::Get:
      h.msg.get.return_wmd = get_wh(p + 32);
      h.msg.get.match_bits = get_le64(p + 48);
      h.msg.get.ptl_index = get_le32(p + 56);
      h.msg.get.src_offset = get_le32(p + 60);
      h.msg.get.sink_length = get_le32(p + 64);
      break;
    case MsgType::Reply: h.msg.reply.dst_wmd = get_wh(p + 32); break;
    case MsgType::Hello:
      h.msg.hello.incarnation = get_le64(p + 32);
      h.msg.hello.type = get_le32(p + 40);
      break;
  }
  return 0;
}

}  // namespace lnet
