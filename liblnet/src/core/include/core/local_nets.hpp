// The local networks of an instance: the drivers in use, every NI and net ever brought
// up, the published NI table (readers take snapshots, no lock) and the global tunables.
// Changes are serialised by the configuration mutex, which the Control takes (lock
// order: after the router's lock, before the discovery lock and the net locks).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include <lnet/config.hpp>
#include <lnet/control.hpp>
#include <lnet/lnd/lnd.hpp>
#include <lnet/mutex.hpp>

#include "net/state.hpp"

namespace lnet::core {

class LocalNets {
 public:
  // `host`: what the NIs' drivers call back; `pid`: the NIs' process id.
  LocalNets(net::State& st, LndHost& host, Pid pid) : st_(st), host_(host), pid_(pid) {}
  LocalNets(const LocalNets&) = delete;
  LocalNets& operator=(const LocalNets&) = delete;

  Mutex& mutex() LNET_RETURN_CAPABILITY(mutex_) { return mutex_; }

  // Drivers handed in by whoever made the instance (else made from the registry when a
  // net of their type comes up).
  void add_driver(std::shared_ptr<Lnd> lnd) LNET_REQUIRES(mutex_);
  // 0@lo, then the configured nets (startup).
  Status start(const std::vector<NetConfig>& nets) LNET_REQUIRES(mutex_);
  // One NI brought up and published.
  Result<net::Ni*> bring_up(const NetConfig& nc) LNET_REQUIRES(mutex_);
  // `ni` out of the published table (its driver still runs: take_down() it).
  void unpublish(net::Ni* ni) LNET_REQUIRES(mutex_);
  void take_down(net::Ni* ni) LNET_REQUIRES(mutex_);
  // Every NI down, the drivers let go (shutdown).
  void stop() LNET_REQUIRES(mutex_);
  // Every NI brought up, deleted ones included (they live until stop()).
  const std::vector<std::unique_ptr<net::Ni>>& all_nis() const LNET_REQUIRES(mutex_) { return all_nis_; }

  const GlobalTunables& globals() const LNET_REQUIRES(mutex_) { return globals_; }
  // Checked and taken (the live copy in net::State too); true when the discovery
  // setting changed (our ping info's DISCOVERY bit).
  Result<bool> set_globals(const GlobalTunables& g) LNET_REQUIRES(mutex_);

  // The drivers' own counters (stats show's lnd statistics).
  std::vector<LndCounters> lnd_counters() LNET_EXCLUDES(mutex_);

 private:
  using Ni = net::Ni;
  Result<Lnd*> driver_for(const NetConfig& nc) LNET_REQUIRES(mutex_);
  // The NI's tx credits shared out over its CPTs (its configured list).
  void share_credits(Ni& ni) const;
  // Its device's NUMA node (from the driver) as selection and net show use it.
  void place_numa(Ni& ni) const;
  // A new NI table with `ni` added.
  void publish_with(Ni* ni) LNET_REQUIRES(mutex_);
  void publish(std::unique_ptr<net::NetTable> t) LNET_REQUIRES(mutex_);

  net::State& st_;
  LndHost& host_;
  const Pid pid_;

  mutable Mutex mutex_;
  std::map<std::uint32_t, std::shared_ptr<Lnd>> lnds_ LNET_GUARDED_BY(mutex_);  // drivers in use
  std::vector<std::unique_ptr<net::Net>> all_nets_ LNET_GUARDED_BY(mutex_);
  std::vector<std::unique_ptr<Ni>> all_nis_ LNET_GUARDED_BY(mutex_);
  std::vector<std::unique_ptr<net::NetTable>> tables_ LNET_GUARDED_BY(mutex_);
  GlobalTunables globals_ LNET_GUARDED_BY(mutex_);
};

}  // namespace lnet::core
