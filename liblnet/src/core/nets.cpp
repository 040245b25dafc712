// Local networks at run time: the drivers, bringing NIs up and down, the published net
// table, and the views of it (NIDs, distance, NI information).
#include <algorithm>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

#include "base/clock.hpp"
#include "base/lnd_registry.hpp"
#include "base/progress_registry.hpp"
#include "core/admin.hpp"

namespace lnet::core {

namespace {

constexpr int kDefaultPeerCredits = 8;  // LNet's, for a driver that names none

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

void Core::publish(std::unique_ptr<net::NetTable> t) {
  st_.table.store(t.get(), std::memory_order_release);
  tables_.push_back(std::move(t));  // old snapshots stay valid for readers still using them
  ExclusiveLock x(st_.locks);
  st_.config_gen.fetch_add(1, std::memory_order_relaxed);
}

Result<Lnd*> Core::driver_for(const NetConfig& nc) {
  std::uint32_t type = nc.net.type();
  auto it = lnds_.find(type);
  if (it != lnds_.end()) return it->second.get();
  std::unique_ptr<Lnd> lnd = make_lnd(type);
  if (!lnd) {
    const char* name = lnd_type_name(type);
    return Failure{-EPROTONOSUPPORT, "not supported: no driver for network type '" +
                                         std::string(name ? name : std::to_string(type)) + "' in this process"};
  }
  return lnds_.emplace(type, std::move(lnd)).first->second.get();
}

void Core::share_credits(Ni& ni) const {
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

Result<Ni*> Core::bring_up(const NetConfig& nc) {
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
    all_nets_.push_back(std::make_unique<net::Net>());
    net = all_nets_.back().get();
    net->id = nc.net;
    net->lnd = *lnd;
  }
  auto ni = std::make_unique<Ni>();
  ni->config = nc;
  ni->host = this;
  ni->lnd = net->lnd;
  ni->net = net;
  ni->pid = pid_;
  if (nc.nid) {
    if (cur.find_ni(*nc.nid)) return Failure{-EEXIST, "NID " + nc.nid->to_string() + " is configured already"};
    ni->nid = *nc.nid;
  }
  int rc = net->lnd->startup(*ni);
  if (rc < 0) return Failure{rc, "cannot start network " + nc.net.to_string() + ": " + errno_string(rc)};
  auto undo = [&](Failure f) -> Result<Ni*> {
    net->lnd->shutdown(*ni);
    return f;
  };
  if (ni->nid.is_any() || ni->nid.net() != nc.net)
    return undo(Failure{-EINVAL, "the driver of " + nc.net.to_string() + " gave no NID on that network"});
  if (cur.find_ni(ni->nid)) return undo(Failure{-EEXIST, "NID " + ni->nid.to_string() + " is configured already"});
  // The flow-control tunables as the driver settled them (lnet-lnd(7)).
  NetTunables& t = ni->config.tunables;
  if (!lo && t.peer_credits <= 0) t.peer_credits = kDefaultPeerCredits;
  share_credits(*ni);
  if (ni->poll) {
    ni->poll_id = add_progress(ni->poll, ni->poll_ctx);
    if (ni->poll_id < 0)
      return undo(Failure{ni->poll_id, "cannot poll " + ni->nid.to_string() + ": too many drivers to poll"});
  }
  auto next = std::make_unique<net::NetTable>(cur);
  net::NetView* v = nullptr;
  for (auto& nv : next->nets)
    if (nv.net == net) v = &nv;
  if (!v) v = &next->nets.emplace_back(net::NetView{net, {}});
  v->nis.push_back(ni.get());
  next->nis.push_back(ni.get());
  Ni* raw = ni.get();
  raw->last_rx.store(coarse_now_ns() / kNsPerSec, std::memory_order_relaxed);  // a router counts its silence from now
  all_nis_.push_back(std::move(ni));
  publish(std::move(next));
  return raw;
}

void Core::take_down(Ni* ni) {
  if (ni->poll_id >= 0) remove_progress(ni->poll_id);  // returns once no poll runs
  ni->poll_id = -1;
  ni->lnd->shutdown(*ni);
}

Status Core::set_ni_up(Nid nid, bool up) {
  MutexLock g(config_mutex_);
  Ni* ni = st_.nets().find_ni(nid);
  if (!ni || ni == st_.lo_ni) return Failure{-ENOENT, "no NI " + nid.to_string()};
  if (ni->up.exchange(up) != up) refresh_ping_target();
  return {};
}

std::vector<Nid> Core::nids() const {
  std::vector<Nid> out;
  for (Ni* ni : st_.nets().nis) out.push_back(ni->nid);
  return out;
}

int Core::dist(Nid nid, Nid* src, std::uint32_t* order) const {
  if (nid.is_lo() && nid != Nid::lo()) return -EHOSTUNREACH;
  const net::NetTable& t = st_.nets();
  if (t.find_ni(nid) || nid == Nid::lo()) {
    if (src) *src = nid;
    if (order) *order = 0;
    return 0;
  }
  for (std::size_t i = 0; i < t.nets.size(); ++i) {
    if (t.nets[i].net->id == nid.net() && !t.nets[i].nis.empty()) {
      if (src) *src = t.nets[i].nis.front()->nid;
      if (order) *order = static_cast<std::uint32_t>(i);
      return 1;
    }
  }
  // Reachable through a router: the distance is the route's hop count plus one.
  const net::RouteTable* rt = st_.routes.table();
  int best = -1;
  for (std::size_t i = 0; rt && i < rt->routes.size(); ++i) {
    const net::RouteEntry& r = rt->routes[i];
    if (r.cfg.net != nid.net()) continue;
    const net::NetView* gwnet = t.find(r.cfg.gateway.net());
    if (!gwnet || gwnet->nis.empty()) continue;
    int d = (r.cfg.hops < 0 ? 1 : r.cfg.hops) + 1;
    if (best < 0 || d < best) {
      best = d;
      if (src) *src = gwnet->nis.front()->nid;
      if (order) *order = static_cast<std::uint32_t>(i);
    }
  }
  return best < 0 ? -EHOSTUNREACH : best;
}

int Core::lnd_timeout() const {
  GlobalTunables g;
  g.transaction_timeout = st_.tun.transaction_timeout.load(std::memory_order_relaxed);
  g.retry_count = st_.tun.retry_count.load(std::memory_order_relaxed);
  return g.lnd_timeout();
}

Status Core::set_globals_locked(const GlobalTunables& next) {
  if (Status r = next.check(); !r) return r;
  // Each tunable is valid on its own (GlobalTunables::set): the ones of features this
  // build does not have keep their one value.
  for (const char* name : GlobalTunables::names()) {
    if (GlobalTunables::read_only(name)) continue;
    GlobalTunables probe;
    if (Status r = probe.set(name, *next.get(name)); !r) return r;
  }
  globals_ = next;
  st_.tun.store(next);
  if (st_.tun.discovery.exchange(next.discovery != 0) != (next.discovery != 0) && started_.load()) {
    // The DISCOVERY feature bit changes: peers hear of it (turning it off pushes even to
    // those that will not be pushed again).
    refresh_ping_target(next.discovery == 0);
  }
  st_.tun.router_check_interval.store(next.alive_router_check_interval, std::memory_order_relaxed);  // wake_checker()
  return {};
}

// ---------------------------------------------------------------- selection rules

// ---------------------------------------------------------------- Control: NIs and globals

Result<Nid> Admin::add_ni(const NetConfig& nc) {
  if (nc.net.type() == kLoLnd) return Failure{-EEXIST, "0@lo always exists"};
  MutexLock g(c_.config_mutex_);
  if (c_.st_.stopping.load()) return Failure{-ESHUTDOWN, "LNet is shutting down"};
  auto r = c_.bring_up(nc);
  if (!r) return r.failure();
  c_.refresh_ping_target();
  {
    ExclusiveLock x(c_.st_.locks);
    c_.st_.udsp.apply(c_.st_.nets(), c_.st_.peers);  // rules on local NIs cover the new one
    c_.st_.config_gen.fetch_add(1, std::memory_order_relaxed);
  }
  return (*r)->nid;
}

Status Admin::del_ni(Nid nid) {
  MutexLock g(c_.config_mutex_);
  Ni* ni = c_.st_.nets().find_ni(nid);
  if (!ni) return Failure{-ENOENT, "no NI " + nid.to_string()};
  if (ni == c_.st_.lo_ni) return Failure{-EINVAL, "0@lo cannot be deleted"};
  auto next = std::make_unique<net::NetTable>(c_.st_.nets());
  next->nis.erase(std::remove(next->nis.begin(), next->nis.end(), ni), next->nis.end());
  for (auto it = next->nets.begin(); it != next->nets.end(); ++it) {
    if (it->net != ni->net) continue;
    it->nis.erase(std::remove(it->nis.begin(), it->nis.end(), ni), it->nis.end());
    if (it->nis.empty()) next->nets.erase(it);
    break;
  }
  ni->up.store(false);
  ni->deleted.store(true);
  c_.publish(std::move(next));
  // What waits for this NI's credits will not go out: fail it; the driver fails what it holds.
  Fifo<FifoLink> failed;
  {
    ExclusiveLock x(c_.st_.locks);
    for (unsigned c = 0; c < c_.st_.cpts.count(); ++c) failed.splice(ni->tq[c].delayed);
  }
  while (FifoLink* l = failed.pop_front()) {
    Message* m = as_message(l);
    m->health = HealthStatus::LocalAborted;
    c_.finalize(m, -ENETDOWN);
  }
  c_.take_down(ni);
  c_.refresh_ping_target();
  return {};
}

std::vector<NetConfig> Admin::net_configs() const {
  std::vector<NetConfig> out;
  for (Ni* ni : c_.st_.nets().nis)
    if (ni != c_.st_.lo_ni) out.push_back(ni->config);
  return out;
}

std::vector<NiInfo> Admin::ni_info() const {
  std::vector<NiInfo> out;
  auto& locks = const_cast<CptLocks&>(c_.st_.locks);
  for (Ni* ni : c_.st_.nets().nis) {
    NiInfo i;
    i.nid = ni->nid;
    i.up = ni->up.load() && !ni->silent.load();  // the status peers are told
    i.interfaces = ni->config.interfaces;
    i.tunables = ni->config.tunables;
    for (const LndTunableSpec& spec : lnd_tunables_of(ni->nid.net().type()))  // the values in effect
      i.lnd_tunables.set(
          spec.name, ni->lnd->tunable_in_effect(*ni, spec.name, ni->config.lnd_tunables.get_or(spec.name, spec.def)));
    i.lnd_timeout = ni->lnd->timeout(*ni);
    i.cpts = ni->cpts;
    if (i.cpts.empty())
      for (unsigned c = 0; c < c_.st_.cpts.count(); ++c) i.cpts.push_back(c);
    i.health = ni->health.load();
    i.fatal_error = ni->fatal_error.load();
    const FailureCounts& f = ni->failures;
    i.hs_interrupts = f.get(HealthStatus::LocalInterrupt);
    i.hs_dropped = f.get(HealthStatus::LocalDropped);
    i.hs_aborted = f.get(HealthStatus::LocalAborted);
    i.hs_no_route = f.get(HealthStatus::LocalNoRoute);
    i.hs_timeouts = f.get(HealthStatus::LocalTimeout);
    i.hs_error = f.get(HealthStatus::LocalError);
    std::tie(i.ping_count, i.next_ping) = c_.health_.recovery_of(ni->recovery);
    i.selection_priority = ni->sel_priority.load();
    i.net_priority = ni->net->sel_priority.load();
    for (unsigned c = 0; c < c_.st_.cpts.count(); ++c) {
      MutexLock g(locks[c]);
      net::TxQueueLock l(*ni, ni->tq[c]);
      i.tx_credits += ni->tq[c].credits;
      i.max_tx_credits += ni->tq[c].max_credits;
      i.min_tx_credits += ni->tq[c].min_credits;
    }
    i.sent = ni->stats.get(TypeStats::kSent);
    i.received = ni->stats.get(TypeStats::kReceived);
    i.dropped = ni->stats.get(TypeStats::kDropped);
    out.push_back(std::move(i));
  }
  return out;
}

GlobalTunables Admin::globals() const {
  MutexLock g(c_.config_mutex_);
  return c_.globals_;
}

Status Admin::set_global(std::string_view name, long value) {
  Status s;
  {
    MutexLock g(c_.config_mutex_);
    GlobalTunables next = c_.globals_;
    if (Status r = next.set(name, value); !r) return r;
    s = c_.set_globals_locked(next);
  }
  c_.router_.wake_checker();
  return s;
}

Status Admin::set_globals(const GlobalTunables& next) {
  Status s;
  {
    MutexLock g(c_.config_mutex_);
    s = c_.set_globals_locked(next);
  }
  c_.router_.wake_checker();
  return s;
}

Status Admin::set_lnd_timeout(NetId net, int seconds) {
  if (seconds < 0) return Failure{-EINVAL, "LND timeout " + std::to_string(seconds) + " must be >= 0"};
  MutexLock g(c_.config_mutex_);  // NIs come and go under it
  bool any = false;
  for (Ni* ni : c_.st_.nets().nis) {
    if (ni == c_.st_.lo_ni || ni->nid.net() != net) continue;
    int rc = ni->lnd->set_timeout(*ni, seconds);
    if (rc == -EOPNOTSUPP)
      return Failure{rc, "not supported yet: the driver of " + net.to_string() +
                             " takes its timeout when an NI comes up (lnd tunables: timeout)"};
    if (rc < 0) return Failure{rc, "cannot set the LND timeout of " + ni->nid.to_string() + ": " + errno_string(rc)};
    any = true;
  }
  if (!any) return Failure{-ENOENT, "no local NI on " + net.to_string()};
  return {};
}

}  // namespace lnet::core
