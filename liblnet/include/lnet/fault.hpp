// Fault injection rules (`lnetctl fault drop|delay`, lnet-facts §10): which messages a
// rule matches (source, destination and local NID with wildcards, portals, message
// types), how often it fires (one in every `rate` matches, or once in every `interval`
// seconds, or every time), and what it does: drop the message on receive, fail its send
// with a health status, or hold it on receive for `latency` seconds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <lnet/nid.hpp>
#include <lnet/result.hpp>
#include <lnet/wire.hpp>

namespace lnet {

// health_errors with every status: "random" (LNet's 0xffffffff).
inline constexpr std::uint32_t kFaultAnyHealthError = 0xffffffffu;

struct FaultRule {
  bool delay = false;  // a delay rule (else a drop rule)
  // Nid::any() matches every NID; an address of all ones (255.255.255.255@tcp, *@net
  // when written) every NID of that net.
  Nid source = Nid::any();
  Nid dest = Nid::any();
  Nid local = Nid::any();     // the NI it arrives on or leaves from
  std::uint64_t portals = 0;  // bit per portal (PUT and GET only); 0: any
  unsigned messages = 0;      // bit 1 << MsgType (ACK 0x1, PUT 0x2, GET 0x4, REPLY 0x8); 0: all
  unsigned rate = 0;          // fires once, at a random place, in every `rate` matches
  unsigned interval = 0;      // fires once, at a random second, in every `interval` seconds
  // Drop rules: a send fails with one of these statuses (bit per HealthStatus value) on
  // transmit instead of being dropped on receive; `random` (with interval): each match
  // fires with probability 1/2; `drop_all`: every match fires.
  std::uint32_t health_errors = 0;
  bool random = false;
  bool drop_all = false;
  unsigned latency = 0;  // delay rules: seconds

  // The field rules of LNet: exactly one of rate and interval (unless drop_all), a
  // portal filter only with PUT/GET, health errors and random only on drop rules,
  // a latency on delay rules. Fails naming the field.
  Status check() const;
  bool matches(Nid src, Nid dst, Nid local_nid, MsgType type, unsigned portal) const;

  // Builds a rule from named fields as `lnetctl fault` options name them (source, dest,
  // local_nid, rate, interval, portal, message, health_error, random, drop_all,
  // latency), values as text; lists by repeating a field or with commas. "*" is any
  // NID, "*@net" any NID of a net. Fails naming the field and the value; checked.
  static Result<FaultRule> from_fields(bool delay, const std::vector<std::pair<std::string, std::string>>& fields);
  // The same fields back (what `fault ... show` and YAML print).
  std::vector<std::pair<std::string, std::string>> to_fields() const;
  // LNET_FAULT: "drop source=*,dest=1@mpi,rate=1; delay dest=2@mpi,latency=2,rate=1".
  static Result<std::vector<FaultRule>> parse_list(std::string_view text);
  friend bool operator==(const FaultRule&, const FaultRule&) = default;
};

// A rule with what it has seen: matches and what it did, by message type.
struct FaultRuleInfo {
  FaultRule rule;
  std::uint64_t count = 0;  // messages that matched its NIDs, portals and types
  std::uint64_t put = 0, ack = 0, get = 0, reply = 0;
  std::uint64_t fired = 0;  // dropped (or failed) / delayed
};

}  // namespace lnet
