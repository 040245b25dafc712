// Registrations of memory that outlives its messages (LndMessage::memory: an MD that takes
// operation after operation, the host's router buffers), kept for the transfers that
// follow (docs/design/o2iblnd.md §2.3). An entry registers one whole fragment of that
// memory for local access only (a source the device reads: no key of it leaves this
// node); a transfer holds the entries it uses until it ends. Idle entries stay until the
// idle ones pass `max_idle` bytes (the least recently used go first) or the host says
// their memory is gone (a sweep).
//
// Threads: any; one mutex, held for lookups and deregistrations, never while a
// registration is made or the host is asked.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include <lnet/mutex.hpp>
#include <lnet/result.hpp>

#include "verbs.hpp"

namespace lnet::o2ib {

class RegCache {
  using Key = std::tuple<std::uint64_t, std::uintptr_t, std::size_t>;  // memory, address, length

 public:
  // One registration (what a transfer holds: region() is all it reads).
  struct Entry {
    Key key;
    std::size_t len = 0;
    MemoryRegion mr;
    int users = 0;
    Entry* prev = nullptr;  // on the idle list while users == 0
    Entry* next = nullptr;
  };

  RegCache(Provider& dev, std::size_t max_idle) : dev_(dev), max_idle_(max_idle) {}
  ~RegCache();  // clear() must have run while the device was there
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  // Whether a fragment of `len` bytes is cached (the cache is on and it fits in it).
  bool takes(std::size_t len) const { return len > 0 && len <= max_idle_; }
  // The registration of all of `frag` of `memory` (non-zero), cached or made now; held
  // until put().
  Result<Entry*> get(std::uint64_t memory, const iovec& frag);
  static const MemoryRegion& region(const Entry* e);
  void put(Entry* e);

  // The memories idle entries belong to (the host's own excepted): what a sweep asks the
  // host about, dropping those it says are gone.
  std::vector<std::uint64_t> idle_memories() const;
  void drop_memory(std::uint64_t memory);
  // Every idle registration dropped (a registration failed: they may hold the locked
  // memory it needed).
  void drop_idle();
  // Whether entries of MD memory exist (sweeps are due while they do): read without the
  // lock, at every wake-up of the progress thread.
  bool holds_md_memory() const { return md_entries_.load(std::memory_order_relaxed) > 0; }
  // Every registration dropped (at stop, none in use).
  void clear();

  struct Stats {
    std::uint64_t hits = 0, misses = 0;
    std::size_t entries = 0, idle_bytes = 0;
  };
  Stats stats() const;

 private:
  void unlink_idle(Entry* e) LNET_REQUIRES(mutex_);
  void erase(Entry* e) LNET_REQUIRES(mutex_);  // deregisters it (idle)

  Provider& dev_;
  const std::size_t max_idle_;
  mutable Mutex mutex_;
  std::map<Key, std::unique_ptr<Entry>> entries_ LNET_GUARDED_BY(mutex_);
  Entry* lru_head_ LNET_GUARDED_BY(mutex_) = nullptr;  // idle, least recently used first
  Entry* lru_tail_ LNET_GUARDED_BY(mutex_) = nullptr;
  std::atomic<std::size_t> md_entries_{0};  // written under the mutex
  Stats stats_ LNET_GUARDED_BY(mutex_);
};

}  // namespace lnet::o2ib
