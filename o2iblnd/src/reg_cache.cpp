// The o2ib driver's registration cache (reg_cache.hpp).
#include "reg_cache.hpp"

#include <cassert>

#include <lnet/lnd/lnd.hpp>

namespace lnet::o2ib {

RegCache::~RegCache() {
  MutexLock g(mutex_);
  assert(entries_.empty());
}

const MemoryRegion& RegCache::region(const Entry* e) { return e->mr; }

Result<RegCache::Entry*> RegCache::get(std::uint64_t memory, const iovec& frag) {
  Key key{memory, reinterpret_cast<std::uintptr_t>(frag.iov_base), frag.iov_len};
  {
    MutexLock g(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      Entry* e = it->second.get();
      if (e->users++ == 0) unlink_idle(e);
      ++stats_.hits;
      return e;
    }
  }
  auto mr = dev_.reg(frag.iov_base, frag.iov_len, false);  // no lock of ours held: it may take a while
  if (!mr) return mr.failure();
  MutexLock g(mutex_);
  auto [it, fresh] = entries_.try_emplace(key);
  Entry* e;
  if (fresh) {
    it->second = std::make_unique<Entry>();
    e = it->second.get();
    e->key = key;
    e->len = frag.iov_len;
    e->mr = *mr;
    md_entries_ += memory != kHostMemory;
    ++stats_.misses;
  } else {  // another transfer registered it meanwhile: use that one
    e = it->second.get();
    if (e->users == 0) unlink_idle(e);
    dev_.dereg(*mr);
    ++stats_.hits;
  }
  ++e->users;
  return e;
}

void RegCache::put(Entry* e) {
  MutexLock g(mutex_);
  assert(e->users > 0);
  if (--e->users > 0) return;
  e->prev = lru_tail_;
  e->next = nullptr;
  (lru_tail_ ? lru_tail_->next : lru_head_) = e;
  lru_tail_ = e;
  stats_.idle_bytes += e->len;
  while (stats_.idle_bytes > max_idle_ && lru_head_) erase(lru_head_);
}

void RegCache::unlink_idle(Entry* e) {
  (e->prev ? e->prev->next : lru_head_) = e->next;
  (e->next ? e->next->prev : lru_tail_) = e->prev;
  e->prev = e->next = nullptr;
  stats_.idle_bytes -= e->len;
}

void RegCache::erase(Entry* e) {
  unlink_idle(e);
  dev_.dereg(e->mr);
  md_entries_ -= std::get<0>(e->key) != kHostMemory;
  Key key = e->key;  // not the entry's own: erasing destroys it
  entries_.erase(key);
}

std::vector<std::uint64_t> RegCache::idle_memories() const {
  std::vector<std::uint64_t> out;
  MutexLock g(mutex_);
  for (const Entry* e = lru_head_; e; e = e->next) {
    std::uint64_t m = std::get<0>(e->key);
    if (m != kHostMemory && (out.empty() || out.back() != m)) out.push_back(m);
  }
  return out;
}

void RegCache::drop_memory(std::uint64_t memory) {
  MutexLock g(mutex_);
  auto it = entries_.lower_bound(Key{memory, 0, 0});
  while (it != entries_.end() && std::get<0>(it->first) == memory) {
    Entry* e = (it++)->second.get();
    if (e->users > 0) continue;  // its transfer ends first; the next sweep takes it
    erase(e);
  }
}

void RegCache::drop_idle() {
  MutexLock g(mutex_);
  while (lru_head_) erase(lru_head_);
}

void RegCache::clear() {
  MutexLock g(mutex_);
  for (auto& [key, e] : entries_) {
    assert(e->users == 0);
    dev_.dereg(e->mr);
  }
  entries_.clear();
  lru_head_ = lru_tail_ = nullptr;
  md_entries_ = 0;
  stats_.idle_bytes = 0;
}

RegCache::Stats RegCache::stats() const {
  MutexLock g(mutex_);
  Stats s = stats_;
  s.entries = entries_.size();
  return s;
}

}  // namespace lnet::o2ib
