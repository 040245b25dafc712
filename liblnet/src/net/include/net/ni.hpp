// Local networks and their NIs as the core keeps them: per-CPT tx credit queues, health,
// selection priority and statistics; and the table of them that readers see.
#pragma once

#include <atomic>
#include <climits>
#include <memory>
#include <vector>

#include <lnet/lnd/fifo.hpp>
#include <lnet/lnd/lnd.hpp>

#include "base/counters.hpp"
#include "base/cpt.hpp"
#include "base/recovery.hpp"

namespace lnet::net {

struct Net;

// NI tx credits of one CPT. A message takes a credit; when the count goes negative it
// waits here in order (the waiting messages are the core's). An NI on every CPT has one
// queue per CPT under that CPT's net lock, used by the peer NIs hashing to it. An NI on
// some CPTs (`CPT: "[0]"`) has queues on those only, each taken by peer NIs of any CPT
// (LNet's mapping of the peer's NID into the NI's list): such a queue is shared by
// holders of different net locks, and `shared` (a leaf lock, after the net lock) guards it.
struct TxQueue {
  int credits = 0;
  int max_credits = 0;
  int min_credits = 0;
  Fifo<FifoLink> delayed;
  Mutex shared;
};

struct Ni : NetInterface {
  Net* net = nullptr;
  std::unique_ptr<TxQueue[]> tq;  // one per CPT of the instance; an NI on some CPTs uses theirs
  std::vector<unsigned> cpts;     // the CPTs it is on, ascending; empty: every CPT
  std::atomic<int> health{1000};
  FailureCounts failures;                // those that blamed it
  RecoveryState recovery;                // under the core's recovery lock
  std::atomic<bool> fatal_error{false};  // its link is down (the driver says; LndHost::link_state)
  std::atomic<bool> up{true};
  std::atomic<bool> deleted{false};
  std::atomic<std::int64_t> last_rx{0};  // routers: when it last heard a message (coarse s)
  std::atomic<bool> silent{false};       // routers: reported down in the ping info: it heard nothing
  std::atomic<bool> told_up{true};       // the status our ping info gives it now
  std::atomic<std::uint32_t> sel_priority{UINT_MAX};
  int dev_prio = 0;
  // NUMA: the CPT of the device's node (-1: unknown or on several), and for each node the
  // distance from it to the device (lnet::numa_distances_to; empty: no nodes known).
  int dev_cpt = -1;
  std::vector<int> numa_dist;
  std::atomic<std::uint32_t> seq{0};
  TypeStats stats;
  OpLatencyStats latency;  // of our operations that went through it
  int poll_id = -1;        // the core's registration of this NI's poll function
  // Neither in fatal error nor down: selection may pick it.
  bool usable() const { return !fatal_error.load(std::memory_order_relaxed) && up.load(std::memory_order_relaxed); }
  // The tx queue a message to peer NI `peer` takes credits from: that of `lock_cpt` (the
  // peer NI's own CPT) on an NI of every CPT, else the one LNet's hash of the peer's NID
  // picks in this NI's list. Derived each time, so it cannot go stale on a resend.
  TxQueue& tx_queue(Nid peer, unsigned lock_cpt) const {
    return tq[cpts.empty() ? lock_cpt : cpts[CptTable::hash(peer, cpts.size())]];
  }
};

// Holds a tx queue's leaf lock for a scope when the NI's queues are shared (an NI on
// some CPTs); on an NI of every CPT the net lock the caller holds is enough.
class TxQueueLock {
 public:
  TxQueueLock(const Ni& ni, TxQueue& tq) LNET_NO_THREAD_SAFETY_ANALYSIS : m_(ni.cpts.empty() ? nullptr : &tq.shared) {
    if (m_) m_->lock();
  }
  ~TxQueueLock() LNET_NO_THREAD_SAFETY_ANALYSIS {
    if (m_) m_->unlock();
  }
  TxQueueLock(const TxQueueLock&) = delete;
  TxQueueLock& operator=(const TxQueueLock&) = delete;

 private:
  Mutex* m_;
};

// A network's identity; which NIs it has is in the NetTable.
struct Net {
  NetId id;
  Lnd* lnd = nullptr;
  std::atomic<std::uint32_t> sel_priority{UINT_MAX};
};

struct NetView {
  Net* net = nullptr;
  std::vector<Ni*> nis;
};

// An immutable snapshot of the local networks, published atomically: readers take no
// lock. Snapshots, Nets and NIs live until the instance shuts down.
struct NetTable {
  std::vector<NetView> nets;  // nets[0] is lo
  std::vector<Ni*> nis;       // LNetGetId order, 0@lo first

  const NetView* find(NetId id) const {
    for (const NetView& v : nets)
      if (v.net->id == id) return &v;
    return nullptr;
  }
  Ni* find_ni(Nid nid) const {
    for (Ni* ni : nis)
      if (ni->nid == nid) return ni;
    return nullptr;
  }
};

}  // namespace lnet::net
