// ip2nets: the module-parameter string and the rules of lnetctl YAML, matched against a
// made-up host.
#include <gtest/gtest.h>

#include <algorithm>

#include <lnet/config.hpp>
#include <lnet/dlc.hpp>

namespace lnet {
namespace {

std::uint32_t ip(int a, int b, int c, int d) {
  return static_cast<std::uint32_t>(a) << 24 | static_cast<std::uint32_t>(b) << 16 |
         static_cast<std::uint32_t>(c) << 8 | static_cast<std::uint32_t>(d);
}

const std::vector<HostInterface> kHost = {
    {"lo", ip(127, 0, 0, 1), true, true},
    {"eth0", ip(192, 168, 1, 10), true, false},
    {"eth1", ip(10, 10, 2, 20), true, false},
    {"ib0", ip(172, 16, 0, 7), false, false},  // down
};

TEST(Ip2netsString, EveryMatchingEntryInOrder) {
  struct Case {
    const char* text;
    const char* networks;
  } cases[] = {
      {"tcp(eth0) 192.168.1.*", "tcp(eth0)"},
      {"tcp(eth0) 192.168.1.*; tcp1(eth1) 10.10.[1-3].[2-200/2]", "tcp(eth0),tcp1(eth1)"},
      // A rule matches when any pattern matches any address; entries that do not, add nothing.
      {"o2ib 172.16.0.*; tcp2 1.2.3.4 10.10.2.20", "tcp2"},
      {"tcp1(eth0),tcp2(eth1) 192.168.*.10", "tcp1(eth0),tcp2(eth1)"},
      // Comments, new lines, and the same net twice (its interfaces add up).
      {"tcp(eth0) 192.168.1.10 # the front end\ntcp(eth1) 10.*.*.*", "tcp(eth0),tcp(eth1)"},
      {"tcp(eth0)[0,1] 192.168.1.[1-20]", "tcp(eth0)[0,1]"},
  };
  for (const auto& c : cases) {
    auto r = ip2nets_to_networks(c.text, kHost);
    ASSERT_TRUE(r) << c.text << ": " << r.message();
    EXPECT_EQ(*r, c.networks) << c.text;
  }
}

TEST(Ip2netsString, NoMatchAndBadSyntaxAreErrors) {
  auto none = ip2nets_to_networks("tcp 1.2.3.*; o2ib 127.0.0.1", kHost);  // loopback is not matched
  ASSERT_FALSE(none);
  EXPECT_EQ(none.code(), -ENOENT);
  EXPECT_NE(none.message().find("does not match any local IP interface"), std::string::npos) << none.message();
  struct Case {
    const char* text;
    const char* names;
  } cases[] = {
      {"tcp(eth0)", "no IP pattern after the networks"},   {"tcp 192.168.1", "four octets"},
      {"tcp 192.168.1.[5-1]", "start above its end"},      {"foo 192.168.1.*", "unknown network type 'foo'"},
      {"tcp 192.168.1.* 10.0.0.x", "'x' is not a number"},  // every pattern is checked
      {"  ;  # only a comment", "ip2nets is empty"},
  };
  for (const auto& c : cases) {
    auto r = ip2nets_to_networks(c.text, kHost);
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.message().find(c.names), std::string::npos) << c.text << " -> " << r.message();
  }
}

Ip2netsRule rule(const char* net, std::vector<std::string> ifs, std::vector<std::string> ranges) {
  Ip2netsRule r;
  r.ni.net = *NetId::parse(net);
  for (auto& i : ifs) r.interfaces.push_back({i, std::nullopt});
  r.ranges = std::move(ranges);
  return r;
}

std::string names(const std::vector<NetConfig>& nis) {
  std::string s;
  for (const auto& n : nis) s += (s.empty() ? "" : " ") + n.net.to_string() + "(" + n.interfaces.at(0) + ")";
  return s;
}

TEST(Ip2netsRules, FirstMatchingRuleWinsPerNet) {
  std::vector<std::string> why;
  auto r = resolve_ip2nets({rule("tcp1", {"eth0"}, {"10.*.*.*"}),            // eth0 is not in 10/8: skipped
                            rule("tcp1", {}, {"192.168.1.*", "10.10.2.*"}),  // both interfaces
                            rule("tcp1", {"eth1"}, {}),                      // tcp1 is done: skipped
                            rule("tcp2", {"ib0"}, {}),                       // down: skipped
                            rule("tcp3", {}, {})},                           // the first interface up
                           kHost, &why);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(names(*r), "tcp1(eth0) tcp1(eth1) tcp3(eth0)");
  ASSERT_EQ(why.size(), 3u);
  EXPECT_NE(why[0].find("interface 'eth0' has no address in the ranges"), std::string::npos) << why[0];
  EXPECT_NE(why[1].find("an earlier rule configured tcp1"), std::string::npos) << why[1];
  EXPECT_NE(why[2].find("interface 'ib0' is not up"), std::string::npos) << why[2];
  auto none = resolve_ip2nets({rule("tcp", {"eth9"}, {})}, kHost);
  ASSERT_FALSE(none);
  EXPECT_NE(none.message().find("no ip2nets rule applies"), std::string::npos) << none.message();
}

TEST(Ip2netsRules, TheYamlSection) {
  auto cfg = dlc::parse_config(R"(ip2nets:
  - net-spec: tcp1
    interfaces:
        0: eth0[0]
    ip-range:
        0: 192.168.*.[1-20]
        1: 10.0.0.5
    tunables:
        peer_credits: 16
    CPT: "[0,1]"
)");
  ASSERT_TRUE(cfg) << cfg.message();
  ASSERT_EQ(cfg->ip2nets.size(), 1u);
  auto nis = resolve_ip2nets(cfg->ip2nets, kHost);
  ASSERT_TRUE(nis) << nis.message();
  ASSERT_EQ(nis->size(), 1u);
  EXPECT_EQ((*nis)[0].interfaces, std::vector<std::string>{"eth0"});
  EXPECT_EQ((*nis)[0].cpts, std::vector<unsigned>{0});  // the interface's own CPTs win
  EXPECT_EQ((*nis)[0].tunables.peer_credits, 16);
  for (const char* bad :
       {"ip2nets:\n  - interfaces: {0: eth0}\n", "ip2nets:\n  - net-spec: tcp\n    ip-range: {0: 10.0.0}\n",
        "ip2nets:\n  - net-spec: tcp\n    local NI(s): []\n",
        "ip2nets:\n  - net-spec: tcp\n    ip-range: {0: 'fe80::[1-2]'}\n"})
    EXPECT_FALSE(dlc::parse_config(bad)) << bad;
}

// IPv6 ranges are prefixes (or single addresses) and match the node's IPv6 addresses;
// the NI is still made on the interface (its address family: lnet configure --large).
TEST(Ip2netsRules, Ipv6RangesMatchIpv6Addresses) {
  std::vector<HostInterface> host = kHost;
  HostInterface v6{"eth2", 0, true, false, true, {}};
  const std::uint8_t addr[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};  // 2001:db8:5::7
  std::copy(addr, addr + 16, v6.ipv6.begin());
  host.push_back(v6);
  auto s = ip2nets_to_networks("tcp5(eth2) 2001:db8:5::/64; tcp6 2001:db8:6::/64; tcp7 0.0.0.*", host);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(*s, "tcp5(eth2)") << "an IPv4 pattern does not take an IPv6 address (ipv4 0)";
  auto r = resolve_ip2nets({rule("tcp1", {}, {"2001:db8::/32"}), rule("tcp2", {"eth2"}, {"2001:db8:5::7"})}, host);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(names(*r), "tcp1(eth2) tcp2(eth2)");
  auto bad = ip2nets_to_networks("tcp 2001:db8::[1-4]", host);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("ranges are written as a prefix"), std::string::npos) << bad.message();
}

TEST(CptList, FormsAndRefusals) {
  EXPECT_EQ(*parse_cpt_list("[0,1]"), (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(*parse_cpt_list("[0-3]"), (std::vector<unsigned>{0, 1, 2, 3}));
  EXPECT_EQ(*parse_cpt_list("[0-6/2, 9]"), (std::vector<unsigned>{0, 2, 4, 6, 9}));
  EXPECT_EQ(*parse_cpt_list("2"), std::vector<unsigned>{2});
  EXPECT_TRUE(parse_cpt_list("[*]")->empty());
  for (const char* bad : {"[]", "[0,]", "[3-1]", "0-3", "[x]", "[0-255]", ""}) EXPECT_FALSE(parse_cpt_list(bad)) << bad;
}

}  // namespace
}  // namespace lnet
