// CPU partitions (CPTs): the shards of the core's locks, queues and counters. A NID maps
// to a CPT by hash; a thread to the CPT of the CPU it runs on.
#pragma once

#include <sched.h>

#include <cstddef>
#include <memory>
#include <mutex>

#include <lnet/nid.hpp>

namespace lnet {

inline constexpr std::size_t kCacheLine = 64;

struct alignas(kCacheLine) PaddedMutex {
  std::mutex m;
};

class CptTable {
 public:
  explicit CptTable(unsigned n) : n_(n ? n : 1) {}
  unsigned count() const { return n_; }
  unsigned of_nid(Nid nid) const {
    std::uint64_t x = nid.value() * 0x9E3779B97F4A7C15ULL;
    return static_cast<unsigned>((x >> 32) % n_);
  }
  unsigned current() const {
    int cpu = sched_getcpu();
    return cpu < 0 ? 0 : static_cast<unsigned>(cpu) % n_;
  }

 private:
  unsigned n_;
};

// One mutex per CPT. lock_all() takes them in ascending order (the "exclusive" lock that
// configuration changes hold); a thread holds at most one otherwise.
class CptLocks {
 public:
  explicit CptLocks(unsigned n) : n_(n), locks_(std::make_unique<PaddedMutex[]>(n)) {}
  std::mutex& operator[](unsigned cpt) { return locks_[cpt].m; }
  void lock_all() {
    for (unsigned i = 0; i < n_; ++i) locks_[i].m.lock();
  }
  void unlock_all() {
    for (unsigned i = n_; i-- > 0;) locks_[i].m.unlock();
  }

 private:
  unsigned n_;
  std::unique_ptr<PaddedMutex[]> locks_;
};

class ExclusiveLock {
 public:
  explicit ExclusiveLock(CptLocks& l) : l_(l) { l_.lock_all(); }
  ~ExclusiveLock() { l_.unlock_all(); }
  ExclusiveLock(const ExclusiveLock&) = delete;
  ExclusiveLock& operator=(const ExclusiveLock&) = delete;

 private:
  CptLocks& l_;
};

}  // namespace lnet
