// The shared memory of the bridge: one memfd region that lnetd creates, maps and hands to
// every proxy that connects (SCM_RIGHTS). Payloads crossing the bridge live in it, so
// neither side copies them: lnetd's router buffers and the UP LND's bounce buffers are
// carved out of it, the proxy's MPI receives land in it and its MPI sends read from it.
// Only the owner allocates; a region never gives memory back (router buffers and bounce
// buffers are kept for reuse by their pools).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <lnet/result.hpp>

namespace lnet::up {

class Region {
 public:
  // A new region of `size` bytes (a sparse memfd: pages cost memory when first touched).
  static Result<std::unique_ptr<Region>> create(std::size_t size, const std::string& name);
  // Maps a region received from its owner; takes ownership of `fd`. The size is checked
  // against the file's.
  static Result<std::unique_ptr<Region>> attach(int fd, std::size_t size);
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  // The mapping outlives this object (until the process exits): for a proxy whose MPI may
  // still move bytes of transfers it had to abandon to and from the region.
  void leave_mapped() { leave_mapped_ = true; }

  int fd() const { return fd_; }
  std::size_t size() const { return size_; }
  char* base() const { return base_; }

  // The offset of [p, p + len) when it lies inside the region.
  std::optional<std::uint64_t> offset_of(const void* p, std::size_t len) const {
    auto a = reinterpret_cast<std::uintptr_t>(p);
    auto b = reinterpret_cast<std::uintptr_t>(base_);
    if (a < b || a - b > size_ || len > size_ - (a - b)) return std::nullopt;
    return a - b;
  }
  // The address of [offset, offset + len), or nullptr when it is not inside the region.
  char* at(std::uint64_t offset, std::uint64_t len) const {
    if (offset > size_ || len > size_ - offset) return nullptr;
    return base_ + offset;
  }

  // `size` bytes (page aligned) from what is left; nullptr when the region is full.
  // Thread-safe. Only the owner allocates.
  void* allocate(std::size_t size);
  // Bytes handed out so far.
  std::size_t used() const { return next_.load(std::memory_order_relaxed); }

 private:
  Region(int fd, char* base, std::size_t size) : fd_(fd), base_(base), size_(size) {}
  int fd_;
  char* base_;
  std::size_t size_;
  std::atomic<std::size_t> next_{0};
  bool leave_mapped_ = false;
};

}  // namespace lnet::up
