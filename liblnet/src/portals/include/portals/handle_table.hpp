// Handle cookies for MDs and MEs: a slot index with a generation, so a stale handle
// never finds the object that reused its slot. One table per CPT, under its resource lock.
#pragma once

#include <cstdint>
#include <vector>

namespace lnet::portals {

// cookie bits: generation (24) | slot index (30) | cpt (8) | type (2).
enum class HandleType : std::uint64_t { Md = 1, Me = 2 };

inline unsigned cookie_cpt(std::uint64_t cookie) { return static_cast<unsigned>((cookie >> 2) & 0xFF); }
inline bool cookie_is(std::uint64_t cookie, HandleType t) { return (cookie & 3) == static_cast<std::uint64_t>(t); }

class HandleTable {
 public:
  std::uint64_t insert(void* obj, HandleType type, unsigned cpt) {
    std::uint32_t idx;
    if (free_head_ != kNone) {
      idx = free_head_;
      free_head_ = slots_[idx].next_free;
    } else {
      idx = static_cast<std::uint32_t>(slots_.size());
      slots_.push_back(Slot{});
    }
    Slot& s = slots_[idx];
    s.obj = obj;
    s.type = type;
    s.gen = (s.gen + 1) & kGenMask;
    if (s.gen == 0) s.gen = 1;
    return (std::uint64_t{s.gen} << 40) | (std::uint64_t{idx} << 10) | (std::uint64_t{cpt & 0xFF} << 2) |
           static_cast<std::uint64_t>(type);
  }

  void* lookup(std::uint64_t cookie, HandleType type) const {
    if (!cookie_is(cookie, type)) return nullptr;
    std::uint64_t idx = (cookie >> 10) & kIndexMask;
    if (idx >= slots_.size()) return nullptr;
    const Slot& s = slots_[idx];
    // The type is checked against the slot too: a cookie from the wire (an ACK's or a
    // REPLY's MD handle) may carry the MD type bits with the slot of an ME.
    if (s.obj == nullptr || s.type != type || s.gen != (cookie >> 40)) return nullptr;
    return s.obj;
  }

  void remove(std::uint64_t cookie) {
    std::uint32_t idx = static_cast<std::uint32_t>((cookie >> 10) & kIndexMask);
    Slot& s = slots_[idx];
    s.obj = nullptr;
    s.next_free = free_head_;
    free_head_ = idx;
  }

  std::size_t live() const {
    std::size_t n = 0;
    for (const Slot& s : slots_) n += s.obj != nullptr;
    return n;
  }

 private:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  static constexpr std::uint64_t kIndexMask = (1ULL << 30) - 1;
  static constexpr std::uint32_t kGenMask = (1U << 24) - 1;
  struct Slot {
    void* obj = nullptr;
    HandleType type = HandleType::Md;
    std::uint32_t gen = 0;
    std::uint32_t next_free = kNone;
  };
  std::vector<Slot> slots_;
  std::uint32_t free_head_ = kNone;
};

}  // namespace lnet::portals
