// Ping info: golden bytes, both byte orders, and every validation rule.
#include <gtest/gtest.h>

#include <algorithm>
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

// LARGE_ADDR (facts §4.1): after the classic entries, one per large NID: status, then
// struct lnet_nid (NID_BYTES), rounded to 4; entry 0's msg_size is the total size.
TEST(PingInfo, LargeEntriesGoldenBytes) {
  PingInfo p = sample();
  p.features |= kPingFeatPrimaryLarge;
  p.large_nis = {NiStatus{*Nid::parse("2001:db8::1@tcp"), kNiStatusUp, 0},
                 NiStatus{*Nid::parse("10.0.0.2@tcp1"), kNiStatusDown, 0}};
  Bytes golden = kGolden;
  golden[4] = 0x6e;      // features + LARGE_ADDR + PRIMARY_LARGE
  golden[16 + 12] = 84;  // entry 0's msg_size: 48 + 24 + 12
  Bytes large = {0xde, 0xc0, 0xaa, 0x15, 12, 2, 0,    0,    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0,  0, 0, 0,
                 0,    0,    0,    0,    0,  1, 0xce, 0xfa, 0xad, 0xde, 0,    2,    0, 1, 10, 0, 0, 2};
  golden.insert(golden.end(), large.begin(), large.end());
  EXPECT_EQ(encode_ping_info(p), golden);
  EXPECT_EQ(p.wire_size(), 84u);
  auto r = decode_ping_info(golden);
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->large_nis.size(), 2u);
  EXPECT_EQ(r->large_nis[0].nid, p.large_nis[0].nid);
  EXPECT_EQ(r->large_nis[0].status, kNiStatusUp);
  EXPECT_EQ(r->large_nis[1].nid, p.large_nis[1].nid);
  EXPECT_EQ(r->large_nis[1].status, kNiStatusDown);
  EXPECT_EQ(r->nis.size(), 2u);
  EXPECT_TRUE(r->features & kPingFeatPrimaryLarge);
}

TEST(PingInfo, LargeEntriesAreSizeChecked) {
  PingInfo p = sample();
  p.large_nis = {NiStatus{*Nid::parse("2001:db8::1@tcp"), kNiStatusUp, 0}};
  Bytes b = encode_ping_info(p);
  ASSERT_EQ(b.size(), 72u);
  std::size_t needed = 0;
  Bytes cut(b.begin(), b.begin() + 64);
  EXPECT_EQ(decode_ping_info(cut, kDefaultMaxInterfaces, &needed).code(), -E2BIG);
  EXPECT_EQ(needed, 72u);
  Bytes bad = b;
  bad[16 + 12] = 30;  // a total size that is not a multiple of 4
  EXPECT_EQ(decode_ping_info(bad).code(), -EPROTO);
  bad = b;
  bad[16 + 12] = 68;  // the large entry (24 bytes from 48) overflows a stated 68
  auto r = decode_ping_info(bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("large entry 0 overflows the stated size 68"), std::string::npos) << r.message();
  bad = b;
  bad[48 + 4] = 7;  // a nid_size that is not carried
  r = decode_ping_info(bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("large entry 0: a NID of nid_size 7"), std::string::npos) << r.message();
  bad = b;
  std::fill(bad.begin() + 52, bad.begin() + 72, 0xFF);  // LNET_ANY_NID
  r = decode_ping_info(bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("large entry 0 is LNET_ANY_NID"), std::string::npos) << r.message();
}

}  // namespace
}  // namespace lnet
