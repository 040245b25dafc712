// User defined selection policies (UDSP): priorities of local nets/NIs and peer
// nets/NIs, and NID pairs (preferred local NIs of peer NIs). Rules are re-applied from
// scratch on every change, last first, so earlier rules win; new NIs and peers get them
// as they appear.
#include <lnet/log.hpp>
#include <lnet/nid_range.hpp>

#include "core/core.hpp"

namespace lnet::core {

struct Core::CompiledRule {
  UdspRule rule;
  std::optional<NidMatcher> src, dst;
};

namespace {

void apply_to_peer_ni(const Core::CompiledRule& r, PeerNi* lpni, const NetTable& t) {
  if (!r.dst || !r.dst->matches(lpni->nid)) return;
  if (r.rule.priority) {
    if (r.dst->is_net_only()) {
      if (lpni->peer_net) lpni->peer_net->sel_priority = *r.rule.priority;
    } else {
      lpni->sel_priority.store(*r.rule.priority);
    }
  } else if (r.src) {
    for (Ni* ni : t.nis)
      if (r.src->matches(ni->nid) &&
          std::find(lpni->pref_local.begin(), lpni->pref_local.end(), ni->nid) == lpni->pref_local.end()) {
        lpni->pref_local.push_back(ni->nid);
      }
  }
}

}  // namespace

Status Core::add_udsp(const UdspRule& rule, int idx) {
  CompiledRule c{rule, {}, {}};
  auto parse = [](const std::string& s, const char* what, std::optional<NidMatcher>& out) -> Status {
    if (s.empty()) return {};
    auto m = NidMatcher::parse(s);
    if (!m) return Failure{-EINVAL, std::string("bad ") + what + " '" + s + "': " + m.message()};
    out = *m;
    return {};
  };
  if (auto r = parse(rule.src, "src", c.src); !r) return r;
  if (auto r = parse(rule.dst, "dst", c.dst); !r) return r;
  std::optional<NidMatcher> rte;
  if (auto r = parse(rule.rte, "rte", rte); !r) return r;
  bool s = c.src.has_value(), d = c.dst.has_value(), t = rte.has_value();
  if (!s && !d && !t) return Failure{-EINVAL, "a selection rule needs --src, --dst or --rte"};
  if ((s && d && t) || (s && t)) return Failure{-EINVAL, "--src cannot go with --rte"};
  if (t) return Failure{-EOPNOTSUPP, "not supported: router preference rules (--dst with --rte)"};
  if (s && d && rule.priority) return Failure{-EINVAL, "a NID pair (--src with --dst) takes no --priority"};
  if ((s != d) && !rule.priority) return Failure{-EINVAL, "a rule on --src or --dst alone needs --priority"};
  std::lock_guard g(config_mutex_);
  for (auto& u : udsp_) {
    if (u.src == rule.src && u.dst == rule.dst && u.rte == rule.rte) {
      if (u.priority == rule.priority) return Failure{-EALREADY, "the same rule exists"};
      u.priority = rule.priority;  // re-adding with another priority updates in place
      apply_udsp();
      return {};
    }
  }
  if (idx < 0 || static_cast<std::size_t>(idx) > udsp_.size()) idx = static_cast<int>(udsp_.size());
  udsp_.insert(udsp_.begin() + idx, rule);
  apply_udsp();
  return {};
}

int Core::del_udsp(int idx) {
  std::lock_guard g(config_mutex_);
  if (idx < 0) {
    udsp_.clear();
  } else {
    if (static_cast<std::size_t>(idx) >= udsp_.size()) return -ENOENT;
    udsp_.erase(udsp_.begin() + idx);
  }
  apply_udsp();
  return 0;
}

std::vector<UdspRule> Core::udsp_rules() const {
  std::lock_guard g(config_mutex_);
  return udsp_;
}

void Core::apply_udsp() {
  auto compiled = std::make_shared<std::vector<CompiledRule>>();
  for (const UdspRule& u : udsp_) {
    CompiledRule c{u, {}, {}};
    if (!u.src.empty()) c.src = *NidMatcher::parse(u.src);
    if (!u.dst.empty()) c.dst = *NidMatcher::parse(u.dst);
    compiled->push_back(std::move(c));
  }
  const NetTable& t = table();
  ExclusiveLock x(net_locks_);
  for (const NetView& v : t.nets) v.net->sel_priority.store(UINT_MAX);
  for (Ni* ni : t.nis) ni->sel_priority.store(UINT_MAX);
  for (auto& p : peers_.peers()) {
    for (auto& pn : p->nets) pn->sel_priority = UINT_MAX;
    for (auto& lpni : p->nis) {
      lpni->sel_priority.store(UINT_MAX);
      lpni->pref_local.clear();
    }
  }
  for (auto it = compiled->rbegin(); it != compiled->rend(); ++it) {
    const CompiledRule& r = *it;
    if (r.src && r.rule.priority && !r.dst) {
      for (const NetView& v : t.nets)
        if (r.src->is_net_only() && r.src->matches_net(v.net->id)) v.net->sel_priority.store(*r.rule.priority);
      for (Ni* ni : t.nis)
        if (!r.src->is_net_only() && r.src->matches(ni->nid)) ni->sel_priority.store(*r.rule.priority);
    }
    for (auto& p : peers_.peers())
      for (auto& lpni : p->nis)
        if (!lpni->removed) apply_to_peer_ni(r, lpni.get(), t);
  }
  udsp_compiled_ = std::move(compiled);
  config_gen_.fetch_add(1, std::memory_order_relaxed);
}

void Core::udsp_new_peer_ni(PeerNi* lpni) {
  auto rules = udsp_compiled_;
  if (!rules) return;
  const NetTable& t = table();
  for (auto it = rules->rbegin(); it != rules->rend(); ++it) apply_to_peer_ni(*it, lpni, t);
}

}  // namespace lnet::core
