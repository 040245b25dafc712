// The YAML corpus (tests/data/yaml): documents in the shapes sites write. Each valid one
// parses to the configuration its .expected file shows (export --backup of what it
// configures, ip2nets resolved on a made-up host, then its warnings) and prints back to a
// document that parses to the same; each invalid one is refused with the error its .error
// file names, at parse time or when applied to an instance, which it leaves unchanged.
// LNET_CORPUS_WRITE=1 writes missing .expected files (to review, then commit).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <lnet/dlc.hpp>
#include <lnet/lnet.hpp>

#include "support/fabric.hpp"

namespace lnet {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fs::path> docs(const char* dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(LNET_TEST_DATA) / "yaml" / dir))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

const std::vector<HostInterface> kHost = {{"lo", 0x7f000001, true, true},
                                          {"eth0", 0x0a000005, true, false},
                                          {"eth1", 0x0a010005, true, false},
                                          {"eth2", 0x0a020005, true, false}};

// What a document configures, as a document: ip2nets resolved, warnings at the end.
std::string shown(dlc::SystemConfig cfg) {
  if (!cfg.ip2nets.empty()) {
    auto nis = resolve_ip2nets(cfg.ip2nets, kHost);
    if (!nis) return "ip2nets: " + nis.message() + "\n";
    cfg.nets.insert(cfg.nets.end(), nis->begin(), nis->end());
    cfg.ip2nets.clear();
  }
  std::string out = dlc::config_to_yaml(cfg, true);
  for (const auto& x : cfg.exec)
    out += std::string("# ") + (x.discover ? "discover" : "ping") + " " + std::to_string(x.targets.size()) + "\n";
  for (const auto& w : cfg.warnings) out += "# warning: " + w + "\n";
  return out;
}

TEST(YamlCorpus, ValidDocumentsParseToTheirConfigurationAndRoundTrip) {
  auto files = docs("valid");
  ASSERT_GE(files.size(), 10u);
  for (const auto& f : files) {
    SCOPED_TRACE(f.filename().string());
    auto cfg = dlc::parse_config(slurp(f));
    ASSERT_TRUE(cfg) << cfg.message();
    std::string got = shown(*cfg);
    fs::path expected = fs::path(f).replace_extension(".expected");
    if (!fs::exists(expected) && std::getenv("LNET_CORPUS_WRITE")) std::ofstream(expected) << got;
    ASSERT_TRUE(fs::exists(expected)) << "no " << expected << " (LNET_CORPUS_WRITE=1 writes it)";
    EXPECT_EQ(got, slurp(expected));
    // export --backup -> import -> export --backup: the same document.
    std::string text = dlc::config_to_yaml(*cfg, true);
    auto again = dlc::parse_config(text);
    ASSERT_TRUE(again) << again.message() << "\n" << text;
    EXPECT_EQ(dlc::config_to_yaml(*again, true), text);
    EXPECT_TRUE(again->warnings.empty()) << "an export carries nothing to warn about: " << again->warnings.front();
  }
}

TEST(YamlCorpus, InvalidDocumentsAreRefusedAndApplyNothing) {
  auto files = docs("invalid");
  ASSERT_GE(files.size(), 15u);
  auto lnet = Instance::create(test::fabric_config({7}), kPidLustre).value();
  std::string before = dlc::config_to_yaml(dlc::export_config(*lnet), true);
  for (const auto& f : files) {
    SCOPED_TRACE(f.filename().string());
    std::string want = slurp(fs::path(f).replace_extension(".error"));
    while (!want.empty() && want.back() == '\n') want.pop_back();
    ASSERT_FALSE(want.empty());
    auto cfg = dlc::parse_config(slurp(f));
    std::string error;
    if (!cfg) {
      error = cfg.message();
    } else if (!cfg->ip2nets.empty()) {
      auto nis = resolve_ip2nets(cfg->ip2nets, kHost);
      ASSERT_FALSE(nis) << "the ip2nets rules matched";
      error = nis.message();
    } else {
      Status s = dlc::apply_config(*lnet, *cfg, dlc::ImportMode::Add);
      ASSERT_FALSE(s) << "applied";
      error = s.message();
    }
    EXPECT_NE(error.find(want), std::string::npos) << error;
    EXPECT_EQ(dlc::config_to_yaml(dlc::export_config(*lnet), true), before) << "a refused document changed something";
  }
}

}  // namespace
}  // namespace lnet
