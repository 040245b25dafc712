// NUMA: what the drivers read from sysfs (a tree of the test's own, LNET_SYSFS_ROOT), and
// local NI selection weighing a device's distance against numa_range.
#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <lnet/lnd/numa.hpp>
#include <lnet/lnet.hpp>

#include "support/event_log.hpp"
#include "support/fabric.hpp"

namespace lnet {
namespace {

namespace fs = std::filesystem;
using test::Fabric;

Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }

unsigned current_node() {
  unsigned cpu = 0, node = 0;
  (void)getcpu(&cpu, &node);
  return node;
}

// A fake sysfs: `nodes` nodes (each with its CPUs and a distance row: 10 on the node, 20
// off it) and interfaces with a device on a node.
class FakeSysfs {
 public:
  FakeSysfs(int nodes, const std::map<std::string, int>& ifaces) {
    root_ = fs::temp_directory_path() / ("lnet-sysfs-" + std::to_string(getpid()));
    fs::remove_all(root_);
    for (int n = 0; n < nodes; ++n) {
      fs::path d = root_ / "devices/system/node" / ("node" + std::to_string(n));
      fs::create_directories(d);
      write(d / "cpulist", std::to_string(2 * n) + "-" + std::to_string(2 * n + 1));
      std::string row;
      for (int m = 0; m < nodes; ++m) row += (m ? " " : "") + std::to_string(m == n ? 10 : 20);
      write(d / "distance", row);
    }
    for (const auto& [name, node] : ifaces) {
      fs::create_directories(root_ / "class/net" / name / "device");
      write(root_ / "class/net" / name / "device/numa_node", std::to_string(node));
    }
    setenv("LNET_SYSFS_ROOT", root_.c_str(), 1);
  }
  ~FakeSysfs() {
    unsetenv("LNET_SYSFS_ROOT");
    fs::remove_all(root_);
  }
  static void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text << "\n"; }
  const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

TEST(NumaSysfs, ReadsDeviceNodesCpuNodesAndDistances) {
  FakeSysfs sys(3, {{"eth0", 1}, {"eth1", -1}});
  fs::create_directories(sys.root() / "class/net/veth0");  // no device
  EXPECT_EQ(interface_numa_node("eth0"), 1);
  EXPECT_EQ(interface_numa_node("eth1"), -1);
  EXPECT_EQ(interface_numa_node("veth0"), -1);
  EXPECT_EQ(interface_numa_node("nosuch"), -1);
  EXPECT_EQ(interface_numa_node("../eth0"), -1);
  EXPECT_EQ(numa_nodes(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(numa_node_cpus(2), (std::vector<int>{4, 5}));
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(2, &set);
  CPU_SET(3, &set);
  EXPECT_EQ(cpus_numa_node(set), 1);
  CPU_SET(4, &set);  // spans nodes 1 and 2
  EXPECT_EQ(cpus_numa_node(set), -1);
  EXPECT_EQ(numa_distances_to(1), (std::vector<int>{20, 10, 20}));
  EXPECT_EQ(numa_distances_to(-1), (std::vector<int>{20, 20, 20}));  // unknown: as far as the furthest
  for (const char* bad : {"0-1,x", "3-1", "-2", "0-99999999", "1-", ",", "0--2"}) {
    FakeSysfs::write(sys.root() / "devices/system/node/node0/cpulist", bad);
    EXPECT_TRUE(numa_node_cpus(0).empty()) << "'" << bad << "': a list it cannot read is no list";
  }
  FakeSysfs::write(sys.root() / "devices/system/node/node1/distance", "x y");
  EXPECT_EQ(numa_distances_to(1), (std::vector<int>{20, 10, 20})) << "an unreadable row: the kernel's defaults";
  FakeSysfs::write(sys.root() / "class/net/eth0/device/numa_node", "banana");
  EXPECT_EQ(interface_numa_node("eth0"), -1);
}

// A with 1@gni on interface fa (a device on this thread's node) and 11@gni on fb (one
// node further); B, a multi-rail peer, with 2@gni and 12@gni.
class NumaSelection : public ::testing::Test {
 protected:
  void SetUp() override {
    CPU_ZERO(&old_);
    sched_getaffinity(0, sizeof old_, &old_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof one, &one);  // the node selection sees stays this one
    node_ = static_cast<int>(current_node());
    sys_ = std::make_unique<FakeSysfs>(node_ + 2, std::map<std::string, int>{{"fa", node_}, {"fb", node_ + 1}});
    Config ca = test::fabric_config({1, 11});
    ca.nets[0].interfaces = {"fa"};
    ca.nets[1].interfaces = {"fb"};
    auto ra = Instance::create(ca, kPidLustre);
    ASSERT_TRUE(ra) << ra.message();
    a = std::move(*ra);
    auto rb = Instance::create(test::fabric_config({2, 12}), kPidLustre);
    ASSERT_TRUE(rb) << rb.message();
    b = std::move(*rb);
    auto me = b->me_attach(7, ProcessId::any(), 0, ~0ULL, Unlink::Unlink, InsPos::After);
    MdDesc d;
    d.start = sink;
    d.length = sizeof sink;
    d.options = kMdOpPut | kMdTruncate;
    d.handler = blog.handler();
    ASSERT_TRUE(b->md_attach(*me, d, Unlink::Retain));
    ASSERT_EQ(a->control().add_peer(PeerConfig{gni(2), true, {gni(12)}}).code(), 0);
    Fabric::instance().clear_sent();
  }
  void TearDown() override {
    a.reset();
    b.reset();
    sys_.reset();
    sched_setaffinity(0, sizeof old_, &old_);
  }
  // How many of 8 PUTs to B left from each local NI.
  std::map<Nid, int> sources() {
    Fabric::instance().clear_sent();
    for (int i = 0; i < 8; ++i) {
      MdDesc d;
      d.start = byte;
      d.length = 1;
      auto md = a->md_bind(d, Unlink::Unlink);
      EXPECT_TRUE(md);
      EXPECT_EQ(a->put(Nid::any(), *md, AckReq::NoAck, ProcessId{gni(2), kPidLustre}, 7, 1, 0, 0), 0);
    }
    std::map<Nid, int> m;
    for (auto& s : Fabric::instance().sent())
      if (s.type == MsgType::Put) m[s.src]++;
    return m;
  }

  cpu_set_t old_;
  int node_ = 0;
  std::unique_ptr<FakeSysfs> sys_;
  std::unique_ptr<Instance> a, b;
  char sink[64] = {};
  char byte[1] = {'x'};
  test::EventLog blog;
};

TEST_F(NumaSelection, TheNearerDeviceWinsUnlessBothAreWithinNumaRange) {
  auto m = sources();
  EXPECT_EQ(m[gni(1)], 8) << "the NI on this thread's node carries everything";
  EXPECT_EQ(m[gni(11)], 0);
  ASSERT_TRUE(a->control().set_global("numa_range", 20));  // 10 and 20 both count as 20
  m = sources();                                           // round robin: 11@gni, not used yet, catches up first ...
  EXPECT_EQ(m[gni(1)], 0);
  EXPECT_EQ(m[gni(11)], 8);
  m = sources();  // ... then they take turns
  EXPECT_EQ(m[gni(1)], 4);
  EXPECT_EQ(m[gni(11)], 4);
  ASSERT_TRUE(a->control().set_global("numa_range", 0));
  m = sources();
  EXPECT_EQ(m[gni(1)], 8) << "back to the nearer one";
}

TEST_F(NumaSelection, NetShowsTheDeviceCpt) {
  for (const NiInfo& i : a->control().ni_info()) {
    if (i.nid.is_lo())
      EXPECT_EQ(i.dev_cpt, -1) << "0@lo has no device";
    else
      EXPECT_EQ(i.dev_cpt, 0) << i.nid.to_string() << ": one CPT, a known node";
  }
  for (const NiInfo& i : b->control().ni_info()) EXPECT_EQ(i.dev_cpt, -1) << i.nid.to_string() << ": no interface";
}

}  // namespace
}  // namespace lnet
