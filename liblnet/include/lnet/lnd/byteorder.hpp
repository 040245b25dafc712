// Explicit byte-order loads and stores for wire structures (never memcpy a packed struct),
// for liblnet and for drivers encoding their own messages.
// Each is one unaligned load or store (plus a byte swap where the orders differ).
#pragma once

#include <bit>
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

}  // namespace lnet::wire
