// Small text helpers shared by the identifier and range-expression parsers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <lnet/result.hpp>

namespace lnet::text {

struct NetLndType {
  std::uint32_t type;
};

std::string_view trim(std::string_view s);
// The next item of a list at `i`: separators (any of `seps`) skipped, then everything up
// to the next separator outside brackets and parentheses; `i` moves past it. Empty at
// the end.
std::string_view next_item(std::string_view input, std::size_t& i, std::string_view seps);
// Decimal digits only, value <= max.
bool parse_u32(std::string_view s, std::uint32_t max, std::uint32_t& out);
// A numeric NID address as LNet reads one: decimal, or hexadecimal after 0x or 0X.
bool parse_numeric_address(std::string_view s, std::uint32_t& out);
// Exactly four decimal octets; result is a<<24|b<<16|c<<8|d.
bool parse_ipv4(std::string_view s, std::uint32_t& out);
std::string ipv4_string(std::uint32_t addr);
// Why `name` cannot be a network interface name (empty when it can): 1 to 15 bytes
// (Linux's IFNAMSIZ less its NUL) of printable ASCII, no space, no '/'.
std::string bad_interface_name(std::string_view name);
// The LND name at the start of `text` (longest match); `rest` gets what follows it.
Result<NetLndType> parse_net_name(std::string_view text, std::string_view& rest);

}  // namespace lnet::text
