// The lnetctl YAML schema (parse, print, round trip, errors with lines) and the control
// commands run against live instances on the test fabric.
#include <gtest/gtest.h>

#include <lnet/dlc.hpp>
#include <lnet/lnet.hpp>

#include "core/core.hpp"
#include "support/fabric.hpp"
#include "support/put_get.hpp"

namespace lnet {
namespace {

using dlc::Request;

// The representative `export --backup` of the reference facts (§7.2).
const char* kFactsExample = R"(net:
    - net type: tcp
      local NI(s):
        - interfaces:
              0: eth1
          tunables:
              peer_timeout: 180
              peer_credits: 8
              peer_buffer_credits: 0
              credits: 256
          lnd tunables:
              conns_per_peer: 1
              timeout: 50
              tos: -1
route:
    - net: tcp7
      gateway: 10.9.0.1@tcp
      hop: -1
      priority: 0
peer:
    - primary nid: 10.9.0.42@tcp
      Multi-Rail: True
      peer ni:
        - nid: 10.9.0.42@tcp
        - nid: 10.10.0.42@tcp1
routing:
    enable: 0
buffers:
    tiny: 2048
    small: 16384
    large: 1024
global:
    numa_range: 0
    max_interfaces: 4096
    discovery: 1
    drop_asym_route: 0
    retry_count: 2
    transaction_timeout: 150
    health_sensitivity: 100
    recovery_interval: 1
    router_sensitivity: 100
    lnd_timeout: 49
    response_tracking: 3
    recovery_limit: 0
    max_recovery_ping_interval: 900
udsp:
    - idx: 0
      src: tcp1
      action:
          priority: 0
)";

// The facts example: every key of a real export is built.
std::string supported_example() { return kFactsExample; }

TEST(DlcParse, RealExportsNameWhatIsNotBuilt) {
  // What the kernel's lnetctl exports is built, global tunables and all; a value out of
  // range is refused naming the key and its line.
  auto cfg = dlc::parse_config(kFactsExample);
  ASSERT_TRUE(cfg) << cfg.message();
  EXPECT_EQ(cfg->global->router_sensitivity, 100);
  EXPECT_EQ(cfg->global->discovery, 1);
  auto rl = dlc::parse_config("global:\n    router_sensitivity: 101\n");
  ASSERT_FALSE(rl);
  EXPECT_NE(rl.message().find("router_sensitivity"), std::string::npos) << rl.message();
  EXPECT_NE(rl.message().find("(line 2)"), std::string::npos) << rl.message();
  // Deadlines and response tracking are built; their rules hold for a whole section.
  auto tt = dlc::parse_config("global:\n    retry_count: 20\n    transaction_timeout: 30\n    lnd_timeout: 1\n");
  ASSERT_TRUE(tt) << tt.message();
  EXPECT_EQ(tt->global->transaction_timeout, 30);
  EXPECT_EQ(tt->global->retry_count, 20);
  // The rules between tunables hold for what the instance ends up with: checked when
  // the document is applied (Commands.ImportChecksTheRulesBetweenGlobals).
  auto below = dlc::parse_config("global:\n    transaction_timeout: 5\n    retry_count: 5\n");
  ASSERT_TRUE(below) << below.message();
  auto rt = dlc::parse_config("global:\n    response_tracking: 4\n");
  ASSERT_FALSE(rt);
  EXPECT_NE(rt.message().find("response_tracking 4 is outside 0..3"), std::string::npos) << rt.message();
  // A route's health_sensitivity (route show -v and older exports write it); 0 is the
  // default, 1.
  auto hs = dlc::parse_config(
      "route:\n    - net: tcp7\n      gateway: 10.9.0.1@tcp\n      health_sensitivity: 7\n"
      "    - net: tcp8\n      gateway: 10.9.0.1@tcp\n      health_sensitivity: 0\n");
  ASSERT_TRUE(hs) << hs.message();
  EXPECT_EQ(hs->routes.at(0).health_sensitivity, 7u);
  EXPECT_EQ(hs->routes.at(1).health_sensitivity, 1u);
  auto hs_bad =
      dlc::parse_config("route:\n    - net: tcp7\n      gateway: 10.9.0.1@tcp\n      health_sensitivity: 1001\n");
  ASSERT_FALSE(hs_bad);
  EXPECT_NE(hs_bad.message().find("'health_sensitivity' 1001 is not 0..1000"), std::string::npos) << hs_bad.message();
}

TEST(DlcParse, TheFactsExample) {
  auto cfg = dlc::parse_config(supported_example());
  ASSERT_TRUE(cfg) << cfg.message();
  ASSERT_EQ(cfg->nets.size(), 1u);
  EXPECT_EQ(cfg->nets[0].net, NetId::make(kSockLnd, 0));
  EXPECT_EQ(cfg->nets[0].interfaces, std::vector<std::string>{"eth1"});
  EXPECT_FALSE(cfg->nets[0].lnd_tunables.get("timeout"));  // read-only: the driver's, derived from lnd_timeout
  ASSERT_EQ(cfg->routes.size(), 1u);
  EXPECT_EQ(cfg->routes[0].net, *NetId::parse("tcp7"));
  EXPECT_EQ(cfg->routes[0].gateway, *Nid::parse("10.9.0.1@tcp"));
  EXPECT_EQ(cfg->routes[0].hops, -1);
  ASSERT_EQ(cfg->peers.size(), 1u);
  EXPECT_TRUE(cfg->peers[0].multi_rail);
  EXPECT_EQ(cfg->peers[0].nids, std::vector<Nid>{*Nid::parse("10.10.0.42@tcp1")});
  EXPECT_EQ(cfg->routing, false);
  EXPECT_EQ(cfg->buffers->small, 16384);
  EXPECT_EQ(cfg->global->max_interfaces, 4096);
  ASSERT_EQ(cfg->udsp.size(), 1u);
  EXPECT_EQ(cfg->udsp[0].src, "tcp1");
  EXPECT_EQ(cfg->udsp[0].priority, 0u);
}

TEST(DlcParse, PrintsTheLnetctlLayoutAndRoundTrips) {
  auto cfg = dlc::parse_config(supported_example());
  ASSERT_TRUE(cfg);
  std::string text = dlc::config_to_yaml(*cfg, true);
  // lnetctl 2.17's export --backup: net, route and peer in the netlink layout (six
  // columns), the rest in the classic one.
  EXPECT_NE(
      text.find("net:\n-     net type: tcp\n      local NI(s):\n      -     interfaces:\n                  0: eth1\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("route:\n-     net: tcp7\n      gateway: 10.9.0.1@tcp\n      hop: -1\n      priority: 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          "      Multi-Rail: true\n      peer ni:\n      -     nid: 10.9.0.42@tcp\n      -     nid: 10.10.0.42@tcp1\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("udsp:\n    - idx: 0\n      src: tcp1\n"), std::string::npos) << text;
  auto again = dlc::parse_config(text);
  ASSERT_TRUE(again) << again.message() << "\n" << text;
  EXPECT_EQ(dlc::config_to_yaml(*again, true), text);
}

TEST(DlcParse, ErrorsNameTheKeyAndLine) {
  using namespace std::string_literals;
  struct Case {
    std::string yaml;
    const char* names;
  } cases[] = {
      {"net:\n    - net type: tcp\n      bogus: 1\n", "invalid key 'bogus' in a 'net' entry (line 3)"},
      {"route:\n    - net: tcp7\n      gateway: 10.9.0@tcp\n", "invalid value for 'gateway': bad NID '10.9.0@tcp'"},
      {"route:\n    - net: tcp7\n", "needs 'net' and 'gateway'"},
      {"global:\n    numa_range: -1\n", "invalid value: numa_range -1 is outside 0.."},
      // The words of lnetctl (Lustre's test suite greps for them).
      {"foobar:\n", "invalid key 'foobar'"},
      {"global:\n    discovery:\n", "'global': no value for 'discovery' (line 2)"},
      {"global:\n    discovery: foo\n", "invalid value 'foo' for 'discovery'"},
      {"global:\n    bogus_tunable: 1\n", "invalid key: unknown tunable 'bogus_tunable' (line 2)"},
      {"buffers:\n    tiny: -4\n", "invalid value -4 for 'tiny': out of range (0..16777216) (line 2)"},
      {"routing:\n    enable: 7\n", "'enable' must be 0 or 1"},
      {"net: [\n", "bad YAML at line"},
      {"nets:\n  - x\n", "invalid key 'nets': not a section"},
      {"peer:\n    - Multi-Rail: True\n", "without 'primary nid'"},
      {"udsp:\n    - src: tcp[1-x]\n", "'src'"},
      {"net:\n    - net type: tcp\n      local NI(s):\n        - tunables:\n              credits: many\n",
       "invalid value 'many' for 'credits': not a number (line 5)"},
      // Found by fuzz_dlc: a quoted name with NULs parsed, then printed as YAML that did not.
      {"net:\n    - net type: tcp\n      local NI(s):\n        - interfaces:\n              0: 'th1\0x'\n"s,
       "interface name 'th1\\x00x' has a character that is not allowed"},
      {"net:\n    - net type: tcp\n      local NI(s):\n        - interfaces:\n              0: [eth0]\n",
       "an interface must be a name (line 5)"},
  };
  for (const auto& c : cases) {
    auto r = dlc::parse_config(c.yaml);
    ASSERT_FALSE(r) << c.yaml;
    EXPECT_EQ(r.code(), -EINVAL);
    EXPECT_NE(r.message().find(c.names), std::string::npos) << c.yaml << "-> " << r.message();
  }
}

Nid gni(std::uint32_t a, unsigned net = 0) { return Nid::make(NetId::make(kGniLnd, net), a); }

class Commands : public ::testing::Test {
 protected:
  void SetUp() override {
    a = Instance::create(test::fabric_config({31}), kPidLustre).value();
    b = Instance::create(test::fabric_config({32}), kPidLustre).value();
    a->control().set_global("alive_router_check_interval", 0).or_throw();
  }
  dlc::Response run(Instance& i, const std::string& cmd, std::map<std::string, std::vector<std::string>> args = {},
                    std::string body = {}) {
    Request r;
    r.command = cmd;
    r.args = std::move(args);
    r.body = std::move(body);
    // Through the encoding as the control socket carries it.
    auto decoded = dlc::decode_request(dlc::encode_request(r));
    EXPECT_TRUE(decoded) << decoded.message();
    auto resp = dlc::execute(i, *decoded);
    auto back = dlc::decode_response(dlc::encode_response(resp));
    EXPECT_TRUE(back);
    return *back;
  }
  std::unique_ptr<Instance> a, b;
};

TEST_F(Commands, NetShow) {
  auto r = run(*a, "net show");
  EXPECT_EQ(r.rc, 0);
  // The netlink lnetctl's layout: lines in it appended to the output (Lustre's test 108
  // appends "      -     nid: ..." for a second NI) make a valid document.
  EXPECT_EQ(r.text,
            "net:\n-     net type: lo\n      local NI(s):\n      -     nid: 0@lo\n            status: up\n"
            "-     net type: gni\n      local NI(s):\n      -     nid: 31@gni\n            status: up\n");
  std::string appended = r.text +
                         "      -     nid: 32@gni\n            status: up\n            interfaces:\n"
                         "                  0: ipogif0\n";
  auto doc = dlc::parse_config(appended);
  ASSERT_TRUE(doc) << doc.message() << "\n" << appended;
  std::vector<std::string> nids;
  for (const NetConfig& nc : doc->nets)
    if (nc.nid) nids.push_back(nc.nid->to_string() + (nc.interfaces.empty() ? "" : " " + nc.interfaces[0]));
  EXPECT_EQ(nids, (std::vector<std::string>{"31@gni", "32@gni ipogif0"})) << appended;
  auto v = run(*a, "net show", {{"verbose", {"1"}}, {"net", {"gni"}}});
  EXPECT_NE(v.text.find("            tunables:\n                  peer_timeout: 180"), std::string::npos) << v.text;
  // lnetctl 2.17's levels: the counts by message type and health from -v 2, udsp info at 4.
  EXPECT_EQ(v.text.find("sent_stats:"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("put_egress_samples:"), std::string::npos) << v.text;
  auto v2 = run(*a, "net show", {{"verbose", {"2"}}, {"net", {"gni"}}});
  EXPECT_NE(v2.text.find("sent_stats:"), std::string::npos) << v2.text;
  EXPECT_NE(v2.text.find("health stats:"), std::string::npos) << v2.text;
  EXPECT_EQ(v2.text.find("udsp info:"), std::string::npos) << v2.text;
  EXPECT_NE(run(*a, "net show", {{"verbose", {"4"}}}).text.find("            udsp info:"), std::string::npos);
  auto none = run(*a, "net show", {{"net", {"tcp5"}}});
  EXPECT_EQ(none.rc, -ENOENT);
}

// LNet 2.17's operation latencies in "statistics" of net show -v and peer show -v
// (nanoseconds): a ping of b (a GET) is one get_rtt sample on a's NI and on b's peer NI;
// a PUT with an ACK one put_egress and one put_ack sample; with one sample min, max and
// avg are that sample; stats reset zeroes them.
TEST_F(Commands, OperationLatenciesAtVerbosity1) {
  auto figure = [&](const std::string& text, const std::string& key) {
    auto at = text.find(key + ": ");
    return at == std::string::npos ? -1L : std::stol(text.substr(at + key.size() + 2));
  };
  auto net1 = [&] { return run(*a, "net show", {{"verbose", {"1"}}, {"net", {"gni"}}}).text; };
  auto peer1 = [&] { return run(*a, "peer show", {{"verbose", {"1"}}, {"nid", {"32@gni"}}}).text; };
  for (const char* k : {"put_egress", "get_rtt", "put_ack"})
    for (const char* f : {"_samples", "_min_nsec", "_max_nsec", "_avg_nsec"})
      EXPECT_EQ(figure(net1(), std::string(k) + f), 0) << k << f << net1();
  ASSERT_TRUE(a->ping(ProcessId{gni(32), kPidLustre}, std::chrono::seconds(2)));
  EXPECT_EQ(figure(net1(), "get_rtt_samples"), 1) << net1();
  EXPECT_EQ(figure(peer1(), "get_rtt_samples"), 1) << peer1();
  long rtt = figure(peer1(), "get_rtt_min_nsec");
  EXPECT_GT(rtt, 0);
  EXPECT_EQ(figure(peer1(), "get_rtt_max_nsec"), rtt);
  EXPECT_EQ(figure(peer1(), "get_rtt_avg_nsec"), rtt);
  test::put_get(*a, *b, gni(32), 4096, 9);
  EXPECT_EQ(figure(net1(), "put_egress_samples"), 1) << net1();
  EXPECT_EQ(figure(net1(), "put_ack_samples"), 1) << net1();
  EXPECT_EQ(figure(peer1(), "put_ack_samples"), 1) << peer1();
  EXPECT_EQ(figure(peer1(), "get_rtt_samples"), 2) << "the GET of put_get" << peer1();
  EXPECT_LE(figure(peer1(), "put_egress_max_nsec"), figure(peer1(), "put_ack_max_nsec"))
      << "the PUT was sent before its ACK came";
  EXPECT_EQ(run(*a, "stats reset").rc, 0);
  EXPECT_EQ(figure(net1(), "get_rtt_samples"), 0) << net1();
  EXPECT_EQ(figure(peer1(), "put_ack_samples"), 0) << peer1();
}

TEST_F(Commands, ErrorsAreLnetctlErrorBlocks) {
  auto r = run(*a, "route add", {{"net", {"gni1"}}, {"gateway", {"bogus"}}});
  EXPECT_EQ(r.rc, -EINVAL);
  // The kernel's lnetctl: a document on stderr, the error's fields beside the object.
  EXPECT_EQ(r.text.rfind("---\nadd:\n-     route:\n      errno: -22\n      descr: ! \"", 0), 0u) << r.text;
  EXPECT_NE(r.text.find("\"\n...\n"), std::string::npos) << r.text;
  auto u = run(*a, "frobnicate");
  EXPECT_EQ(u.rc, -ENOSYS);
  auto s = run(*a, "set", {{"name", {"retry_count"}}, {"value", {"x"}}});
  EXPECT_EQ(s.rc, -EINVAL);
}

// lnetctl route add --gateway 192.168.50.[11-15]@tcp: one route per gateway; a range that
// fails part-way adds none, a deletion of a range deletes all or none.
TEST_F(Commands, AGatewayRangeIsOneRoutePerGateway) {
  a->control().set_global("alive_router_check_interval", 0).or_throw();
  auto r = run(*a, "route add", {{"net", {"tcp1"}}, {"gateway", {"[40-44/2]@gni"}}});
  ASSERT_EQ(r.rc, 0) << r.text;
  auto routes = a->control().route_info();
  ASSERT_EQ(routes.size(), 3u);
  EXPECT_EQ(routes[0].gateway, *Nid::parse("40@gni"));
  EXPECT_EQ(routes[2].gateway, *Nid::parse("44@gni"));
  // 42 has its route already: the range is refused as a whole.
  auto again = run(*a, "route add", {{"net", {"tcp1"}}, {"gateway", {"[45-47]@gni,42@gni"}}});
  EXPECT_NE(again.rc, 0);
  EXPECT_NE(again.text.find("via 42@gni"), std::string::npos) << again.text;
  EXPECT_EQ(a->control().route_info().size(), 3u) << "45..47 taken back";
  auto big = run(*a, "route add", {{"net", {"tcp2"}}, {"gateway", {"[1-200]@gni"}}});
  EXPECT_EQ(big.rc, -E2BIG) << big.text;
  EXPECT_NE(big.text.find("[1-200]@gni"), std::string::npos) << big.text;
  auto part = run(*a, "route del", {{"net", {"tcp1"}}, {"gateway", {"[40-46/2]@gni"}}});
  EXPECT_EQ(part.rc, -ENOENT) << part.text;
  EXPECT_NE(part.text.find("via 46@gni"), std::string::npos) << part.text;
  EXPECT_EQ(a->control().route_info().size(), 3u) << "nothing deleted";
  ASSERT_EQ(run(*a, "route del", {{"net", {"tcp1"}}, {"gateway", {"[40-44/2]@gni"}}}).rc, 0);
  EXPECT_TRUE(a->control().route_info().empty());
}

// The kernel's lnetctl: --nid alone names the net; --peer-timeout -1 is the default, as in
// YAML.
TEST_F(Commands, NetAddByNidAloneAndPeerTimeoutMinusOne) {
  auto r = run(*a, "net add", {{"nid", {"37@gni6"}}, {"peer-timeout", {"-1"}}});
  ASSERT_EQ(r.rc, 0) << r.text;
  auto v = run(*a, "net show", {{"verbose", {"1"}}, {"net", {"gni6"}}});
  EXPECT_NE(v.text.find("nid: 37@gni6"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("peer_timeout: 180"), std::string::npos) << v.text;
  EXPECT_NE(run(*a, "net add", {{"nid", {"37@"}}}).rc, 0);
  EXPECT_NE(run(*a, "net add", {{"nid", {"38@gni7"}}, {"peer-timeout", {"-2"}}}).rc, 0);
}

TEST_F(Commands, ARouteHasItsHealthSensitivity) {
  ASSERT_EQ(run(*a, "route add", {{"net", {"gni9"}}, {"gateway", {"32@gni"}}, {"health_sensitivity", {"2"}}}).rc, 0);
  ASSERT_EQ(run(*a, "route add", {{"net", {"gni8"}}, {"gateway", {"32@gni"}}}).rc, 0);
  // lnetctl's -v shows no sensitivity; ours adds it at -v 4 (docs/interop.md).
  auto show = run(*a, "route show", {{"verbose", {"1"}}});
  EXPECT_NE(show.text.find("net: gni9\n      gateway: 32@gni\n      hop: -1\n      priority: 0\n      state: "),
            std::string::npos)
      << show.text;
  auto v4 = run(*a, "route show", {{"verbose", {"4"}}});
  EXPECT_NE(v4.text.find("health_sensitivity: 2\n"), std::string::npos) << v4.text;
  auto exported = run(*a, "export", {{"backup", {}}});
  EXPECT_NE(exported.text.find("gateway: 32@gni\n      hop: -1\n      priority: 0\n      health_sensitivity: 2\n"),
            std::string::npos)
      << exported.text;
  EXPECT_EQ(exported.text.find("health_sensitivity: 1\n"), std::string::npos)
      << "the default (1) is not written, as lnetctl export does not: " << exported.text;
  EXPECT_NE(exported.text.find("net: gni8\n      gateway: 32@gni\n      hop: -1\n      priority: 0\n"),
            std::string::npos)
      << exported.text;
  auto bad = run(*a, "route add", {{"net", {"gni7"}}, {"gateway", {"32@gni"}}, {"health_sensitivity", {"1001"}}});
  EXPECT_EQ(bad.rc, -EINVAL);
  EXPECT_NE(bad.text.find("1001"), std::string::npos) << bad.text;
}

TEST_F(Commands, OptionsThatAreNotBuiltAreRefused) {
  // Options the real lnetctl has and this build does not take: refused, named.
  struct Case {
    const char* cmd;
    std::map<std::string, std::vector<std::string>> args;
    const char* names;
  } cases[] = {
      {"net add", {{"net", {"gni5"}}, {"auth-key", {"x"}}}, "not supported yet: net add --auth-key"},
      {"service-id", {}, "not supported yet: service-id"},
      // The fabric's driver fixes its timeout; only tcp has connections per peer.
      {"net set", {{"net", {"gni"}}, {"lnd-timeout", {"5"}}}, "not supported yet: the driver of gni"},
      {"net set", {{"net", {"gni"}}, {"conns-per-peer", {"1"}}}, "not supported yet: conns_per_peer on gni"},
  };
  for (const auto& c : cases) {
    auto r = run(*a, c.cmd, c.args);
    EXPECT_EQ(r.rc, -EOPNOTSUPP) << c.cmd;
    EXPECT_NE(r.text.find(c.names), std::string::npos) << r.text;
  }
  EXPECT_TRUE(a->control().route_configs().empty()) << "a refused command changes nothing";
  auto unknown = run(*a, "net show", {{"bogus", {}}});
  EXPECT_EQ(unknown.rc, -EINVAL);
  EXPECT_NE(unknown.text.find("'net show' has no option --bogus"), std::string::npos) << unknown.text;
  // Tunables of features not built: the value that says what the code does is taken.
  EXPECT_EQ(run(*a, "set", {{"name", {"drop_asym_route"}}, {"value", {"1"}}}).rc, 0);
  auto d = run(*a, "set", {{"name", {"router_sensitivity"}}, {"value", {"101"}}});
  EXPECT_EQ(d.rc, -EINVAL);
  EXPECT_NE(d.text.find("router_sensitivity"), std::string::npos) << d.text;
  auto g = run(*a, "global show");
  EXPECT_NE(g.text.find("    drop_asym_route: 1\n"), std::string::npos) << g.text;
  EXPECT_NE(g.text.find("    discovery: 0\n"), std::string::npos) << g.text;  // fabric_config's
  // lnd_timeout is what LNet derives from transaction_timeout and retry_count.
  EXPECT_NE(
      g.text.find("    transaction_timeout: 150\n    health_sensitivity: 100\n    recovery_interval: 1\n"
                  "    router_sensitivity: 100\n    lnd_timeout: 49\n    response_tracking: 3\n    recovery_limit: 0\n"
                  "    max_recovery_ping_interval: 900\n"),
      std::string::npos)
      << g.text;
  EXPECT_EQ(run(*a, "set", {{"name", {"transaction_timeout"}}, {"value", {"31"}}}).rc, 0);
  EXPECT_NE(run(*a, "global show").text.find("    lnd_timeout: 10\n"), std::string::npos);
  auto ro = run(*a, "set", {{"name", {"lnd_timeout"}}, {"value", {"5"}}});
  EXPECT_EQ(ro.rc, -EINVAL);
  EXPECT_NE(ro.text.find("lnd_timeout is read-only"), std::string::npos) << ro.text;
}

TEST_F(Commands, HealthByHandAndTheRecoveryQueues) {
  auto empty = run(*a, "debug recovery", {{"local", {}}});
  EXPECT_EQ(empty.rc, 0);
  EXPECT_EQ(empty.text, "");
  ASSERT_EQ(run(*a, "net set", {{"nid", {"31@gni"}}, {"health", {"0"}}}).rc, 0);
  auto local = run(*a, "debug recovery", {{"local", {}}});
  EXPECT_EQ(local.text, "Local NI recovery:\n    nid-0: 31@gni\n");
  auto v = run(*a, "net show", {{"verbose", {"2"}}, {"net", {"gni"}}});
  EXPECT_NE(v.text.find("health value: 0\n"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("ping_count: "), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("next_ping: "), std::string::npos) << v.text;
  // A peer NI exists once something went to it.
  ASSERT_TRUE(a->ping(ProcessId{gni(32), kPidLustre}, std::chrono::seconds(5), 16));
  ASSERT_EQ(run(*a, "peer set", {{"nid", {"32@gni"}}, {"health", {"10"}}}).rc, 0);
  EXPECT_EQ(run(*a, "debug recovery", {{"peer", {}}}).text, "Peer NI recovery:\n    nid-0: 32@gni\n");
  // Bad values name themselves; nothing is applied.
  auto high = run(*a, "net set", {{"nid", {"31@gni"}}, {"health", {"1001"}}});
  EXPECT_EQ(high.rc, -EINVAL);
  EXPECT_NE(high.text.find("1001"), std::string::npos) << high.text;
  auto nobody = run(*a, "peer set", {{"nid", {"77@gni"}}, {"health", {"5"}}});
  EXPECT_EQ(nobody.rc, -ENOENT);
  EXPECT_NE(nobody.text.find("no peer NI 77@gni"), std::string::npos) << nobody.text;
  auto bad = run(*a, "net set", {{"nid", {"31@bogus"}}, {"health", {"5"}}});
  EXPECT_EQ(bad.rc, -EINVAL);
  EXPECT_EQ(run(*a, "net set", {{"nid", {"31@gni"}}}).rc, -EINVAL) << "no --health";
  auto both = run(*a, "debug recovery", {{"local", {}}, {"peer", {}}});
  EXPECT_EQ(both.rc, -EINVAL);
  // peer set --state (the kernel's test-only switch): the configuration bits change,
  // those discovery owns must stay as they are.
  auto bits_of = [&](Nid nid) {
    for (const PeerInfo& p : a->control().peer_info())
      for (const PeerNiInfo& n : p.nis)
        if (n.nid == nid) return p.state;
    return 0xFFFFFFFFu;
  };
  std::uint32_t cur = bits_of(gni(32));
  ASSERT_NE(cur, 0xFFFFFFFFu);
  constexpr std::uint32_t kConfigured = 0x8, kLockPrimary = 0x100000, kDiscovering = 0x40;
  std::uint32_t want = cur ^ (kConfigured | kLockPrimary);
  auto set = run(*a, "peer set", {{"nid", {"32@gni"}}, {"state", {std::to_string(want)}}});
  ASSERT_EQ(set.rc, 0) << set.text;
  EXPECT_EQ(bits_of(gni(32)), want);
  auto odd = run(*a, "peer set", {{"nid", {"32@gni"}}, {"state", {std::to_string(want ^ kDiscovering)}}});
  EXPECT_EQ(odd.rc, -EOPNOTSUPP);
  EXPECT_NE(odd.text.find("not supported yet: peer state bits 0x40"), std::string::npos) << odd.text;
  EXPECT_EQ(bits_of(gni(32)), want) << "nothing changed";
  EXPECT_EQ(run(*a, "peer set", {{"all", {}}, {"state", {"1"}}}).rc, -EINVAL) << "--state names one peer";
}

TEST_F(Commands, DebugPeerWritesTheLogAndNamesUnknownPeers) {
  ASSERT_TRUE(a->ping(ProcessId{gni(32), kPidLustre}, std::chrono::seconds(5), 16));
  auto d = run(*a, "debug peer", {{"prim_nid", {"32@gni"}}});
  EXPECT_EQ(d.rc, 0) << d.text;
  EXPECT_EQ(d.text, "") << "the dump goes to the log, as LNet's goes to the kernel log";
  auto unknown = run(*a, "debug peer", {{"prim_nid", {"77@gni"}}});
  EXPECT_EQ(unknown.rc, -ENOENT);
  EXPECT_NE(unknown.text.find("no peer with NID 77@gni"), std::string::npos) << unknown.text;
  EXPECT_EQ(run(*a, "debug peer").rc, -EINVAL);
  EXPECT_EQ(run(*a, "debug peer", {{"prim_nid", {"32@bogus"}}}).rc, -EINVAL);
}

TEST_F(Commands, PingFromAGivenSource) {
  ASSERT_EQ(run(*a, "net add", {{"net", {"gni"}}, {"nid", {"36@gni"}}}).rc, 0);
  test::Fabric::instance().clear_sent();
  auto r = run(*a, "ping", {{"nid", {"32@gni"}}, {"source", {"36@gni"}}});
  EXPECT_EQ(r.rc, 0) << r.text;
  bool from_36 = false;
  for (const auto& s : test::Fabric::instance().sent())
    from_36 = from_36 || (s.type == MsgType::Get && s.src == gni(36));
  EXPECT_TRUE(from_36) << "the ping's GET left from --source";
  auto bad = run(*a, "ping", {{"nid", {"32@gni"}}, {"source", {"77@gni"}}});
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.text.find("not one of our NIDs"), std::string::npos) << bad.text;
}

TEST_F(Commands, RoutesPeersSetAndShow) {
  EXPECT_EQ(run(*a, "route add", {{"net", {"gni9"}}, {"gateway", {"32@gni"}}, {"hop", {"2"}}, {"priority", {"3"}}}).rc,
            0);
  auto r = run(*a, "route show", {{"verbose", {"1"}}});
  EXPECT_EQ(r.text,
            "route:\n-     net: gni9\n      gateway: 32@gni\n      hop: 2\n      priority: 3\n"
            "      state: up\n      type: multi-hop\n");
  auto r4 = run(*a, "route show", {{"verbose", {"4"}}});
  EXPECT_NE(r4.text.find("      health_sensitivity: 1\n"), std::string::npos) << r4.text;
  EXPECT_NE(r4.text.find("      gateway health: 1000\n"), std::string::npos) << r4.text;
  EXPECT_EQ(run(*a, "route del", {{"net", {"gni9"}}, {"gateway", {"32@gni"}}}).rc, 0);
  EXPECT_EQ(run(*a, "route del", {{"net", {"gni9"}}, {"gateway", {"32@gni"}}}).rc, -ENOENT);

  EXPECT_EQ(run(*a, "peer add", {{"prim_nid", {"40@gni"}}, {"nid", {"41@gni,42@gni"}}}).rc, 0);
  auto p = run(*a, "peer show", {{"nid", {"41@gni"}}});
  EXPECT_NE(p.text.find("primary nid: 40@gni\n      Multi-Rail: true"), std::string::npos) << p.text;
  EXPECT_EQ(run(*a, "peer del", {{"prim_nid", {"40@gni"}}}).rc, 0);

  EXPECT_EQ(run(*a, "set", {{"name", {"numa_range"}}, {"value", {"60"}}}).rc, 0);
  EXPECT_EQ(run(*a, "set", {{"name", {"small_buffers"}}, {"value", {"100"}}}).rc, 0);
  EXPECT_EQ(run(*a, "set", {{"name", {"routing"}}, {"value", {"1"}}}).rc, 0);
  auto g = run(*a, "global show");
  EXPECT_NE(g.text.find("    numa_range: 60\n"), std::string::npos) << g.text;
  auto rs = run(*a, "routing show");
  EXPECT_NE(rs.text.find("- enable: 1"), std::string::npos) << rs.text;
  EXPECT_NE(rs.text.find("small: 100"), std::string::npos) << rs.text;
  auto st = run(*a, "stats show");
  EXPECT_EQ(st.text.rfind("statistics:\n    msgs_alloc: ", 0), 0u) << st.text;
}

// As the kernel's: a gateway's peer is not deleted while a route goes through it.
TEST_F(Commands, AGatewaysPeerStaysWhileARouteUsesIt) {
  ASSERT_EQ(run(*a, "peer add", {{"prim_nid", {"40@gni"}}, {"nid", {"41@gni"}}}).rc, 0);
  ASSERT_EQ(run(*a, "route add", {{"net", {"gni9"}}, {"gateway", {"41@gni"}}}).rc, 0);
  auto r = run(*a, "peer del", {{"prim_nid", {"40@gni"}}});
  EXPECT_EQ(r.rc, -EINVAL);
  EXPECT_NE(r.text.find("peer 40@gni is a router (41@gni is the gateway of a route to gni9)"), std::string::npos)
      << r.text;
  EXPECT_EQ(run(*a, "peer del", {{"prim_nid", {"41@gni"}}}).rc, -EINVAL) << "nor one of its NIDs";
  ASSERT_EQ(run(*a, "route del", {{"net", {"gni9"}}, {"gateway", {"41@gni"}}}).rc, 0);
  EXPECT_EQ(run(*a, "peer del", {{"prim_nid", {"40@gni"}}}).rc, 0);
}

TEST_F(Commands, PingAndDiscover) {
  auto r = run(*a, "ping", {{"nid", {"32@gni", "99@gni", "nonsense"}}, {"timeout", {"1"}}});
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.text.find("ping:\n- primary nid: 32@gni\n  Multi-Rail: false\n  peer_ni:\n  - nid: 32@gni\n"),
            std::string::npos)
      << r.text;
  EXPECT_NE(r.text.find("manage:\n- ping:\n  errno: "), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("failed to ping 99@gni"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("bad process id ''nonsense''"), std::string::npos) << r.text;
  auto d = run(*a, "discover", {{"nid", {"32@gni"}}});
  EXPECT_EQ(d.rc, 0) << d.text;
  EXPECT_NE(core::Core::of(*a).state().find_peer_ni(gni(32)), nullptr);
}

TEST_F(Commands, ImportIsAllOrNothing) {
  std::string doc =
      "net:\n    - net type: gni3\n      local NI(s):\n        - nid: 33@gni3\n"
      "    - net type: tcp\n      local NI(s):\n        - interfaces:\n              0: no-such-if0\n"
      "route:\n    - net: gni7\n      gateway: 32@gni\n";
  auto before = a->nids();
  auto r = run(*a, "import", {}, doc);
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.text.find("nothing was applied"), std::string::npos) << r.text;
  EXPECT_EQ(a->nids(), before) << "the gni3 NI that came up was taken down again";
  EXPECT_TRUE(a->control().route_info().empty());
}

// import --merge (lnetd.service's reload): a second import of the whole file adds what
// is new and leaves what is there, where plain import fails on what exists.
TEST_F(Commands, ImportMergeAddsWhatIsNewAndLeavesTheRest) {
  std::string doc =
      "net:\n    - net type: gni3\n      local NI(s):\n        - nid: 33@gni3\n"
      "peer:\n    - primary nid: 50@gni\n      peer ni:\n        - nid: 51@gni\n"
      "udsp:\n    - src: gni3\n      action:\n          priority: 0\n"
      "route:\n    - net: gni7\n      gateway: 32@gni\n";
  ASSERT_EQ(run(*a, "import", {}, doc).rc, 0);
  auto again = run(*a, "import", {}, doc);
  EXPECT_NE(again.rc, 0) << "plain import of what exists fails, as the kernel's";
  std::string before = run(*a, "export", {{"backup", {}}}).text;
  auto same = run(*a, "import", {{"merge", {}}}, doc);
  ASSERT_EQ(same.rc, 0) << same.text;
  EXPECT_EQ(run(*a, "export", {{"backup", {}}}).text, before) << "nothing changed";
  for (const char* kept : {"# net 33@gni3: configured already", "# route to gni7 via 32@gni: configured already",
                           "# peer 50@gni: configured already", "# udsp rule gni3: configured already"})
    EXPECT_NE(same.text.find(kept), std::string::npos) << kept << " in:\n" << same.text;
  // The file grows a route and a NID of the peer: both added, the rest left.
  std::string grown = doc + "    - net: gni8\n      gateway: 32@gni\n";
  grown.replace(grown.find("        - nid: 51@gni\n"), 0, "        - nid: 52@gni\n");
  auto more = run(*a, "import", {{"merge", {}}}, grown);
  ASSERT_EQ(more.rc, 0) << more.text;
  EXPECT_EQ(a->control().route_info().size(), 2u);
  EXPECT_NE(run(*a, "peer show", {{"nid", {"50@gni"}}}).text.find("52@gni"), std::string::npos);
  // What cannot apply changes nothing: a route through a gateway that is our own NID.
  std::string now = run(*a, "export", {{"backup", {}}}).text;
  auto bad = run(*a, "import", {{"merge", {}}}, grown + "    - net: gni9\n      gateway: 33@gni3\n");
  EXPECT_NE(bad.rc, 0);
  EXPECT_EQ(run(*a, "export", {{"backup", {}}}).text, now);
}

// What the show commands print, saved as a configuration, imports: every key they print
// is one import reads or ignores, and it configures what was shown.
TEST_F(Commands, ShowOutputsImportCleanly) {
  ASSERT_EQ(run(*a, "route add", {{"net", {"gni8"}}, {"gateway", {"32@gni"}}}).rc, 0);
  ASSERT_EQ(run(*a, "peer add", {{"prim_nid", {"50@gni"}}, {"nid", {"51@gni"}}}).rc, 0);
  ASSERT_EQ(run(*a, "udsp add", {{"src", {"gni"}}, {"priority", {"1"}}}).rc, 0);
  struct Show {
    const char* cmd;
    std::map<std::string, std::vector<std::string>> args;
  } shows[] = {{"net show", {}},
               {"net show", {{"verbose", {"4"}}}},
               {"peer show", {{"verbose", {"4"}}}},
               {"route show", {{"verbose", {}}}},
               {"routing show", {}},
               {"global show", {}},
               {"stats show", {}},
               {"udsp show", {}},
               {"export", {}},
               {"export", {{"backup", {}}}}};
  for (const auto& s : shows) {
    auto out = run(*a, s.cmd, s.args);
    ASSERT_EQ(out.rc, 0) << s.cmd;
    auto cfg = dlc::parse_config(out.text);
    EXPECT_TRUE(cfg) << s.cmd << ": " << cfg.message() << "\n" << out.text;
    if (cfg) {
      EXPECT_TRUE(cfg->warnings.empty()) << s.cmd << ": " << cfg->warnings.front();
    }
  }
}

TEST_F(Commands, ExportImportExportRoundTrips) {
  // Configure A by commands, export, import into a fresh C, export again.
  ASSERT_EQ(run(*a, "net add", {{"net", {"gni4"}}, {"nid", {"34@gni4"}}, {"peer-credits", {"16"}}}).rc, 0);
  ASSERT_EQ(run(*a, "route add", {{"net", {"gni8"}}, {"gateway", {"32@gni"}}, {"priority", {"1"}}}).rc, 0);
  ASSERT_EQ(run(*a, "peer add", {{"prim_nid", {"50@gni"}}, {"nid", {"51@gni"}}}).rc, 0);
  ASSERT_EQ(run(*a, "set", {{"name", {"max_interfaces"}}, {"value", {"300"}}}).rc, 0);
  ASSERT_EQ(run(*a, "set", {{"name", {"routing"}}, {"value", {"1"}}}).rc, 0);
  ASSERT_EQ(run(*a, "udsp add", {{"src", {"gni4"}}, {"priority", {"0"}}}).rc, 0);
  std::string first = run(*a, "export", {{"backup", {}}}).text;
  a.reset();  // frees 31@gni and 34@gni4 on the fabric
  test::Fabric::install();
  auto c = Instance::create(Config{}, kPidLustre).value();  // 0@lo only: the import brings the rest
  auto imp = run(*c, "import", {}, first);
  ASSERT_EQ(imp.rc, 0) << imp.text << "\n" << first;
  std::string second = run(*c, "export", {{"backup", {}}}).text;
  EXPECT_EQ(second, first);
  EXPECT_NE(first.find("net type: gni4"), std::string::npos) << first;
  EXPECT_NE(first.find("gateway: 32@gni"), std::string::npos);
  EXPECT_NE(first.find("routing:\n    enable: 1"), std::string::npos);
  // --del takes the items away again.
  auto del = run(*c, "import", {{"del", {}}}, "route:\n    - net: gni8\n      gateway: 32@gni\n");
  EXPECT_EQ(del.rc, 0) << del.text;
  EXPECT_TRUE(c->control().route_info().empty());
}

// import --del of a peer (Lustre's test suite, tests 14-18): a NID list that names the
// primary deletes the peer; one that does not deletes those NIDs only.
TEST_F(Commands, ImportDelOfAPeerWhoseListNamesItsPrimaryDeletesIt) {
  const std::string peer =
      "peer:\n    - primary nid: 1.1.1.1@tcp\n      Multi-Rail: True\n      peer ni:\n"
      "        - nid: 1.1.1.1@tcp\n        - nid: 2.2.2.2@tcp\n        - nid: 3.3.3.3@tcp\n";
  auto peers = [&] {
    std::vector<std::string> out;
    for (const PeerConfig& p : a->control().configured_peers()) {
      out.push_back(p.primary.to_string());
      for (Nid n : p.nids) out.push_back(n.to_string());
    }
    return out;
  };
  ASSERT_EQ(run(*a, "import", {}, peer).rc, 0);
  ASSERT_EQ(run(*a, "import", {{"del", {}}}, peer).rc, 0);
  EXPECT_TRUE(peers().empty()) << "the primary stayed";
  ASSERT_EQ(run(*a, "import", {}, peer).rc, 0);
  auto subset = run(*a, "import", {{"del", {}}},
                    "peer:\n    - primary nid: 1.1.1.1@tcp\n      peer ni:\n        - nid: 3.3.3.3@tcp\n");
  ASSERT_EQ(subset.rc, 0) << subset.text;
  EXPECT_EQ(peers(), (std::vector<std::string>{"1.1.1.1@tcp", "2.2.2.2@tcp"}));
}

// export --backup after an import that named every CPT writes what a plain net add
// writes: no CPT list (Lustre's test 0 compares the two).
// lnetctl export --backup lists an NI's CPTs always; an NI on every CPT exports the same
// whether it came with the whole list or with none.
TEST_F(Commands, AnNiOnEveryCptExportsTheSameWithOrWithoutAList) {
  std::string all = "[";
  for (unsigned k = 0; k < a->control().cpt_count(); ++k) all += (k ? "," : "") + std::to_string(k);
  all += "]";
  auto imp =
      run(*a, "import", {},
          "net:\n    - net type: gni9\n      local NI(s):\n        - nid: 39@gni9\n          CPT: \"" + all + "\"\n");
  ASSERT_EQ(imp.rc, 0) << imp.text;
  std::string listed = run(*a, "export", {{"backup", {}}}).text;
  EXPECT_NE(listed.find("      -     nid: 39@gni9\n"), std::string::npos) << listed;
  EXPECT_NE(listed.find("CPT: \"" + all + "\""), std::string::npos) << listed;
  ASSERT_EQ(run(*a, "net del", {{"net", {"gni9"}}}).rc, 0);
  ASSERT_EQ(run(*a, "net add", {{"net", {"gni9"}}, {"nid", {"39@gni9"}}}).rc, 0);
  EXPECT_EQ(run(*a, "export", {{"backup", {}}}).text, listed);
}

TEST_F(Commands, UdspPrioritiesReachSelection) {
  ASSERT_EQ(run(*a, "net add", {{"net", {"gni"}}, {"nid", {"35@gni"}}}).rc, 0);
  ASSERT_EQ(run(*a, "udsp add", {{"src", {"35@gni"}}, {"priority", {"0"}}}).rc, 0);
  EXPECT_EQ(core::Core::of(*a).state().find_ni(gni(35))->sel_priority.load(), 0u);
  EXPECT_EQ(core::Core::of(*a).state().find_ni(gni(31))->sel_priority.load(), UINT_MAX);
  EXPECT_EQ(run(*a, "udsp add", {{"src", {"35@gni"}}, {"priority", {"0"}}}).rc, -EALREADY);
  auto show = run(*a, "udsp show");
  EXPECT_NE(show.text.find("udsp:\n    - idx: 0\n      src: 35@gni\n      action:\n          priority: 0\n"),
            std::string::npos)
      << show.text;
  EXPECT_EQ(run(*a, "udsp del", {{"all", {}}}).rc, 0);
  EXPECT_EQ(core::Core::of(*a).state().find_ni(gni(35))->sel_priority.load(), UINT_MAX) << "deleting reverts";
  // A router rule: shown as added, and in YAML with its rte.
  EXPECT_EQ(run(*a, "udsp add", {{"dst", {"gni"}}, {"rte", {"32@gni"}}}).rc, 0);
  show = run(*a, "udsp show");
  EXPECT_NE(show.text.find("dst: gni\n      rte: 32@gni\n"), std::string::npos) << show.text;
  EXPECT_EQ(run(*a, "udsp add", {{"rte", {"32@gni"}}}).rc, -EINVAL) << "a router rule needs --dst";
}

}  // namespace
}  // namespace lnet
