// The 72-byte LNet header against golden byte vectors written from the wire layout.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include <lnet/lnd/header.hpp>

namespace lnet {
namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes encode(const Header& h) {
  std::array<std::uint8_t, kHeaderSize> out{};
  encode_header(h, out);
  return Bytes(out.begin(), out.end());
}

// dest 192.168.1.2@tcp1, src 0@lo, dest pid 12345, src pid U1, then the type, length.
const Bytes kCommon = {0x02, 0x01, 0xA8, 0xC0, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
                       0x00, 0x00, 0x09, 0x00, 0x39, 0x30, 0x00, 0x00, 0x01, 0x00, 0x00, 0x80};
const Bytes kWmd = {0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Header base(MsgType t, std::uint32_t len) {
  Header h;
  h.dest_nid = Nid(0x00020001C0A80102ULL);
  h.src_nid = Nid::lo();
  h.dest_pid = 12345;
  h.src_pid = kPidUserFlag | 1;
  h.type = t;
  h.payload_length = len;
  return h;
}

constexpr WireHandle kHandle{0x1122334455667788ULL, 0x0102030405060708ULL};

TEST(Header, PutGolden) {
  Header h = base(MsgType::Put, 4096);
  h.msg.put = {kHandle, 0x8000000000000001ULL, 0xdeadbeefcafef00dULL, 52, 16};
  Bytes golden = cat({kCommon,
                      {0x01, 0, 0, 0, 0x00, 0x10, 0, 0},
                      kWmd,
                      {0x01, 0, 0, 0, 0, 0, 0, 0x80},
                      {0x0d, 0xf0, 0xfe, 0xca, 0xef, 0xbe, 0xad, 0xde},
                      {0x34, 0, 0, 0},
                      {0x10, 0, 0, 0}});
  ASSERT_EQ(golden.size(), kHeaderSize);
  EXPECT_EQ(encode(h), golden);
  Header d;
  ASSERT_EQ(decode_header(golden, d), 0);
  EXPECT_EQ(d.dest_nid, h.dest_nid);
  EXPECT_EQ(d.src_nid, h.src_nid);
  EXPECT_EQ(d.dest_pid, 12345u);
  EXPECT_EQ(d.src_pid, kPidUserFlag | 1);
  EXPECT_EQ(d.type, MsgType::Put);
  EXPECT_EQ(d.payload_length, 4096u);
  EXPECT_EQ(d.msg.put.ack_wmd, kHandle);
  EXPECT_EQ(d.msg.put.match_bits, 0x8000000000000001ULL);
  EXPECT_EQ(d.msg.put.hdr_data, 0xdeadbeefcafef00dULL);
  EXPECT_EQ(d.msg.put.ptl_index, 52u);
  EXPECT_EQ(d.msg.put.offset, 16u);
}

TEST(Header, GetGolden) {
  Header h = base(MsgType::Get, 0);
  h.msg.get = {kHandle, 0x42, 4, 8, 1048576};
  Bytes golden = cat({kCommon,
                      {0x02, 0, 0, 0, 0, 0, 0, 0},
                      kWmd,
                      {0x42, 0, 0, 0, 0, 0, 0, 0},
                      {4, 0, 0, 0},
                      {8, 0, 0, 0},
                      {0, 0, 0x10, 0},
                      {0, 0, 0, 0}});
  ASSERT_EQ(golden.size(), kHeaderSize);
  EXPECT_EQ(encode(h), golden);
  Header d;
  ASSERT_EQ(decode_header(golden, d), 0);
  EXPECT_EQ(d.msg.get.return_wmd, kHandle);
  EXPECT_EQ(d.msg.get.match_bits, 0x42u);
  EXPECT_EQ(d.msg.get.ptl_index, 4u);
  EXPECT_EQ(d.msg.get.src_offset, 8u);
  EXPECT_EQ(d.msg.get.sink_length, 1048576u);
}

TEST(Header, AckGolden) {
  Header h = base(MsgType::Ack, 0);
  h.msg.ack = {kHandle, 0x99, 777};
  Bytes golden =
      cat({kCommon, {0, 0, 0, 0, 0, 0, 0, 0}, kWmd, {0x99, 0, 0, 0, 0, 0, 0, 0}, {0x09, 0x03, 0, 0}, Bytes(12, 0)});
  ASSERT_EQ(golden.size(), kHeaderSize);
  EXPECT_EQ(encode(h), golden);
  Header d;
  ASSERT_EQ(decode_header(golden, d), 0);
  EXPECT_EQ(d.msg.ack.dst_wmd, kHandle);
  EXPECT_EQ(d.msg.ack.match_bits, 0x99u);
  EXPECT_EQ(d.msg.ack.mlength, 777u);
}

TEST(Header, ReplyGolden) {
  Header h = base(MsgType::Reply, 3);
  h.msg.reply = {kHandle};
  Bytes golden = cat({kCommon, {0x03, 0, 0, 0, 0x03, 0, 0, 0}, kWmd, Bytes(24, 0)});
  ASSERT_EQ(golden.size(), kHeaderSize);
  EXPECT_EQ(encode(h), golden);
  Header d;
  ASSERT_EQ(decode_header(golden, d), 0);
  EXPECT_EQ(d.msg.reply.dst_wmd, kHandle);
}

TEST(Header, HelloGolden) {
  Header h = base(MsgType::Hello, 0);
  h.msg.hello = {0x0123456789abcdefULL, 3};
  Bytes golden = cat({kCommon,
                      {0x04, 0, 0, 0, 0, 0, 0, 0},
                      {0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01},
                      {3, 0, 0, 0},
                      Bytes(28, 0)});
  ASSERT_EQ(golden.size(), kHeaderSize);
  EXPECT_EQ(encode(h), golden);
  Header d;
  ASSERT_EQ(decode_header(golden, d), 0);
  EXPECT_EQ(d.msg.hello.incarnation, 0x0123456789abcdefULL);
  EXPECT_EQ(d.msg.hello.type, 3u);
}

// A classic NID never has its top byte set (ours would name a large address): refused.
TEST(Header, RefusesANidWhoseTopByteIsSet) {
  Bytes b = encode(base(MsgType::Put, 0));
  Header d;
  ASSERT_EQ(decode_header(b, d), 0);
  for (std::size_t at : {7u, 15u}) {  // the top bytes of dest_nid and src_nid (little-endian)
    Bytes bad = b;
    bad[at] = 12;
    EXPECT_EQ(decode_header(bad, d), -EPROTO) << at;
  }
}

TEST(Header, NoAckHandleIsAllOnes) {
  Header h = base(MsgType::Put, 0);
  h.msg.put = {WireHandle::none(), 0, 0, 0, 0};
  Bytes b = encode(h);
  for (int i = 32; i < 48; ++i) EXPECT_EQ(b[static_cast<std::size_t>(i)], 0xFF) << i;
}

TEST(Header, RejectsShortInputAndUnknownTypes) {
  Header h = base(MsgType::Put, 1);
  Bytes b = encode(h);
  Header d;
  EXPECT_EQ(decode_header(std::span(b.data(), 71), d), -EPROTO);
  EXPECT_EQ(decode_header({}, d), -EPROTO);
  b[24] = 5;
  EXPECT_EQ(decode_header(b, d), -EPROTO);
  b[24] = 1;
  b[27] = 0x80;
  EXPECT_EQ(decode_header(b, d), -EPROTO);
}

}  // namespace
}  // namespace lnet

namespace lnet {
namespace {

// The large-NID header (96 bytes): dest 2001:db8::1@tcp1 and src 10.0.0.1@tcp as struct
// lnet_nid (big-endian fields), then pids, type and length little-endian, then the PUT.
TEST(HeaderLarge, PutGolden) {
  Header h;
  h.dest_nid = *Nid::parse("2001:db8::1@tcp1");
  h.src_nid = *Nid::parse("10.0.0.1@tcp");
  h.dest_pid = 12345;
  h.src_pid = 12345;
  h.type = MsgType::Put;
  h.payload_length = 4096;
  h.msg.put = {WireHandle{0x1122334455667788ULL, 0x0102030405060708ULL}, 0xAABBCCDD00112233ULL, 0x55, 4, 8};
  const std::vector<std::uint8_t> golden = {
      12,   2,    0,    1,    0x20, 0x01, 0x0d, 0xb8, 0,    0, 0, 0, 0,    0,    0, 0, 0, 0, 0, 1,  // dest
      0,    2,    0,    0,    10,   0,    0,    1,    0,    0, 0, 0, 0,    0,    0, 0, 0, 0, 0, 0,  // src
      0x39, 0x30, 0,    0,    0x39, 0x30, 0,    0,    1,    0, 0, 0, 0x00, 0x10, 0, 0,              // pids, PUT, 4096
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 8,    7, 6, 5, 4,    3,    2, 1,              // ack_wmd
      0x33, 0x22, 0x11, 0x00, 0xDD, 0xCC, 0xBB, 0xAA, 0x55, 0, 0, 0, 0,    0,    0, 0,  // match bits, hdr_data
      4,    0,    0,    0,    8,    0,    0,    0};                                     // portal, offset
  ASSERT_EQ(golden.size(), kHeaderLargeSize);
  std::array<std::uint8_t, kHeaderLargeSize> out{};
  encode_header_large(h, out);
  EXPECT_EQ(std::vector<std::uint8_t>(out.begin(), out.end()), golden);
  Header d;
  ASSERT_EQ(decode_header_large(golden, d), 0);
  EXPECT_EQ(d.dest_nid, h.dest_nid);
  EXPECT_EQ(d.src_nid, h.src_nid);
  EXPECT_EQ(d.src_pid, 12345u);
  EXPECT_EQ(d.type, MsgType::Put);
  EXPECT_EQ(d.payload_length, 4096u);
  EXPECT_EQ(d.msg.put.match_bits, 0xAABBCCDD00112233ULL);
  EXPECT_EQ(d.msg.put.hdr_data, 0x55u);
  EXPECT_EQ(d.msg.put.offset, 8u);
}

TEST(HeaderLarge, RefusesBadNidsTypesAndShortInput) {
  Header h;
  h.dest_nid = *Nid::parse("2001:db8::1@tcp");
  h.src_nid = *Nid::parse("2001:db8::2@tcp");
  h.type = MsgType::Ack;
  std::array<std::uint8_t, kHeaderLargeSize> out{};
  encode_header_large(h, out);
  Header d;
  ASSERT_EQ(decode_header_large(out, d), 0);
  EXPECT_EQ(d.src_nid, h.src_nid);
  EXPECT_EQ(decode_header_large(std::span<const std::uint8_t>(out.data(), kHeaderLargeSize - 1), d), -EPROTO);
  auto bad = out;
  bad[0] = 4;  // nid_size 4: not carried
  EXPECT_EQ(decode_header_large(bad, d), -EPROTO);
  bad = out;
  bad[48] = 9;  // type
  EXPECT_EQ(decode_header_large(bad, d), -EPROTO);
}

}  // namespace
}  // namespace lnet
