// NID range expressions: parse, print, match, and errors that name the bad part.
#include <gtest/gtest.h>

#include <lnet/nid_range.hpp>

namespace lnet {
namespace {

Nid nid(const char* s) { return *Nid::parse(s); }

TEST(NumberExpr, RangesStepsAndLists) {
  auto e = NumberExpr::parse("[1-10/2, 13, 20-22]", 255);
  ASSERT_TRUE(e) << e.message();
  for (std::uint32_t v : {1u, 3u, 5u, 7u, 9u, 13u, 20u, 21u, 22u}) EXPECT_TRUE(e->matches(v)) << v;
  for (std::uint32_t v : {0u, 2u, 4u, 10u, 11u, 12u, 14u, 19u, 23u}) EXPECT_FALSE(e->matches(v)) << v;
  EXPECT_EQ(e->to_string(), "[1-10/2,13,20-22]");
  EXPECT_TRUE(NumberExpr::parse("*", 255)->matches(200));
  EXPECT_EQ(NumberExpr::parse("7", 255)->to_string(), "7");
}

TEST(NumberExpr, Errors) {
  struct Case {
    const char* text;
    const char* names;
  } cases[] = {
      {"[1-x]", "'x' is not a number"},
      {"[5-3]", "range '5-3' has its start above its end"},
      {"[1-10/0]", "step 0"},
      {"[1,2", "missing ']'"},
      {"[]", "empty list"},
      {"300", "above 255"},
      {"[1,,2]", "empty item"},
      {"[1/2]", "step without a range"},
  };
  for (const auto& c : cases) {
    auto r = NumberExpr::parse(c.text, 255);
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.message().find(c.names), std::string::npos) << c.text << " -> " << r.message();
  }
}

TEST(NidPattern, IpRanges) {
  auto p = NidPattern::parse("192.168.0.[1-10/2,13]@tcp");
  ASSERT_TRUE(p) << p.message();
  EXPECT_TRUE(p->matches(nid("192.168.0.1@tcp")));
  EXPECT_TRUE(p->matches(nid("192.168.0.9@tcp")));
  EXPECT_TRUE(p->matches(nid("192.168.0.13@tcp")));
  EXPECT_FALSE(p->matches(nid("192.168.0.2@tcp")));
  EXPECT_FALSE(p->matches(nid("192.168.1.1@tcp")));
  EXPECT_FALSE(p->matches(nid("192.168.0.1@tcp1")));
  EXPECT_EQ(p->to_string(), "192.168.0.[1-10/2,13]@tcp");
}

TEST(NidPattern, SpacesInsideBracketsAsInTheDesign) {
  auto p = NidPattern::parse("192.168.0.[1-10/2, 13, 14]@o2ib");
  ASSERT_TRUE(p) << p.message();
  EXPECT_TRUE(p->matches(nid("192.168.0.14@o2ib")));
}

TEST(NidPattern, WildcardsAndNumericNets) {
  EXPECT_TRUE(NidPattern::parse("*@tcp")->matches(nid("1.2.3.4@tcp")));
  EXPECT_FALSE(NidPattern::parse("*@tcp")->matches(nid("1.2.3.4@tcp2")));
  EXPECT_TRUE(NidPattern::parse("10.0.*.*@tcp")->matches(nid("10.0.7.9@tcp")));
  EXPECT_TRUE(NidPattern::parse("*@tcp*")->matches(nid("1.2.3.4@tcp2")));
  auto m = NidPattern::parse("[1-64]@mpi");
  ASSERT_TRUE(m) << m.message();
  EXPECT_TRUE(m->matches(nid("64@mpi")));
  EXPECT_FALSE(m->matches(nid("65@mpi")));
  EXPECT_EQ(NidPattern::parse("*@tcp")->to_string(), "*@tcp");
}

// The mpi net writes a proxy (2^24 and above) as dotted IPv4 and a rank as a number, so
// a pattern may be either; a dotted one names proxies only.
TEST(NidPattern, MpiProxiesAreDottedAndRanksAreNumbers) {
  auto p = NidPattern::parse("10.0.0.[1-2]@mpi");
  ASSERT_TRUE(p) << p.message();
  EXPECT_TRUE(p->matches(nid("10.0.0.2@mpi")));
  EXPECT_FALSE(p->matches(nid("10.0.0.3@mpi")));
  EXPECT_EQ(p->to_string(), "10.0.0.[1-2]@mpi");
  auto any = NidPattern::parse("*.*.*.*@mpi");
  ASSERT_TRUE(any) << any.message();
  EXPECT_TRUE(any->matches(nid("192.0.2.1@mpi")));
  EXPECT_FALSE(any->matches(nid("7@mpi")));
  auto zero = NidPattern::parse("[0-1].0.0.7@mpi");
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.message().find("an application rank is written as a number"), std::string::npos) << zero.message();
  EXPECT_FALSE(NidPattern::parse("1.2.3@mpi"));
}

TEST(NidPattern, Errors) {
  struct Case {
    const char* text;
    const char* names;
  } cases[] = {
      {"192.168.0.[1-x]@tcp", "'x' is not a number"},
      {"192.168.0@tcp", "does not have four octets"},
      {"192.168.0.300@tcp", "octet 4"},
      {"10.0.0.1", "missing '@<network>'"},
      {"10.0.0.1@bogus", "unknown network type 'bogus'"},
      {"@tcp", "missing address"},
  };
  for (const auto& c : cases) {
    auto r = NidPattern::parse(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.message().find(c.names), std::string::npos) << c.text << " -> " << r.message();
  }
}

TEST(NidPattern, Ipv6AddressesAndPrefixes) {
  auto exact = NidPattern::parse("2001:db8::1@tcp");
  ASSERT_TRUE(exact) << exact.message();
  EXPECT_TRUE(exact->is_v6());
  EXPECT_TRUE(exact->matches(nid("2001:db8::1@tcp")));
  EXPECT_FALSE(exact->matches(nid("2001:db8::2@tcp")));
  EXPECT_FALSE(exact->matches(nid("2001:db8::1@tcp1")));
  EXPECT_FALSE(exact->matches(nid("10.0.0.1@tcp"))) << "an IPv4 NID is not in an IPv6 pattern";
  EXPECT_EQ(exact->to_string(), "2001:db8::1@tcp");

  auto net64 = NidPattern::parse("2001:db8:0:1::/64@tcp[0-1]");
  ASSERT_TRUE(net64) << net64.message();
  EXPECT_TRUE(net64->matches(nid("2001:db8:0:1:aaaa::7@tcp1")));
  EXPECT_TRUE(net64->matches(nid("2001:db8:0:1::1@tcp")));
  EXPECT_FALSE(net64->matches(nid("2001:db8:0:2::1@tcp")));
  EXPECT_EQ(net64->to_string(), "2001:db8:0:1::/64@tcp[0-1]");
  // A prefix that is not a whole number of bytes; the host part is cleared when read.
  auto odd = NidPattern::parse("2001:db8:ffff::9/36@tcp");
  ASSERT_TRUE(odd) << odd.message();
  EXPECT_EQ(odd->to_string(), "2001:db8:f000::/36@tcp");
  EXPECT_TRUE(odd->matches(nid("2001:db8:fabc::1@tcp")));
  EXPECT_FALSE(odd->matches(nid("2001:db8:8fff::1@tcp")));
  EXPECT_TRUE(NidPattern::parse("::/0@tcp")->matches(nid("2001:db8::5@tcp")));
  EXPECT_TRUE(NidPattern::parse("*@tcp")->matches(nid("2001:db8::5@tcp"))) << "the net's wildcard takes IPv6 too";
  EXPECT_FALSE(NidPattern::parse("10.0.0.*@tcp")->matches(nid("2001:db8::5@tcp")));

  EXPECT_TRUE(NidMatcher::parse("2001:db8::/32@tcp")->matches(nid("2001:db8::5@tcp")));
  auto list = NidRangeList::parse("10.0.0.[1-2]@tcp 2001:db8::/48@tcp");
  ASSERT_TRUE(list) << list.message();
  EXPECT_TRUE(list->matches(nid("2001:db8:0:9::1@tcp")));
  EXPECT_TRUE(list->matches(nid("10.0.0.2@tcp")));

  for (const char* bad : {"2001:db8::[1-4]@tcp", "2001:db8::1/129@tcp", "2001:db8::g@tcp", "2001:db8::/@tcp",
                          "1::2::3@tcp", "2001:db8::1/64/2@tcp"}) {
    auto r = NidPattern::parse(bad);
    EXPECT_FALSE(r) << bad;
    EXPECT_NE(r.message().find(bad), std::string::npos) << r.message();
  }
  EXPECT_FALSE(NidPattern::parse("2001:db8::1@mpi")) << "not an IP network";
  EXPECT_FALSE(NidPattern::parse("2001:db8::1.5@mpi")) << "mpi's dotted form is IPv4 only";
  EXPECT_FALSE(NidPattern::parse(std::string_view("2001:db8::1\0x@tcp", 17))) << "a NUL in the address";
}

TEST(NetPattern, ListsRangesAndStar) {
  auto p = NetPattern::parse("tcp[1,3-5]");
  ASSERT_TRUE(p) << p.message();
  for (int n : {1, 3, 4, 5}) EXPECT_TRUE(p->matches(NetId::make(kSockLnd, n))) << n;
  for (int n : {0, 2, 6}) EXPECT_FALSE(p->matches(NetId::make(kSockLnd, n))) << n;
  EXPECT_FALSE(p->matches(NetId::make(kO2ibLnd, 1)));
  auto star = NetPattern::parse("o2ib*");
  ASSERT_TRUE(star);
  EXPECT_TRUE(star->matches(NetId::make(kO2ibLnd, 77)));
  EXPECT_EQ(star->to_string(), "o2ib*");
  EXPECT_TRUE(NetPattern::parse("tcp")->matches(NetId::make(kSockLnd, 0)));
  EXPECT_FALSE(NetPattern::parse("tcp")->matches(NetId::make(kSockLnd, 1)));
  EXPECT_EQ(NetPattern::parse("tcp0")->to_string(), "tcp");
  EXPECT_EQ(NetPattern::parse("o2ib[1-10/2]")->to_string(), "o2ib[1-10/2]");
  auto bad = NetPattern::parse("tcp[1-x]");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("'x' is not a number"), std::string::npos) << bad.message();
}

TEST(NidRangeList, AnyOfSeveralPatterns) {
  auto l = NidRangeList::parse("10.0.0.[1-2]@tcp  5@mpi 192.168.0.[1-10/2, 13]@o2ib1");
  ASSERT_TRUE(l) << l.message();
  EXPECT_EQ(l->patterns().size(), 3u);
  EXPECT_TRUE(l->matches(nid("10.0.0.2@tcp")));
  EXPECT_TRUE(l->matches(nid("5@mpi")));
  EXPECT_TRUE(l->matches(nid("192.168.0.13@o2ib1")));
  EXPECT_FALSE(l->matches(nid("6@mpi")));
  EXPECT_FALSE(NidRangeList::parse("   "));
}

TEST(NidMatcher, NetOrNid) {
  auto net = NidMatcher::parse("tcp[1-3]");
  ASSERT_TRUE(net);
  EXPECT_TRUE(net->is_net_only());
  EXPECT_TRUE(net->matches(nid("1.1.1.1@tcp2")));
  auto n = NidMatcher::parse("10.1.1.*@tcp");
  ASSERT_TRUE(n);
  EXPECT_FALSE(n->is_net_only());
  EXPECT_TRUE(n->matches(nid("10.1.1.9@tcp")));
  EXPECT_FALSE(n->matches(nid("10.1.2.9@tcp")));
}

// peer add --nid: what each list names, in LNet's order.
TEST(ExpandNidList, TheOrderAndFormsOfRealLists) {
  struct Case {
    const char* text;
    const char* nids;  // space separated
  } cases[] = {
      {"10.0.0.1@tcp", "10.0.0.1@tcp"},
      {"10.0.0.[1-3]@tcp", "10.0.0.1@tcp 10.0.0.2@tcp 10.0.0.3@tcp"},
      // The first bracket varies slowest.
      {"10.0.[1-2].[5-6]@tcp", "10.0.1.5@tcp 10.0.1.6@tcp 10.0.2.5@tcp 10.0.2.6@tcp"},
      // Strides count from the low end; commas inside brackets are items, outside NIDs.
      {"[1-10/3]@gni", "1@gni 4@gni 7@gni 10@gni"},
      {"10.0.0.[1,3]@tcp,10.0.1.1@tcp1", "10.0.0.1@tcp 10.0.0.3@tcp 10.0.1.1@tcp1"},
      {"10.0.0.[9,2-3]@tcp", "10.0.0.9@tcp 10.0.0.2@tcp 10.0.0.3@tcp"},
      // Mixed nets, hexadecimal single NIDs, a NID named twice counts once.
      {"5@gni, 0x10@gni 10.0.0.1@o2ib3,5@gni", "5@gni 16@gni 10.0.0.1@o2ib3"},
      {"[0]@gni", "0@gni"},
      // The mpi net: ranks as numbers, proxies as dotted IPv4.
      {"[1-2]@mpi 127.0.5.[1-2]@mpi", "1@mpi 2@mpi 127.0.5.1@mpi 127.0.5.2@mpi"},
  };
  for (const auto& c : cases) {
    auto r = expand_nid_list(c.text, 128);
    ASSERT_TRUE(r) << c.text << ": " << r.message();
    std::string got;
    for (Nid n : *r) got += (got.empty() ? "" : " ") + n.to_string();
    EXPECT_EQ(got, c.nids) << c.text;
  }
}

TEST(ExpandNidList, RefusesWhatNamesNoNidsAndTooMany) {
  struct Case {
    const char* text;
    const char* names;
    int code;
  } cases[] = {
      {"*@tcp", "'*' names no NIDs", -EINVAL},
      {"10.0.0.*@tcp", "'*' names no NIDs", -EINVAL},
      {"10.0.0.1@tcp[1-2]", "a range of networks names no NIDs", -EINVAL},
      {"10.0.0.[3-1]@tcp", "start above its end", -EINVAL},
      {"10.0.0.[1-5/0]@tcp", "step 0", -EINVAL},
      {"10.0.0.[1-129]@tcp", "more than 128 NIDs", -E2BIG},
      {"[1-64]@gni,[65-129]@gni", "more than 128 NIDs", -E2BIG},
      {"  , ", "empty", -EINVAL},
      {"10.0.0.300@tcp", "10.0.0.300", -EINVAL},
  };
  for (const auto& c : cases) {
    auto r = expand_nid_list(c.text, 128);
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.code(), c.code) << c.text << ": " << r.message();
    EXPECT_NE(r.message().find(c.names), std::string::npos) << c.text << " -> " << r.message();
  }
  auto full = expand_nid_list("10.0.0.[1-128]@tcp", 128);  // exactly the limit
  ASSERT_TRUE(full) << full.message();
  EXPECT_EQ(full->size(), 128u);
}

// '*' is a pattern where patterns match (NID lists of fault and selection rules).
TEST(ExpandNidList, StarStaysAPatternElsewhere) {
  EXPECT_TRUE(NidRangeList::parse("*@tcp 10.0.*.[1-4]@o2ib"));
  EXPECT_TRUE(NidMatcher::parse("tcp*"));
  EXPECT_TRUE(NidMatcher::parse("*.*.*.*@tcp"));
}

}  // namespace
}  // namespace lnet
