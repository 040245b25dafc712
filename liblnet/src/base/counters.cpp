// Summing and resetting the sharded counters.
#include "base/counters.hpp"

namespace lnet {

void GlobalCounters::health(unsigned cpt, HealthStatus h) {
  switch (h) {
    case HealthStatus::Ok: return;
    case HealthStatus::LocalInterrupt: add(cpt, kLocalInterrupt); return;
    case HealthStatus::LocalDropped: add(cpt, kLocalDropped); return;
    case HealthStatus::LocalAborted: add(cpt, kLocalAborted); return;
    case HealthStatus::LocalNoRoute: add(cpt, kLocalNoRoute); return;
    case HealthStatus::LocalError: add(cpt, kLocalError); return;
    case HealthStatus::LocalTimeout: add(cpt, kLocalTimeout); return;
    case HealthStatus::RemoteError: add(cpt, kRemoteError); return;
    case HealthStatus::RemoteDropped: add(cpt, kRemoteDropped); return;
    case HealthStatus::RemoteTimeout: add(cpt, kRemoteTimeout); return;
    case HealthStatus::NetworkTimeout: add(cpt, kNetworkTimeout); return;
  }
}

Counters GlobalCounters::snapshot() const {
  std::int64_t sum[kNumCtr] = {};
  for (unsigned i = 0; i < n_; ++i)
    for (unsigned c = 0; c < kNumCtr; ++c) sum[c] += shards_[i].v[c].load(std::memory_order_relaxed);
  auto u = [&](Ctr c) { return static_cast<std::uint64_t>(sum[c] < 0 ? 0 : sum[c]); };
  Counters out;
  out.msgs_alloc = u(kMsgsAlloc);
  out.msgs_max = u(kMsgsMax);
  out.rst_alloc = u(kRstAlloc);
  out.errors = u(kErrors);
  out.send_count = u(kSendCount);
  out.resend_count = u(kResendCount);
  out.failed_resends = u(kFailedResends);
  out.successful_resends = u(kSuccessfulResends);
  out.response_timeout_count = u(kResponseTimeout);
  out.local_interrupt_count = u(kLocalInterrupt);
  out.local_dropped_count = u(kLocalDropped);
  out.local_aborted_count = u(kLocalAborted);
  out.local_no_route_count = u(kLocalNoRoute);
  out.local_timeout_count = u(kLocalTimeout);
  out.local_error_count = u(kLocalError);
  out.remote_dropped_count = u(kRemoteDropped);
  out.remote_error_count = u(kRemoteError);
  out.remote_timeout_count = u(kRemoteTimeout);
  out.network_timeout_count = u(kNetworkTimeout);
  out.recv_count = u(kRecvCount);
  out.route_count = u(kRouteCount);
  out.drop_count = u(kDropCount);
  out.send_length = u(kSendLength);
  out.recv_length = u(kRecvLength);
  out.route_length = u(kRouteLength);
  out.drop_length = u(kDropLength);
  return out;
}

std::int64_t GlobalCounters::sum(Ctr c) const {
  std::int64_t s = 0;
  for (unsigned i = 0; i < n_; ++i) s += shards_[i].v[c].load(std::memory_order_relaxed);
  return s;
}

void GlobalCounters::reset() {
  // msgs_alloc tracks live messages and is not a statistic; keep it.
  for (unsigned i = 0; i < n_; ++i)
    for (unsigned c = 0; c < kNumCtr; ++c)
      if (c != kMsgsAlloc) shards_[i].v[c].store(c == kMsgsMax ? shards_[i].v[kMsgsAlloc].load() : 0);
}

}  // namespace lnet
