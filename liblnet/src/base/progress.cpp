// The registry of the poll functions of drivers without threads (lnet/progress.hpp):
// readers (drive_progress) take a shared lock; registration is rare and exclusive. And
// IdlePolicy's yield.
#include <lnet/mutex.hpp>
#include <lnet/progress.hpp>

#include "base/progress_registry.hpp"

#include <atomic>
#include <cerrno>
#include <thread>

namespace lnet {

namespace {

constexpr int kSlots = 16;

struct Slot {
  PollFn fn = nullptr;
  void* ctx = nullptr;
};

struct Registry {
  SharedMutex mutex;
  Slot slots[kSlots] LNET_GUARDED_BY(mutex);
  std::atomic<int> count{0};
};

Registry& registry() {
  static Registry* r = new Registry;  // usable from destructors at exit
  return *r;
}

// Initial-exec: read on every progress call, and the general TLS model would make
// each read a call into the dynamic loader. A byte of static TLS is safe to ask for.
[[gnu::tls_model("initial-exec")]] thread_local bool tl_driving = false;

}  // namespace

int add_progress(PollFn fn, void* ctx) {
  Registry& r = registry();
  WriteLock g(r.mutex);
  for (int i = 0; i < kSlots; ++i) {
    if (!r.slots[i].fn) {
      r.slots[i] = Slot{fn, ctx};
      r.count.fetch_add(1, std::memory_order_release);
      return i;
    }
  }
  return -ENOSPC;
}

void remove_progress(int id) {
  if (id < 0 || id >= kSlots) return;
  Registry& r = registry();
  WriteLock g(r.mutex);  // waits for running calls (they hold the lock shared)
  if (r.slots[id].fn) {
    r.slots[id] = Slot{};
    r.count.fetch_sub(1, std::memory_order_release);
  }
}

// A system call (0.7 us on the test VM), so not in the first microseconds of an idle
// stretch: the answer in request-response traffic over shared memory comes within them.
void IdlePolicy::yield() { std::this_thread::yield(); }

bool progress_is_polled() { return registry().count.load(std::memory_order_acquire) > 0; }

bool drive_progress() {
  Registry& r = registry();
  if (tl_driving || r.count.load(std::memory_order_acquire) == 0) return false;
  struct Guard {
    Guard() { tl_driving = true; }
    ~Guard() { tl_driving = false; }
  } guard;
  bool worked = false;
  ReadLock g(r.mutex);
  for (const Slot& s : r.slots)
    if (s.fn) worked |= s.fn(s.ctx);
  return worked;
}

}  // namespace lnet
