// The local networks: drivers, bringing NIs up and down, the published NI table, the
// global tunables.
#include "core/local_nets.hpp"

#include <algorithm>
#include <set>

#include <lnet/lnd/numa.hpp>
#include <lnet/log.hpp>

#include "base/clock.hpp"
#include "base/lnd_registry.hpp"
#include "base/progress_registry.hpp"

namespace lnet::core {

namespace {

Status check_tunables(const NetConfig& nc, unsigned ncpts) {
  const NetTunables& t = nc.tunables;
  std::string net = nc.net.to_string();
  if (t.credits < 1 || t.peer_credits < 0 || t.peer_buffer_credits < 0 || t.peer_timeout < 0) {
    return Failure{-EINVAL, "bad tunables for " + net + ": credits " + std::to_string(t.credits) + " (at least 1), " +
                                "peer_credits " + std::to_string(t.peer_credits) + ", peer_buffer_credits " +
                                std::to_string(t.peer_buffer_credits) + ", peer_timeout " +
                                std::to_string(t.peer_timeout) + " (none negative)"};
  }
  if (nc.cpts.empty()) return {};
  std::vector<unsigned> cpts = nc.cpts;
  std::sort(cpts.begin(), cpts.end());
  for (std::size_t i = 0; i < cpts.size(); ++i) {
    if (cpts[i] >= ncpts)
      return Failure{-EINVAL, "CPT " + std::to_string(cpts[i]) + " of " + net + " is not one of the " +
                                  std::to_string(ncpts) + " CPTs (0.." + std::to_string(ncpts - 1) + ")"};
    if (i && cpts[i] == cpts[i - 1])
      return Failure{-EINVAL, "CPT " + std::to_string(cpts[i]) + " is listed twice for " + net};
  }
  return {};
}

}  // namespace

void LocalNets::add_driver(std::shared_ptr<Lnd> lnd) { lnds_[lnd->net_type()] = std::move(lnd); }

Status LocalNets::start(const std::vector<NetConfig>& nets) {
  st_.table.store(tables_.emplace_back(std::make_unique<net::NetTable>()).get(), std::memory_order_release);
  NetConfig lo;  // self sends take no credits: its tunables are nothing (as LNet shows 0@lo's)
  lo.net = NetId::make(kLoLnd, 0);
  lo.tunables = NetTunables{0, 0, 0, 0};
  auto r = bring_up(lo);
  if (!r) return r.failure();
  st_.lo_ni = *r;
  for (const NetConfig& nc : nets) {
    if (nc.net.type() == kLoLnd) continue;  // 0@lo always exists
    if (auto n = bring_up(nc); !n) return n.failure();
  }
  return {};
}

void LocalNets::publish(std::unique_ptr<net::NetTable> t) {
  st_.table.store(t.get(), std::memory_order_release);
  tables_.push_back(std::move(t));  // old snapshots stay valid for readers still using them
  ExclusiveLock x(st_.locks);
  st_.config_gen.fetch_add(1, std::memory_order_relaxed);
}

Result<Lnd*> LocalNets::driver_for(const NetConfig& nc) {
  std::uint32_t type = nc.net.type();
  auto it = lnds_.find(type);
  if (it != lnds_.end()) return it->second.get();
  // A driver registered for the type, else one the program gave that serves it too.
  if (std::unique_ptr<Lnd> lnd = make_lnd(type)) return lnds_.emplace(type, std::move(lnd)).first->second.get();
  for (const auto& [given_type, lnd] : lnds_)
    if (lnd->serves(type)) return lnds_.emplace(type, lnd).first->second.get();
  const char* name = lnd_type_name(type);
  return Failure{-EPROTONOSUPPORT, "not supported: no driver for network type '" +
                                       std::string(name ? name : std::to_string(type)) + "' in this process"};
}

void LocalNets::share_credits(Ni& ni) const {
  // The NI's CPTs: a list naming every CPT is no list. Its credits are shared out over
  // them as LNet does (lnet-facts: NI tx credits); the other CPTs' queues stay empty.
  const NetTunables& t = ni.config.tunables;
  ni.cpts = ni.config.cpts;
  std::sort(ni.cpts.begin(), ni.cpts.end());
  if (ni.cpts.size() == st_.cpts.count()) ni.cpts.clear();
  int ncpts = static_cast<int>(ni.cpts.empty() ? st_.cpts.count() : ni.cpts.size());
  int per_cpt = std::max(t.credits, 0);
  if (ncpts > 1) per_cpt = std::min(t.credits, std::max(t.credits / ncpts, 8 * t.peer_credits));
  ni.tq = std::make_unique<net::TxQueue[]>(st_.cpts.count());
  for (unsigned c = 0; c < st_.cpts.count(); ++c) {
    bool on = ni.cpts.empty() || std::binary_search(ni.cpts.begin(), ni.cpts.end(), c);
    ni.tq[c].credits = ni.tq[c].max_credits = ni.tq[c].min_credits = on ? per_cpt : 0;
  }
}

void LocalNets::place_numa(Ni& ni) const {
  // The node the driver found for the NI's device, as selection weighs it (lnet-facts §5.4).
  ni.numa_dist = numa_distances_to(ni.numa_node);
  ni.dev_cpt = -1;
  if (ni.numa_node < 0) return;
  std::set<unsigned> cpts;
  for (int cpu : numa_node_cpus(ni.numa_node)) cpts.insert(static_cast<unsigned>(cpu) % st_.cpts.count());
  if (st_.cpts.count() == 1 || cpts.size() == 1) ni.dev_cpt = static_cast<int>(cpts.empty() ? 0 : *cpts.begin());
}

Result<net::Ni*> LocalNets::bring_up(const NetConfig& nc) {
  bool lo = nc.net.type() == kLoLnd;
  if (!lo)
    if (Status s = check_tunables(nc, st_.cpts.count()); !s) return s.failure();
  auto lnd = driver_for(nc);
  if (!lnd) return lnd.failure();
  if (Status s = (*lnd)->check_config(nc); !s) return s.failure();
  const net::NetTable& cur = st_.nets();
  const net::NetView* view = cur.find(nc.net);
  net::Net* net = view ? view->net : nullptr;
  if (!net) {
    for (auto& n : all_nets_)
      if (n->id == nc.net) net = n.get();  // a net brought down earlier comes back
  }
  if (!net) {
    net = all_nets_.emplace_back(std::make_unique<net::Net>()).get();
    net->id = nc.net;
    net->lnd = *lnd;
  }
  auto ni = std::make_unique<Ni>();
  ni->config = nc;
  ni->host = &host_;
  ni->lnd = net->lnd;
  ni->net = net;
  ni->pid = pid_;
  if (nc.nid) {
    if (cur.find_ni(*nc.nid)) return Failure{-EEXIST, "NID " + nc.nid->to_string() + " is configured already"};
    ni->nid = *nc.nid;
  }
  int rc = net->lnd->startup(*ni);
  if (rc < 0)
    return Failure{rc, "cannot start network " + nc.net.to_string() + ": " +
                           (ni->startup_error.empty() ? errno_string(rc) : ni->startup_error)};
  auto undo = [&](Failure f) -> Result<Ni*> {
    net->lnd->shutdown(*ni);
    return f;
  };
  if (ni->nid.is_any() || ni->nid.net() != nc.net)
    return undo(Failure{-EINVAL, "the driver of " + nc.net.to_string() + " gave no NID on that network"});
  if (cur.find_ni(ni->nid)) return undo(Failure{-EEXIST, "NID " + ni->nid.to_string() + " is configured already"});
  // The flow-control tunables as the driver settled them (lnet-lnd(7)).
  NetTunables& t = ni->config.tunables;
  if (!lo && t.peer_credits <= 0) t.peer_credits = net::kDefaultPeerCredits;
  share_credits(*ni);
  place_numa(*ni);
  if (ni->poll) {
    ni->poll_id = add_progress(ni->poll, ni->poll_ctx);
    if (ni->poll_id < 0)
      return undo(Failure{ni->poll_id, "cannot poll " + ni->nid.to_string() + ": too many drivers to poll"});
  }
  Ni* raw = ni.get();
  raw->last_rx.store(coarse_now_ns() / kNsPerSec, std::memory_order_relaxed);  // a router counts its silence from now
  all_nis_.push_back(std::move(ni));
  publish_with(raw);
  return raw;
}

void LocalNets::publish_with(Ni* ni) {
  auto next = std::make_unique<net::NetTable>(st_.nets());
  net::NetView* v = nullptr;
  for (auto& nv : next->nets)
    if (nv.net == ni->net) v = &nv;
  if (!v) v = &next->nets.emplace_back(net::NetView{ni->net, {}});
  v->nis.push_back(ni);
  next->nis.push_back(ni);
  publish(std::move(next));
}

void LocalNets::unpublish(Ni* ni) {
  auto next = std::make_unique<net::NetTable>(st_.nets());
  next->nis.erase(std::remove(next->nis.begin(), next->nis.end(), ni), next->nis.end());
  for (auto it = next->nets.begin(); it != next->nets.end(); ++it) {
    if (it->net != ni->net) continue;
    it->nis.erase(std::remove(it->nis.begin(), it->nis.end(), ni), it->nis.end());
    if (it->nis.empty()) next->nets.erase(it);
    break;
  }
  ni->up.store(false);
  ni->deleted.store(true);
  publish(std::move(next));
}

void LocalNets::take_down(Ni* ni) {
  if (ni->poll_id >= 0) remove_progress(ni->poll_id);  // returns once no poll runs
  ni->poll_id = -1;
  ni->lnd->shutdown(*ni);
}

void LocalNets::stop() {
  for (auto& ni : all_nis_)
    if (!ni->deleted.load()) take_down(ni.get());
  {
    ExclusiveLock x(st_.locks);
    st_.peers.clear();
  }
  st_.table.store(nullptr, std::memory_order_release);
  tables_.clear();
  all_nis_.clear();
  all_nets_.clear();
  lnds_.clear();
  st_.lo_ni = nullptr;
}

Result<bool> LocalNets::set_globals(const GlobalTunables& next) {
  if (Status r = next.check(); !r) return r.failure();
  // Each tunable is in its range (GlobalTunables::set), also when a program filled them.
  for (const char* name : GlobalTunables::names()) {
    if (GlobalTunables::read_only(name)) continue;
    GlobalTunables probe;
    if (Status r = probe.set(name, *next.get(name)); !r) return r.failure();
  }
  globals_ = next;
  bool was_discovering = st_.tun.discovery.load() != 0;
  st_.tun.store(next);
  return was_discovering != (next.discovery != 0);
}

std::vector<LndCounters> LocalNets::lnd_counters() {
  std::vector<LndCounters> out;
  MutexLock g(mutex_);
  std::set<const Lnd*> seen;  // a driver serving several types counts once
  for (const auto& [type, lnd] : lnds_) {
    if (!seen.insert(lnd.get()).second) continue;
    std::string name = lnd->counters_name();
    auto counters = lnd->counters();
    if (!name.empty() && !counters.empty()) out.push_back(LndCounters{std::move(name), std::move(counters)});
  }
  return out;
}

}  // namespace lnet::core
