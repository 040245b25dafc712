// The LNET_MPI_* variables: declared here, next to Options::from_env that reads them.
#include <lnet/env.hpp>
#include <lnet/mpi.hpp>

namespace lnet::mpi {

namespace {

const EnvVar kNet{"LNET_MPI_NET", "mpi",
                  "the MPI network: mpi<N>, or a net of a kernel type a site chose for it (gni<N>, kfi<N>...: "
                  "lnet-mpi(7)); a number N is mpi<N>; unset with LNET_PROXY: the proxies' network"};
const EnvVar kShortMax{"LNET_MPI_SHORT_MAX", "8192",
                       "largest payload sent inline in a short message (bytes, up to 1048576)"};
const EnvVar kPool{"LNET_MPI_POOL", "64", "persistent receives for short messages"};
const EnvVar kCredits{"LNET_MPI_CREDITS", "32", "short messages each peer may have in flight to this rank (1..255)"};
const EnvVar kProgress{"LNET_MPI_PROGRESS", "auto",
                       "auto (a thread with MPI_THREAD_MULTIPLE, else the application), thread or poll"};
const EnvVar kOnError{"LNET_MPI_ON_ERROR", "return",
                      "when MPI returns an error: return (fail the message) or abort (MPI_Abort)"};
const EnvVar kTimeout{"LNET_MPI_TIMEOUT", "50",
                      "seconds a send may wait for a peer's handshake or a credit, and a transfer may stay in MPI "
                      "(0: LNet's lnd_timeout, derived from transaction_timeout and retry_count)"};
const EnvVar kChunk{"LNET_MPI_CHUNK", "2147483647", "largest MPI message of a bulk transfer (bytes)"};
const EnvVar kIdleUs{"LNET_MPI_IDLE_US", "1000", "longest nap of an idle progress thread (microseconds)"};
const EnvVar kPack{"LNET_MPI_PACK", "1",
                   "1: short messages that waited for a credit go out packed in one MPI message; 0: one each"};
const EnvVar kFault{"LNET_MPI_FAULT", "none",
                    "testing only: none; mute ignores every handshake; isend fails every MPI_Isend of an LNet message"};
const EnvVar kProxy{"LNET_PROXY", "",
                    "reach lnetd's nets through lnet-proxy: its port file (a path), name:<published service>, or "
                    "spawn:[HOST:]BRIDGE,... (start one proxy rank per bridge)"};
const EnvVar kProxyBin{"LNET_PROXY_BIN", "lnet-proxy", "the lnet-proxy program LNET_PROXY=spawn: starts"};
const EnvVar kProxyTimeout{"LNET_PROXY_TIMEOUT", "30", "seconds to reach the proxy and get its answer"};
const EnvVar kProxySecret{"LNET_PROXY_SECRET", "/run/lnet/lnet-proxy.port",
                          "with LNET_PROXY=name:, the proxy's port file, whose secret the knock says"};

// LNET_MPI_NET: a net of a type an MPI network can have, or a number N for mpi<N>.
Result<NetId> net_from_env() {
  const char* v = kNet.value();
  std::string_view text = v ? v : kNet.default_value();
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos) {
    auto n = kNet.number(0, 65535);
    if (!n) return n.failure();
    return NetId::make(kMpiLnd, static_cast<std::uint32_t>(*n));
  }
  auto net = NetId::parse(text);
  if (!net || net->is_any() || !mpi_net_type(net->type()))
    return Failure{-EINVAL, std::string(kNet.name()) + "='" + std::string(text) +
                                "' is not an MPI network: mpi<N>, a number N, or a net of gni, gip, ptlf, kfi, efa "
                                "or bxi3f (types the kernel names and no driver here drives)"};
  return *net;
}

}  // namespace

Result<Options> Options::from_env() {
  Options o;
  struct Num {
    const EnvVar& var;
    long lo, hi;
    long* out;
  };
  long short_max, pool, credits, timeout, chunk, idle, proxy_timeout;
  for (Num n : {Num{kShortMax, 0, kMaxPayload, &short_max}, Num{kPool, 1, 65536, &pool},
                Num{kCredits, 1, 255, &credits}, Num{kTimeout, 0, 3600, &timeout}, Num{kChunk, 1, INT_MAX, &chunk},
                Num{kIdleUs, 1, 1000000, &idle}, Num{kProxyTimeout, 1, 3600, &proxy_timeout}}) {
    auto v = n.var.number(n.lo, n.hi);
    if (!v) return v.failure();
    *n.out = *v;
  }
  auto net = net_from_env();
  if (!net) return net.failure();
  o.net = *net;
  o.net_given = kNet.value() != nullptr;
  o.short_max = static_cast<std::uint32_t>(short_max);
  o.pool_depth = static_cast<unsigned>(pool);
  o.credits = static_cast<int>(credits);
  o.timeout = static_cast<int>(timeout);
  o.chunk = static_cast<std::uint32_t>(chunk);
  o.idle_us = static_cast<int>(idle);
  o.proxy_timeout = static_cast<int>(proxy_timeout);
  if (const char* p = kProxy.value()) o.proxy = p;
  if (const char* p = kProxyBin.value()) o.proxy_bin = p;
  if (const char* p = kProxySecret.value()) o.proxy_secret = p;
  auto pack = kPack.flag();
  if (!pack) return pack.failure();
  o.pack = *pack;
  auto progress = kProgress.choice({"auto", "thread", "poll"});
  if (!progress) return progress.failure();
  o.progress = static_cast<ProgressMode>(*progress);
  auto on_error = kOnError.choice({"return", "abort"});
  if (!on_error) return on_error.failure();
  o.on_error = static_cast<OnError>(*on_error);
  auto fault = kFault.choice({"none", "mute", "isend"});
  if (!fault) return fault.failure();
  o.mute = *fault == 1;
  o.fail_isend = *fault == 2;
  return o;
}

}  // namespace lnet::mpi
