// LNet identifiers: network ids, 64-bit NIDs and process ids, parsed and printed exactly
// as the real LNet does ("0@lo", "192.168.1.2@tcp1", "12345-10.0.0.1@tcp", "<?>").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <lnet/result.hpp>

namespace lnet {

using Pid = std::uint32_t;

// LND (network) type numbers, as in the real LNet; `mpi` is this project's private type.
inline constexpr std::uint32_t kSockLnd = 2;   // tcp
inline constexpr std::uint32_t kO2ibLnd = 5;   // o2ib
inline constexpr std::uint32_t kLoLnd = 9;     // lo
inline constexpr std::uint32_t kGniLnd = 13;   // gni
inline constexpr std::uint32_t kGipLnd = 14;   // gip
inline constexpr std::uint32_t kPtl4Lnd = 15;  // ptlf
inline constexpr std::uint32_t kKfiLnd = 16;   // kfi
inline constexpr std::uint32_t kEfaLnd = 18;   // efa
inline constexpr std::uint32_t kBxi3Lnd = 19;  // bxi3f
// Private, never sent to a real Lustre node (real numbers are assigned below 64).
inline constexpr std::uint32_t kMpiLnd = 64;  // mpi

inline constexpr Pid kPidAny = 0xFFFFFFFFu;
inline constexpr Pid kPidLustre = 12345;
inline constexpr Pid kPidUserFlag = 0x80000000u;
inline constexpr Pid kPidReserved = 0xF0000000u;

// The name of an LND type ("tcp") or nullptr when the type has no name.
const char* lnd_type_name(std::uint32_t type);
// Whether addresses of this LND type are dotted IPv4 (tcp, o2ib, gip, efa).
bool lnd_type_uses_ip(std::uint32_t type);
// The net types an MPI network can have (docs/design/mpi-net-type.md): `mpi`, this
// project's own, which only userspace nodes can name; or one the kernel names but no
// driver of this project drives (gni, gip, ptlf, kfi, efa, bxi3f), chosen by a site so
// that its Lustre servers can route to the MPI network.
bool mpi_net_type(std::uint32_t type);
// On an MPI network an address from 2^24 up is a node's (a proxy's or an lnetd's static
// <primary IPv4>, seed 002 §1.2.2); one below is an application rank.
constexpr bool mpi_node_address(std::uint32_t addr) { return addr >= (1u << 24); }
// The mpi type writes and reads a node's address dotted; the kernel's types write theirs
// as they always do (a number on gni, dotted on gip).
constexpr bool mpi_ip_form(std::uint32_t type, std::uint32_t addr) { return type == kMpiLnd && mpi_node_address(addr); }

// A network: (type << 16) | number.
class NetId {
 public:
  static constexpr std::uint32_t kAnyValue = 0xFFFFFFFFu;

  constexpr NetId() = default;
  constexpr explicit NetId(std::uint32_t value) : value_(value) {}
  static constexpr NetId make(std::uint32_t type, std::uint32_t num) {
    return NetId(((type & 0xFFu) << 16) | (num & 0xFFFFu));
  }
  static constexpr NetId any() { return NetId(kAnyValue); }

  constexpr std::uint32_t value() const { return value_; }
  constexpr std::uint32_t type() const { return (value_ >> 16) & 0xFFu; }
  constexpr std::uint32_t num() const { return value_ & 0xFFFFu; }
  constexpr bool is_any() const { return value_ == kAnyValue; }

  // "tcp", "tcp1", "<?>" for ANY, "<type:num>" for unknown types.
  std::string to_string() const;
  // Accepts "tcp", "tcp0", "o2ib3", "lo"; the failure message names the bad part.
  static Result<NetId> parse(std::string_view text);

  friend constexpr bool operator==(NetId a, NetId b) { return a.value_ == b.value_; }
  friend constexpr auto operator<=>(NetId a, NetId b) { return a.value_ <=> b.value_; }

 private:
  std::uint32_t value_ = kAnyValue;
};

// A NID in 64 bits. The classic NID (lnet_nid_t): network in the high 32 bits, address
// in the low 32 bits, the top byte always 0. A large NID (LNet 2.15+: `struct lnet_nid`
// with an address longer than 4 bytes, an IPv6 address) is the same value with its
// nid_size (address bytes - 4: 12) in that top byte and, in the low 32 bits, the index of
// its address in the process's table of large addresses, where every address is entered
// once: equal NIDs have equal values, and the classic path is not touched
// (docs/design/large-nid.md).
class Nid {
 public:
  static constexpr std::uint64_t kAnyValue = ~0ULL;
  static constexpr unsigned kMaxAddrBytes = 16;  // an IPv6 address
  static constexpr unsigned kWireBytes = 20;     // struct lnet_nid: size, type, num, 4 address words

  constexpr Nid() = default;
  constexpr explicit Nid(std::uint64_t value) : value_(value) {}
  static constexpr Nid make(NetId net, std::uint32_t addr) { return Nid((std::uint64_t{net.value()} << 32) | addr); }
  static constexpr Nid any() { return Nid(kAnyValue); }
  static constexpr Nid lo() { return make(NetId::make(kLoLnd, 0), 0); }
  // A NID of `len` address bytes (network order): 4 make a classic NID, 16 a large one
  // (its address entered in the table); other lengths are refused.
  static Result<Nid> make(NetId net, const std::uint8_t* addr, unsigned len);
  // A classic lnet_nid_t as the wire and the C API carry it: refused (false) when its top
  // byte is set (no classic NID has one; in ours it would name a large address).
  static constexpr bool fits_nid4(std::uint64_t v) { return v == kAnyValue || (v >> 56) == 0; }

  constexpr std::uint64_t value() const { return value_; }
  constexpr NetId net() const {
    auto hi = static_cast<std::uint32_t>(value_ >> 32);
    return NetId((hi >> 24) == 0xFFu ? hi : hi & 0xFFFFFFu);
  }
  // The classic address (a large NID's is its table index: use addr_bytes()).
  constexpr std::uint32_t addr() const { return static_cast<std::uint32_t>(value_); }
  constexpr bool is_any() const { return value_ == kAnyValue; }
  constexpr bool is_lo() const { return net().type() == kLoLnd; }
  // nid_size of struct lnet_nid: 0 for a classic NID, 12 for IPv6.
  constexpr unsigned nid_size() const { return is_large() ? static_cast<unsigned>(value_ >> 56) : 0; }
  constexpr bool is_large() const {
    auto top = static_cast<unsigned>(value_ >> 56);
    return top != 0 && top != 0xFFu;
  }
  // The address in network order (4 bytes classic, 16 IPv6); the count (0: a large NID
  // whose index is not in the table, which no parser makes).
  unsigned addr_bytes(std::uint8_t (&out)[kMaxAddrBytes]) const;

  // struct lnet_nid on the wire (facts §1.5): NID_BYTES (nid_size + 8) written to `out`.
  unsigned to_wire(std::uint8_t (&out)[kWireBytes]) const;
  // One struct lnet_nid of at most `len` bytes at `p` (the bytes it took in *used:
  // NID_BYTES); a size, type or address it cannot carry is refused, naming it.
  static Result<Nid> from_wire(const std::uint8_t* p, std::size_t len, std::size_t* used = nullptr);
  // The order of struct lnet_nid compared byte by byte (the socket LND's connection race).
  static int wire_compare(Nid a, Nid b);

  // "192.168.1.2@tcp1", "2001:db8::1@tcp", "0@lo", "5@mpi", "<?>" for ANY.
  std::string to_string() const;
  // Accepts "<addr>@<net>", a bare address (net tcp0) and "<?>"; IPv6 addresses on the
  // networks that take IP addresses.
  static Result<Nid> parse(std::string_view text);

  friend constexpr bool operator==(Nid a, Nid b) { return a.value_ == b.value_; }
  friend constexpr auto operator<=>(Nid a, Nid b) { return a.value_ <=> b.value_; }

 private:
  std::uint64_t value_ = kAnyValue;
};

// (nid, pid): a process on the network.
struct ProcessId {
  Nid nid = Nid::any();
  Pid pid = kPidAny;

  static constexpr ProcessId any() { return {}; }
  // "12345-10.0.0.1@tcp", "U42-5@mpi" (user flag), "LNET_PID_ANY-0@lo".
  std::string to_string() const;
  // Accepts the printed forms; a bare NID gets pid ANY.
  static Result<ProcessId> parse(std::string_view text);

  friend constexpr bool operator==(const ProcessId&, const ProcessId&) = default;
};

}  // namespace lnet

template <>
struct std::hash<lnet::Nid> {
  std::size_t operator()(lnet::Nid n) const noexcept {
    std::uint64_t x = n.value() * 0x9E3779B97F4A7C15ULL;
    return static_cast<std::size_t>(x ^ (x >> 29));
  }
};
