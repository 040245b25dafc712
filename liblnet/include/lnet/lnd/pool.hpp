// The one object pool: process-wide, per type, with per-thread caches. Taking and
// giving back take no lock and no heap call in the steady state; the shared list
// (under a mutex) only moves batches of 32 between threads. Objects are never freed
// (their memory outlives thread caches at process exit) and keep what they own while
// pooled (a vector keeps its capacity): reset what must not carry over when taking.
#pragma once

#include <vector>

#include <lnet/mutex.hpp>

namespace lnet {

// T needs a member `next` that is a T* or a pointer to a base of T (a FifoLink, see
// fifo.hpp); the pool owns it while the object is free.
template <class T>
class Pool {
 public:
  static T* take() {
    Cache& c = cache();
    if (!c.head) refill(c);
    T* t = c.head;
    c.head = static_cast<T*>(t->next);
    --c.count;
    t->next = nullptr;
    return t;
  }
  static void give(T* t) {
    Cache& c = cache();
    if (!c.enrolled) enroll(c);
    t->next = c.head;
    c.head = t;
    if (++c.count > kCacheMax) drain(c);
  }

 private:
  static constexpr unsigned kBatch = 32;
  static constexpr unsigned kCacheMax = 4 * kBatch;

  struct Shared {
    Mutex mutex;
    T* head LNET_GUARDED_BY(mutex) = nullptr;
    std::vector<T*> chunks LNET_GUARDED_BY(mutex);
  };
  static Shared& shared() {
    static Shared* s = new Shared;  // leaked on purpose, see above
    return *s;
  }
  // Trivial, so that the hot path reads it without an initialisation check; what a thread
  // still holds when it exits goes back through the Returner it enrolled on first use.
  struct Cache {
    T* head = nullptr;
    unsigned count = 0;
    bool enrolled = false;
  };
  static Cache& cache() {
    // Initial-exec (no call into the dynamic loader per take/give): see progress.cpp.
    [[gnu::tls_model("initial-exec")]] thread_local Cache c;
    return c;
  }
  struct Returner {
    ~Returner() {
      Cache& c = cache();
      if (!c.head) return;
      T* tail = c.head;
      while (tail->next) tail = static_cast<T*>(tail->next);
      Shared& s = shared();
      MutexLock g(s.mutex);
      tail->next = s.head;
      s.head = c.head;
      c.head = nullptr;
      c.count = 0;
    }
  };
  [[gnu::noinline]] static void enroll(Cache& c) {
    thread_local Returner r;  // constructed here, destroyed at thread exit
    (void)r;
    c.enrolled = true;
  }
  static void refill(Cache& c) {
    if (!c.enrolled) enroll(c);
    Shared& s = shared();
    MutexLock g(s.mutex);
    for (unsigned i = 0; i < kBatch; ++i) {
      if (!s.head) {
        T* chunk = new T[kBatch];
        s.chunks.push_back(chunk);
        for (unsigned j = 0; j < kBatch; ++j) {
          chunk[j].next = s.head;
          s.head = &chunk[j];
        }
      }
      T* t = s.head;
      s.head = static_cast<T*>(t->next);
      t->next = c.head;
      c.head = t;
      ++c.count;
    }
  }
  static void drain(Cache& c) {
    T* first = c.head;
    T* last = first;
    for (unsigned i = 1; i < kBatch; ++i) last = static_cast<T*>(last->next);
    c.head = static_cast<T*>(last->next);
    c.count -= kBatch;
    Shared& s = shared();
    MutexLock g(s.mutex);
    last->next = s.head;
    s.head = first;
  }
};

}  // namespace lnet
