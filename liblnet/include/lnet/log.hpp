// One logger for liblnet and its tools: levels and subsystem masks (like LNet's debug
// masks), one line per event, lower-case text with the exact cause.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include <lnet/result.hpp>

namespace lnet {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };

// Subsystem bits.
inline constexpr std::uint32_t kLogCore = 0x01;
inline constexpr std::uint32_t kLogLnd = 0x02;
inline constexpr std::uint32_t kLogRouter = 0x04;
inline constexpr std::uint32_t kLogConfig = 0x08;
inline constexpr std::uint32_t kLogDaemon = 0x10;
inline constexpr std::uint32_t kLogAll = 0xFFFFFFFF;

// Defaults: level Warn, every subsystem; LNET_LOG_LEVEL and LNET_LOG_SUBSYS (names,
// comma-separated: core,lnd,router,config,daemon,all) override them. A bad value of
// either is left out and reported by log_env_status() (Config::from_env fails on it).
Status log_env_status();
void set_log_level(LogLevel l);
void set_log_subsystems(std::uint32_t mask);
LogLevel log_level();
bool log_enabled(LogLevel l, std::uint32_t subsys);
// Parses "error|warn|info|debug" and "core,lnd,..." (false on a bad name).
bool parse_log_level(std::string_view s, LogLevel* out);
bool parse_log_subsystems(std::string_view s, std::uint32_t* out);
// Where lines go (default: stderr, as "<seconds since the epoch> <program> <level>:
// <text>"). The sink gets one line without its newline.
void set_log_sink(std::function<void(LogLevel, std::string_view)> sink);
// The program name on stderr lines (default "lnet"; tools set their own).
void set_log_program(const char* name);

// Where a daemon's lines go, as operators route them (--log-target):
//   stderr  "<seconds> <program> <level>: <text>" (the default);
//   syslog  syslog(3) as <program>, facility daemon, at the level's priority;
//   journal stderr with the "<N>" priority prefix systemd's journal reads from a
//           service's output (no time: the journal stamps each line).
enum class LogTarget { Stderr, Syslog, Journal };
bool parse_log_target(std::string_view s, LogTarget* out);  // "stderr" | "syslog" | "journal"
void set_log_target(LogTarget t);                           // replaces a sink set before
// The syslog priority of a level: error LOG_ERR, warn LOG_WARNING, info LOG_INFO,
// debug LOG_DEBUG.
int log_syslog_priority(LogLevel l);

void log_write(LogLevel l, std::uint32_t subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// Lines of one kind that a peer can make us repeat (a message after message) are logged
// at most `burst` times per interval: allow() says whether this one goes, and how many
// were held back since the last that went (for the line to say so). A few bad inputs are
// each logged; a flood of them is a line now and then with a count.
class LogLimiter {
 public:
  explicit LogLimiter(std::chrono::seconds interval, unsigned burst = 1)
      : interval_ns_(interval.count() * 1000000000LL), burst_(burst) {}
  bool allow(std::uint64_t* held_back);

 private:
  std::int64_t interval_ns_;
  unsigned burst_;
  std::mutex mutex_;
  std::int64_t window_ns_ = 0;  // when the current interval began (0: none yet)
  unsigned used_ = 0;           // lines in it
  std::uint64_t held_ = 0;      // lines held back since the last that went
};

}  // namespace lnet

#define LNET_LOG(level, subsys, ...)                                     \
  do {                                                                   \
    if (::lnet::log_enabled(::lnet::LogLevel::level, (subsys)))          \
      ::lnet::log_write(::lnet::LogLevel::level, (subsys), __VA_ARGS__); \
  } while (0)
