// Message counters: relaxed atomics sharded per CPT (no shared cache line on the data
// path), summed when read.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <lnet/lnd/lnd.hpp>
#include <lnet/stats.hpp>
#include <lnet/wire.hpp>

#include "base/cpt.hpp"

namespace lnet {

enum Ctr : unsigned {
  kMsgsAlloc,
  kMsgsMax,
  kRstAlloc,
  kErrors,
  kSendCount,
  kResendCount,
  kResponseTimeout,
  kLocalInterrupt,
  kLocalDropped,
  kLocalAborted,
  kLocalNoRoute,
  kLocalTimeout,
  kLocalError,
  kRemoteDropped,
  kRemoteError,
  kRemoteTimeout,
  kNetworkTimeout,
  kRecvCount,
  kRouteCount,
  kDropCount,
  kSendLength,
  kRecvLength,
  kRouteLength,
  kDropLength,
  kFailedResends,
  kSuccessfulResends,
  kNumCtr
};

class GlobalCounters {
 public:
  explicit GlobalCounters(unsigned ncpts) : n_(ncpts), shards_(std::make_unique<Shard[]>(ncpts)) {}

  void add(unsigned cpt, Ctr c, std::int64_t v = 1) { shards_[cpt].v[c].fetch_add(v, std::memory_order_relaxed); }
  void msg_alloc(unsigned cpt) {
    Shard& s = shards_[cpt];
    std::int64_t now = s.v[kMsgsAlloc].fetch_add(1, std::memory_order_relaxed) + 1;
    if (now > s.v[kMsgsMax].load(std::memory_order_relaxed)) s.v[kMsgsMax].store(now, std::memory_order_relaxed);
  }
  void msg_free(unsigned cpt) { shards_[cpt].v[kMsgsAlloc].fetch_sub(1, std::memory_order_relaxed); }
  // Counts a failed transmission by its health status.
  void health(unsigned cpt, HealthStatus h);

  Counters snapshot() const;
  std::int64_t sum(Ctr c) const;  // one counter over the shards
  void reset();

 private:
  struct alignas(kCacheLine) Shard {
    std::atomic<std::int64_t> v[kNumCtr] = {};
  };
  unsigned n_;
  std::unique_ptr<Shard[]> shards_;
};

// Failed sends by health status (`net show -v` / `peer show -v` health stats).
struct FailureCounts {
  std::atomic<std::uint64_t> n[static_cast<unsigned>(HealthStatus::NetworkTimeout) + 1] = {};
  void add(HealthStatus h) { n[static_cast<unsigned>(h)].fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t get(HealthStatus h) const { return n[static_cast<unsigned>(h)].load(std::memory_order_relaxed); }
};

// Latencies of one kind of operation on an NI or a peer NI (nanoseconds): a few relaxed
// atomic updates per sample, no lock.
class LatencyStats {
 public:
  void add(std::uint64_t ns) {
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(ns, std::memory_order_relaxed);
    std::uint64_t m = min_.load(std::memory_order_relaxed);
    while (ns < m && !min_.compare_exchange_weak(m, ns, std::memory_order_relaxed)) {
    }
    m = max_.load(std::memory_order_relaxed);
    while (ns > m && !max_.compare_exchange_weak(m, ns, std::memory_order_relaxed)) {
    }
  }
  LatencyFigures get() const {
    LatencyFigures f;
    f.samples = count_.load(std::memory_order_relaxed);
    if (f.samples == 0) return f;
    f.min_ns = min_.load(std::memory_order_relaxed);
    f.max_ns = max_.load(std::memory_order_relaxed);
    f.avg_ns = sum_.load(std::memory_order_relaxed) / f.samples;
    return f;
  }
  void reset() {
    count_.store(0, std::memory_order_relaxed);
    sum_.store(0, std::memory_order_relaxed);
    min_.store(UINT64_MAX, std::memory_order_relaxed);
    max_.store(0, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t> count_{0}, sum_{0}, min_{UINT64_MAX}, max_{0};
};

// The three of an NI or a peer NI (OpLatencies).
struct OpLatencyStats {
  LatencyStats put_egress, get_rtt, put_ack;
  OpLatencies get() const { return {put_egress.get(), get_rtt.get(), put_ack.get()}; }
  void reset() {
    put_egress.reset();
    get_rtt.reset();
    put_ack.reset();
  }
};

// sent / received / dropped counts per message type, for NIs and peer NIs.
class TypeStats {
 public:
  enum Kind { kSent = 0, kReceived = 1, kDropped = 2 };
  void add(Kind k, MsgType t) { v_[k][static_cast<unsigned>(t)].fetch_add(1, std::memory_order_relaxed); }
  MsgTypeStats get(Kind k) const {
    auto at = [&](MsgType t) { return v_[k][static_cast<unsigned>(t)].load(std::memory_order_relaxed); };
    return {at(MsgType::Put), at(MsgType::Get), at(MsgType::Reply), at(MsgType::Ack), at(MsgType::Hello)};
  }
  void reset() {
    for (auto& row : v_)
      for (auto& x : row) x.store(0, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t> v_[3][5] = {};
};

}  // namespace lnet
