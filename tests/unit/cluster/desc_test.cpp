// The virtual cluster's description: what a good one builds (lnetd configurations that
// lnetd's reader takes, hosts, hostfiles, the plan) and every kind of bad one refused
// naming its line.
#include <gtest/gtest.h>

#include <lnet/dlc.hpp>

#include "desc.hpp"

namespace lnet::cluster {
namespace {

const HostFacts kHost{"buildhost.example.org", {"localhost", "buildhost", "buildhost.example.org", "myalias"}};

constexpr const char* kGood = R"(# two compute nodes, two proxy/routers, a server behind them
cluster demo
fabric mpi  10.90.0.0/24
fabric tcp0 10.90.1.0/24
node login login          mpi=10
node c1    compute        mpi=11
node c2    compute        mpi=12 slots=4
node r1    server,router  mpi=21 tcp0=21
node r2    server,router  mpi=10.90.0.22 tcp0=22
node s1    server         tcp0=31
node s2    server         tcp0=32 lnetd=no
route s1 mpi r1 r2
proxy r1 r2
proxy r2 -- --client-timeout 5
daemon s2 lnet-xfer serve --nid {s2.tcp0}@tcp --route mpi@{r1.tcp0}@tcp   # the data server
global router_ping_timeout 2
)";

Result<Description> parse_text(const std::string& text, const std::string& name = "") {
  return parse(text, "t.cluster", kHost, name);
}

// The failure message of `text`, or "" when it parses.
std::string error_of(const std::string& text) {
  auto d = parse_text(text);
  return d ? "" : d.message();
}

const std::string kFabrics = "fabric mpi 10.90.0.0/24\nfabric tcp0 10.90.1.0/24\n";

TEST(ClusterDesc, AGoodDescriptionParses) {
  auto d = parse_text(kGood);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->name, "demo");
  ASSERT_EQ(d->nodes.size(), 7u);
  EXPECT_EQ(d->nodes[d->login].name, "login");
  EXPECT_EQ(d->nodes[1].slots, 2);  // compute: 2 unless given
  EXPECT_EQ(d->nodes[2].slots, 4);
  EXPECT_EQ(d->nodes[0].slots, 1);
  EXPECT_FALSE(d->nodes[1].lnetd);
  EXPECT_TRUE(d->nodes[3].lnetd);
  EXPECT_TRUE(d->nodes[5].lnetd);
  EXPECT_FALSE(d->nodes[6].lnetd);
  EXPECT_EQ(ip_string(d->nodes[4].addrs[0].ip), "10.90.0.22");
  ASSERT_EQ(d->proxies.size(), 2u);
  EXPECT_EQ(d->proxies[0].name, "r1");
  EXPECT_EQ(d->proxies[0].nodes.size(), 2u);
  EXPECT_EQ(d->proxies[1].name, "r2");
  EXPECT_EQ(d->proxies[1].args, (std::vector<std::string>{"--client-timeout", "5"}));
  ASSERT_EQ(d->daemons.size(), 1u);
  EXPECT_EQ(d->daemons[0].command, "lnet-xfer serve --nid 10.90.1.32@tcp --route mpi@10.90.1.21@tcp");
  ASSERT_EQ(d->routes.size(), 1u);
  EXPECT_EQ(d->routes[0].net.to_string(), "mpi");
}

TEST(ClusterDesc, TheNameGivenOverridesTheClusterLine) {
  auto d = parse_text(kGood, "other");
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->name, "other");
  EXPECT_FALSE(parse_text(kGood, "Bad_Name"));
  auto unnamed = parse_text(kFabrics + "node c1 compute mpi=1\n");
  ASSERT_TRUE(unnamed);
  EXPECT_EQ(unnamed->name, "lc");
}

TEST(ClusterDesc, LnetdConfigurationsAreWhatLnetdReads) {
  auto d = parse_text(kGood);
  ASSERT_TRUE(d) << d.message();
  for (const Node& n : d->nodes) {
    if (!n.lnetd) continue;
    std::string y = lnetd_yaml(*d, n);
    auto cfg = dlc::parse_config(y);
    ASSERT_TRUE(cfg) << n.name << ": " << cfg.message() << "\n" << y;
    ASSERT_TRUE(cfg->selftest && cfg->selftest->enable);
    ASSERT_TRUE(cfg->global);
    EXPECT_EQ(cfg->global->router_ping_timeout, 2);
  }
  std::string r1 = lnetd_yaml(*d, d->nodes[3]);
  EXPECT_NE(r1.find("nid: 10.90.0.21@mpi"), std::string::npos) << r1;  // the UP LND
  EXPECT_NE(r1.find("0: tcp0"), std::string::npos) << r1;
  EXPECT_NE(r1.find("routing:\n    enable: 1"), std::string::npos) << r1;
  auto s1 = dlc::parse_config(lnetd_yaml(*d, d->nodes[5]));
  ASSERT_TRUE(s1);
  ASSERT_EQ(s1->routes.size(), 2u);
  EXPECT_EQ(s1->routes[0].gateway.to_string(), "10.90.1.21@tcp");
  EXPECT_EQ(s1->routes[1].gateway.to_string(), "10.90.1.22@tcp");
  EXPECT_FALSE(s1->routing.value_or(false));
}

TEST(ClusterDesc, HostsAndHostfiles) {
  auto d = parse_text(kGood);
  ASSERT_TRUE(d);
  std::string h = hosts_file(*d);
  EXPECT_NE(h.find("10.90.0.11\tc1\n"), std::string::npos) << h;
  EXPECT_NE(h.find("10.90.1.31\ts1\n"), std::string::npos) << h;  // not on mpi: its first address
  EXPECT_EQ(hostfile(*d, kCompute, false), "c1 slots=2\nc2 slots=4\n");
  EXPECT_EQ(hostfile(*d, kCompute, true), "c1:2\nc2:4\n");
  std::string plan = shell_plan(*d);
  EXPECT_NE(plan.find("CL_PROXY_JOBS=('r1' 'r2')"), std::string::npos) << plan;
  EXPECT_NE(plan.find("[r1]='r1 r2'"), std::string::npos) << plan;
  EXPECT_NE(plan.find(R"([r2]=''\''--client-timeout'\'' '\''5'\''')"), std::string::npos) << plan;
  EXPECT_NE(plan.find("CL_MPI_SUBNET=10.90.0.0/24"), std::string::npos) << plan;
  EXPECT_NE(plan.find("[r1]='mpi=10.90.0.21/24 tcp0=10.90.1.21/24'"), std::string::npos) << plan;
}

// The MPI network on a kernel type (net=gni), two fabrics of one tcp net (multi-rail),
// and kernel nodes: what their lnetctl imports, their modules' parameters, their NICs'
// nets; they are in no MPI hostfile.
TEST(ClusterDesc, KernelNodesAndTheMpiNetworkOnAKernelType) {
  auto d = parse_text(R"(fabric mpi  10.90.0.0/24 net=gni
fabric tcp0 10.90.1.0/24
fabric rail 10.90.2.0/24 net=tcp
fabric tcp1 10.90.3.0/24
node c1 compute       mpi=11
node r1 server,router mpi=21 tcp0=21
node k1 server        tcp0=41 rail=41 kind=kernel
node kr router        tcp0=42 tcp1=42 kind=kernel
node s3 server        tcp1=43
route k1 gni r1
route s3 gni kr
route r1 tcp1 kr
global transaction_timeout 10
global router_ping_timeout 2
)");
  ASSERT_TRUE(d) << d.message();
  EXPECT_TRUE(d->fabrics[0].is_mpi());
  EXPECT_EQ(d->fabrics[0].net.to_string(), "gni");
  EXPECT_EQ(d->fabrics[2].net.to_string(), "tcp");
  const Node& r1 = d->nodes[1];
  const Node& k1 = d->nodes[2];
  const Node& kr = d->nodes[3];
  EXPECT_TRUE(k1.kernel && kr.kernel && !k1.lnetd && !kr.lnetd);
  std::string ry = lnetd_yaml(*d, r1);
  EXPECT_NE(ry.find("net type: gni\n      local NI(s):\n        - nid: 173670421@gni"), std::string::npos) << ry;
  EXPECT_NE(ry.find("- net: tcp1\n      gateway: 10.90.1.42@tcp"), std::string::npos) << ry;
  std::string ky = kernel_yaml(*d, k1);
  EXPECT_NE(ky.find("net type: tcp\n      local NI(s):\n        - interfaces:\n              0: eth0\n    - net type: "
                    "tcp\n      local NI(s):\n        - interfaces:\n              0: eth1"),
            std::string::npos)
      << ky;
  EXPECT_NE(ky.find("route:\n    - net: gni\n      gateway: 10.90.1.21@tcp"), std::string::npos) << ky;
  EXPECT_NE(ky.find("global:\n    transaction_timeout: 10\n"), std::string::npos) << ky;
  EXPECT_EQ(ky.find("router_ping_timeout"), std::string::npos) << ky;  // a module parameter there
  EXPECT_EQ(kernel_yaml(*d, kr).find("routing:\n    enable: 1"), kernel_yaml(*d, kr).find("routing:"));
  std::string km = kernel_modprobe(*d, kr);
  EXPECT_NE(km.find("options lnet router_ping_timeout=2 tiny_router_buffers="), std::string::npos) << km;
  EXPECT_EQ(kernel_modprobe(*d, k1).find("router_buffers"), std::string::npos);
  EXPECT_EQ(kernel_nets(*d, k1), "tcp,tcp");
  EXPECT_EQ(kernel_nets(*d, kr), "tcp,tcp1");
  EXPECT_EQ(hostfile(*d, kServer, false), "r1 slots=1\ns3 slots=1\n");
  std::string plan = shell_plan(*d);
  EXPECT_NE(plan.find("[k1]=kernel"), std::string::npos) << plan;
  EXPECT_NE(plan.find("CL_KNET=( [k1]=tcp,tcp [kr]=tcp,tcp1 )"), std::string::npos) << plan;
  // What lnetd reads takes every lnetd's configuration here.
  for (const Node& n : d->nodes) {
    if (!n.lnetd) continue;
    EXPECT_TRUE(dlc::parse_config(lnetd_yaml(*d, n))) << n.name;
  }
}

TEST(ClusterDesc, DaemonCommandsAreQuotedForTheShell) {
  auto d = parse_text(kFabrics + "node a server tcp0=1\ndaemon a echo 'it''s' \"$HOME\"\n");
  ASSERT_TRUE(d) << d.message();
  EXPECT_NE(shell_plan(*d).find(R"(CL_DAEMON_CMD=('echo '\''it'\'''\''s'\'' "$HOME"'))"), std::string::npos)
      << shell_plan(*d);
}

struct Bad {
  std::string text;
  std::string line;  // "t.cluster:N:"
  std::string says;
};

TEST(ClusterDesc, BadDescriptionsAreRefusedNamingTheLine) {
  const std::vector<Bad> cases = {
      {"frobnicate x\n", "t.cluster:1:", "unknown keyword 'frobnicate'"},
      {kFabrics + "node c1 compute,wizard mpi=1\n", "t.cluster:3:", "unknown role 'wizard'"},
      {kFabrics + "node c1 compute\n", "t.cluster:3:", "is on no fabric"},
      {kFabrics + "node c1\n", "t.cluster:3:", "usage: node"},
      {kFabrics + "node s1 server slots=2\n", "t.cluster:3:", "is on no fabric"},
      {kFabrics + "node c1 compute mpi=5\nnode c2 compute mpi=10.90.0.5\n",
       "t.cluster:4:", "10.90.0.5 of node 'c2' is already that of node 'c1' (line 3)"},
      {kFabrics + "node c1 compute mpi=5\nnode c1 compute mpi=6\n", "t.cluster:4:", "already defined on line 3"},
      {kFabrics + "node localhost compute mpi=5\n", "t.cluster:3:", "would resolve to the local host"},
      {kFabrics + "node buildhost compute mpi=5\n", "t.cluster:3:", "this machine's host name"},
      {kFabrics + "node myalias compute mpi=5\n", "t.cluster:3:", "loopback"},
      {kFabrics + "node C1 compute mpi=5\n", "t.cluster:3:", "bad node name"},
      {kFabrics + "node c1 compute mpi=0\n", "t.cluster:3:", "network address"},
      {kFabrics + "node c1 compute mpi=255\n", "t.cluster:3:", "broadcast address"},
      {kFabrics + "node c1 compute mpi=256\n", "t.cluster:3:", "bad address '256'"},
      {kFabrics + "node c1 compute mpi=10.91.0.3\n", "t.cluster:3:", "is not in fabric 'mpi'"},
      {kFabrics + "node c1 compute ib0=3\n", "t.cluster:3:", "unknown fabric 'ib0'"},
      {kFabrics + "node c1 compute tcp0=3\n", "t.cluster:3:", "not on the mpi fabric"},
      {kFabrics + "node c1 compute mpi=3 mpi=4\n", "t.cluster:3:", "twice"},
      {kFabrics + "node c1 compute mpi=3 slots=0\n", "t.cluster:3:", "bad slots"},
      {kFabrics + "node r1 router tcp0=3\n", "t.cluster:3:", "a router joins two or more"},
      {kFabrics + "node r1 router,server mpi=3 tcp0=3 lnetd=no\n", "t.cluster:3:", "lnetd=no"},
      {kFabrics + "node l1 login mpi=3\nnode l2 login mpi=4\n", "t.cluster:4:", "a second login node"},
      {"fabric mpi 10.90.0.0/24\nfabric tcp 10.90.0.128/25\n", "t.cluster:2:", "overlaps fabric 'mpi'"},
      {"fabric tcp0 10.90.0.0/24 net=lo\n", "t.cluster:1:", "fabric 'tcp0' carries lo"},
      {"fabric a 10.90.0.0/24 lnet=tcp\n", "t.cluster:1:", "bad 'lnet=tcp': net=NET"},
      {"fabric mpi 10.90.0.0/24\nfabric mpi1 10.91.0.0/24\n", "t.cluster:2:", "a second MPI fabric"},
      {"fabric mpi 10.90.0.0/24\nfabric x 10.91.0.0/24 net=gni\n", "t.cluster:2:", "a second MPI fabric 'x'"},
      {"fabric o2ib0 10.90.0.0/24\n", "t.cluster:1:", "not supported yet: fabric 'o2ib0'"},
      {"fabric eth0 10.90.0.0/24\n", "t.cluster:1:", "fabric 'eth0' names no network"},
      {"fabric Eth0 10.90.0.0/24 net=tcp\n", "t.cluster:1:", "bad fabric name 'Eth0'"},
      {kFabrics + "node k1 compute mpi=3 kind=kernel\n", "t.cluster:3:", "a kernel node is a server or a router"},
      {kFabrics + "node k1 server mpi=3 kind=kernel\n", "t.cluster:3:", "is on the MPI fabric 'mpi'"},
      {kFabrics + "node k1 server tcp0=3 kind=kernel lnetd=yes\n", "t.cluster:3:", "its LNet is the kernel's"},
      {kFabrics + "node k1 server tcp0=3 kind=vm\n", "t.cluster:3:", "bad kind 'vm'"},
      {kFabrics + "node k1 server tcp0=3 kind=kernel\nproxy k1\n", "t.cluster:4:", "is a kernel node"},
      {kFabrics + "node k1 server tcp0=3 kind=kernel\ndaemon k1 run\n", "t.cluster:4:", "is a kernel node"},
      {"fabric tcp 10.90.0.1/24\n", "t.cluster:1:", "host bits are set"},
      {"fabric tcp 127.0.0.0/24\n", "t.cluster:1:", "not a unicast network"},
      {"fabric tcp 10.90.0.0/31\n", "t.cluster:1:", "8..30"},
      {"fabric tcp 10.90.0/24\n", "t.cluster:1:", "bad subnet"},
      {kFabrics + "node s1 server tcp0=3\nroute s1 tcp0 s1\n", "t.cluster:4:", "is on tcp itself"},
      {kFabrics + "node s1 server tcp0=3\nroute s1 mpi r9\n", "t.cluster:4:", "'r9' is not a node defined above"},
      {kFabrics + "node s1 server tcp0=3\nnode s2 server tcp0=4\nroute s1 mpi s2\n", "t.cluster:5:", "is not a router"},
      {kFabrics + "node s1 server tcp0=3\nroute s1 o2ib9 s1\n", "t.cluster:4:", "no fabric's"},
      {kFabrics + "node c1 compute mpi=3\nroute c1 tcp0 c1\n", "t.cluster:4:", "runs no lnetd"},
      {kFabrics + "node c1 compute mpi=3\nproxy c1\n", "t.cluster:4:", "runs no lnetd"},
      {kFabrics + "node s1 server tcp0=3\nproxy s1\n", "t.cluster:4:", "not on the mpi fabric"},
      {kFabrics + "node s1 server mpi=3\nproxy -- --timeout 3\n", "t.cluster:4:", "no node"},
      {kFabrics + "node s1 server mpi=3\nnode s2 server mpi=4\nproxy s1 s2\n", "t.cluster:", "needs a login node"},
      {kFabrics + "node s1 server mpi=3\nproxy s1\nproxy s1\n", "t.cluster:5:", "a second proxy job first on node"},
      {kFabrics + "node s1 server tcp0=3\ndaemon s1 run {s1.mpi}\n", "t.cluster:4:", "{s1.mpi} is no address"},
      {kFabrics + "node s1 server tcp0=3\ndaemon s1 run {s1.tcp0\n", "t.cluster:4:", "unclosed"},
      {kFabrics + "node s1 server tcp0=3\ndaemon s9 run\n", "t.cluster:4:", "'s9' is not a node"},
      {"global router_ping_timeout 0\n", "t.cluster:1:", "global 'router_ping_timeout'"},
      {"global no_such_tunable 1\n", "t.cluster:1:", "global 'no_such_tunable'"},
      {"global retry_count x\n", "t.cluster:1:", "a tunable name and a whole number"},
      {"cluster a\ncluster b\n", "t.cluster:2:", "a second cluster line"},
      {"cluster Abc\n", "t.cluster:1:", "bad cluster name"},
      {"# nothing\n", "t.cluster:", "no nodes"},
      {std::string("node a\0 b", 9), "t.cluster:", "NUL"},
  };
  for (const Bad& b : cases) {
    std::string e = error_of(b.text);
    EXPECT_EQ(e.rfind(b.line, 0), 0u) << b.text << "=> " << e;
    EXPECT_NE(e.find(b.says), std::string::npos) << b.text << "=> " << e;
  }
}

TEST(ClusterDesc, LocalNamesAreComparedWithoutCase) {
  const HostFacts upper{"BuildHost.Example.ORG", {"MyAlias"}};
  for (const char* name : {"buildhost", "myalias"}) {
    auto d = parse(kFabrics + "node " + name + " compute mpi=5\n", "t.cluster", upper);
    ASSERT_FALSE(d) << name;
    EXPECT_NE(d.message().find("would resolve to the local host"), std::string::npos) << d.message();
  }
}

TEST(ClusterDesc, HostFactsReadLoopbackNames) {
  char path[] = "/tmp/desc_test_hosts.XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string text = "127.0.0.1 localhost\n127.0.1.1 box.lan box # comment\n10.0.0.1 other\n::1 ip6-localhost\n";
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  HostFacts h = HostFacts::read(path);
  ::unlink(path);
  EXPECT_EQ(h.loopback_names, (std::vector<std::string>{"localhost", "box.lan", "box", "ip6-localhost"}));
  EXPECT_FALSE(h.hostname.empty());
}

}  // namespace
}  // namespace lnet::cluster
