// CPU partitions (CPTs): the shards of the core's locks, queues and counters. A NID maps
// to a CPT by hash; a thread to the CPT of the CPU it runs on.
#pragma once

#include <sched.h>

#include <cstddef>
#include <memory>

#include <lnet/mutex.hpp>
#include <lnet/nid.hpp>

namespace lnet {

inline constexpr std::size_t kCacheLine = 64;

struct alignas(kCacheLine) PaddedMutex {
  Mutex m;
};

class CptTable {
 public:
  explicit CptTable(unsigned n) : n_(n ? n : 1) {}
  unsigned count() const { return n_; }
  // LNet's mapping (lnet_nid_cpt_hash for 4-byte addresses): the sum of the NID's eight
  // bytes, modulo the CPT count, so that lnetctl cpt-of-nid answers as the kernel's does.
  unsigned of_nid(Nid nid) const { return hash(nid, n_); }
  // The same mapping into n slots (an NI's own CPT list).
  static unsigned hash(Nid nid, std::size_t n) {
    if (n <= 1) return 0;
    std::uint64_t v = nid.value();
    unsigned sum = 0;
    for (int i = 0; i < 8; ++i, v >>= 8) sum += static_cast<unsigned>(v & 0xFF);
    return static_cast<unsigned>(sum % n);
  }
  unsigned current() const {
    int cpu = sched_getcpu();
    return cpu < 0 ? 0 : static_cast<unsigned>(cpu) % n_;
  }

 private:
  unsigned n_;
};

// One mutex per CPT. lock_all() takes them in ascending order (the "exclusive" lock that
// configuration changes hold); a thread holds at most one otherwise. What they guard is
// sharded by CPT, the lock chosen at run time: the thread-safety analysis cannot name
// it, so that state carries no LNET_GUARDED_BY (the owners' comments say which lock).
// For the analysis, the set is one capability, held exclusively by ExclusiveLock: state
// that only changes under every lock (and is read under all of them) is guarded by it.
class LNET_CAPABILITY("cpt locks") CptLocks {
 public:
  explicit CptLocks(unsigned n) : n_(n), locks_(std::make_unique<PaddedMutex[]>(n)) {}
  Mutex& operator[](unsigned cpt) { return locks_[cpt].m; }
  void lock_all() LNET_ACQUIRE() LNET_NO_THREAD_SAFETY_ANALYSIS {
    for (unsigned i = 0; i < n_; ++i) locks_[i].m.lock();
  }
  void unlock_all() LNET_RELEASE() LNET_NO_THREAD_SAFETY_ANALYSIS {
    for (unsigned i = n_; i-- > 0;) locks_[i].m.unlock();
  }

 private:
  unsigned n_;
  std::unique_ptr<PaddedMutex[]> locks_;
};

class LNET_SCOPED_CAPABILITY ExclusiveLock {
 public:
  explicit ExclusiveLock(CptLocks& l) LNET_ACQUIRE(l) : l_(l) { l_.lock_all(); }
  ~ExclusiveLock() LNET_RELEASE() { l_.unlock_all(); }
  ExclusiveLock(const ExclusiveLock&) = delete;
  ExclusiveLock& operator=(const ExclusiveLock&) = delete;

 private:
  CptLocks& l_;
};

}  // namespace lnet
