// Routes, the routing switch, router buffer pool sizes, and the router checker that
// pings gateways to tell which routes are up.
#include <algorithm>
#include <set>

#include <lnet/log.hpp>

#include "core/core.hpp"

namespace lnet::core {

namespace {
std::unique_ptr<RouteTable> copy_routes(const RouteTable* t) {
  return t ? std::make_unique<RouteTable>(*t) : std::make_unique<RouteTable>();
}
}  // namespace

Status Core::add_route(const RouteConfig& r) {
  if (r.net.is_any() || r.net.type() == kLoLnd) return Failure{-EINVAL, "bad route network " + r.net.to_string()};
  if (r.hops != -1 && (r.hops < 1 || r.hops > 255)) {
    return Failure{-EINVAL, "route hop count " + std::to_string(r.hops) + " is outside 1..255"};
  }
  std::lock_guard g(config_mutex_);
  if (find_net(r.net)) return Failure{-EINVAL, "cannot route to " + r.net.to_string() + ": it is a local network"};
  if (r.gateway.is_any() || !find_net(r.gateway.net()) || r.gateway.is_lo()) {
    return Failure{-EHOSTUNREACH, "gateway " + r.gateway.to_string() + " is not on a local network"};
  }
  if (is_local_nid(r.gateway)) return Failure{-EINVAL, "gateway " + r.gateway.to_string() + " is one of our NIDs"};
  const RouteTable* cur = routes_.load(std::memory_order_acquire);
  for (std::size_t i = 0; cur && i < cur->routes.size(); ++i) {
    if (cur->routes[i].cfg.net == r.net && cur->routes[i].cfg.gateway == r.gateway) {
      return Failure{-EEXIST, "route to " + r.net.to_string() + " via " + r.gateway.to_string() + " exists"};
    }
  }
  {
    ExclusiveLock x(net_locks_);
    if (!peers_.find(r.gateway)) {
      if (peers_.add_ni(r.gateway, r.gateway, false, peer_credits_for(r.gateway.net()),
                        peer_rtr_credits_for(r.gateway.net())) == 0)
        udsp_new_peer_ni(peers_.find(r.gateway));
    }
  }
  auto next = copy_routes(cur);
  next->routes.push_back(RouteEntry{r, std::make_shared<RouteState>()});
  routes_.store(next.get(), std::memory_order_release);
  route_tables_.push_back(std::move(next));
  LNET_LOG(Info, kLogRouter, "route to %s via %s (hops %d, priority %u)", r.net.to_string().c_str(),
           r.gateway.to_string().c_str(), r.hops, r.priority);
  return {};
}

int Core::del_route(NetId net, Nid gateway) {
  std::lock_guard g(config_mutex_);
  auto next = copy_routes(routes_.load(std::memory_order_acquire));
  auto& v = next->routes;
  std::size_t before = v.size();
  v.erase(std::remove_if(
              v.begin(), v.end(),
              [&](const RouteEntry& e) { return e.cfg.net == net && (gateway.is_any() || e.cfg.gateway == gateway); }),
          v.end());
  if (v.size() == before) return -ENOENT;
  routes_.store(next.get(), std::memory_order_release);
  route_tables_.push_back(std::move(next));
  return 0;
}

std::vector<RouteConfig> Core::route_configs() const {
  std::vector<RouteConfig> out;
  const RouteTable* t = routes_.load(std::memory_order_acquire);
  if (t)
    for (const auto& e : t->routes) out.push_back(e.cfg);
  return out;
}

std::vector<RouteInfo> Core::route_info() const {
  std::vector<RouteInfo> out;
  const RouteTable* t = routes_.load(std::memory_order_acquire);
  for (std::size_t i = 0; t && i < t->routes.size(); ++i) {
    const RouteEntry& e = t->routes[i];
    RouteInfo ri;
    ri.net = e.cfg.net;
    ri.gateway = e.cfg.gateway;
    ri.hops = e.cfg.hops;
    ri.priority = e.cfg.priority;
    ri.multi_hop = e.cfg.hops > 1;
    bool alive;
    {
      std::lock_guard g(const_cast<CptLocks&>(net_locks_)[cpts_.of_nid(e.cfg.gateway)]);
      PeerNi* gw = peers_.find(e.cfg.gateway);
      alive = gw && gw->alive.load();
    }
    ri.up = alive && e.state->up.load();
    out.push_back(ri);
  }
  return out;
}

// ---------------------------------------------------------------- router buffers

namespace {
// Per CPT: the configured total divided among the CPTs, at least one buffer each.
int per_cpt(int total, unsigned ncpts) { return std::max(total / static_cast<int>(ncpts), 1); }
}  // namespace

Status Core::set_buffers(const BufferConfig& b) {
  if (b.tiny < 0 || b.small < 0 || b.large < 0) return Failure{-EINVAL, "router buffer counts cannot be negative"};
  std::lock_guard g(config_mutex_);
  BufferConfig next = b;
  BufferConfig def;
  if (next.tiny == 0) next.tiny = def.tiny;  // 0 asks for the default, as in LNet
  if (next.small == 0) next.small = def.small;
  if (next.large == 0) next.large = def.large;
  buffers_ = next;
  if (routing_.load()) {
    ExclusiveLock x(net_locks_);
    int want[kNumPools] = {buffers_.tiny, buffers_.small, buffers_.large};
    for (unsigned c = 0; c < cpts_.count(); ++c) {
      for (int k = 0; k < kNumPools; ++k) {
        RtrPool& p = pools_[c * kNumPools + static_cast<unsigned>(k)];
        int n = per_cpt(want[k], cpts_.count());
        p.credits += n - p.nbuffers;  // waiters beyond the old size are served as buffers come back
        p.nbuffers = n;
        p.min_credits = std::min(p.min_credits, p.credits);
      }
    }
  }
  return {};
}

BufferConfig Core::buffers() const {
  std::lock_guard g(config_mutex_);
  return buffers_;
}

Status Core::set_routing(bool on) {
  std::lock_guard g(config_mutex_);
  if (on == routing_.load()) return {};
  if (on) {
    ExclusiveLock x(net_locks_);
    int want[kNumPools] = {buffers_.tiny, buffers_.small, buffers_.large};
    for (unsigned c = 0; c < cpts_.count(); ++c) {
      for (int k = 0; k < kNumPools; ++k) {
        RtrPool& p = pools_[c * kNumPools + static_cast<unsigned>(k)];
        int n = per_cpt(want[k], cpts_.count());
        p.npages = kRtrPoolPages[k];
        p.credits += n - p.nbuffers;
        p.nbuffers = n;
        p.min_credits = p.credits;
      }
    }
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
    std::lock_guard g(locks[c]);
    for (int k = 0; k < kNumPools; ++k) {
      const RtrPool& p = pools_[c * kNumPools + static_cast<unsigned>(k)];
      out[c].pools[k] = RouterPoolInfo{kRtrPoolPages[k], p.nbuffers, p.credits, p.min_credits};
    }
  }
  return out;
}

// ---------------------------------------------------------------- router checker

void Core::check_routers() {
  const RouteTable* t = routes_.load(std::memory_order_acquire);
  if (!t) return;
  std::set<Nid> gateways;
  for (const auto& e : t->routes) gateways.insert(e.cfg.gateway);
  GlobalTunables gt = globals();
  for (Nid gw : gateways) {
    if (stopping_.load()) return;
    auto r = ping(ProcessId{gw, kPidLustre}, std::chrono::seconds(gt.router_ping_timeout), 64);
    bool alive = r.ok();
    std::set<NetId> up_nets;
    bool routes_through = false;
    if (alive) {
      routes_through = !(r->info.features & kPingFeatRteDisabled);
      for (const NiStatus& ns : r->info.nis)
        if (ns.status == kNiStatusUp) up_nets.insert(ns.nid.net());
    }
    {
      std::lock_guard g(net_locks_[cpts_.of_nid(gw)]);
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
  std::unique_lock lk(checker_mutex_);
  while (!stopping_.load()) {
    int interval = globals().alive_router_check_interval;
    if (interval <= 0) {
      checker_cv_.wait(lk);
      continue;
    }
    if (checker_cv_.wait_for(lk, std::chrono::seconds(interval), [&] { return stopping_.load(); })) break;
    lk.unlock();
    check_routers();
    lk.lock();
  }
}

}  // namespace lnet::core
