// Routing state of an instance: the route table (an immutable snapshot, like the net
// table) and the router buffer pools a router forwards through.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <memory>
#include <vector>

#include <lnet/config.hpp>

#include "core/message.hpp"

namespace lnet::core {

// The router checker's verdict on one route (its gateway answers and, for a single hop,
// has an NI up on the route's net).
struct RouteState {
  std::atomic<bool> up{true};
};

struct RouteEntry {
  RouteConfig cfg;
  std::shared_ptr<RouteState> state;
};

struct RouteTable {
  std::vector<RouteEntry> routes;
};

// A forwarding buffer; allocated on first use and kept.
struct RtrBuffer {
  RtrBuffer* next = nullptr;
  std::unique_ptr<char[]> data;
  iovec iov{};
};

enum RtrPoolKind { kTinyPool = 0, kSmallPool = 1, kLargePool = 2, kNumPools = 3 };
inline constexpr int kRtrPoolPages[kNumPools] = {0, 1, 256};
inline constexpr std::size_t kRtrPageSize = 4096;

// One pool of one CPT (under that CPT's net lock). Credits go negative while messages
// wait for a buffer.
struct RtrPool {
  int npages = 0;
  int nbuffers = 0;
  int credits = 0;
  int min_credits = 0;
  RtrBuffer* free = nullptr;
  std::vector<std::unique_ptr<RtrBuffer>> all;
  MsgQueue waiting;
};

// The smallest pool whose buffers hold `len` bytes.
inline int pool_for(std::uint32_t len) {
  if (len == 0) return kTinyPool;
  if (len <= kRtrPageSize) return kSmallPool;
  return kLargePool;
}

}  // namespace lnet::core
