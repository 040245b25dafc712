// The Control's local NIs and global tunables: adding and deleting NIs (the local nets
// bring them up), what net show prints, the globals and LND timeouts.
#include <lnet/mutex.hpp>

#include "core/admin.hpp"

namespace lnet::core {

Result<Nid> Admin::add_ni(const NetConfig& nc) {
  if (nc.net.type() == kLoLnd) return Failure{-EEXIST, "0@lo always exists"};
  MutexLock g(c_.nets_.mutex());
  if (c_.st_.stopping.load()) return Failure{-ESHUTDOWN, "LNet is shutting down"};
  auto r = c_.nets_.bring_up(nc);
  if (!r) return r.failure();
  c_.ping_target_.refresh();
  {
    ExclusiveLock x(c_.st_.locks);
    c_.st_.udsp.apply(c_.st_.nets(), c_.st_.peers);  // rules on local NIs cover the new one
    c_.st_.config_gen.fetch_add(1, std::memory_order_relaxed);
  }
  return (*r)->nid;
}

Status Admin::set_ni_health(Nid nid, int value) {
  if (Status s = c_.health_.set_ni_health(nid, value); !s) return s;
  c_.push_status_changes();  // health 0 is down, and back from it up: peers are told now
  return {};
}

Status Admin::del_ni(Nid nid) {
  MutexLock g(c_.nets_.mutex());
  Ni* ni = c_.st_.nets().find_ni(nid);
  if (!ni) return Failure{-ENOENT, "no NI " + nid.to_string()};
  if (ni == c_.st_.lo_ni) return Failure{-EINVAL, "0@lo cannot be deleted"};
  c_.nets_.unpublish(ni);
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
  c_.nets_.take_down(ni);
  c_.ping_target_.refresh();
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
    i.up = c_.st_.ni_status_up(*ni);  // the status peers are told
    i.interfaces = ni->config.interfaces;
    i.tunables = ni->config.tunables;
    for (const LndTunableSpec& spec : lnd_tunables_of(ni->nid.net().type()))  // the values in effect
      i.lnd_tunables.set(
          spec.name, ni->lnd->tunable_in_effect(*ni, spec.name, ni->config.lnd_tunables.get_or(spec.name, spec.def)));
    i.lnd_timeout = ni->lnd->timeout(*ni);
    i.cpts = ni->cpts;
    i.dev_cpt = ni->dev_cpt;
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
    i.latency = ni->latency.get();
    out.push_back(std::move(i));
  }
  return out;
}

GlobalTunables Admin::globals() const {
  MutexLock g(c_.nets_.mutex());
  return c_.nets_.globals();
}

Status Admin::apply_globals_locked(const GlobalTunables& next) {
  auto changed = c_.nets_.set_globals(next);
  if (!changed) return changed.failure();
  // The DISCOVERY feature bit changes: peers hear of it (turning it off pushes even to
  // those that will not be pushed again).
  if (*changed && c_.started_.load()) c_.ping_target_.refresh(next.discovery == 0);
  return {};
}

Status Admin::set_global(std::string_view name, long value) {
  Status s;
  {
    MutexLock g(c_.nets_.mutex());
    GlobalTunables next = c_.nets_.globals();
    if (Status r = next.set(name, value); !r) return r;
    s = apply_globals_locked(next);
  }
  c_.router_.wake_checker();
  return s;
}

Status Admin::set_globals(const GlobalTunables& next) {
  Status s;
  {
    MutexLock g(c_.nets_.mutex());
    s = apply_globals_locked(next);
  }
  c_.router_.wake_checker();
  return s;
}

Status Admin::set_lnd_timeout(NetId net, int seconds) {
  if (seconds < 0) return Failure{-EINVAL, "LND timeout " + std::to_string(seconds) + " must be >= 0"};
  MutexLock g(c_.nets_.mutex());  // NIs come and go under it
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

Status Admin::set_lnd_tunable(Nid nid, std::string_view name, long value) {
  MutexLock g(c_.nets_.mutex());  // NIs come and go under it
  for (Ni* ni : c_.st_.nets().nis) {
    if (ni == c_.st_.lo_ni || ni->nid != nid) continue;
    int rc = ni->lnd->set_tunable(*ni, name, value);
    if (rc == -EOPNOTSUPP)
      return Failure{rc, "not supported yet: " + std::string(name) + " on " + nid.net().to_string() +
                             " at run time (its driver takes it when an NI comes up)"};
    if (rc < 0)
      return Failure{rc, "cannot set " + std::string(name) + " " + std::to_string(value) + " on " + nid.to_string() +
                             ": " + errno_string(rc)};
    return {};
  }
  return Failure{-ENOENT, "no local NI " + nid.to_string()};
}

}  // namespace lnet::core
