// The logger: atomics for the fast "is it on" check, a mutex around the sink.
#include <lnet/env.hpp>
#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

#include <syslog.h>

#include <atomic>
#include <cstdio>
#include <ctime>

namespace lnet {

namespace {

const EnvVar kLogLevelVar{"LNET_LOG_LEVEL", "warn", "messages logged: error | warn | info | debug"};
const EnvVar kLogSubsysVar{"LNET_LOG_SUBSYS", "all",
                           "subsystems logged: comma list of core, lnd, router, config, daemon, or all"};

struct State {
  std::atomic<int> level{static_cast<int>(LogLevel::Warn)};
  std::atomic<std::uint32_t> mask{kLogAll};
  Mutex mutex;
  std::function<void(LogLevel, std::string_view)> sink LNET_GUARDED_BY(mutex);
  const char* program LNET_GUARDED_BY(mutex) = "lnet";
  Status env;  // what was wrong with LNET_LOG_LEVEL / LNET_LOG_SUBSYS
  State() {
    LogLevel l;
    if (const char* v = kLogLevelVar.value()) {
      if (parse_log_level(v, &l))
        level = static_cast<int>(l);
      else
        env = Failure{-EINVAL, std::string("LNET_LOG_LEVEL='") + v + "' is not error, warn, info or debug"};
    }
    std::uint32_t m;
    if (const char* v = kLogSubsysVar.value()) {
      if (parse_log_subsystems(v, &m))
        mask = m;
      else if (env.ok())
        env = Failure{-EINVAL, std::string("LNET_LOG_SUBSYS='") + v +
                                   "' is not a comma list of core, lnd, router, config, daemon or all"};
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

Status log_env_status() { return state().env; }
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
  struct Name {
    const char* name;
    std::uint32_t bit;
  };
  static const Name names[] = {{"core", kLogCore},     {"lnd", kLogLnd},       {"router", kLogRouter},
                               {"config", kLogConfig}, {"daemon", kLogDaemon}, {"all", kLogAll}};
  std::uint32_t mask = 0;
  while (!v.empty()) {
    std::size_t comma = v.find(',');
    std::string_view name = v.substr(0, comma);
    bool found = false;
    for (const Name& n : names) {
      if (name == n.name) {
        mask |= n.bit;
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
  MutexLock g(s.mutex);
  s.sink = std::move(sink);
}

void set_log_program(const char* name) {
  State& s = state();
  MutexLock g(s.mutex);
  s.program = name;
}

bool parse_log_target(std::string_view v, LogTarget* out) {
  if (v == "stderr") {
    *out = LogTarget::Stderr;
  } else if (v == "syslog") {
    *out = LogTarget::Syslog;
  } else if (v == "journal") {
    *out = LogTarget::Journal;
  } else {
    return false;
  }
  return true;
}

int log_syslog_priority(LogLevel l) {
  switch (l) {
    case LogLevel::Error: return LOG_ERR;
    case LogLevel::Warn: return LOG_WARNING;
    case LogLevel::Info: return LOG_INFO;
    case LogLevel::Debug: return LOG_DEBUG;
  }
  return LOG_INFO;
}

void set_log_target(LogTarget t) {
  switch (t) {
    case LogTarget::Stderr: set_log_sink(nullptr); return;
    case LogTarget::Syslog: {
      State& s = state();
      const char* ident;
      {
        MutexLock g(s.mutex);
        ident = s.program;
      }
      openlog(ident, LOG_PID, LOG_DAEMON);
      set_log_sink([](LogLevel l, std::string_view line) {
        syslog(log_syslog_priority(l), "%.*s", static_cast<int>(line.size()), line.data());
      });
      return;
    }
    case LogTarget::Journal:
      set_log_sink([](LogLevel l, std::string_view line) {
        std::fprintf(stderr, "<%d>%.*s\n", log_syslog_priority(l), static_cast<int>(line.size()), line.data());
      });
      return;
  }
}

void log_write(LogLevel l, std::uint32_t, const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  State& s = state();
  MutexLock g(s.mutex);
  if (s.sink) {
    s.sink(l, line);
    return;
  }
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  std::fprintf(stderr, "%lld.%06ld %s %s: %s\n", static_cast<long long>(ts.tv_sec), ts.tv_nsec / 1000, s.program,
               level_name(l), line);
}

bool LogLimiter::allow(std::uint64_t* held_back) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  std::int64_t now = static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
  std::lock_guard g(mutex_);
  if (window_ns_ == 0 || now - window_ns_ >= interval_ns_) {
    window_ns_ = now;
    used_ = 0;
  }
  if (used_ >= burst_) {
    ++held_;
    return false;
  }
  ++used_;
  *held_back = held_;
  held_ = 0;
  return true;
}

}  // namespace lnet
