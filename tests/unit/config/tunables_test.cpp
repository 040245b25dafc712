// Options that take effect or are refused, never ignored: max_interfaces bounds what a
// ping may bring back; NI CPT lists name CPTs the instance has; LND tunables a driver does not take.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include <lnet/dlc.hpp>
#include <lnet/lnet.hpp>

#include "support/fabric.hpp"

namespace lnet {
namespace {

Nid gni(std::uint32_t a, unsigned net = 0) { return Nid::make(NetId::make(kGniLnd, net), a); }

TEST(Tunables, MaxInterfacesBoundsWhatAPingBringsBack) {
  auto a = Instance::create(test::fabric_config({60}), kPidLustre).value();
  // B has 17 NIs besides 0@lo: more than max_interfaces 16 lets a peer list.
  std::initializer_list<std::uint32_t> many = {61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77};
  auto b = Instance::create(test::fabric_config(many), kPidLustre).value();
  auto ok = a->ping(ProcessId{gni(61), kPidLustre}, std::chrono::seconds(5), 64);
  ASSERT_TRUE(ok) << ok.message();
  EXPECT_EQ(ok->info.nis.size(), 18u);
  ASSERT_TRUE(a->control().set_global("max_interfaces", 16));
  auto refused = a->ping(ProcessId{gni(61), kPidLustre}, std::chrono::seconds(5), 64);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("18"), std::string::npos) << refused.message();
  EXPECT_EQ(a->control().set_global("max_interfaces", 15).code(), -EINVAL);
}

// Each global tunable is declared once (LNET_GLOBAL_TUNABLES): a client process sets
// every one of them by its variable, as the kernel's module parameters, and a value out
// of the tunable's range is refused naming the variable.
TEST(Tunables, EveryGlobalTunableIsSetByItsVariable) {
  struct Row {
    const char* name;
    const char* var;
    long lo, hi;
  };
  const Row rows[] = {
#define ROW(name, def, lo, hi, var, help) {#name, var, lo, hi},
      LNET_GLOBAL_TUNABLES(ROW)
#undef ROW
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.var);
    long v = r.name == std::string("retry_count") ? 1 : std::min(r.hi, r.lo + 10);
    setenv(r.var, std::to_string(v).c_str(), 1);
    auto cfg = Config::from_env();
    if (r.lo > 0) {  // below the range: refused, naming the variable
      setenv(r.var, std::to_string(r.lo - 1).c_str(), 1);
      auto bad = Config::from_env();
      ASSERT_FALSE(bad);
      EXPECT_NE(bad.message().find(r.var), std::string::npos) << bad.message();
    }
    unsetenv(r.var);
    ASSERT_TRUE(cfg) << cfg.message();
    EXPECT_EQ(*cfg->globals.get(r.name), v);
  }
  // Every name `global show` prints is a row, or the derived lnd_timeout.
  EXPECT_EQ(GlobalTunables::names().size(), std::size(rows) + 1);
}

TEST(Tunables, CptListsNameCptsOfTheInstance) {
  Config cfg = test::fabric_config({80}, 0, {}, 2);
  cfg.nets[0].cpts = {0, 1};
  auto all = Instance::create(cfg, kPidLustre);
  ASSERT_TRUE(all) << all.message();
  ASSERT_EQ((*all)->nets().size(), 2u);
  EXPECT_EQ((*all)->nets()[1].cpts, (std::vector<unsigned>{0, 1}));
  all->reset();
  cfg.nets[0].cpts = {1};
  auto some = Instance::create(cfg, kPidLustre);
  ASSERT_TRUE(some) << some.message();
  EXPECT_EQ((*some)->nets()[1].cpts, std::vector<unsigned>{1});
  some->reset();
  cfg.nets[0].cpts = {0, 5};
  auto bad = Instance::create(cfg, kPidLustre);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("CPT 5 of gni is not one of the 2 CPTs"), std::string::npos) << bad.message();
  cfg.nets[0].cpts = {1, 1};
  auto twice = Instance::create(cfg, kPidLustre);
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.message().find("CPT 1 is listed twice for gni"), std::string::npos) << twice.message();
}

TEST(Tunables, LndTunablesADriverDoesNotTakeAreRefused) {
  Config cfg = test::fabric_config({81});
  cfg.nets[0].lnd_tunables.set("conns_per_peer", 2);
  auto r = Instance::create(cfg, kPidLustre);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("not supported yet: conns_per_peer on gni"), std::string::npos) << r.message();
}

// A driver's own tunables: declared once (here for bxi3f, which no driver of this build
// serves), then read, checked and printed by the DLC from the declaration alone.
TEST(Tunables, ADriversDeclaredTunablesAreReadCheckedAndPrinted) {
  register_lnd_tunables(kBxi3Lnd, {{"knob", 0, 10, 3, false, "a test knob"}, {"gauge", 0, 99, 7, true, "shown"}});
  auto cfg = dlc::parse_config(
      "net:\n  - net type: bxi3f\n    local NI(s):\n      - nid: 5@bxi3f\n        lnd tunables:\n"
      "          knob: 9\n          gauge: 50\n");
  ASSERT_TRUE(cfg) << cfg.message();
  ASSERT_EQ(cfg->nets.size(), 1u);
  EXPECT_EQ(cfg->nets[0].lnd_tunables.get("knob"), 9);
  EXPECT_FALSE(cfg->nets[0].lnd_tunables.get("gauge")) << "read-only: shown, never read";
  std::string text = dlc::config_to_yaml(*cfg, false);
  EXPECT_NE(text.find("knob: 9"), std::string::npos) << text;
  EXPECT_NE(text.find("gauge: 7"), std::string::npos) << "the default of a key not set\n" << text;
  EXPECT_EQ(dlc::config_to_yaml(*cfg, true).find("gauge"), std::string::npos) << "a backup leaves read-only keys out";
  auto range = dlc::parse_config(
      "net:\n  - net type: bxi3f\n    local NI(s):\n      - nid: 5@bxi3f\n        lnd tunables:\n"
      "          knob: 11\n");
  ASSERT_FALSE(range);
  EXPECT_NE(range.message().find("invalid knob value 11 (valid range 0-10)"), std::string::npos) << range.message();
  // A key the net type's driver did not declare is refused when the NI comes up.
  Config c = test::fabric_config({83});
  c.nets[0].lnd_tunables.set("knob", 1);
  auto r = Instance::create(c, kPidLustre);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("not supported yet: knob on gni"), std::string::npos) << r.message();
}

TEST(Tunables, PeerCreditsDefaultToTheDrivers) {
  auto a = Instance::create(test::fabric_config({82}), kPidLustre).value();
  auto nis = a->control().ni_info();
  ASSERT_EQ(nis.size(), 2u);
  EXPECT_EQ(nis[1].tunables.peer_credits, 8) << "the test driver names none: LNet's 8";
}

}  // namespace
}  // namespace lnet
