// Routes, the routing switch, router buffer pool sizes, selection rules, and the
// router checker that pings gateways to tell which routes are up.
#include <algorithm>
#include <set>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

#include "base/clock.hpp"
#include "core/core.hpp"

namespace lnet::core {

// ---------------------------------------------------------------- routes

Status Core::add_route(const RouteConfig& r) {
  if (r.net.is_any() || r.net.type() == kLoLnd) return Failure{-EINVAL, "bad route network " + r.net.to_string()};
  if (r.hops != -1 && (r.hops < 1 || r.hops > 255))
    return Failure{-EINVAL, "route hop count " + std::to_string(r.hops) + " is outside 1..255"};
  if (r.health_sensitivity > static_cast<unsigned>(kMaxHealth))
    return Failure{-EINVAL, "route health_sensitivity " + std::to_string(r.health_sensitivity) + " is outside 0..1000"};
  RouteConfig cfg = r;
  if (cfg.health_sensitivity == 0) cfg.health_sensitivity = 1;  // LNet's default for a route
  MutexLock g(config_mutex_);
  if (find_net(r.net)) return Failure{-EINVAL, "cannot route to " + r.net.to_string() + ": it is a local network"};
  if (r.gateway.is_any() || !find_net(r.gateway.net()) || r.gateway.is_lo())
    return Failure{-EHOSTUNREACH, "gateway " + r.gateway.to_string() + " is not on a local network"};
  if (is_local_nid(r.gateway)) return Failure{-EINVAL, "gateway " + r.gateway.to_string() + " is one of our NIDs"};
  if (Status s = routes_.add(cfg); !s) return s;
  PeerNi* gw = peer_ni_for(r.gateway);
  if (!gw) return Failure{-ENOMEM, "cannot make the peer of " + r.gateway.to_string()};
  {
    MutexLock n(net_locks_[cpts_.of_nid(r.gateway)]);
    gw->peer->health_sensitivity.store(cfg.health_sensitivity, std::memory_order_relaxed);
  }
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
    ri.health_sensitivity = e.cfg.health_sensitivity;
    {
      MutexLock g(const_cast<CptLocks&>(net_locks_)[cpts_.of_nid(e.cfg.gateway)]);
      PeerNi* gw = peers_.find(e.cfg.gateway);
      ri.up = net::Selector::route_alive(e, gw, table(), gateway_min_health());
      ri.multi_hop = e.cfg.hops > 1 || !e.state->single_hop.load();
      ri.gateway_health = 0;  // its best NI on our side
      for (std::size_t k = 0; gw && k < gw->peer->nets.size(); ++k)
        if (find_net(gw->peer->nets[k]->net))
          for (const PeerNi* n : gw->peer->nets[k]->nis)
            ri.gateway_health = std::max(ri.gateway_health, n->health.load());
    }
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
  // The NIs' silence is counted from now; one down for it comes back when routing stops.
  for (Ni* ni : table().nis) {
    ni->last_rx.store(coarse_now_ns() / kNsPerSec, std::memory_order_relaxed);
    ni->silent.store(false);
  }
  routing_.store(on, std::memory_order_release);
  refresh_ping_target();   // RTE_DISABLED changes
  if (on) wake_monitor();  // it checks the NIs while routing
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

// Every gateway gets a discovery round that pings it (seed 003: router pings are
// discovery pings); its answer sets the routes through it (update_routes_locked), its
// silence takes them down (the peer is unreachable). Returns once every round ended or
// router_ping_timeout passed.
void Core::check_routers() {
  const net::RouteTable* t = routes_.table();
  if (!t || stopping_.load()) return;
  std::vector<std::pair<Peer*, Nid>> gateways;
  {
    ExclusiveLock x(net_locks_);
    for (const auto& e : t->routes) {
      PeerNi* gw = peers_.find(e.cfg.gateway);
      if (!gw) continue;
      bool seen = false;
      for (auto& g : gateways) seen = seen || g.first == gw->peer;
      if (!seen) gateways.emplace_back(gw->peer, e.cfg.gateway);
    }
  }
  auto timeout = std::chrono::seconds(globals().router_ping_timeout);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock g(dc_mutex_);
  std::vector<unsigned> rounds;
  for (auto& [peer, nid] : gateways) {
    while (peer->dc.state.load() == net::DcState::Merged) peer = peer->dc.merged_into;
    rounds.push_back(start_round_locked(peer, false));
  }
  for (std::size_t i = 0; i < gateways.size(); ++i) {
    auto r = wait_round_locked(gateways[i].first, rounds[i], gateways[i].second, g, deadline, timeout);
    if (r) continue;
    LNET_LOG(Info, kLogRouter, "gateway %s: %s", gateways[i].second.to_string().c_str(), r.message().c_str());
    // Not answered within router_ping_timeout: its routes are down until a round ends
    // well (a ping lost with a cut link would otherwise keep them up until its
    // transaction_timeout). A failed round has said so already.
    Peer* peer = gateways[i].first;
    while (peer->dc.state.load() == net::DcState::Merged) peer = peer->dc.merged_into;
    if (r.code() == -ETIMEDOUT && peer->reachable.exchange(false, std::memory_order_relaxed))
      LNET_LOG(Warn, kLogRouter, "gateway %s did not answer within %d s: its routes are down",
               gateways[i].second.to_string().c_str(), globals().router_ping_timeout);
  }
}

void Core::update_routes_locked(const Peer* gw, const PingInfo& info) {
  const net::RouteTable* t = routes_.table();
  bool routes_through = !(info.features & kPingFeatRteDisabled);
  for (std::size_t i = 0; t && i < t->routes.size(); ++i) {
    const net::RouteEntry& e = t->routes[i];
    PeerNi* named = peers_.find(e.cfg.gateway);
    if (!named || named->peer != gw) continue;
    // A single hop (the gateway lists an NI on the route's net) is up only while one of
    // them is (avoid_asym_router_failure); beyond a hop the gateway's word is taken.
    bool listed = false, up_there = false;
    for (std::size_t k = 1; k < info.nis.size(); ++k) {
      if (info.nis[k].nid.net() != e.cfg.net) continue;
      listed = true;
      up_there = up_there || info.nis[k].status == kNiStatusUp;
    }
    e.state->single_hop.store(listed);
    bool up = routes_through && (!listed || e.cfg.hops > 1 || up_there);
    if (e.state->up.exchange(up) != up) {
      LNET_LOG(Warn, kLogRouter, "route to %s via %s is %s%s", e.cfg.net.to_string().c_str(),
               e.cfg.gateway.to_string().c_str(), up ? "up" : "down",
               up ? "" : (routes_through ? ": the gateway has no NI up on that net" : ": the gateway does not route"));
    }
  }
}

bool Core::asymmetric(Nid src, const PeerNi* from) const {
  // We would reach src's net through this gateway: not asymmetric.
  const net::RouteTable* t = routes_.table();
  for (std::size_t i = 0; t && i < t->routes.size(); ++i) {
    const net::RouteEntry& e = t->routes[i];
    if (e.cfg.net != src.net()) continue;
    MutexLock g(net_locks_[cpts_.of_nid(e.cfg.gateway)]);
    PeerNi* gw = peers_.find(e.cfg.gateway);
    if (gw && gw->peer == from->peer) return false;
  }
  return true;
}

void Core::checker_loop() {
  MutexLock lk(checker_mutex_);
  while (!stopping_.load()) {
    int interval = router_check_interval_.load(std::memory_order_relaxed);
    if (interval <= 0) {  // off: until it is set
      checker_cv_.wait(lk.native(),
                       [&] { return stopping_.load() || router_check_interval_.load(std::memory_order_relaxed) > 0; });
      continue;
    }
    // A new interval (set_global) ends the wait, which starts again with it: waiting
    // out an old 60 s would leave the gateways unchecked that long.
    if (checker_cv_.wait_for(lk.native(), std::chrono::seconds(interval), [&] {
          return stopping_.load() || router_check_interval_.load(std::memory_order_relaxed) != interval;
        })) {
      if (stopping_.load()) break;
      continue;
    }
    lk.unlock();
    check_routers();
    lk.lock();
  }
}

}  // namespace lnet::core
