// The logger: atomics for the fast "is it on" check, a mutex around the sink.
#include <lnet/log.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace lnet {

namespace {

struct State {
  std::atomic<int> level{static_cast<int>(LogLevel::Warn)};
  std::atomic<std::uint32_t> mask{kLogAll};
  std::mutex mutex;
  std::function<void(LogLevel, std::string_view)> sink;
  State() {
    LogLevel l;
    if (const char* v = std::getenv("LNET_LOG_LEVEL"); v && *v) {
      if (parse_log_level(v, &l))
        level = static_cast<int>(l);
      else
        std::fprintf(stderr, "lnet: ignoring LNET_LOG_LEVEL='%s' (error, warn, info or debug)\n", v);
    }
    std::uint32_t m;
    if (const char* v = std::getenv("LNET_LOG_SUBSYS"); v && *v) {
      if (parse_log_subsystems(v, &m))
        mask = m;
      else
        std::fprintf(stderr, "lnet: ignoring LNET_LOG_SUBSYS='%s' (core, lnd, router, config, daemon or all)\n", v);
    }
  }
};

State& state() {
  static State* s = new State;  // usable from any destructor at exit
  return *s;
}

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::Error: return "error";
    case LogLevel::Warn: return "warn";
    case LogLevel::Info: return "info";
    case LogLevel::Debug: return "debug";
  }
  return "?";
}

}  // namespace

void set_log_level(LogLevel l) { state().level = static_cast<int>(l); }
void set_log_subsystems(std::uint32_t mask) { state().mask = mask; }
LogLevel log_level() { return static_cast<LogLevel>(state().level.load()); }

bool log_enabled(LogLevel l, std::uint32_t subsys) {
  State& s = state();
  return static_cast<int>(l) <= s.level.load(std::memory_order_relaxed) &&
         (subsys & s.mask.load(std::memory_order_relaxed)) != 0;
}

bool parse_log_level(std::string_view v, LogLevel* out) {
  for (LogLevel l : {LogLevel::Error, LogLevel::Warn, LogLevel::Info, LogLevel::Debug}) {
    if (v == level_name(l)) {
      *out = l;
      return true;
    }
  }
  return false;
}

bool parse_log_subsystems(std::string_view v, std::uint32_t* out) {
  static const std::pair<const char*, std::uint32_t> names[] = {{"core", kLogCore},     {"lnd", kLogLnd},
                                                                {"router", kLogRouter}, {"config", kLogConfig},
                                                                {"daemon", kLogDaemon}, {"all", kLogAll}};
  std::uint32_t mask = 0;
  while (!v.empty()) {
    std::size_t comma = v.find(',');
    std::string_view name = v.substr(0, comma);
    bool found = false;
    for (auto& [n, bit] : names) {
      if (name == n) {
        mask |= bit;
        found = true;
      }
    }
    if (!found) return false;
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  *out = mask;
  return true;
}

void set_log_sink(std::function<void(LogLevel, std::string_view)> sink) {
  State& s = state();
  std::lock_guard g(s.mutex);
  s.sink = std::move(sink);
}

void log_write(LogLevel l, std::uint32_t, const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  State& s = state();
  std::lock_guard g(s.mutex);
  if (s.sink) {
    s.sink(l, line);
    return;
  }
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  std::fprintf(stderr, "%lld.%06ld lnet %s: %s\n", static_cast<long long>(ts.tv_sec), ts.tv_nsec / 1000, level_name(l),
               line);
}

}  // namespace lnet
