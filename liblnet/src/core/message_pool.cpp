// Message objects come from per-thread caches refilled in batches from one shared free
// list, so allocation takes no lock and no heap call in the steady state.
#include <mutex>
#include <vector>

#include "core/message.hpp"

namespace lnet::core {

namespace {

constexpr unsigned kBatch = 32;
constexpr unsigned kCacheMax = 4 * kBatch;

struct SharedPool {
  std::mutex mutex;
  Message* head = nullptr;
  std::vector<Message*> chunks;  // never freed: messages outlive thread caches at exit
};

SharedPool& shared() {
  static SharedPool* p = new SharedPool;  // leaked on purpose, see above
  return *p;
}

struct ThreadCache {
  Message* head = nullptr;
  unsigned count = 0;
  ~ThreadCache() {
    if (!head) return;
    Message* tail = head;
    while (tail->next) tail = tail->next;
    SharedPool& s = shared();
    std::lock_guard g(s.mutex);
    tail->next = s.head;
    s.head = head;
  }
};

thread_local ThreadCache tl_cache;

void refill(ThreadCache& c) {
  SharedPool& s = shared();
  std::lock_guard g(s.mutex);
  for (unsigned i = 0; i < kBatch; ++i) {
    if (!s.head) {
      Message* chunk = new Message[kBatch];
      s.chunks.push_back(chunk);
      for (unsigned j = 0; j < kBatch; ++j) {
        chunk[j].next = s.head;
        s.head = &chunk[j];
      }
    }
    Message* m = s.head;
    s.head = m->next;
    m->next = c.head;
    c.head = m;
    ++c.count;
  }
}

void drain(ThreadCache& c) {
  Message* first = c.head;
  Message* last = first;
  for (unsigned i = 1; i < kBatch; ++i) last = last->next;
  c.head = last->next;
  c.count -= kBatch;
  SharedPool& s = shared();
  std::lock_guard g(s.mutex);
  last->next = s.head;
  s.head = first;
}

}  // namespace

Message* msg_alloc() {
  ThreadCache& c = tl_cache;
  if (!c.head) refill(c);
  Message* m = c.head;
  c.head = m->next;
  --c.count;
  *m = Message{};
  return m;
}

void msg_free(Message* m) {
  ThreadCache& c = tl_cache;
  m->next = c.head;
  c.head = m;
  if (++c.count > kCacheMax) drain(c);
}

}  // namespace lnet::core
