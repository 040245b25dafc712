// Local networks and their NIs as the core keeps them: per-CPT tx credit queues, health,
// selection priority and statistics.
#pragma once

#include <atomic>
#include <climits>
#include <memory>
#include <vector>

#include <lnet/lnd.hpp>

#include "core/counters.hpp"
#include "core/message.hpp"

namespace lnet::core {

struct Net;

// NI tx credits of one CPT (under that CPT's net lock). A message takes a credit; when
// the count goes negative it waits here in order.
struct TxQueue {
  int credits = 0;
  int max_credits = 0;
  int min_credits = 0;
  MsgQueue delayed;
};

struct Ni : NetInterface {
  Net* net = nullptr;
  unsigned index = 0;  // position in LNetGetId order
  std::unique_ptr<TxQueue[]> tq;
  std::atomic<int> health{1000};
  std::atomic<bool> fatal_error{false};
  std::atomic<bool> up{true};
  std::atomic<std::uint32_t> sel_priority{UINT_MAX};
  int dev_prio = 0;
  std::atomic<std::uint32_t> seq{0};
  TypeStats stats;
};

struct Net {
  NetId id;
  Lnd* lnd = nullptr;
  std::vector<Ni*> nis;
  std::atomic<std::uint32_t> sel_priority{UINT_MAX};
};

}  // namespace lnet::core
