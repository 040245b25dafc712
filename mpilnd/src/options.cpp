// LNET_MPI_* environment variables.
#include <cerrno>
#include <cstdlib>
#include <string>

#include <lnet/mpi.hpp>

namespace lnet::mpi {

namespace {

constexpr EnvVar kVars[] = {
    {"LNET_MPI_NET", "0", "the MPI network is mpi<N>"},
    {"LNET_MPI_SHORT_MAX", "8192", "largest payload sent inline in a short message (bytes, up to 1048576)"},
    {"LNET_MPI_POOL", "64", "persistent receives for short messages"},
    {"LNET_MPI_CREDITS", "32", "short messages each peer may have in flight to this rank (1..255)"},
    {"LNET_MPI_PROGRESS", "auto", "auto (a thread with MPI_THREAD_MULTIPLE, else the application), thread or poll"},
    {"LNET_MPI_ON_ERROR", "return", "when MPI returns an error: return (fail the message) or abort (MPI_Abort)"},
    {"LNET_MPI_TIMEOUT", "50", "seconds a send may wait for a peer's handshake or a credit"},
    {"LNET_MPI_CHUNK", "2147483647", "largest MPI message of a bulk transfer (bytes)"},
    {"LNET_MPI_IDLE_US", "1000", "longest nap of an idle progress thread (microseconds)"},
    {"LNET_MPI_PACK", "1", "1: short messages that waited for a credit go out packed in one MPI message; 0: one each"},
    {"LNET_MPI_FAULT", "",
     "testing only: 'mute' ignores every handshake; 'isend' fails every MPI_Isend of an LNet message"},
};

Result<long> env_long(const char* name, long def, long lo, long hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return def;
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi)
    return Failure{-EINVAL, std::string(name) + "='" + v + "' is not a number in " + std::to_string(lo) + ".." +
                                std::to_string(hi)};
  return x;
}

}  // namespace

std::span<const EnvVar> env_vars() { return kVars; }

std::string env_help() {
  std::string out;
  for (const EnvVar& v : kVars) {
    const char* cur = std::getenv(v.name);
    out += std::string(v.name) + "\n    " + v.description + "\n    default: \"" + v.default_value + "\"";
    if (cur) out += ", now: \"" + std::string(cur) + "\"";
    out += "\n";
  }
  return out;
}

Result<Options> Options::from_env() {
  Options o;
  auto num = [&](const char* name, long def, long lo, long hi) { return env_long(name, def, lo, hi); };
  auto net = num("LNET_MPI_NET", o.net_number, 0, 65535);
  if (!net) return net.failure();
  o.net_number = static_cast<unsigned>(*net);
  auto sm = num("LNET_MPI_SHORT_MAX", o.short_max, 0, kMaxPayload);
  if (!sm) return sm.failure();
  o.short_max = static_cast<std::uint32_t>(*sm);
  auto pool = num("LNET_MPI_POOL", o.pool_depth, 1, 65536);
  if (!pool) return pool.failure();
  o.pool_depth = static_cast<unsigned>(*pool);
  auto cr = num("LNET_MPI_CREDITS", o.credits, 1, 255);
  if (!cr) return cr.failure();
  o.credits = static_cast<int>(*cr);
  auto to = num("LNET_MPI_TIMEOUT", o.timeout, 1, 3600);
  if (!to) return to.failure();
  o.timeout = static_cast<int>(*to);
  auto chunk = num("LNET_MPI_CHUNK", o.chunk, 1, INT_MAX);
  if (!chunk) return chunk.failure();
  o.chunk = static_cast<std::uint32_t>(*chunk);
  auto idle = num("LNET_MPI_IDLE_US", o.idle_us, 1, 1000000);
  if (!idle) return idle.failure();
  o.idle_us = static_cast<int>(*idle);
  auto pack = num("LNET_MPI_PACK", o.pack ? 1 : 0, 0, 1);
  if (!pack) return pack.failure();
  o.pack = *pack != 0;
  if (const char* v = std::getenv("LNET_MPI_PROGRESS"); v && *v) {
    std::string s = v;
    if (s == "auto")
      o.progress = ProgressMode::Auto;
    else if (s == "thread")
      o.progress = ProgressMode::Thread;
    else if (s == "poll")
      o.progress = ProgressMode::Poll;
    else
      return Failure{-EINVAL, "LNET_MPI_PROGRESS='" + s + "' is not auto, thread or poll"};
  }
  if (const char* v = std::getenv("LNET_MPI_ON_ERROR"); v && *v) {
    std::string s = v;
    if (s == "return")
      o.on_error = OnError::Return;
    else if (s == "abort")
      o.on_error = OnError::Abort;
    else
      return Failure{-EINVAL, "LNET_MPI_ON_ERROR='" + s + "' is not return or abort"};
  }
  if (const char* v = std::getenv("LNET_MPI_FAULT"); v && *v) {
    std::string s = v;
    if (s == "mute")
      o.mute = true;
    else if (s == "isend")
      o.fail_isend = true;
    else
      return Failure{-EINVAL, "LNET_MPI_FAULT='" + s + "' is not mute or isend"};
  }
  return o;
}

}  // namespace lnet::mpi
