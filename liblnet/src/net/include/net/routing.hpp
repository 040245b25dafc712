// Routing state of an instance: the routes (an immutable snapshot that readers use
// without a lock, like the net table) and the router buffer pools a router forwards
// through. The core validates a route against its NIs and takes the locks; these
// objects keep the state.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <memory>
#include <vector>

#include <lnet/config.hpp>
#include <lnet/lnd/fifo.hpp>
#include <lnet/lnd/lnd.hpp>
#include <lnet/result.hpp>
#include <lnet/stats.hpp>

namespace lnet::net {

// What the gateway's last ping info says of one route: the gateway routes and, for a
// single hop, lists an NI up on the route's net (avoid_asym_router_failure). Up until
// the gateway's first answer (check_routers_before_use 0).
struct RouteState {
  std::atomic<bool> up{true};
  std::atomic<bool> single_hop{true};     // the gateway lists an NI on the route's net
  std::atomic<bool> told_private{false};  // logged: a route to mpi through a gateway without an mpi NI
};

struct RouteEntry {
  RouteConfig cfg;
  std::shared_ptr<RouteState> state;
};

struct RouteTable {
  std::vector<RouteEntry> routes;
};

// The routes. Changes are serialised by the owner (the core's configuration mutex);
// every snapshot stays valid until the Routes object goes, so a reader may keep using
// the one it loaded.
class Routes {
 public:
  const RouteTable* table() const { return cur_.load(std::memory_order_acquire); }
  // -EEXIST when a route to that net through that gateway exists.
  Status add(const RouteConfig& r);
  // Removes the routes to `net` through `gateway` (every gateway when ANY); false if none.
  bool del(NetId net, Nid gateway);
  std::vector<RouteConfig> configs() const;

 private:
  void publish(std::unique_ptr<RouteTable> t);

  std::atomic<const RouteTable*> cur_{nullptr};
  std::vector<std::unique_ptr<RouteTable>> all_;
};

// A forwarding buffer; allocated on first use and kept.
struct RtrBuffer {
  RtrBuffer* next = nullptr;
  std::unique_ptr<char[]> owned;  // null when a driver's memory holds it
  iovec iov{};
  // Kept out of use for a driver (Router::keep_buffer): the pool it goes back to.
  unsigned kept_cpt = 0;
  int kept_kind = 0;
};

enum RtrPoolKind { kTinyPool = 0, kSmallPool = 1, kLargePool = 2, kNumPools = 3 };
inline constexpr int kRtrPoolPages[kNumPools] = {0, 1, 256};
inline constexpr std::size_t kRtrPageSize = 4096;

// One pool of one CPT (under that CPT's net lock). Credits go negative while messages
// wait for a buffer; the waiting messages are the core's.
struct RtrPool {
  int npages = 0;
  int nbuffers = 0;
  int credits = 0;
  int min_credits = 0;
  RtrBuffer* free = nullptr;
  std::vector<std::unique_ptr<RtrBuffer>> all;
  Fifo<FifoLink> waiting;
};

// The smallest pool whose buffers hold `len` bytes.
inline int pool_for(std::uint32_t len) {
  if (len == 0) return kTinyPool;
  if (len <= kRtrPageSize) return kSmallPool;
  return kLargePool;
}

// The pools of every CPT (tiny, small, large each). A pool is guarded by the net lock
// of its CPT; resize() needs every net lock.
class RouterBuffers {
 public:
  explicit RouterBuffers(unsigned ncpts);
  // Buffers made from now on come from `m` while it has memory (a driver's, see
  // Lnd::router_memory), then from the heap. Set before any buffer is taken.
  void set_memory(BufferMemory* m) { memory_ = m; }
  RtrPool& pool(unsigned cpt, int kind) { return pools_[cpt * kNumPools + static_cast<unsigned>(kind)]; }
  const RtrPool& pool(unsigned cpt, int kind) const { return pools_[cpt * kNumPools + static_cast<unsigned>(kind)]; }
  // Sizes every pool to its share of the totals in `b` (at least one buffer per CPT);
  // waiters beyond a smaller size are served as buffers come back. `reset_min` starts
  // the low-water marks afresh (routing turned on).
  void resize(const BufferConfig& b, bool reset_min);
  // A buffer of `pool` (of kind `kind`), made on first use: the caller holds a credit.
  RtrBuffer* take(RtrPool& pool, int kind);
  void give(RtrPool& pool, RtrBuffer* b);
  RouterPoolInfo info(unsigned cpt, int kind) const;

 private:
  unsigned ncpts_;
  std::unique_ptr<RtrPool[]> pools_;
  BufferMemory* memory_ = nullptr;
};

}  // namespace lnet::net
