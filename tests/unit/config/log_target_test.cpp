// Where a daemon's lines go (--log-target): the names, the priorities of the levels, and
// the journal's form (stderr with the "<N>" prefix systemd reads, no time stamp).
#include <gtest/gtest.h>
#include <syslog.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <lnet/log.hpp>

namespace lnet {
namespace {

TEST(LogTarget, NamesAndPriorities) {
  LogTarget t;
  ASSERT_TRUE(parse_log_target("journal", &t));
  EXPECT_EQ(t, LogTarget::Journal);
  ASSERT_TRUE(parse_log_target("syslog", &t));
  EXPECT_EQ(t, LogTarget::Syslog);
  ASSERT_TRUE(parse_log_target("stderr", &t));
  EXPECT_EQ(t, LogTarget::Stderr);
  EXPECT_FALSE(parse_log_target("Journal", &t));
  EXPECT_FALSE(parse_log_target("", &t));
  EXPECT_EQ(log_syslog_priority(LogLevel::Error), LOG_ERR);
  EXPECT_EQ(log_syslog_priority(LogLevel::Warn), LOG_WARNING);
  EXPECT_EQ(log_syslog_priority(LogLevel::Info), LOG_INFO);
  EXPECT_EQ(log_syslog_priority(LogLevel::Debug), LOG_DEBUG);
}

// stderr, pointed at a file while `fn` runs: what was written there.
template <typename F>
std::string stderr_of(F fn) {
  std::string path = ::testing::TempDir() + "log_target_" + std::to_string(getpid());
  std::fflush(stderr);
  int saved = dup(2);
  std::FILE* f = std::fopen(path.c_str(), "w");
  EXPECT_NE(f, nullptr);
  dup2(fileno(f), 2);
  fn();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::fclose(f);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove(path.c_str());
  return ss.str();
}

TEST(LogTarget, JournalLinesCarryTheirPriority) {
  LogLevel was = log_level();
  set_log_level(LogLevel::Info);
  std::string out = stderr_of([] {
    set_log_target(LogTarget::Journal);
    LNET_LOG(Error, kLogDaemon, "bad configuration in %s", "/etc/lnet.conf");
    LNET_LOG(Warn, kLogDaemon, "a warning");
    LNET_LOG(Info, kLogDaemon, "lnetd up");
    LNET_LOG(Debug, kLogDaemon, "not at this level");
    set_log_target(LogTarget::Stderr);
    LNET_LOG(Warn, kLogDaemon, "back on stderr");
  });
  set_log_level(was);
  std::istringstream lines(out);
  std::string l1, l2, l3, l4;
  std::getline(lines, l1);
  std::getline(lines, l2);
  std::getline(lines, l3);
  std::getline(lines, l4);
  EXPECT_EQ(l1, "<3>bad configuration in /etc/lnet.conf");
  EXPECT_EQ(l2, "<4>a warning");
  EXPECT_EQ(l3, "<6>lnetd up");
  EXPECT_NE(l4.find("warn: back on stderr"), std::string::npos) << l4;
  EXPECT_NE(l4.rfind("<", 0), 0u) << "stderr lines have no priority prefix: " << l4;
}

}  // namespace
}  // namespace lnet
