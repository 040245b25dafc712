// User defined selection policies (UDSP, `lnetctl udsp`): priorities of local nets and
// NIs and of peer nets and NIs, NID pairs (preferred local NIs of peer NIs) and router
// rules (preferred gateways of peer NIs). The
// rules are re-applied from scratch on every change, last first, so that earlier rules
// win; NIs and peer NIs that appear later get them as they appear.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <lnet/config.hpp>
#include <lnet/nid_range.hpp>
#include <lnet/result.hpp>

#include "net/ni.hpp"
#include "net/peer_table.hpp"

namespace lnet::net {

class UdspRules {
 public:
  // Checks a rule and inserts it at `idx` (-1 or past the end: last). A rule that exists
  // with another priority is updated in place. Then apply() must run.
  Status add(const UdspRule& rule, int idx);
  // Removes the rule at `idx` (-1: every rule). -ENOENT past the end. Then apply().
  Status del(int idx);
  std::vector<UdspRule> list() const { return rules_; }
  // Sets every priority and preference from the rules (under every net lock).
  void apply(const NetTable& nets, PeerTable& peers);
  // Gives a new peer NI the rules (under every net lock).
  void apply_new(PeerNi* lpni, const NetTable& nets) const;

 private:
  struct Compiled {
    UdspRule rule;
    std::optional<NidMatcher> src, dst, rte;
  };
  static void apply_to_peer_ni(const Compiled& r, PeerNi* lpni, const NetTable& nets);

  std::vector<UdspRule> rules_;  // changed under the owner's configuration lock
  // What apply_new() reads (under a net lock): replaced, never changed, by apply().
  std::shared_ptr<const std::vector<Compiled>> compiled_;
};

}  // namespace lnet::net
