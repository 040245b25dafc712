// Large NIDs (struct lnet_nid, IPv6): text, the 20-byte wire form with golden bytes,
// one value per address, the classic forms refusing what does not fit.
#include <gtest/gtest.h>

#include <lnet/nid.hpp>

#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace lnet {
namespace {

std::vector<std::uint8_t> wire(Nid n) {
  std::uint8_t b[Nid::kWireBytes];
  unsigned len = n.to_wire(b);
  return {b, b + len};
}

TEST(LargeNid, Ipv6TextRoundTripsInTheCompressedForm) {
  auto n = Nid::parse("2001:db8::1@tcp");
  ASSERT_TRUE(n) << n.message();
  EXPECT_TRUE(n->is_large());
  EXPECT_EQ(n->nid_size(), 12u);
  EXPECT_EQ(n->net(), NetId::make(kSockLnd, 0));
  EXPECT_EQ(n->to_string(), "2001:db8::1@tcp");
  EXPECT_EQ(Nid::parse("2001:0DB8:0:0:0:0:0:1@tcp0")->to_string(), "2001:db8::1@tcp");
  EXPECT_EQ(Nid::parse("fe80::a:b@o2ib3")->to_string(), "fe80::a:b@o2ib3");
  EXPECT_EQ(Nid::parse("::1@tcp")->to_string(), "::1@tcp");
  EXPECT_EQ(Nid::parse("2001:db8::7")->to_string(), "2001:db8::7@tcp") << "a bare address is on tcp";
  auto pid = ProcessId::parse("12345-2001:db8::1@tcp1");
  ASSERT_TRUE(pid) << pid.message();
  EXPECT_EQ(pid->pid, 12345u);
  EXPECT_EQ(pid->to_string(), "12345-2001:db8::1@tcp1");
}

TEST(LargeNid, EqualAddressesAreEqualValues) {
  Nid a = *Nid::parse("2001:db8::1@tcp");
  Nid b = *Nid::parse("2001:db8:0::1@tcp");
  Nid c = *Nid::parse("2001:db8::2@tcp");
  Nid d = *Nid::parse("2001:db8::1@tcp1");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.value(), b.value());
  EXPECT_NE(a, c);
  EXPECT_NE(a, d) << "same address, another net";
  EXPECT_EQ(a.addr(), d.addr()) << "one table entry per address";
  EXPECT_EQ(std::hash<Nid>{}(a), std::hash<Nid>{}(b));
  // Entered from many threads at once: still one value per address.
  std::vector<std::thread> ts;
  std::vector<std::uint64_t> seen(8);
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] { seen[t] = Nid::parse("2001:db8:77::" + std::to_string(1) + "@tcp")->value(); });
  for (auto& t : ts) t.join();
  EXPECT_EQ(std::set<std::uint64_t>(seen.begin(), seen.end()).size(), 1u);
}

TEST(LargeNid, ClassicNidsAreUnchanged) {
  Nid n = *Nid::parse("192.168.1.2@tcp1");
  EXPECT_FALSE(n.is_large());
  EXPECT_EQ(n.nid_size(), 0u);
  EXPECT_EQ(n.value(), 0x00020001C0A80102ULL);
  EXPECT_FALSE(Nid::any().is_large());
  EXPECT_EQ(Nid::any().net(), NetId::any());
  EXPECT_TRUE(Nid::fits_nid4(n.value()));
  EXPECT_TRUE(Nid::fits_nid4(Nid::any().value()));
  EXPECT_FALSE(Nid::fits_nid4(Nid::parse("2001:db8::1@tcp")->value()));
  std::uint8_t a[16];
  EXPECT_EQ(n.addr_bytes(a), 4u);
  EXPECT_EQ(std::vector<std::uint8_t>(a, a + 4), (std::vector<std::uint8_t>{192, 168, 1, 2}));
}

// Golden bytes (lnet-facts §1.5): size, type, big-endian net number, big-endian address.
TEST(LargeNid, WireFormGoldenBytes) {
  EXPECT_EQ(wire(*Nid::parse("2001:db8::1@tcp1")),
            (std::vector<std::uint8_t>{12, 2, 0, 1, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
  // A classic NID: size 0, its first 8 bytes the lnet_nid_t in big-endian order.
  EXPECT_EQ(wire(*Nid::parse("192.168.1.2@tcp1")), (std::vector<std::uint8_t>{0, 2, 0, 1, 192, 168, 1, 2}));
  EXPECT_EQ(wire(*Nid::parse("7@gni300")), (std::vector<std::uint8_t>{0, 13, 0x01, 0x2c, 0, 0, 0, 7}));
  EXPECT_EQ(wire(Nid::any()), std::vector<std::uint8_t>(20, 0xFF));
}

TEST(LargeNid, WireFormRoundTrips) {
  for (const char* s : {"2001:db8::1@tcp", "fe80::1234:5678:9abc:def0@o2ib2", "10.0.0.1@tcp", "0@lo", "5@mpi"}) {
    Nid n = *Nid::parse(s);
    auto b = wire(n);
    std::size_t used = 0;
    auto back = Nid::from_wire(b.data(), b.size(), &used);
    ASSERT_TRUE(back) << s << ": " << back.message();
    EXPECT_EQ(*back, n) << s;
    EXPECT_EQ(used, b.size()) << s;
  }
  std::uint8_t any[20];
  std::memset(any, 0xFF, sizeof any);
  EXPECT_EQ(*Nid::from_wire(any, sizeof any), Nid::any());
}

TEST(LargeNid, BadWireFormsAreRefusedNamingTheFault) {
  std::uint8_t b[20] = {12, 2, 0, 0};
  auto r = Nid::from_wire(b, 12);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), -EPROTO);
  EXPECT_NE(r.message().find("nid_size 12 in 12 bytes"), std::string::npos) << r.message();
  b[0] = 4;
  r = Nid::from_wire(b, 20);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("nid_size 4"), std::string::npos) << r.message();
  EXPECT_FALSE(Nid::from_wire(b, 7));
  b[0] = 0xFF;
  EXPECT_FALSE(Nid::from_wire(b, 8)) << "LNET_ANY_NID cut short";
}

TEST(LargeNid, BadTextIsRefusedNamingTheFault) {
  auto r = Nid::parse("2001:db8::1::2@tcp");
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("is not an IPv6 address"), std::string::npos) << r.message();
  r = Nid::parse("2001:db8::1@gni");
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("gni takes no IPv6 address"), std::string::npos) << r.message();
  EXPECT_FALSE(Nid::parse("2001:db8::1@lo"));
  EXPECT_FALSE(Nid::parse("2001:db8:::1@tcp"));
  EXPECT_FALSE(Nid::parse("12345:2001:db8::1:2:3:4:5@tcp"));
  EXPECT_FALSE(Nid::parse("2001:db8::g@tcp"));
}

TEST(LargeNid, WireOrderIsTheKernelsMemcmp) {
  Nid v4 = *Nid::parse("10.0.0.1@tcp"), v4b = *Nid::parse("10.0.0.2@tcp");
  Nid v6 = *Nid::parse("2001:db8::1@tcp"), v6b = *Nid::parse("2001:db8::2@tcp");
  EXPECT_LT(Nid::wire_compare(v4, v4b), 0);
  EXPECT_LT(Nid::wire_compare(v4, v6), 0) << "nid_size 0 before 12";
  EXPECT_LT(Nid::wire_compare(v6, v6b), 0);
  EXPECT_EQ(Nid::wire_compare(v6, v6), 0);
}

}  // namespace
}  // namespace lnet
