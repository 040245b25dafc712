// Large NIDs (struct lnet_nid, LNet 2.15+): the process's table of large addresses, and
// the 20-byte wire form of every NID.
//
// The table only grows: an address is entered the first time a NID with it is made
// (parsed, read off the wire, configured) and keeps its index for the life of the
// process, so that a Nid stays one 64-bit value. Readers find an entry without a lock
// (chunks are published once, never moved); entering takes a mutex. It holds at most
// kMaxEntries addresses: a peer sending ever new addresses is refused beyond that.
#include <lnet/nid.hpp>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

namespace lnet {

namespace {

constexpr unsigned kChunkBits = 12;
constexpr std::uint32_t kChunkSize = 1u << kChunkBits;
constexpr std::uint32_t kMaxChunks = 256;
constexpr std::uint32_t kMaxEntries = kChunkSize * kMaxChunks;  // 1 Mi addresses, 16 MiB
constexpr unsigned kIpv6Size = 12;                              // nid_size of an IPv6 NID

using Addr = std::array<std::uint8_t, Nid::kMaxAddrBytes>;

struct AddrTable {
  std::mutex mutex;
  std::unordered_map<std::string, std::uint32_t> index;  // the 16 bytes -> entry
  std::atomic<Addr*> chunks[kMaxChunks] = {};
  std::atomic<std::uint32_t> count{0};

  const Addr* find(std::uint32_t i) const {
    if (i >= count.load(std::memory_order_acquire)) return nullptr;
    return &chunks[i >> kChunkBits].load(std::memory_order_acquire)[i & (kChunkSize - 1)];
  }

  Result<std::uint32_t> enter(const std::uint8_t* a) {
    std::string key(reinterpret_cast<const char*>(a), Nid::kMaxAddrBytes);
    std::lock_guard g(mutex);
    if (auto it = index.find(key); it != index.end()) return it->second;
    std::uint32_t i = count.load(std::memory_order_relaxed);
    if (i >= kMaxEntries)
      return Failure{-ENOSPC, "too many distinct large-NID addresses (" + std::to_string(kMaxEntries) + ")"};
    Addr* chunk = chunks[i >> kChunkBits].load(std::memory_order_relaxed);
    if (!chunk) {
      chunk = new Addr[kChunkSize];
      chunks[i >> kChunkBits].store(chunk, std::memory_order_release);
    }
    std::memcpy(chunk[i & (kChunkSize - 1)].data(), a, Nid::kMaxAddrBytes);
    index.emplace(std::move(key), i);
    count.store(i + 1, std::memory_order_release);
    return i;
  }
};

// Never destroyed: threads still printing NIDs at exit find it.
AddrTable& table() {
  static auto* t = new AddrTable;
  return *t;
}

void put_be32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}

std::uint32_t be32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}

}  // namespace

Result<Nid> Nid::make(NetId net, const std::uint8_t* addr, unsigned len) {
  if (len == 4) return make(net, be32(addr));
  if (len != kMaxAddrBytes)
    return Failure{-EINVAL, "a NID address of " + std::to_string(len) + " bytes (4 or 16 are carried)"};
  if (net.is_any()) return Failure{-EINVAL, "a large NID on network '<?>'"};
  auto i = table().enter(addr);
  if (!i) return i.failure();
  return Nid((std::uint64_t{kIpv6Size} << 56) | (std::uint64_t{net.value()} << 32) | *i);
}

unsigned Nid::addr_bytes(std::uint8_t (&out)[kMaxAddrBytes]) const {
  if (!is_large()) {
    put_be32(out, addr());
    return 4;
  }
  const Addr* a = table().find(addr());
  if (!a) return 0;
  std::memcpy(out, a->data(), kMaxAddrBytes);
  return kMaxAddrBytes;
}

unsigned Nid::to_wire(std::uint8_t (&out)[kWireBytes]) const {
  std::memset(out, 0, kWireBytes);
  if (is_any()) {
    std::memset(out, 0xFF, kWireBytes);  // LNET_ANY_NID: every field all ones
    return kWireBytes;
  }
  NetId n = net();
  out[0] = static_cast<std::uint8_t>(nid_size());
  out[1] = static_cast<std::uint8_t>(n.type());
  out[2] = static_cast<std::uint8_t>(n.num() >> 8);
  out[3] = static_cast<std::uint8_t>(n.num());
  std::uint8_t a[kMaxAddrBytes];
  unsigned len = addr_bytes(a);
  std::memcpy(out + 4, a, len);
  return nid_size() + 8;
}

Result<Nid> Nid::from_wire(const std::uint8_t* p, std::size_t len, std::size_t* used) {
  if (len < 8) return Failure{-EPROTO, "a struct lnet_nid of " + std::to_string(len) + " bytes (8 at least)"};
  unsigned size = p[0];
  if (size == 0xFF) {  // LNET_ANY_NID
    if (len < kWireBytes) return Failure{-EPROTO, "LNET_ANY_NID cut short"};
    if (used) *used = kWireBytes;
    return Nid::any();
  }
  if (size != 0 && size != kIpv6Size)
    return Failure{-EPROTO, "a NID of nid_size " + std::to_string(size) + " (0 or 12 are carried)"};
  if (len < size + 8u)
    return Failure{-EPROTO, "a NID of nid_size " + std::to_string(size) + " in " + std::to_string(len) + " bytes"};
  NetId net = NetId::make(p[1], std::uint32_t{p[2]} << 8 | p[3]);
  if (used) *used = size + 8;
  return make(net, p + 4, size + 4);
}

int Nid::wire_compare(Nid a, Nid b) {
  std::uint8_t x[kWireBytes], y[kWireBytes];
  a.to_wire(x);
  b.to_wire(y);
  return std::memcmp(x, y, kWireBytes);
}

}  // namespace lnet
