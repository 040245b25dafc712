// lnet::o2ib::O2ibLnd: the o2ib driver as the LND SPI sees it, its tunables and their
// rules (docs/design/o2iblnd.md §1.5), an NI per device address.
#include <algorithm>

#include <lnet/env.hpp>
#include <lnet/lnd/ifaddr.hpp>
#include <lnet/log.hpp>

#include "o2ib_ni.hpp"

namespace lnet::o2ib {

namespace {

constexpr unsigned kDefaultPeerCredits = 8;  // ko2iblnd's peer_credits
constexpr unsigned kMaxPeerCredits = 255;    // a message returns at most 255 credits

O2ibNi* net_of(const NetInterface& ni) { return static_cast<O2ibNi*>(ni.lnd_data); }

// ko2iblnd's module parameters, as variables (the kernel reads them at module load; we
// when an NI comes up).
const EnvVar kServiceVar{"LNET_O2IB_SERVICE", "987", "o2ib: RDMA CM port (service id) NIs listen on and connect to"};
const EnvVar kKeepaliveVar{"LNET_O2IB_KEEPALIVE", "100",
                           "o2ib: seconds of silence on a connection before a NOOP (0: none)"};
const EnvVar kCksumVar{"LNET_O2IB_CKSUM", "0", "o2ib: 1 = checksum every message sent (received ones are checked)"};
const EnvVar kRetryCountVar{"LNET_O2IB_RETRY_COUNT", "5",
                            "o2ib: transport retries of an unacknowledged send, and connects refused for want of a "
                            "listener before giving up (0..7)"};
const EnvVar kRnrRetryCountVar{"LNET_O2IB_RNR_RETRY_COUNT", "6",
                               "o2ib: retries of a send the peer had no receive posted for (0..7; 7: without end)"};
// Ours (ko2iblnd maps kernel pages per transfer and has no such cache).
const EnvVar kRegCacheVar{"LNET_O2IB_REG_CACHE_MB", "1024",
                          "o2ib: MiB of idle memory registrations kept for reuse (0: register per transfer)"};

// The module parameters into `p`; a failure names the variable and its bad value.
Status module_params(NetParams& p) {
  auto service = kServiceVar.number(1, 65535);
  if (!service) return service.failure();
  auto keepalive = kKeepaliveVar.number(0, 3600);
  if (!keepalive) return keepalive.failure();
  auto cksum = kCksumVar.flag();
  if (!cksum) return cksum.failure();
  auto retry = kRetryCountVar.number(0, 7);
  if (!retry) return retry.failure();
  auto rnr = kRnrRetryCountVar.number(0, 7);
  if (!rnr) return rnr.failure();
  auto cache_mb = kRegCacheVar.number(0, 1 << 20);
  if (!cache_mb) return cache_mb.failure();
  p.service = static_cast<std::uint16_t>(*service);
  p.keepalive = static_cast<int>(*keepalive);
  p.cksum = *cksum;
  p.retry_count = static_cast<int>(*retry);
  p.rnr_retry_count = static_cast<int>(*rnr);
  p.reg_cache = static_cast<std::size_t>(*cache_mb) << 20;
  return {};
}

}  // namespace

std::vector<LndTunableSpec> o2ib_tunables() {
  return {
      {"peercredits_hiw", 0, kMaxPeerCredits, 0, false,
       "credits owed to a peer before a NOOP returns them (0: half of peer_credits)"},
      {"concurrent_sends", 0, 2 * kMaxPeerCredits, 0, false,
       "sends in flight on a connection (0: peer_credits; kept within peer_credits/2..2*peer_credits)"},
      {"ntx", 16, 65536, 512, false, "message buffers of the NI"},
      {"conns_per_peer", 1, 1, 1, false, "connections per peer (1)"},
      {"timeout", 0, 3600, 0, true, "seconds a transfer may take (lnd_timeout)"},
  };
}

Result<NetParams> net_params(const NetConfig& config) {
  NetParams p;
  const LndTunables& t = config.lnd_tunables;
  std::string net = config.net.to_string();
  long credits = config.tunables.peer_credits ? config.tunables.peer_credits : kDefaultPeerCredits;
  if (credits < 1 || credits > static_cast<long>(kMaxPeerCredits))
    return Failure{-EINVAL, "peer_credits " + std::to_string(credits) + " on " + net + " is outside 1..255"};
  p.queue_depth = static_cast<unsigned>(credits);
  // ko2iblnd's rules: the high-water mark at least half the queue depth and below it; the
  // sends in flight between half and twice the queue depth.
  long hiw = t.get_or("peercredits_hiw", 0);
  p.hiw = static_cast<unsigned>(std::clamp<long>(hiw, credits / 2, credits - 1));
  if (p.hiw == 0) p.hiw = 1;
  long cs = t.get_or("concurrent_sends", 0);
  if (cs == 0) cs = credits;
  p.concurrent = static_cast<unsigned>(std::clamp<long>(cs, std::max<long>(1, credits / 2), 2 * credits));
  p.ntx = static_cast<unsigned>(t.get_or("ntx", 512));
  if (p.ntx < 2 * p.queue_depth) p.ntx = 2 * p.queue_depth;
  if (Status s = module_params(p); !s) return s.failure();
  return p;
}

Status O2ibLnd::check_config(const NetConfig& config) const {
  if (config.interfaces.size() > 1)
    return Failure{-EOPNOTSUPP, "not supported yet: more than one interface on " + config.net.to_string() +
                                    " (one NI per RDMA port: configure an NI per interface)"};
  if (auto p = net_params(config); !p) return p.failure();
  return Lnd::check_config(config);
}

int O2ibLnd::startup(NetInterface& ni) {
  auto params = net_params(ni.config);
  if (!params) return fail_startup(ni, params.code(), params.message());
  // The NID: the interface's IPv4 address (ib0 unless named), or the one configured.
  std::uint32_t ip = 0;
  if (!ni.nid.is_any()) {
    ip = ni.nid.addr();
  } else {
    std::string ifname = ni.config.interfaces.empty() ? "ib0" : ni.config.interfaces[0];
    auto addr = interface_ipv4(ifname);
    if (!addr) return fail_startup(ni, addr.code(), addr.message());
    ip = *addr;
    ni.nid = Nid::make(ni.config.net, ip);
  }
  auto dev = open_ ? open_(ip) : open_rdma(ip);
  if (!dev) return fail_startup(ni, dev.code(), dev.message());
  int timeout = ni.host && ni.host->lnd_timeout() > 0 ? ni.host->lnd_timeout() : params->timeout;
  params->timeout = timeout;
  ni.config.tunables.peer_credits = static_cast<int>(params->queue_depth);
  auto n = std::make_unique<O2ibNi>(ni, std::move(*dev), ip, *params);
  if (int rc = n->start(); rc < 0) return rc;
  ni.lnd_data = n.get();
  MutexLock g(mutex_);
  nets_.push_back(n.release());
  return 0;
}

void O2ibLnd::shutdown(NetInterface& ni) {
  O2ibNi* n = net_of(ni);
  if (!n) return;
  n->stop();
  {
    MutexLock g(mutex_);
    nets_.erase(std::remove(nets_.begin(), nets_.end(), n), nets_.end());
  }
  ni.lnd_data = nullptr;
  delete n;
}

int O2ibLnd::send(NetInterface& ni, LndMessage& msg) {
  O2ibNi* n = net_of(ni);
  return n ? n->send(msg) : -ESHUTDOWN;
}

int O2ibLnd::recv(NetInterface& ni, void* lnd_private, LndMessage* msg, bool delayed, const iovec* iov, unsigned niov,
                  std::uint32_t offset, std::uint32_t mlen, std::uint32_t rlen) {
  (void)delayed;
  O2ibNi* n = net_of(ni);
  return n ? n->recv(static_cast<Rx*>(lnd_private), msg, iov, niov, offset, mlen, rlen) : -ESHUTDOWN;
}

int O2ibLnd::timeout(const NetInterface& ni) const {
  const O2ibNi* n = net_of(ni);
  return n ? n->timeout() : NetParams{}.timeout;
}

int O2ibLnd::set_timeout(NetInterface& ni, int seconds) {
  O2ibNi* n = net_of(ni);
  if (!n || seconds < 0) return -EINVAL;
  if (seconds == 0) seconds = ni.host && ni.host->lnd_timeout() > 0 ? ni.host->lnd_timeout() : NetParams{}.timeout;
  n->set_timeout(seconds);
  return 0;
}

long O2ibLnd::tunable_in_effect(const NetInterface& ni, std::string_view name, long configured) const {
  const O2ibNi* n = net_of(ni);
  if (!n) return configured;
  if (name == "peercredits_hiw") return n->params().hiw;
  if (name == "concurrent_sends") return n->params().concurrent;
  if (name == "ntx") return n->params().ntx;
  return Lnd::tunable_in_effect(ni, name, configured);
}

std::vector<std::pair<std::string, std::uint64_t>> O2ibLnd::counters() const {
  MutexLock g(mutex_);
  std::vector<std::pair<std::string, std::uint64_t>> sum;
  for (const O2ibNi* n : nets_) {
    auto c = counter_list(n->counters(), n->cache_stats());
    if (sum.empty()) {
      sum = std::move(c);
      continue;
    }
    for (std::size_t i = 0; i < sum.size() && i < c.size(); ++i) sum[i].second += c[i].second;
  }
  return sum;  // none while the driver has no NI: `stats show` lists the drivers in use
}

std::shared_ptr<Lnd> make_o2ib_lnd(ProviderFactory open) { return std::make_shared<O2ibLnd>(std::move(open)); }

void register_o2ib_lnd() {
  register_lnd(kO2ibLnd, [] { return std::unique_ptr<Lnd>(new O2ibLnd({})); });
  register_lnd_tunables(kO2ibLnd, o2ib_tunables());
}

}  // namespace lnet::o2ib
