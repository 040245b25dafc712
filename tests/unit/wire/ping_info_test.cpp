// Ping info: golden bytes, both byte orders, and every validation rule.
#include <gtest/gtest.h>

#include <vector>

#include <lnet/wire.hpp>

namespace lnet {
namespace {

using Bytes = std::vector<std::uint8_t>;

PingInfo sample() {
  PingInfo p;
  p.features = kPingFeatNiStatus | kPingFeatMultiRail | kPingFeatRteDisabled;
  p.pid = 12345;
  p.nis = {NiStatus{Nid::lo(), 1, 0}, NiStatus{*Nid::parse("10.0.0.1@tcp"), kNiStatusUp, 0}};
  return p;
}

const Bytes kGolden = {
    0x67, 0x6e, 0x69, 0x70, 0x0e, 0, 0,    0, 0x39, 0x30, 0,    0,    0x02, 0, 0, 0,  // magic, features, pid, nnis
    0,    0,    0,    0,    0,    0, 0x09, 0, 0x01, 0,    0,    0,    0,    0, 0, 0,  // 0@lo, seq 1
    0x01, 0,    0,    0x0a, 0,    0, 0x02, 0, 0xde, 0xc0, 0xaa, 0x15, 0,    0, 0, 0,  // 10.0.0.1@tcp, UP
};

TEST(PingInfo, EncodesToGoldenBytes) { EXPECT_EQ(encode_ping_info(sample()), kGolden); }

TEST(PingInfo, DecodesGoldenBytes) {
  auto p = decode_ping_info(kGolden);
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(p->features, 0x0eu);
  EXPECT_EQ(p->pid, 12345u);
  EXPECT_EQ(p->nis, sample().nis);
}

TEST(PingInfo, DecodesTheOtherByteOrder) {
  Bytes be = kGolden;
  auto swap4 = [&](std::size_t off) {
    std::reverse(be.begin() + static_cast<long>(off), be.begin() + static_cast<long>(off) + 4);
  };
  auto swap8 = [&](std::size_t off) {
    std::reverse(be.begin() + static_cast<long>(off), be.begin() + static_cast<long>(off) + 8);
  };
  for (std::size_t off : {0u, 4u, 8u, 12u}) swap4(off);
  for (std::size_t e = 16; e < be.size(); e += 16) {
    swap8(e);
    swap4(e + 8);
    swap4(e + 12);
  }
  auto p = decode_ping_info(be);
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(p->nis, sample().nis);
  EXPECT_EQ(p->pid, 12345u);
}

TEST(PingInfo, IgnoresTrailingSpace) {
  Bytes b = kGolden;
  b.resize(272, 0);
  EXPECT_TRUE(decode_ping_info(b));
}

TEST(PingInfo, RejectsBadMagic) {
  Bytes b = kGolden;
  b[0] = 0;
  auto p = decode_ping_info(b);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.code(), -EPROTO);
  EXPECT_NE(p.message().find("magic"), std::string::npos);
}

TEST(PingInfo, RejectsAClassicEntryWhoseTopByteIsSet) {
  Bytes b = kGolden;
  b[16 + 16 + 7] = 12;  // entry 1's NID, top byte (this host's order: little-endian)
  auto p = decode_ping_info(b);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.code(), -EPROTO);
  EXPECT_NE(p.message().find("entry 1 is not a classic NID"), std::string::npos) << p.message();
}

TEST(PingInfo, RejectsMissingNiStatusFeature) {
  Bytes b = kGolden;
  b[4] = kPingFeatMultiRail;
  auto p = decode_ping_info(b);
  ASSERT_FALSE(p);
  EXPECT_NE(p.message().find("NI_STATUS"), std::string::npos);
}

TEST(PingInfo, RejectsBadInterfaceCounts) {
  Bytes b = kGolden;
  b[12] = 0;
  EXPECT_EQ(decode_ping_info(b).code(), -EPROTO);
  b[12] = 3;
  EXPECT_EQ(decode_ping_info(b, 2).code(), -EPROTO);  // above max_interfaces
}

TEST(PingInfo, TruncatedReportsTheSizeNeeded) {
  Bytes b = kGolden;
  b.resize(40);
  std::size_t needed = 0;
  auto p = decode_ping_info(b, kDefaultMaxInterfaces, &needed);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.code(), -E2BIG);
  EXPECT_EQ(needed, 48u);
  b.resize(10);
  EXPECT_EQ(decode_ping_info(b).code(), -EPROTO);
}

TEST(PingInfo, FirstEntryMustBeLoopback) {
  PingInfo p = sample();
  std::swap(p.nis[0], p.nis[1]);
  auto r = decode_ping_info(encode_ping_info(p));
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("not 0@lo"), std::string::npos);
}

TEST(PingInfo, LargeAddressBlockIsSizeChecked) {
  PingInfo p = sample();
  p.features |= kPingFeatLargeAddr;
  p.nis[0].msg_size = 64;  // 48 bytes of nid4 entries + 16 of large ones
  Bytes b = encode_ping_info(p);
  b.resize(64, 0);
  EXPECT_TRUE(decode_ping_info(b));
  std::size_t needed = 0;
  b.resize(56);
  EXPECT_EQ(decode_ping_info(b, kDefaultMaxInterfaces, &needed).code(), -E2BIG);
  EXPECT_EQ(needed, 64u);
  p.nis[0].msg_size = 30;
  EXPECT_EQ(decode_ping_info(encode_ping_info(p)).code(), -EPROTO);
}

}  // namespace
}  // namespace lnet
