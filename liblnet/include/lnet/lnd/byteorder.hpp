// Explicit byte-order loads and stores for wire structures (never memcpy a packed struct),
// for liblnet and for drivers encoding their own messages.
// Each is one unaligned load or store (plus a byte swap where the orders differ).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace lnet::wire {

namespace detail {

template <class T>
inline T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
inline void store(std::uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
inline std::uint16_t swap(std::uint16_t v) { return __builtin_bswap16(v); }
inline std::uint32_t swap(std::uint32_t v) { return __builtin_bswap32(v); }
inline std::uint64_t swap(std::uint64_t v) { return __builtin_bswap64(v); }
template <class T>
inline T to_le(T v) {
  if constexpr (std::endian::native == std::endian::little)
    return v;
  else
    return swap(v);
}
template <class T>
inline T to_be(T v) {
  if constexpr (std::endian::native == std::endian::big)
    return v;
  else
    return swap(v);
}

}  // namespace detail

inline void put_le16(std::uint8_t* p, std::uint16_t v) { detail::store(p, detail::to_le(v)); }
inline void put_le32(std::uint8_t* p, std::uint32_t v) { detail::store(p, detail::to_le(v)); }
inline void put_le64(std::uint8_t* p, std::uint64_t v) { detail::store(p, detail::to_le(v)); }
inline std::uint16_t get_le16(const std::uint8_t* p) { return detail::to_le(detail::load<std::uint16_t>(p)); }
inline std::uint32_t get_le32(const std::uint8_t* p) { return detail::to_le(detail::load<std::uint32_t>(p)); }
inline std::uint64_t get_le64(const std::uint8_t* p) { return detail::to_le(detail::load<std::uint64_t>(p)); }
inline std::uint32_t get_be32(const std::uint8_t* p) { return detail::to_be(detail::load<std::uint32_t>(p)); }
inline std::uint64_t get_be64(const std::uint8_t* p) { return detail::to_be(detail::load<std::uint64_t>(p)); }
inline void put_be32(std::uint8_t* p, std::uint32_t v) { detail::store(p, detail::to_be(v)); }
inline void put_be64(std::uint8_t* p, std::uint64_t v) { detail::store(p, detail::to_be(v)); }

// Cursors for codecs that write or read a message's fields one after another, in the
// byte order given: LNet's wire is little-endian; self-test writes its sender's own order
// and reads in the order the magic says. The caller keeps within the buffer (a codec
// checks a message's length before it touches its fields). Codecs with fields of their
// own (a NID, a header) wrap one and add them.
class ByteWriter {
 public:
  explicit ByteWriter(std::uint8_t* at, std::endian order = std::endian::little)
      : p_(at), swap_(order != std::endian::native) {}
  ByteWriter& u8(std::uint8_t v) {
    *p_++ = v;
    return *this;
  }
  ByteWriter& u16(std::uint16_t v) { return put(v); }
  ByteWriter& u32(std::uint32_t v) { return put(v); }
  ByteWriter& u64(std::uint64_t v) { return put(v); }
  ByteWriter& i32(std::int32_t v) { return put(static_cast<std::uint32_t>(v)); }
  ByteWriter& i64(std::int64_t v) { return put(static_cast<std::uint64_t>(v)); }
  ByteWriter& bytes(const void* src, std::size_t n) {
    std::memcpy(p_, src, n);
    p_ += n;
    return *this;
  }
  ByteWriter& skip(std::size_t n) {  // leaves the bytes as they are (a zeroed buffer's padding)
    p_ += n;
    return *this;
  }
  std::uint8_t* pos() const { return p_; }

 private:
  template <class T>
  ByteWriter& put(T v) {
    detail::store(p_, swap_ ? detail::swap(v) : v);
    p_ += sizeof v;
    return *this;
  }
  std::uint8_t* p_;
  bool swap_;
};

class ByteReader {
 public:
  explicit ByteReader(const std::uint8_t* at, std::endian order = std::endian::little)
      : p_(at), swap_(order != std::endian::native) {}
  std::uint8_t u8() { return *p_++; }
  std::uint16_t u16() { return get<std::uint16_t>(); }
  std::uint32_t u32() { return get<std::uint32_t>(); }
  std::uint64_t u64() { return get<std::uint64_t>(); }
  std::int32_t i32() { return static_cast<std::int32_t>(get<std::uint32_t>()); }
  std::int64_t i64() { return static_cast<std::int64_t>(get<std::uint64_t>()); }
  void bytes(void* dst, std::size_t n) {
    std::memcpy(dst, p_, n);
    p_ += n;
  }
  void skip(std::size_t n) { p_ += n; }
  const std::uint8_t* pos() const { return p_; }

 private:
  template <class T>
  T get() {
    T v = detail::load<T>(p_);
    p_ += sizeof v;
    return swap_ ? detail::swap(v) : v;
  }
  const std::uint8_t* p_;
  bool swap_;
};

// The other byte order than this machine's: what a peer whose magic arrives swapped wrote in.
inline constexpr std::endian kForeignOrder =
    std::endian::native == std::endian::little ? std::endian::big : std::endian::little;

}  // namespace lnet::wire
