// NID range expressions, as used by ip2nets, routes, selection rules (UDSP) and fault
// rules: "192.168.0.[1-10/2,13]@tcp", "*@tcp", "tcp[1,3-5]", "o2ib*", "[1-100]@mpi".
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <lnet/nid.hpp>
#include <lnet/result.hpp>

namespace lnet {

// A set of numbers: "*", "7", or "[1-10/2, 13, 20-22]".
class NumberExpr {
 public:
  struct Range {
    std::uint32_t lo = 0;
    std::uint32_t hi = 0;
    std::uint32_t step = 1;
  };

  NumberExpr() = default;  // matches everything ("*")
  static NumberExpr single(std::uint32_t v) { return NumberExpr({Range{v, v, 1}}); }
  // Values above `max` are rejected with a message naming them.
  static Result<NumberExpr> parse(std::string_view text, std::uint32_t max);

  bool is_any() const { return ranges_.empty(); }
  bool matches(std::uint32_t v) const;
  const std::vector<Range>& ranges() const { return ranges_; }
  std::string to_string() const;

  friend bool operator==(const NumberExpr& a, const NumberExpr& b);

 private:
  explicit NumberExpr(std::vector<Range> r) : ranges_(std::move(r)) {}
  std::vector<Range> ranges_;  // empty: any
};

// A set of networks of one LND type: "tcp" (= tcp0), "tcp1", "o2ib*", "tcp[1,3-5]".
class NetPattern {
 public:
  static Result<NetPattern> parse(std::string_view text);
  static NetPattern exact(NetId net);

  std::uint32_t type() const { return type_; }
  const NumberExpr& numbers() const { return num_; }
  bool matches(NetId net) const { return net.type() == type_ && num_.matches(net.num()); }
  // Whether this names exactly one network (no wildcard or list).
  bool is_single() const;
  std::string to_string() const;

  friend bool operator==(const NetPattern& a, const NetPattern& b) { return a.type_ == b.type_ && a.num_ == b.num_; }

 private:
  std::uint32_t type_ = 0;
  NumberExpr num_ = NumberExpr::single(0);
};

// An address pattern on a network pattern: "10.0.[0-3].*@tcp", "*@o2ib1", "[1-64]@mpi",
// and on IP networks an IPv6 address or prefix: "2001:db8::1@tcp", "2001:db8:0:1::/64@tcp".
class NidPattern {
 public:
  static Result<NidPattern> parse(std::string_view text);

  const NetPattern& net() const { return net_; }
  // Four octet expressions for IPv4, one expression for numeric addresses; none for IPv6.
  const std::vector<NumberExpr>& address() const { return addr_; }
  // IPv6: the address (network order) and how many of its leading bits a NID must share.
  bool is_v6() const { return v6_prefix_ >= 0; }
  bool matches(Nid nid) const;
  std::string to_string() const;

  friend bool operator==(const NidPattern& a, const NidPattern& b) {
    return a.net_ == b.net_ && a.addr_ == b.addr_ && a.v6_prefix_ == b.v6_prefix_ && a.v6_addr_ == b.v6_addr_;
  }

 private:
  Status parse_v6(std::string_view addr);
  NetPattern net_;
  std::vector<NumberExpr> addr_;
  std::array<std::uint8_t, 16> v6_addr_{};
  int v6_prefix_ = -1;  // -1: not an IPv6 pattern
};

// A whitespace-separated list of NID patterns; matches when any of them does.
class NidRangeList {
 public:
  static Result<NidRangeList> parse(std::string_view text);
  const std::vector<NidPattern>& patterns() const { return patterns_; }
  bool matches(Nid nid) const;
  std::string to_string() const;

 private:
  std::vector<NidPattern> patterns_;
};

// What selection and fault rules match on: a network pattern ("tcp[1-3]") or a NID
// pattern ("192.168.0.*@tcp"), told apart by the '@'.
class NidMatcher {
 public:
  static Result<NidMatcher> parse(std::string_view text);

  bool is_net_only() const { return !has_nid_; }
  bool matches(Nid nid) const { return has_nid_ ? nid_.matches(nid) : net_.matches(nid.net()); }
  bool matches_net(NetId net) const { return has_nid_ ? nid_.net().matches(net) : net_.matches(net); }
  std::string to_string() const { return has_nid_ ? nid_.to_string() : net_.to_string(); }

 private:
  bool has_nid_ = false;
  NetPattern net_;
  NidPattern nid_;
};

// The NIDs a list names, in LNet's order (lnetctl peer add --nid, a peer NI in YAML):
// items separated by commas outside brackets (or spaces), each a NID (hexadecimal
// numbers and all) or a NID range whose first bracket varies slowest. Every address must
// be named: '*' is refused, as is a range of networks. A NID named twice counts once.
// More than `max` NIDs fails with -E2BIG.
Result<std::vector<Nid>> expand_nid_list(std::string_view text, std::size_t max);

}  // namespace lnet
