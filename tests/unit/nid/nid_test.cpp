// NIDs, nets and process ids print and parse exactly like the real LNet.
#include <gtest/gtest.h>

#include <lnet/nid.hpp>

namespace lnet {
namespace {

TEST(NetId, PrintsKnownTypes) {
  EXPECT_EQ(NetId::make(kSockLnd, 0).to_string(), "tcp");
  EXPECT_EQ(NetId::make(kSockLnd, 1).to_string(), "tcp1");
  EXPECT_EQ(NetId::make(kO2ibLnd, 3).to_string(), "o2ib3");
  EXPECT_EQ(NetId::make(kLoLnd, 0).to_string(), "lo");
  EXPECT_EQ(NetId::make(kMpiLnd, 0).to_string(), "mpi");
  EXPECT_EQ(NetId::make(kMpiLnd, 7).to_string(), "mpi7");
  EXPECT_EQ(NetId::any().to_string(), "<?>");
  EXPECT_EQ(NetId::make(200, 4).to_string(), "<200:4>");
}

TEST(NetId, ParsesAndNormalises) {
  EXPECT_EQ(*NetId::parse("tcp"), NetId::make(kSockLnd, 0));
  EXPECT_EQ(*NetId::parse("tcp0"), NetId::make(kSockLnd, 0));
  EXPECT_EQ(*NetId::parse("tcp65535"), NetId::make(kSockLnd, 65535));
  EXPECT_EQ(*NetId::parse("  o2ib1 "), NetId::make(kO2ibLnd, 1));
  EXPECT_EQ(*NetId::parse("bxi3f2"), NetId::make(kBxi3Lnd, 2));
  EXPECT_EQ(NetId::parse("tcp0")->value(), 0x00020000u);
}

TEST(NetId, RejectsBadStringsNamingTheFault) {
  auto r = NetId::parse("foo1");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), -EINVAL);
  EXPECT_NE(r.message().find("unknown network type 'foo1'"), std::string::npos) << r.message();
  r = NetId::parse("tcp65536");
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("'65536'"), std::string::npos) << r.message();
  r = NetId::parse("lo1");
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("lo takes no network number"), std::string::npos) << r.message();
  EXPECT_FALSE(NetId::parse(""));
  EXPECT_FALSE(NetId::parse("tcpx"));
  EXPECT_FALSE(NetId::parse("tcp-1"));
}

TEST(Nid, WorkedExampleFromTheFacts) {
  auto n = Nid::parse("192.168.1.2@tcp1");
  ASSERT_TRUE(n) << n.message();
  EXPECT_EQ(n->value(), 0x00020001C0A80102ULL);
  EXPECT_EQ(n->net(), NetId(0x00020001));
  EXPECT_EQ(n->addr(), 0xC0A80102u);
  EXPECT_EQ(n->to_string(), "192.168.1.2@tcp1");
}

TEST(Nid, Loopback) {
  EXPECT_EQ(Nid::lo().value(), 0x0009000000000000ULL);
  EXPECT_EQ(Nid::lo().to_string(), "0@lo");
  EXPECT_EQ(*Nid::parse("0@lo"), Nid::lo());
}

// What sites write, and the NID LNet's parser makes of it.
TEST(Nid, NormalisedAsLnetReadsThem) {
  struct Case {
    const char* text;
    const char* nid;
  } cases[] = {
      {"0x10@gni", "16@gni"},
      {"0X1f@gni3", "31@gni3"},
      {"0xffffffff@kfi", "4294967295@kfi"},
      {"0x0@ptlf", "0@ptlf"},
      {"007@gni", "7@gni"},
      {"0x2A@mpi", "42@mpi"},
      {"1@lo", "0@lo"},
      {"0x5@lo", "0@lo"},
      {"anything@lo", "0@lo"},
      {"010.000.000.001@tcp", "10.0.0.1@tcp"},
      {"10.0.0.1@tcp0", "10.0.0.1@tcp"},
      {"10.0.0.1@o2ib007", "10.0.0.1@o2ib7"},
      {" 10.0.0.1@tcp1 ", "10.0.0.1@tcp1"},
  };
  for (const auto& c : cases) {
    auto n = Nid::parse(c.text);
    ASSERT_TRUE(n) << c.text << ": " << n.message();
    EXPECT_EQ(n->to_string(), c.nid) << c.text;
  }
  for (const char* bad : {"0x@gni", "0x100000000@gni", "0xg@gni", "4294967296@gni", "-1@gni", "+1@gni", "0x10@tcp"})
    EXPECT_FALSE(Nid::parse(bad)) << bad;
}

TEST(Nid, RoundTrips) {
  for (const char* s : {"10.0.0.1@tcp", "255.255.255.255@o2ib65535", "5@mpi", "0@mpi3", "4294967295@gni", "1.2.3.4@efa",
                        "7@kfi", "192.168.1.2@mpi", "127.0.0.2@mpi1"}) {
    auto n = Nid::parse(s);
    ASSERT_TRUE(n) << s << ": " << n.message();
    EXPECT_EQ(n->to_string(), s);
  }
}

// The mpi net carries application ranks (numbers) and proxies' static <IPv4>@mpi NIDs.
TEST(Nid, MpiAddressesAboveTwoToThe24ArePrintedAsIpv4) {
  EXPECT_EQ(Nid::parse("16777215@mpi")->to_string(), "16777215@mpi");
  EXPECT_EQ(Nid::parse("16777216@mpi")->to_string(), "1.0.0.0@mpi");
  EXPECT_EQ(Nid::parse("10.0.0.1@mpi")->addr(), 0x0a000001u);
  auto low = Nid::parse("0.0.0.5@mpi");
  ASSERT_FALSE(low);
  EXPECT_NE(low.message().find("below 1.0.0.0"), std::string::npos) << low.message();
}

// An MPI network of a type the kernel names (docs/design/mpi-net-type.md): its NIDs are
// written and read as the kernel writes and reads that type's, a node's <IPv4> address
// too (a number on gni, dotted on gip), so that a NID copied from one side works on the
// other.
TEST(Nid, MpiNetworksOfTheKernelsTypesAreWrittenAsTheKernelWritesThem) {
  for (std::uint32_t t : {kMpiLnd, kGniLnd, kGipLnd, kPtl4Lnd, kKfiLnd, kEfaLnd, kBxi3Lnd})
    EXPECT_TRUE(mpi_net_type(t)) << t;
  for (std::uint32_t t : {kSockLnd, kO2ibLnd, kLoLnd, 17u, 65u}) EXPECT_FALSE(mpi_net_type(t)) << t;
  NetId gni = *NetId::parse("gni"), gip3 = *NetId::parse("gip3");
  EXPECT_EQ(Nid::make(gni, 0x0A5A0015).to_string(), "173670421@gni");  // lnetd's 10.90.0.21
  EXPECT_EQ(Nid::make(gni, 5).to_string(), "5@gni");                   // rank 5
  EXPECT_EQ(Nid::make(gip3, 5).to_string(), "0.0.0.5@gip3");
  EXPECT_EQ(Nid::make(gip3, 0x0A5A0015).to_string(), "10.90.0.21@gip3");
  EXPECT_FALSE(Nid::parse("10.90.0.21@gni"));  // the kernel refuses these too
  EXPECT_FALSE(Nid::parse("5@gip3"));
  EXPECT_TRUE(mpi_node_address(0x0A5A0015));
  EXPECT_FALSE(mpi_node_address(5));
}

TEST(Nid, TcpIsTcp0AndBareAddressIsTcp) {
  EXPECT_EQ(*Nid::parse("10.0.0.1@tcp0"), *Nid::parse("10.0.0.1@tcp"));
  EXPECT_EQ(*Nid::parse("10.0.0.1"), *Nid::parse("10.0.0.1@tcp"));
  EXPECT_EQ(Nid::parse("10.0.0.1@tcp0")->to_string(), "10.0.0.1@tcp");
}

TEST(Nid, AnyPrintsAsQuestionMark) {
  EXPECT_EQ(Nid::any().to_string(), "<?>");
  EXPECT_EQ(*Nid::parse("<?>"), Nid::any());
  EXPECT_EQ(Nid::any().value(), ~0ULL);
}

TEST(Nid, UnknownTypePrintsHexAddress) {
  Nid n = Nid::make(NetId::make(100, 2), 0xabcd);
  EXPECT_EQ(n.to_string(), "abcd@<100:2>");
}

TEST(Nid, RejectsBadStringsNamingTheFault) {
  struct Case {
    const char* text;
    const char* names;
  } cases[] = {
      {"10.0.0@tcp", "address '10.0.0' is not a dotted IPv4 address"},
      {"10.0.0.256@tcp", "'10.0.0.256'"},
      {"10.0.0.1.2@tcp", "'10.0.0.1.2'"},
      {"a.b.c.d@tcp", "'a.b.c.d'"},
      {"x@mpi", "address 'x' is not a number (decimal, or hexadecimal after 0x)"},
      {"5@foo", "unknown network type 'foo'"},
      {"@tcp", "missing address"},
      {"10.0.0.1@", "empty network name"},
      {"10.0.0.1@<?>", "'<?>' is not allowed"},
      {"", "empty NID"},
  };
  for (const auto& c : cases) {
    auto r = Nid::parse(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.code(), -EINVAL);
    EXPECT_NE(r.message().find(c.names), std::string::npos) << c.text << " -> " << r.message();
  }
}

TEST(ProcessId, PrintsLikeLibcfs) {
  EXPECT_EQ((ProcessId{*Nid::parse("10.0.0.1@tcp"), 12345}).to_string(), "12345-10.0.0.1@tcp");
  EXPECT_EQ((ProcessId{Nid::lo(), kPidUserFlag | 42}).to_string(), "U42-0@lo");
  EXPECT_EQ((ProcessId{Nid::lo(), kPidAny}).to_string(), "LNET_PID_ANY-0@lo");
}

TEST(ProcessId, ParsesEveryPrintedForm) {
  for (ProcessId id : {ProcessId{*Nid::parse("10.0.0.1@tcp"), 12345}, ProcessId{*Nid::parse("5@mpi"), kPidUserFlag | 7},
                       ProcessId{Nid::lo(), kPidAny}, ProcessId{*Nid::parse("3@mpi"), 0}}) {
    auto back = ProcessId::parse(id.to_string());
    ASSERT_TRUE(back) << id.to_string() << ": " << back.message();
    EXPECT_EQ(*back, id);
  }
  EXPECT_EQ(ProcessId::parse("5@mpi")->pid, kPidAny);
}

TEST(ProcessId, RejectsBadPid) {
  auto r = ProcessId::parse("12x-0@lo");
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("pid '12x'"), std::string::npos) << r.message();
  EXPECT_FALSE(ProcessId::parse("U2147483648-0@lo"));
  EXPECT_FALSE(ProcessId::parse("1-bad@tcp"));
}

}  // namespace
}  // namespace lnet
