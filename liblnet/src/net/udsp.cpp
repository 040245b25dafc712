// Selection rules: checking, keeping in order, and applying them to NIs and peer NIs.
#include "net/udsp.hpp"

#include <algorithm>
#include <cerrno>

namespace lnet::net {

namespace {

Status parse_matcher(const std::string& s, const char* what, std::optional<NidMatcher>& out) {
  if (s.empty()) return {};
  auto m = NidMatcher::parse(s);
  if (!m) return Failure{-EINVAL, std::string("bad ") + what + " '" + s + "': " + m.message()};
  out = *m;
  return {};
}

}  // namespace

Status UdspRules::add(const UdspRule& rule, int idx) {
  std::optional<NidMatcher> src, dst, rte;
  if (Status r = parse_matcher(rule.src, "src", src); !r) return r;
  if (Status r = parse_matcher(rule.dst, "dst", dst); !r) return r;
  if (Status r = parse_matcher(rule.rte, "rte", rte); !r) return r;
  bool s = src.has_value(), d = dst.has_value(), t = rte.has_value();
  if (!s && !d && !t) return Failure{-EINVAL, "a selection rule needs --src, --dst or --rte"};
  if (s && t) return Failure{-EINVAL, "--src cannot go with --rte"};
  if (t && !d) return Failure{-EINVAL, "a router rule (--rte) needs --dst: the peers it applies to"};
  if (t && rule.priority) return Failure{-EINVAL, "a router rule (--dst with --rte) takes no --priority"};
  if (s && d && rule.priority) return Failure{-EINVAL, "a NID pair (--src with --dst) takes no --priority"};
  if ((s != d) && !t && !rule.priority) return Failure{-EINVAL, "a rule on --src or --dst alone needs --priority"};
  for (auto& u : rules_) {
    if (u.src == rule.src && u.dst == rule.dst && u.rte == rule.rte) {
      if (u.priority == rule.priority) return Failure{-EALREADY, "the same rule exists"};
      u.priority = rule.priority;  // re-adding with another priority updates in place
      return {};
    }
  }
  if (idx < 0 || static_cast<std::size_t>(idx) > rules_.size()) idx = static_cast<int>(rules_.size());
  rules_.insert(rules_.begin() + idx, rule);
  return {};
}

Status UdspRules::del(int idx) {
  if (idx < 0) {
    rules_.clear();
    return {};
  }
  if (static_cast<std::size_t>(idx) >= rules_.size())
    return Failure{-ENOENT, "no selection rule at index " + std::to_string(idx)};
  rules_.erase(rules_.begin() + idx);
  return {};
}

void UdspRules::apply_to_peer_ni(const Compiled& r, PeerNi* lpni, const NetTable& nets) {
  if (!r.dst || !r.dst->matches(lpni->nid)) return;
  if (r.rule.priority) {
    if (r.dst->is_net_only()) {
      if (lpni->peer_net) lpni->peer_net->sel_priority = *r.rule.priority;
    } else {
      lpni->sel_priority.store(*r.rule.priority);
    }
  } else if (r.rte) {
    // A router rule: routes through a gateway r.rte matches are preferred for this peer NI.
    auto same = [&](const NidMatcher& m) { return m.to_string() == r.rte->to_string(); };
    if (std::none_of(lpni->pref_rtr.begin(), lpni->pref_rtr.end(), same)) lpni->pref_rtr.push_back(*r.rte);
  } else if (r.src) {
    for (Ni* ni : nets.nis)
      if (r.src->matches(ni->nid) &&
          std::find(lpni->pref_local.begin(), lpni->pref_local.end(), ni->nid) == lpni->pref_local.end()) {
        lpni->pref_local.push_back(ni->nid);
      }
  }
}

void UdspRules::apply(const NetTable& nets, PeerTable& peers) {
  auto compiled = std::make_shared<std::vector<Compiled>>();
  for (const UdspRule& u : rules_) {
    Compiled c{u, {}, {}, {}};
    if (!u.src.empty()) c.src = *NidMatcher::parse(u.src);  // checked by add()
    if (!u.dst.empty()) c.dst = *NidMatcher::parse(u.dst);
    if (!u.rte.empty()) c.rte = *NidMatcher::parse(u.rte);
    compiled->push_back(std::move(c));
  }
  for (const NetView& v : nets.nets) v.net->sel_priority.store(UINT_MAX);
  for (Ni* ni : nets.nis) ni->sel_priority.store(UINT_MAX);
  for (auto& p : peers.peers()) {
    for (auto& pn : p->nets) pn->sel_priority = UINT_MAX;
    for (auto& lpni : p->nis) {
      lpni->sel_priority.store(UINT_MAX);
      lpni->pref_local.clear();
      lpni->pref_rtr.clear();
    }
  }
  for (auto it = compiled->rbegin(); it != compiled->rend(); ++it) {
    const Compiled& r = *it;
    if (r.src && r.rule.priority && !r.dst) {
      for (const NetView& v : nets.nets)
        if (r.src->is_net_only() && r.src->matches_net(v.net->id)) v.net->sel_priority.store(*r.rule.priority);
      for (Ni* ni : nets.nis)
        if (!r.src->is_net_only() && r.src->matches(ni->nid)) ni->sel_priority.store(*r.rule.priority);
    }
    for (auto& p : peers.peers())
      for (auto& lpni : p->nis)
        if (!lpni->removed) apply_to_peer_ni(r, lpni.get(), nets);
  }
  compiled_ = std::move(compiled);
}

void UdspRules::apply_new(PeerNi* lpni, const NetTable& nets) const {
  if (!compiled_) return;
  for (auto it = compiled_->rbegin(); it != compiled_->rend(); ++it) apply_to_peer_ni(*it, lpni, nets);
}

}  // namespace lnet::net
