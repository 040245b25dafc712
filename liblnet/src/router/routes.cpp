// Routes, the routing switch, router buffer pool sizes, selection rules, and the
// router checker that pings gateways to tell which routes are up.
#include <algorithm>
#include <set>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

#include "base/clock.hpp"
#include "router/router.hpp"

namespace lnet::router {

// ---------------------------------------------------------------- routes

Status Router::add_route(const RouteConfig& r) {
  if (r.net.is_any() || r.net.type() == kLoLnd) return Failure{-EINVAL, "bad route network " + r.net.to_string()};
  if (r.hops != -1 && (r.hops < 1 || r.hops > 255))
    return Failure{-EINVAL, "route hop count " + std::to_string(r.hops) + " is outside 1..255"};
  if (r.health_sensitivity > static_cast<unsigned>(kMaxHealth))
    return Failure{-EINVAL, "route health_sensitivity " + std::to_string(r.health_sensitivity) + " is outside 0..1000"};
  RouteConfig cfg = r;
  if (cfg.health_sensitivity == 0) cfg.health_sensitivity = 1;  // LNet's default for a route
  MutexLock g(mutex_);
  if (st_.find_net(r.net)) return Failure{-EINVAL, "cannot route to " + r.net.to_string() + ": it is a local network"};
  if (r.gateway.is_any() || !st_.find_net(r.gateway.net()) || r.gateway.is_lo())
    return Failure{-EHOSTUNREACH, "gateway " + r.gateway.to_string() + " is not on a local network"};
  if (st_.is_local_nid(r.gateway)) return Failure{-EINVAL, "gateway " + r.gateway.to_string() + " is one of our NIDs"};
  if (Status s = st_.routes.add(cfg); !s) return s;
  PeerNi* gw = st_.peer_ni_for(r.gateway);
  if (!gw) return Failure{-ENOMEM, "cannot make the peer of " + r.gateway.to_string()};
  {
    MutexLock n(st_.locks[st_.cpts.of_nid(r.gateway)]);
    gw->peer->health_sensitivity.store(cfg.health_sensitivity, std::memory_order_relaxed);
  }
  LNET_LOG(Info, kLogRouter, "route to %s via %s (hops %d, priority %u)", r.net.to_string().c_str(),
           r.gateway.to_string().c_str(), r.hops, r.priority);
  return {};
}

Status Router::del_route(NetId net, Nid gateway) {
  MutexLock g(mutex_);
  if (!st_.routes.del(net, gateway))
    return Failure{-ENOENT, "no route to " + net.to_string() + (gateway.is_any() ? "" : " via " + gateway.to_string())};
  return {};
}

std::vector<RouteInfo> Router::route_info() const {
  std::vector<RouteInfo> out;
  const net::RouteTable* t = st_.routes.table();
  for (std::size_t i = 0; t && i < t->routes.size(); ++i) {
    const net::RouteEntry& e = t->routes[i];
    RouteInfo ri;
    ri.net = e.cfg.net;
    ri.gateway = e.cfg.gateway;
    ri.hops = e.cfg.hops;
    ri.priority = e.cfg.priority;
    ri.health_sensitivity = e.cfg.health_sensitivity;
    {
      MutexLock g(st_.locks[st_.cpts.of_nid(e.cfg.gateway)]);
      PeerNi* gw = st_.peers.find(e.cfg.gateway);
      ri.up = net::Selector::route_alive(e, gw, st_.nets(), st_.gateway_min_health());
      ri.multi_hop = e.cfg.hops > 1 || !e.state->single_hop.load();
      ri.gateway_health = 0;  // its best NI on our side
      for (std::size_t k = 0; gw && k < gw->peer->nets.size(); ++k)
        if (st_.find_net(gw->peer->nets[k]->net))
          for (const PeerNi* n : gw->peer->nets[k]->nis)
            ri.gateway_health = std::max(ri.gateway_health, n->health.load());
    }
    out.push_back(ri);
  }
  return out;
}

// ---------------------------------------------------------------- router buffers

Status Router::set_buffers(const BufferConfig& b) {
  if (b.tiny < 0 || b.small < 0 || b.large < 0) return Failure{-EINVAL, "router buffer counts cannot be negative"};
  MutexLock g(mutex_);
  BufferConfig next = b;
  BufferConfig def;
  if (next.tiny == 0) next.tiny = def.tiny;  // 0 asks for the default, as in LNet
  if (next.small == 0) next.small = def.small;
  if (next.large == 0) next.large = def.large;
  config_ = next;
  if (st_.routing.load()) {
    ExclusiveLock x(st_.locks);
    buffers_.resize(config_, false);
  }
  return {};
}

BufferConfig Router::buffers() const {
  MutexLock g(mutex_);
  return config_;
}

// Routing off while it is on drains first (as 2.17's routers do): the ping info says
// RTE_DISABLED at once (pushed to the discovered peers; the others see it at their next
// router check) while what arrives is still forwarded; the monitor's drain_step stops it.
// Routing on again during the drain only takes the announcement back.
Status Router::set_routing(bool on) {
  MutexLock g(mutex_);
  if (!on) {
    if (!st_.routing.load() || st_.routing_draining.load()) return {};
    std::int64_t now = coarse_now_ns();
    drain_ = Drain{now, now, st_.counters.sum(kRouteCount)};
    st_.routing_draining.store(true);
    host_.ping_info_changed();
    health_.wake_now();
    LNET_LOG(Info, kLogRouter,
             "routing draining: RTE_DISABLED announced, forwarding until quiet for %d s (1 s once every peer has "
             "the news; at most %d s)",
             drain_quiet(), drain_most());
    return {};
  }
  if (st_.routing_draining.exchange(false)) {
    host_.ping_info_changed();
    LNET_LOG(Info, kLogRouter, "routing enabled again (the drain is called off)");
    return {};
  }
  if (st_.routing.load()) return {};
  {
    ExclusiveLock x(st_.locks);
    buffers_.resize(config_, true);
  }
  switch_routing_locked(true);
  health_.wake_now();  // it checks the NIs while routing
  return {};
}

void Router::switch_routing_locked(bool on) {
  // The NIs' silence is counted from now; one down for it comes back when routing stops.
  for (Ni* ni : st_.nets().nis) {
    ni->last_rx.store(coarse_now_ns() / kNsPerSec, std::memory_order_relaxed);
    ni->silent.store(false);
  }
  st_.routing.store(on, std::memory_order_release);
  st_.routing_draining.store(false);
  host_.ping_info_changed();  // RTE_DISABLED changes
  LNET_LOG(Info, kLogRouter, "routing %s", on ? "enabled" : "disabled");
}

// A peer that had us up stops choosing us once told: at once when pushed, else at its
// next router check (alive_router_check_interval, taken as the peers' own). Nothing
// forwarded for one such interval and a second means they have all moved (a second
// alone once every peer has ACKed the push: what they sent before is in); a peer still
// sending after interval + router_ping_timeout does not follow RTE_DISABLED at all.
int Router::drain_quiet() const { return std::max(0, st_.tun.alive_router_check_interval.load()) + 1; }
int Router::drain_most() const { return drain_quiet() + std::max(0, st_.tun.router_ping_timeout.load()); }

void Router::drain_step() {
  if (!st_.routing_draining.load()) return;
  MutexLock g(mutex_);
  if (!st_.routing_draining.load()) return;
  std::int64_t now = coarse_now_ns();
  std::int64_t forwarded = st_.counters.sum(kRouteCount);
  if (forwarded != drain_.forwarded) {
    drain_.during += forwarded > drain_.forwarded ? forwarded - drain_.forwarded : 0;
    drain_.forwarded = forwarded;
    drain_.last_forward = now;
  }
  std::int64_t quiet_ns = (discovery_.all_told() ? 1 : drain_quiet()) * kNsPerSec;
  bool quiet = now - drain_.last_forward >= quiet_ns;
  if (!quiet && now - drain_.started < drain_most() * kNsPerSec) return;
  LNET_LOG(Info, kLogRouter, "routing drained after %.1f s (%lld messages forwarded meanwhile%s)",
           static_cast<double>(now - drain_.started) / kNsPerSec, static_cast<long long>(drain_.during),
           quiet ? "" : "; still forwarding at the drain's end");
  switch_routing_locked(false);
}

std::vector<RouterCptInfo> Router::router_pools() const {
  std::vector<RouterCptInfo> out(st_.cpts.count());
  auto& locks = st_.locks;
  for (unsigned c = 0; c < st_.cpts.count(); ++c) {
    MutexLock g(locks[c]);
    for (int k = 0; k < net::kNumPools; ++k) out[c].pools[k] = buffers_.info(c, k);
  }
  return out;
}

// ---------------------------------------------------------------- router checker

void Router::set_memory(std::shared_ptr<Lnd> owner, BufferMemory* memory) {
  memory_owner_ = std::move(owner);
  buffers_.set_memory(memory);
}

void Router::start() {
  checker_ = std::thread([this] { checker_loop(); });
}

void Router::stop() {
  wake_checker();
  if (checker_.joinable()) checker_.join();
}

void Router::wake_checker() {
  // The checker waits under its mutex for the interval to pass or change: taken here,
  // the change cannot fall between its look and its sleep.
  { MutexLock c(checker_mutex_); }
  checker_cv_.notify_all();
}

// Every gateway gets a discovery round that pings it (seed 003: router pings are
// discovery pings); its answer sets the routes through it (update_routes_locked), its
// silence takes them down (the peer is unreachable). Returns once every round ended or
// router_ping_timeout passed.
void Router::check_routers() {
  const net::RouteTable* t = st_.routes.table();
  if (!t || st_.stopping.load()) return;
  std::vector<std::pair<Peer*, Nid>> gateways;
  {
    ExclusiveLock x(st_.locks);
    for (const auto& e : t->routes) {
      PeerNi* gw = st_.peers.find(e.cfg.gateway);
      if (!gw) continue;
      bool seen = false;
      for (auto& g : gateways) seen = seen || g.first == gw->peer;
      if (!seen) gateways.emplace_back(gw->peer, e.cfg.gateway);
    }
  }
  int timeout = st_.tun.router_ping_timeout.load(std::memory_order_relaxed);
  auto results = discovery_.rounds(gateways, std::chrono::seconds(timeout));
  for (std::size_t i = 0; i < gateways.size(); ++i) {
    const auto& r = results[i];
    if (r) continue;
    LNET_LOG(Info, kLogRouter, "gateway %s: %s", gateways[i].second.to_string().c_str(), r.message().c_str());
    // Not answered within router_ping_timeout: its routes are down until a round ends
    // well (a ping lost with a cut link would otherwise keep them up until its
    // transaction_timeout). A failed round has said so already.
    Peer* peer = discovery_.follow(gateways[i].first);
    if (r.code() == -ETIMEDOUT && peer->reachable.exchange(false, std::memory_order_relaxed))
      LNET_LOG(Warn, kLogRouter, "gateway %s did not answer within %d s: its routes are down",
               gateways[i].second.to_string().c_str(), timeout);
  }
}

void Router::update_routes_locked(const Peer* gw, const PingInfo& info) {
  const net::RouteTable* t = st_.routes.table();
  bool routes_through = !(info.features & kPingFeatRteDisabled);
  for (std::size_t i = 0; t && i < t->routes.size(); ++i) {
    const net::RouteEntry& e = t->routes[i];
    PeerNi* named = st_.peers.find(e.cfg.gateway);
    if (!named || named->peer != gw) continue;
    // A single hop (the gateway lists an NI on the route's net) is up only while one of
    // them is (avoid_asym_router_failure); beyond a hop the gateway's word is taken.
    bool listed = false, up_there = false;
    for (std::size_t k = 1; k < info.nis.size(); ++k) {
      if (info.nis[k].nid.net() != e.cfg.net) continue;
      listed = true;
      up_there = up_there || info.nis[k].status == kNiStatusUp;
    }
    // A gateway without an NI on this project's own type cannot be a kernel's router
    // for it: a kernel cannot name mpi, so the route works only if the gateway is an
    // lnetd that routes it on. Said once, when the gateway's word first comes.
    if (!listed && e.cfg.net.type() == kMpiLnd && !e.state->told_private.exchange(true))
      LNET_LOG(Warn, kLogRouter,
               "route to %s via %s: the gateway has no NI on %s, so it must route it on; a kernel "
               "LNet router cannot (it cannot name %s, a type only userspace nodes know: docs/design/mpi-net-type.md)",
               e.cfg.net.to_string().c_str(), e.cfg.gateway.to_string().c_str(), e.cfg.net.to_string().c_str(),
               lnd_type_name(kMpiLnd));
    e.state->single_hop.store(listed);
    bool up = routes_through && (!listed || e.cfg.hops > 1 || up_there);
    if (e.state->up.exchange(up) != up) {
      LNET_LOG(Warn, kLogRouter, "route to %s via %s is %s%s", e.cfg.net.to_string().c_str(),
               e.cfg.gateway.to_string().c_str(), up ? "up" : "down",
               up ? "" : (routes_through ? ": the gateway has no NI up on that net" : ": the gateway does not route"));
    }
  }
}

bool Router::asymmetric(Nid src, const PeerNi* from) const {
  // We would reach src's net through this gateway: not asymmetric.
  const net::RouteTable* t = st_.routes.table();
  for (std::size_t i = 0; t && i < t->routes.size(); ++i) {
    const net::RouteEntry& e = t->routes[i];
    if (e.cfg.net != src.net()) continue;
    MutexLock g(st_.locks[st_.cpts.of_nid(e.cfg.gateway)]);
    PeerNi* gw = st_.peers.find(e.cfg.gateway);
    if (gw && gw->peer == from->peer) return false;
  }
  return true;
}

void Router::checker_loop() {
  MutexLock lk(checker_mutex_);
  while (!st_.stopping.load()) {
    int interval = st_.tun.alive_router_check_interval.load(std::memory_order_relaxed);
    if (interval <= 0) {  // off: until it is set
      checker_cv_.wait(lk.native(), [&] {
        return st_.stopping.load() || st_.tun.alive_router_check_interval.load(std::memory_order_relaxed) > 0;
      });
      continue;
    }
    // A new interval (set_global) ends the wait, which starts again with it: waiting
    // out an old 60 s would leave the gateways unchecked that long.
    if (checker_cv_.wait_for(lk.native(), std::chrono::seconds(interval), [&] {
          return st_.stopping.load() || st_.tun.alive_router_check_interval.load(std::memory_order_relaxed) != interval;
        })) {
      if (st_.stopping.load()) break;
      continue;
    }
    lk.unlock();
    check_routers();
    lk.lock();
  }
}

}  // namespace lnet::router
