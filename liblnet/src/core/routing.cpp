// Routes, the routing switch, router buffer pool sizes, selection rules, and the
// router checker that pings gateways to tell which routes are up.
#include <algorithm>
#include <set>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

#include "core/core.hpp"

namespace lnet::core {

// ---------------------------------------------------------------- routes

Status Core::add_route(const RouteConfig& r) {
  if (r.net.is_any() || r.net.type() == kLoLnd) return Failure{-EINVAL, "bad route network " + r.net.to_string()};
  if (r.hops != -1 && (r.hops < 1 || r.hops > 255))
    return Failure{-EINVAL, "route hop count " + std::to_string(r.hops) + " is outside 1..255"};
  MutexLock g(config_mutex_);
  if (find_net(r.net)) return Failure{-EINVAL, "cannot route to " + r.net.to_string() + ": it is a local network"};
  if (r.gateway.is_any() || !find_net(r.gateway.net()) || r.gateway.is_lo())
    return Failure{-EHOSTUNREACH, "gateway " + r.gateway.to_string() + " is not on a local network"};
  if (is_local_nid(r.gateway)) return Failure{-EINVAL, "gateway " + r.gateway.to_string() + " is one of our NIDs"};
  if (Status s = routes_.add(r); !s) return s;
  if (!peer_ni_for(r.gateway)) return Failure{-ENOMEM, "cannot make the peer of " + r.gateway.to_string()};
  LNET_LOG(Info, kLogRouter, "route to %s via %s (hops %d, priority %u)", r.net.to_string().c_str(),
           r.gateway.to_string().c_str(), r.hops, r.priority);
  return {};
}

Status Core::del_route(NetId net, Nid gateway) {
  MutexLock g(config_mutex_);
  if (!routes_.del(net, gateway))
    return Failure{-ENOENT, "no route to " + net.to_string() + (gateway.is_any() ? "" : " via " + gateway.to_string())};
  return {};
}

std::vector<RouteInfo> Core::route_info() const {
  std::vector<RouteInfo> out;
  const net::RouteTable* t = routes_.table();
  for (std::size_t i = 0; t && i < t->routes.size(); ++i) {
    const net::RouteEntry& e = t->routes[i];
    RouteInfo ri;
    ri.net = e.cfg.net;
    ri.gateway = e.cfg.gateway;
    ri.hops = e.cfg.hops;
    ri.priority = e.cfg.priority;
    ri.multi_hop = e.cfg.hops > 1;
    bool alive;
    {
      MutexLock g(const_cast<CptLocks&>(net_locks_)[cpts_.of_nid(e.cfg.gateway)]);
      PeerNi* gw = peers_.find(e.cfg.gateway);
      alive = gw && gw->alive.load();
    }
    ri.up = alive && e.state->up.load();
    out.push_back(ri);
  }
  return out;
}

// ---------------------------------------------------------------- router buffers

Status Core::set_buffers(const BufferConfig& b) {
  if (b.tiny < 0 || b.small < 0 || b.large < 0) return Failure{-EINVAL, "router buffer counts cannot be negative"};
  MutexLock g(config_mutex_);
  BufferConfig next = b;
  BufferConfig def;
  if (next.tiny == 0) next.tiny = def.tiny;  // 0 asks for the default, as in LNet
  if (next.small == 0) next.small = def.small;
  if (next.large == 0) next.large = def.large;
  buffers_ = next;
  if (routing_.load()) {
    ExclusiveLock x(net_locks_);
    rtr_buffers_.resize(buffers_, false);
  }
  return {};
}

BufferConfig Core::buffers() const {
  MutexLock g(config_mutex_);
  return buffers_;
}

Status Core::set_routing(bool on) {
  MutexLock g(config_mutex_);
  if (on == routing_.load()) return {};
  if (on) {
    ExclusiveLock x(net_locks_);
    rtr_buffers_.resize(buffers_, true);
  }
  routing_.store(on, std::memory_order_release);
  refresh_ping_target();  // RTE_DISABLED changes
  LNET_LOG(Info, kLogRouter, "routing %s", on ? "enabled" : "disabled");
  return {};
}

std::vector<RouterCptInfo> Core::router_pools() const {
  std::vector<RouterCptInfo> out(cpts_.count());
  auto& locks = const_cast<CptLocks&>(net_locks_);
  for (unsigned c = 0; c < cpts_.count(); ++c) {
    MutexLock g(locks[c]);
    for (int k = 0; k < net::kNumPools; ++k) out[c].pools[k] = rtr_buffers_.info(c, k);
  }
  return out;
}

// ---------------------------------------------------------------- selection rules

Status Core::add_udsp(const UdspRule& rule, int idx) {
  MutexLock g(config_mutex_);
  ExclusiveLock x(net_locks_);
  if (Status s = udsp_.add(rule, idx); !s) return s;
  udsp_.apply(table(), peers_);
  config_gen_.fetch_add(1, std::memory_order_relaxed);
  return {};
}

Status Core::del_udsp(int idx) {
  MutexLock g(config_mutex_);
  ExclusiveLock x(net_locks_);
  if (Status s = udsp_.del(idx); !s) return s;
  udsp_.apply(table(), peers_);
  config_gen_.fetch_add(1, std::memory_order_relaxed);
  return {};
}

std::vector<UdspRule> Core::udsp_rules() const {
  ExclusiveLock x(const_cast<CptLocks&>(net_locks_));
  return udsp_.list();
}

// ---------------------------------------------------------------- router checker

void Core::check_routers() {
  const net::RouteTable* t = routes_.table();
  if (!t) return;
  std::set<Nid> gateways;
  for (const auto& e : t->routes) gateways.insert(e.cfg.gateway);
  GlobalTunables gt = globals();
  for (Nid gw : gateways) {
    if (stopping_.load()) return;
    auto r = ping(ProcessId{gw, kPidLustre}, std::chrono::seconds(gt.router_ping_timeout), 64, Nid::any());
    bool alive = r.ok();
    std::set<NetId> up_nets;
    bool routes_through = false;
    if (alive) {
      routes_through = !(r->info.features & kPingFeatRteDisabled);
      for (const NiStatus& ns : r->info.nis)
        if (ns.status == kNiStatusUp) up_nets.insert(ns.nid.net());
    }
    {
      MutexLock g(net_locks_[cpts_.of_nid(gw)]);
      if (PeerNi* lpni = peers_.find(gw)) lpni->alive.store(alive);
    }
    for (const auto& e : t->routes) {
      if (e.cfg.gateway != gw) continue;
      // A single-hop route is up only if the gateway routes and has an NI up on the
      // route's net (avoid_asym_router_failure).
      bool up = alive && routes_through && (e.cfg.hops > 1 || up_nets.count(e.cfg.net) > 0);
      if (e.state->up.exchange(up) != up) {
        LNET_LOG(Warn, kLogRouter, "route to %s via %s is %s", e.cfg.net.to_string().c_str(), gw.to_string().c_str(),
                 up ? "up" : "down");
      }
    }
  }
}

void Core::checker_loop() {
  MutexLock lk(checker_mutex_);
  while (!stopping_.load()) {
    int interval = globals().alive_router_check_interval;
    if (interval <= 0) {
      lk.wait(checker_cv_);
      continue;
    }
    if (checker_cv_.wait_for(lk.native(), std::chrono::seconds(interval), [&] { return stopping_.load(); })) break;
    lk.unlock();
    check_routers();
    lk.lock();
  }
}

}  // namespace lnet::core
