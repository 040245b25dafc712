// IPv6 NIDs through the configuration: an NI, a multi-rail peer, a route through an
// IPv6 gateway and a selection rule on an IPv6 prefix, exported, imported into a fresh
// process and exported again, unchanged (as lnetctl export / import do).
#include <gtest/gtest.h>

#include <lnet/dlc.hpp>
#include <lnet/lnet.hpp>

namespace lnet {
namespace {

constexpr int kPort = 12993;  // [::1] in this test process only

dlc::Response run(Instance& i, const std::string& cmd, std::map<std::string, std::vector<std::string>> args = {},
                  std::string body = {}) {
  dlc::Request r;
  r.command = cmd;
  r.args = std::move(args);
  r.body = std::move(body);
  return dlc::execute(i, r);
}

TEST(Ipv6Yaml, ExportImportExportRoundTrips) {
  SocketParams sp;
  sp.port = kPort;
  sp.accept = AcceptMode::All;
  set_socket_params(sp);
  auto a = Instance::create(Config{}, kPidLustre).value();
  auto net = run(*a, "net add", {{"net", {"tcp"}}, {"nid", {"::1@tcp"}}});
  if (net.rc == -EADDRNOTAVAIL) GTEST_SKIP() << "no IPv6 on this host: " << net.text;
  ASSERT_EQ(net.rc, 0) << net.text;
  ASSERT_EQ(run(*a, "peer add", {{"prim_nid", {"2001:db8::1@tcp"}}, {"nid", {"2001:db8::2@tcp,10.0.0.2@tcp"}}}).rc, 0);
  ASSERT_EQ(run(*a, "route add", {{"net", {"tcp9"}}, {"gateway", {"2001:db8::1@tcp"}}}).rc, 0);
  ASSERT_EQ(run(*a, "udsp add", {{"dst", {"2001:db8::/64@tcp"}}, {"priority", {"1"}}}).rc, 0);
  std::string first = run(*a, "export", {{"backup", {}}}).text;
  for (const char* want : {"nid: \"::1@tcp\"", "primary nid: 2001:db8::1@tcp", "nid: 2001:db8::2@tcp",
                           "nid: 10.0.0.2@tcp", "gateway: 2001:db8::1@tcp", "2001:db8::/64@tcp"})
    EXPECT_NE(first.find(want), std::string::npos) << want << " in\n" << first;
  auto parsed = dlc::parse_config(first);
  ASSERT_TRUE(parsed) << parsed.message() << "\n" << first;
  a.reset();

  auto c = Instance::create(Config{}, kPidLustre).value();  // 0@lo only: the import brings the rest
  auto imp = run(*c, "import", {}, first);
  ASSERT_EQ(imp.rc, 0) << imp.text << "\n" << first;
  EXPECT_EQ(run(*c, "export", {{"backup", {}}}).text, first);
  c.reset();
  set_socket_params(SocketParams{});
}

}  // namespace
}  // namespace lnet
