#include <lnet/up/region.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lnet::up {

namespace {

constexpr std::size_t kPage = 4096;
// What no holder of the region's descriptor may do once it is sized: a proxy that could
// shrink it would make lnetd (and every other proxy) die of SIGBUS on its next access.
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

Result<char*> map(int fd, std::size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Failure{-errno, "cannot map the bridge region: " + errno_string(errno)};
  return static_cast<char*>(p);
}

}  // namespace

Result<std::unique_ptr<Region>> Region::create(std::size_t size, const std::string& name) {
  if (size == 0 || size % kPage)
    return Failure{-EINVAL, "bridge region size " + std::to_string(size) + " is not a multiple of 4096"};
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Failure{-errno, "memfd_create: " + errno_string(errno)};
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int e = errno;
    close(fd);
    return Failure{-e, "cannot size the bridge region to " + std::to_string(size) + " bytes: " + errno_string(e)};
  }
  if (fcntl(fd, F_ADD_SEALS, kSeals) != 0) {
    int e = errno;
    close(fd);
    return Failure{-e, "cannot seal the bridge region: " + errno_string(e)};
  }
  auto base = map(fd, size);
  if (!base) {
    close(fd);
    return base.failure();
  }
  return std::unique_ptr<Region>(new Region(fd, *base, size));
}

Result<std::unique_ptr<Region>> Region::attach(int fd, std::size_t size) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return Failure{-e, "fstat of the bridge region: " + errno_string(e)};
  }
  if (size == 0 || static_cast<std::size_t>(st.st_size) != size) {
    close(fd);
    return Failure{-EPROTO, "the bridge region has " + std::to_string(st.st_size) + " bytes, not the " +
                                std::to_string(size) + " announced"};
  }
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & kSeals) != kSeals) {
    close(fd);
    return Failure{-EPROTO, "the bridge region is not sealed against resizing (another process could shrink it)"};
  }
  auto base = map(fd, size);
  if (!base) {
    close(fd);
    return base.failure();
  }
  return std::unique_ptr<Region>(new Region(fd, *base, size));
}

Region::~Region() {
  if (!leave_mapped_) munmap(base_, size_);
  close(fd_);
}

void* Region::allocate(std::size_t size) {
  std::size_t want = (size + kPage - 1) / kPage * kPage;
  std::size_t at = next_.load(std::memory_order_relaxed);
  do {
    if (want > size_ - at) return nullptr;
  } while (!next_.compare_exchange_weak(at, at + want, std::memory_order_relaxed));
  return base_ + at;
}

}  // namespace lnet::up
