// The networks string and the LNET_* environment.
#include <gtest/gtest.h>

#include <cstdlib>

#include <lnet/lnet.hpp>

namespace lnet {
namespace {

TEST(Networks, InterfacesAndCpts) {
  auto r = Config::parse_networks("tcp0(eth0, eth1)[0,1], o2ib1 mpi");
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].net, NetId::make(kSockLnd, 0));
  EXPECT_EQ((*r)[0].interfaces, (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ((*r)[0].cpts, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ((*r)[1].net, NetId::make(kO2ibLnd, 1));
  EXPECT_TRUE((*r)[1].interfaces.empty());
  EXPECT_EQ((*r)[2].net, NetId::make(kMpiLnd, 0));
  EXPECT_TRUE(Config::parse_networks("")->empty());
}

TEST(Networks, ErrorsNameTheEntry) {
  struct Case {
    const char* text;
    const char* names;
  } cases[] = {
      {"tcp0(eth0", "unbalanced"},
      {"foo(eth0)", "unknown network type 'foo'"},
      {"tcp(eth0,)", "empty interface name"},
      {"tcp(a-very-long-interface)", "'a-very-long-interface' is longer than 15 characters"},
      {"tcp(eth0,et/h1)", "'et/h1' has a character that is not allowed"},
      {"tcp[x]", "bad CPT list '[x]'"},
      {"tcp(eth0)junk", "unexpected 'junk'"},
  };
  for (const auto& c : cases) {
    auto r = Config::parse_networks(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.message().find(c.names), std::string::npos) << c.text << " -> " << r.message();
  }
}

TEST(Env, ReadsTunablesAndNetworks) {
  setenv("LNET_NETWORKS", "tcp1(eth3)", 1);
  setenv("LNET_PEER_CREDITS", "16", 1);
  setenv("LNET_CPT_NUMBER", "3", 1);
  auto c = Config::from_env();
  unsetenv("LNET_NETWORKS");
  unsetenv("LNET_PEER_CREDITS");
  unsetenv("LNET_CPT_NUMBER");
  ASSERT_TRUE(c) << c.message();
  ASSERT_EQ(c->nets.size(), 1u);
  EXPECT_EQ(c->nets[0].tunables.peer_credits, 16);
  EXPECT_EQ(c->nets[0].tunables.credits, 256);
  EXPECT_EQ(c->ncpts, 3u);
}

// LNET_IP2NETS: the networks an ip2nets string picks on this host (any address that is up).
TEST(Env, Ip2netsPicksByAddress) {
  setenv("LNET_IP2NETS", "tcp 203.0.113.[1-3]", 1);  // TEST-NET-3: no host has it
  auto none = Config::from_env();
  ASSERT_FALSE(none);
  EXPECT_NE(none.message().find("LNET_IP2NETS: "), std::string::npos) << none.message();
  setenv("LNET_NETWORKS", "tcp", 1);
  auto both = Config::from_env();
  unsetenv("LNET_NETWORKS");
  unsetenv("LNET_IP2NETS");
  ASSERT_FALSE(both);
  EXPECT_NE(both.message().find("LNET_NETWORKS and LNET_IP2NETS are both set"), std::string::npos) << both.message();
  auto host = host_interfaces();
  ASSERT_TRUE(host) << host.message();
  const HostInterface* up = nullptr;
  for (const auto& h : *host)
    if (h.up && !h.loopback && !h.is_v6) up = &h;
  if (!up) GTEST_SKIP() << "no interface up besides loopback: a match on this host's address is not tried";
  std::string pattern = std::to_string(up->ipv4 >> 24) + ".*.*.*";
  setenv("LNET_IP2NETS", ("tcp9(" + up->name + ") " + pattern + "; tcp8 203.0.113.*").c_str(), 1);
  auto c = Config::from_env();
  unsetenv("LNET_IP2NETS");
  ASSERT_TRUE(c) << c.message();
  ASSERT_EQ(c->nets.size(), 1u);
  EXPECT_EQ(c->nets[0].net.to_string(), "tcp9");
  EXPECT_EQ(c->nets[0].interfaces, std::vector<std::string>{up->name});
}

TEST(Env, BadValuesNameTheVariable) {
  setenv("LNET_PEER_CREDITS", "many", 1);
  auto c = Config::from_env();
  unsetenv("LNET_PEER_CREDITS");
  ASSERT_FALSE(c);
  EXPECT_NE(c.message().find("LNET_PEER_CREDITS='many'"), std::string::npos) << c.message();
  setenv("LNET_NETWORKS", "bogus", 1);
  c = Config::from_env();
  unsetenv("LNET_NETWORKS");
  ASSERT_FALSE(c);
  EXPECT_NE(c.message().find("LNET_NETWORKS"), std::string::npos) << c.message();
}

TEST(Env, EveryVariableIsListed) {
  std::string help = env_help();
  for (const EnvVar* v : env_vars()) EXPECT_NE(help.find(v->name()), std::string::npos);
  EXPECT_GE(env_vars().size(), 6u);
}

TEST(Instance, UnknownNetworkTypeIsNotSupported) {
  Config cfg;
  cfg.nets = *Config::parse_networks("o2ib");
  auto r = Instance::create(cfg);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), -EPROTONOSUPPORT);
  EXPECT_NE(r.message().find("not supported: no driver for network type 'o2ib'"), std::string::npos) << r.message();
}

TEST(Instance, DefaultsToLoopbackWithAUserPid) {
  auto r = Instance::create();
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ((*r)->nids(), std::vector<Nid>{Nid::lo()});
  EXPECT_TRUE((*r)->pid() & kPidUserFlag);
  Nid src;
  std::uint32_t order = 9;
  EXPECT_EQ((*r)->dist(Nid::lo(), &src, &order), 0);
  EXPECT_EQ((*r)->dist(*Nid::parse("1.2.3.4@tcp"), &src, &order), -EHOSTUNREACH);
}

}  // namespace
}  // namespace lnet
