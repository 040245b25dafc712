// conns_per_peer of the socket LND: the automatic count from the link speed (a fake
// sysfs tree), the placement rule over a peer's connections, and the bookkeeping of two
// instances in this process (127.x addresses, lo: no speed) that disagree on the count:
// the one that dials opens CONTROL + N + N, the other takes its own count of each type
// and answers one more with a HELLO of type NONE, counted.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <lnet/lnet.hpp>

#include "lnd/socket/conn_select.hpp"
#include "lnd/socket/sock_wire.hpp"
#include "support/lnd_counter.hpp"

namespace lnet {
namespace {

namespace fs = std::filesystem;

TEST(ConnsPerPeer, AutoRuleFromTheLinkSpeed) {
  struct {
    long mbps;
    int cpp;
  } cases[] = {{-1, 1},    {0, 1},     {10, 1},     {100, 1},    {999, 1},    {1000, 1},   {1999, 1},
               {2000, 1},  {3999, 1},  {4000, 2},   {10000, 2},  {15999, 2},  {16000, 3},  {25000, 3},
               {40000, 3}, {64000, 4}, {100000, 4}, {200000, 4}, {256000, 5}, {400000, 5}, {800000, 5}};
  for (const auto& c : cases) EXPECT_EQ(conns_per_peer_for_speed(c.mbps), c.cpp) << c.mbps << " Mb/s";
}

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    root = fs::temp_directory_path() / ("lnet-sysfs-" + std::to_string(getpid()));
    fs::remove_all(root);
  }
  void TearDown() override { fs::remove_all(root); }
  void dev(const std::string& name, const char* speed, const char* flags) {
    fs::create_directories(root / "class/net" / name);
    if (speed) std::ofstream(root / "class/net" / name / "speed") << speed << "\n";
    if (flags) std::ofstream(root / "class/net" / name / "flags") << flags << "\n";
  }
  fs::path root;
};

TEST_F(FakeSysfs, LinkSpeedRead) {
  dev("eth0", "10000", "0x1003");
  dev("eth1", "-1", "0x1003");  // a link down, or a driver that does not know
  dev("eth2", "", "0x1003");    // reading it fails (EINVAL): an empty file here
  dev("lo", "10000", "0x9");    // loopback: never asked, as ksocklnd
  dev("ib0", "100000", nullptr);
  std::string r = root.string();
  EXPECT_EQ(link_speed_mbps("eth0", r), 10000);
  EXPECT_EQ(link_speed_mbps("eth0:1", r), 10000);  // an alias: its device's speed
  EXPECT_EQ(link_speed_mbps("eth1", r), -1);
  EXPECT_EQ(link_speed_mbps("eth2", r), -1);
  EXPECT_EQ(link_speed_mbps("lo", r), -1);
  EXPECT_EQ(link_speed_mbps("ib0", r), 100000);
  EXPECT_EQ(link_speed_mbps("nosuch", r), -1);
  EXPECT_EQ(link_speed_mbps("", r), -1);
  EXPECT_EQ(link_speed_mbps("../eth0", r), -1);
  EXPECT_EQ(conns_per_peer_for_speed(link_speed_mbps("eth0", r)), 2);  // veth reports 10000
  EXPECT_EQ(conns_per_peer_for_speed(link_speed_mbps("ib0", r)), 4);
}

TEST_F(FakeSysfs, RootFromTheEnvironment) {
  setenv("LNET_SYSFS_ROOT", root.c_str(), 1);
  auto p = SocketParams::from_env();
  unsetenv("LNET_SYSFS_ROOT");
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(p->sysfs_root, root.string());
  auto d = SocketParams::from_env();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->sysfs_root, "");  // the kernel is asked
}

TEST(ConnsPerPeer, TheKernelIsAskedWithoutASysfsRoot) {
  EXPECT_EQ(link_speed_mbps("lo", ""), -1);  // loopback: one of each
  EXPECT_EQ(link_speed_mbps("lnet-no-such0", ""), -1);
}

// ---- the placement rule ----

using sock::ConnLoad;
using sock::ConnType;

// Chooses among `conns` as pick_conn does, bumping the chosen one's post sequence and
// adding `bytes` to its queue when `queue` is set.
std::size_t choose(std::vector<ConnLoad>& conns, ConnType want, std::uint64_t& seq, std::uint64_t bytes = 0) {
  std::size_t i = sock::choose_conn(conns.size(), want, false, [&](std::size_t k) { return conns[k]; });
  if (i < conns.size()) {
    conns[i].last_post = ++seq;
    conns[i].queued += bytes;
  }
  return i;
}

TEST(ConnPlacement, BulkSpreadsRoundRobinWhenNothingIsQueued) {
  std::vector<ConnLoad> c = {{ConnType::Control, true, 0, 0},
                             {ConnType::BulkOut, true, 0, 0},
                             {ConnType::BulkIn, true, 0, 0},
                             {ConnType::BulkOut, true, 0, 0},
                             {ConnType::BulkOut, true, 0, 0}};
  std::uint64_t seq = 0;
  std::vector<int> hits(c.size());
  for (int i = 0; i < 300; ++i) ++hits[choose(c, ConnType::BulkOut, seq)];
  EXPECT_EQ(hits[0], 0);
  EXPECT_EQ(hits[2], 0);  // BULK_IN carries no messages of ours
  EXPECT_EQ(hits[1], 100);
  EXPECT_EQ(hits[3], 100);
  EXPECT_EQ(hits[4], 100);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(choose(c, ConnType::Control, seq), 0u);  // small ones stay on CONTROL
}

TEST(ConnPlacement, LeastQueuedWins) {
  std::vector<ConnLoad> c = {
      {ConnType::BulkOut, true, 5000, 1}, {ConnType::BulkOut, true, 100, 2}, {ConnType::BulkOut, true, 3000, 3}};
  std::uint64_t seq = 3;
  EXPECT_EQ(choose(c, ConnType::BulkOut, seq, 1 << 20), 1u);
  EXPECT_EQ(choose(c, ConnType::BulkOut, seq, 1 << 20), 2u);  // 1 now has a MiB queued
  EXPECT_EQ(choose(c, ConnType::BulkOut, seq, 1 << 20), 0u);
  c[2].queued = 0;  // written out
  EXPECT_EQ(choose(c, ConnType::BulkOut, seq), 2u);
}

TEST(ConnPlacement, ClosedAndMissingTypesFallBack) {
  std::uint64_t seq = 0;
  std::vector<ConnLoad> c = {{ConnType::Control, true, 0, 0}, {ConnType::BulkOut, false, 0, 0}};
  EXPECT_EQ(choose(c, ConnType::BulkOut, seq), 0u);  // bulk not up (yet): CONTROL takes it
  c = {{ConnType::BulkIn, true, 0, 0}};
  EXPECT_EQ(choose(c, ConnType::BulkOut, seq), c.size());  // nothing may carry it
  c = {{ConnType::BulkIn, true, 0, 0}, {ConnType::Any, true, 7, 0}, {ConnType::Control, true, 0, 0}};
  EXPECT_EQ(choose(c, ConnType::BulkOut, seq), 1u);  // ANY before another type
  c.clear();
  EXPECT_EQ(choose(c, ConnType::Control, seq), 0u);
}

// ---- two instances that disagree ----

constexpr int kPort = 12989;

Nid tcp(const std::string& ip) { return *Nid::parse(ip + "@tcp"); }

std::string test_ip(int host) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::size_t h = std::hash<std::string>{}(std::string(info->test_suite_name()) + "." + info->name());
  return "127." + std::to_string(10 + h % 200) + "." + std::to_string((h >> 8) % 250) + "." + std::to_string(host);
}

std::unique_ptr<Instance> make(const std::string& ip, long cpp, int nscheds = 1) {
  SocketParams p;
  p.nscheds = nscheds;
  p.port = kPort;
  p.accept = AcceptMode::All;
  p.timeout = 5;
  set_socket_params(p);
  Config cfg;
  NetConfig nc;
  nc.net = NetId::make(kSockLnd, 0);
  nc.nid = tcp(ip);
  if (cpp >= 0) nc.lnd_tunables.set("conns_per_peer", cpp);
  cfg.nets.push_back(nc);
  auto r = Instance::create(cfg, kPidLustre);
  EXPECT_TRUE(r) << r.message();
  return r ? std::move(*r) : nullptr;
}

std::uint64_t counter(Instance& i, const std::string& name) { return test::lnd_counter(i, name); }

long cpp_shown(Instance& i) {
  for (const NiInfo& n : i.control().ni_info())
    if (n.nid.net().type() == kSockLnd) return n.lnd_tunables.get_or("conns_per_peer", -1);
  return -1;
}

// Until `pred` or 5 s.
template <class Pred>
bool eventually(Pred pred) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// a at 3 dials CONTROL + 3 BULK_IN + 3 BULK_OUT; b at 2 takes CONTROL + 2 + 2 and
// refuses two, also when its handshakes run on several I/O threads at once.
void disagree(const std::string& ip_a, const std::string& ip_b, int nscheds) {
  auto a = make(ip_a, 3, nscheds);
  auto b = make(ip_b, 2, nscheds);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(cpp_shown(*a), 3);
  EXPECT_EQ(cpp_shown(*b), 2);
  auto r = a->ping(ProcessId{tcp(ip_b), kPidLustre}, std::chrono::milliseconds(5000));
  ASSERT_TRUE(r) << r.message();
  EXPECT_TRUE(eventually([&] { return counter(*b, "conns_refused_excess") == 2; }))
      << counter(*b, "conns_refused_excess");
  EXPECT_TRUE(eventually([&] { return counter(*a, "conns_established") == 5; })) << counter(*a, "conns_established");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // nothing more comes
  EXPECT_EQ(counter(*b, "conns_established"), 5u);
  EXPECT_EQ(counter(*b, "conns_refused_excess"), 2u);
  EXPECT_EQ(counter(*a, "conns_refused_excess"), 0u);
  // b answers over the connections a made: it dials none of its own.
  auto back = b->ping(ProcessId{tcp(ip_a), kPidLustre}, std::chrono::milliseconds(5000));
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(counter(*b, "conns_established"), 5u);
  EXPECT_EQ(counter(*a, "conns_established"), 5u);
}

TEST(ConnsPerPeerPair, TheAcceptingSideTakesItsCountAndRefusesTheRest) { disagree(test_ip(2), test_ip(3), 1); }

TEST(ConnsPerPeerPair, SeveralIoThreadsTakeNoMore) {
  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    disagree(test_ip(2), test_ip(3), 4);
  }
}

TEST(ConnsPerPeerPair, AutomaticOnLoopbackIsOneAndNetSetChangesIt) {
  std::string ip_a = test_ip(2), ip_b = test_ip(3);
  auto a = make(ip_a, 0);
  auto b = make(ip_b, -1);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(cpp_shown(*a), 1);  // lo has no link speed: one of each, shown as computed
  EXPECT_EQ(cpp_shown(*b), 1);
  EXPECT_TRUE(a->control().set_lnd_tunable(tcp(ip_a), "conns_per_peer", 4));
  EXPECT_EQ(cpp_shown(*a), 4);
  EXPECT_TRUE(b->control().set_lnd_tunable(tcp(ip_b), "conns_per_peer", 4));
  auto r = a->ping(ProcessId{tcp(ip_b), kPidLustre}, std::chrono::milliseconds(5000));
  ASSERT_TRUE(r) << r.message();
  EXPECT_TRUE(eventually([&] { return counter(*b, "conns_established") == 9; })) << counter(*b, "conns_established");
  EXPECT_EQ(counter(*b, "conns_refused_excess"), 0u);
  EXPECT_FALSE(a->control().set_lnd_tunable(tcp(ip_a), "conns_per_peer", 128));
  EXPECT_FALSE(a->control().set_lnd_tunable(tcp(ip_a), "tos", 3));  // taken when the NI comes up
  EXPECT_TRUE(a->control().set_lnd_tunable(tcp(ip_a), "conns_per_peer", 0));
  EXPECT_EQ(cpp_shown(*a), 1);
}

}  // namespace
}  // namespace lnet
