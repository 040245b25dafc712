// ksocklnd wire structures against golden bytes written from the layout (facts §3).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>

#include "lnd/socket/sock_wire.hpp"

namespace lnet::sock {
namespace {

using Bytes = std::vector<std::uint8_t>;
const Nid kA = Nid(0x00020000C0A80101ULL);  // 192.168.1.1@tcp
const Nid kB = Nid(0x00020000C0A80102ULL);  // 192.168.1.2@tcp

TEST(ConnReq, GoldenBytes) {
  std::array<std::uint8_t, kConnReqSize> out{};
  encode_connreq(kB, out);
  Bytes golden = {0x00, 0x71, 0xce, 0xac, 0x01, 0, 0, 0, 0x02, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00};
  EXPECT_EQ(Bytes(out.begin(), out.end()), golden);
  bool flip = true;
  EXPECT_EQ(classify_first_word(std::span<const std::uint8_t, 4>(out.data(), 4), &flip), FirstWord::Acceptor);
  EXPECT_FALSE(flip);
  auto r = decode_connreq(out, false);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->target, kB);
  EXPECT_EQ(r->version, 1u);
}

TEST(ConnReq, ByteSwappedAndBadVersions) {
  Bytes be = {0xac, 0xce, 0x71, 0x00, 0, 0, 0, 1, 0x00, 0x02, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x02};
  bool flip = false;
  EXPECT_EQ(classify_first_word(std::span<const std::uint8_t, 4>(be.data(), 4), &flip), FirstWord::Acceptor);
  EXPECT_TRUE(flip);
  auto r = decode_connreq(std::span<const std::uint8_t, kConnReqSize>(be.data(), kConnReqSize), true);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->target, kB);
  be[7] = 2;
  EXPECT_EQ(decode_connreq(std::span<const std::uint8_t, kConnReqSize>(be.data(), kConnReqSize), true).code(),
            -EPROTONOSUPPORT);
}

TEST(FirstWord, TellsProtocolsApart) {
  bool flip;
  std::uint8_t proto[4] = {0x63, 0x69, 0x72, 0x45};  // LNET_PROTO_MAGIC, little-endian
  EXPECT_EQ(classify_first_word(proto, &flip), FirstWord::Proto);
  std::uint8_t v1[4] = {0xed, 0x0d, 0xbc, 0xee};
  EXPECT_EQ(classify_first_word(v1, &flip), FirstWord::TcpV1);
  std::uint8_t junk[4] = {'G', 'E', 'T', ' '};
  EXPECT_EQ(classify_first_word(junk, &flip), FirstWord::Unknown);
}

Hello sample() {
  Hello h;
  h.version = kProtoV3;
  h.src_nid = kA;
  h.dst_nid = kB;
  h.src_pid = 12345;
  h.dst_pid = 12345;
  h.src_incarnation = 0x1122334455667788ULL;
  h.ctype = ConnType::BulkIn;
  return h;
}

TEST(Hello, V3GoldenBytes) {
  Bytes golden = {0x63, 0x69, 0x72, 0x45, 3,    0,    0,    0,     // magic, version
                  0x01, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00,  // src nid
                  0x02, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00,  // dst nid
                  0x39, 0x30, 0,    0,    0x39, 0x30, 0,    0,     // pids
                  0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // src incarnation
                  0,    0,    0,    0,    0,    0,    0,    0,     // dst incarnation
                  2,    0,    0,    0,    0,    0,    0,    0};    // BULK_IN, no IPs
  EXPECT_EQ(encode_hello(sample()), golden);
  auto p = decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize>(golden.data(), 8));
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(p->version, 3u);
  EXPECT_FALSE(p->flip);
  std::uint32_t nips = 9;
  auto h = decode_hello_body(*p, std::span(golden.data() + 8, kHelloV2BodySize), &nips);
  ASSERT_TRUE(h) << h.message();
  EXPECT_EQ(nips, 0u);
  EXPECT_EQ(h->src_nid, kA);
  EXPECT_EQ(h->dst_nid, kB);
  EXPECT_EQ(h->src_pid, 12345u);
  EXPECT_EQ(h->src_incarnation, 0x1122334455667788ULL);
  EXPECT_EQ(h->ctype, ConnType::BulkIn);
}

TEST(Hello, V2FromABigEndianSenderWithIps) {
  Hello h = sample();
  h.version = kProtoV2;
  h.ips = {0x0a000001, 0x0a000002};
  Bytes le = encode_hello(h);
  // Byte-swap every field, as a big-endian kernel would have sent them.
  Bytes be = le;
  auto sw = [&](std::size_t off, std::size_t n) {
    std::reverse(be.begin() + static_cast<long>(off), be.begin() + static_cast<long>(off + n));
  };
  for (std::size_t off : {0u, 4u, 24u, 28u, 48u, 52u, 56u, 60u}) sw(off, 4);
  for (std::size_t off : {8u, 16u, 32u, 40u}) sw(off, 8);
  auto p = decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize>(be.data(), 8));
  ASSERT_TRUE(p) << p.message();
  EXPECT_TRUE(p->flip);
  EXPECT_EQ(p->version, 2u);
  std::uint32_t nips = 0;
  auto d = decode_hello_body(*p, std::span(be.data() + 8, kHelloV2BodySize), &nips);
  ASSERT_TRUE(d) << d.message();
  ASSERT_EQ(nips, 2u);
  decode_hello_ips(*p, std::span(be.data() + 56, 8), *d);
  EXPECT_EQ(d->ips, h.ips);
  EXPECT_EQ(d->src_nid, kA);
  EXPECT_EQ(d->ctype, ConnType::BulkIn);
}

TEST(Hello, V1LnetHeaderForm) {
  Hello h = sample();
  h.version = kProtoV1;
  h.ctype = ConnType::Control;
  Bytes b = encode_hello(h);
  ASSERT_EQ(b.size(), 72u);
  EXPECT_EQ(Bytes(b.begin(), b.begin() + 8), (Bytes{0xed, 0x0d, 0xbc, 0xee, 1, 0, 0, 0}));
  EXPECT_EQ(b[24], 4) << "type HELLO";
  auto p = decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize>(b.data(), 8));
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(p->version, kProtoV1);
  std::uint32_t nips = 0;
  auto d = decode_hello_body(*p, std::span(b.data() + 8, kHelloV1BodySize), &nips);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->src_nid, kA);
  EXPECT_EQ(d->src_pid, 12345u);
  EXPECT_EQ(d->src_incarnation, h.src_incarnation);
  EXPECT_EQ(d->ctype, ConnType::Control);
}

TEST(Hello, Rejects) {
  Bytes b = encode_hello(sample());
  Bytes bad = b;
  bad[4] = 9;
  EXPECT_EQ(decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize>(bad.data(), 8)).code(), -EPROTO);
  bad = b;
  bad[0] = 0;
  EXPECT_EQ(decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize>(bad.data(), 8)).code(), -EPROTO);
  auto p = *decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize>(b.data(), 8));
  std::uint32_t nips;
  bad = b;
  bad[52] = 17;  // too many IPs
  EXPECT_FALSE(decode_hello_body(p, std::span(bad.data() + 8, kHelloV2BodySize), &nips));
  bad = b;
  bad[48] = 7;  // no such connection type
  EXPECT_FALSE(decode_hello_body(p, std::span(bad.data() + 8, kHelloV2BodySize), &nips));
  bad = b;
  std::fill(bad.begin() + 8, bad.begin() + 16, 0xFF);  // from ANY
  EXPECT_FALSE(decode_hello_body(p, std::span(bad.data() + 8, kHelloV2BodySize), &nips));
  EXPECT_FALSE(decode_hello_body(p, std::span(b.data() + 8, 10), &nips)) << "short";
}

// HELLO V4 (IPv6 connections): the V3 fields with 20-byte NIDs, nips always 0: 80 bytes.
TEST(Hello, V4GoldenBytes) {
  Hello h = sample();
  h.version = kProtoV4;
  h.src_nid = *Nid::parse("2001:db8::1@tcp");
  h.dst_nid = *Nid::parse("2001:db8::2@tcp");
  Bytes golden = {0x63, 0x69, 0x72, 0x45, 4,    0,    0,    0,                                         // magic, version
                  12,   2,    0,    0,    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,  // src nid
                  12,   2,    0,    0,    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,  // dst nid
                  0x39, 0x30, 0,    0,    0x39, 0x30, 0,    0,                                         // pids
                  0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // src incarnation
                  0,    0,    0,    0,    0,    0,    0,    0,     // dst incarnation
                  2,    0,    0,    0,    0,    0,    0,    0};    // BULK_IN, no IPs
  ASSERT_EQ(golden.size(), 80u);
  EXPECT_EQ(encode_hello(h), golden);
  auto p = decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize>(golden.data(), 8));
  ASSERT_TRUE(p) << p.message();
  ASSERT_EQ(hello_body_size(*p), kHelloV4BodySize);
  std::uint32_t nips = 9;
  auto d = decode_hello_body(*p, std::span(golden.data() + 8, kHelloV4BodySize), &nips);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(nips, 0u);
  EXPECT_EQ(d->src_nid, h.src_nid);
  EXPECT_EQ(d->dst_nid, h.dst_nid);
  EXPECT_EQ(d->src_incarnation, 0x1122334455667788ULL);
  EXPECT_EQ(d->ctype, ConnType::BulkIn);
  // A V4 HELLO may carry classic NIDs (nid_size 0) too.
  h.src_nid = kA;
  d = decode_hello_body(*p, std::span(encode_hello(h).data() + 8, kHelloV4BodySize), &nips);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->src_nid, kA);
}

TEST(Hello, V4Rejects) {
  Hello h = sample();
  h.version = kProtoV4;
  h.src_nid = *Nid::parse("2001:db8::1@tcp");
  Bytes b = encode_hello(h);
  auto p = *decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize>(b.data(), 8));
  std::uint32_t nips;
  Bytes bad = b;
  bad[8] = 5;  // a nid_size not carried
  auto r = decode_hello_body(p, std::span(bad.data() + 8, kHelloV4BodySize), &nips);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("its source"), std::string::npos) << r.message();
  bad = b;
  bad[76] = 1;  // nips
  r = decode_hello_body(p, std::span(bad.data() + 8, kHelloV4BodySize), &nips);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("V4 has no IP list"), std::string::npos) << r.message();
  EXPECT_FALSE(decode_hello_body(p, std::span(b.data() + 8, kHelloV2BodySize), &nips)) << "short";
}

TEST(ConnReq, V2GoldenBytes) {
  std::array<std::uint8_t, kConnReqV2Size> out{};
  Nid target = *Nid::parse("2001:db8::2@tcp");
  encode_connreq_v2(target, out);
  Bytes golden = {0x00, 0x71, 0xce, 0xac, 0x02, 0, 0, 0, 12, 2, 0, 0, 0x20, 0x01,
                  0x0d, 0xb8, 0,    0,    0,    0, 0, 0, 0,  0, 0, 0, 0,    2};
  EXPECT_EQ(Bytes(out.begin(), out.end()), golden);
  auto r = decode_connreq_v2(out, false);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->version, 2u);
  EXPECT_EQ(r->target, target);
  out[8] = 7;
  EXPECT_EQ(decode_connreq_v2(out, false).code(), -EPROTO);
  out[4] = 1;
  EXPECT_EQ(decode_connreq_v2(out, false).code(), -EPROTONOSUPPORT);
}

TEST(MsgHdr, GoldenNoopAndLnet) {
  std::array<std::uint8_t, kMsgHdrSize> out{};
  MsgHdr noop;
  noop.type = kMsgNoop;
  noop.zc_ack = kKeepalivePing;
  encode_msg_hdr(noop, out);
  Bytes golden = {0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(Bytes(out.begin(), out.end()), golden);
  MsgHdr d;
  ASSERT_EQ(decode_msg_hdr(out, false, d), 0);
  EXPECT_EQ(d.type, kMsgNoop);
  EXPECT_EQ(d.zc_ack, kKeepalivePing);
  MsgHdr lnet;
  lnet.zc_req = 0x22;
  lnet.csum = 0xdeadbeef;
  encode_msg_hdr(lnet, out);
  golden = {0xc1, 0, 0, 0, 0xef, 0xbe, 0xad, 0xde, 0x22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(Bytes(out.begin(), out.end()), golden);
  ASSERT_EQ(decode_msg_hdr(out, false, d), 0);
  EXPECT_EQ(d.zc_req, 0x22u);
  out[0] = 0xc2;
  EXPECT_EQ(decode_msg_hdr(out, false, d), -EPROTO);
}

TEST(MsgHdr, FlippedFromABigEndianSender) {
  Bytes be = {0, 0, 0, 0xc1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0};
  MsgHdr d;
  ASSERT_EQ(decode_msg_hdr(std::span<const std::uint8_t, kMsgHdrSize>(be.data(), kMsgHdrSize), true, d), 0);
  EXPECT_EQ(d.type, kMsgLnet);
  EXPECT_EQ(d.zc_req, 5u);
}

TEST(Crc32, MatchesTheKernelsCrc32Le) {
  // crc32_le(~0, "123456789") without the final inversion = ~0xCBF43926.
  EXPECT_EQ(crc32_le(~0U, "123456789", 9), ~0xCBF43926U);
}

TEST(ConnType, Inverse) {
  EXPECT_EQ(inverse(ConnType::BulkIn), ConnType::BulkOut);
  EXPECT_EQ(inverse(ConnType::BulkOut), ConnType::BulkIn);
  EXPECT_EQ(inverse(ConnType::Control), ConnType::Control);
  EXPECT_EQ(inverse(ConnType::Any), ConnType::Any);
}

}  // namespace
}  // namespace lnet::sock
