// Health (lnet-facts §5.3): the outcome of every sent message moves the health of the
// local NI and the peer NI it used. Success raises both by health_sensitivity (up to
// 1000; a router sets the peer NI's to 1000); a failure lowers the one its health
// status blames. Selection prefers the healthier NIs (net/selection.cpp).
#include "core/core.hpp"

#include <algorithm>

namespace lnet::core {

namespace {

constexpr int kMaxHealth = 1000;

void raise(std::atomic<int>& h, int by) {
  int v = h.load(std::memory_order_relaxed);
  if (v < kMaxHealth) h.store(std::min(kMaxHealth, v + by), std::memory_order_relaxed);
}

void lower(std::atomic<int>& h, int by) {
  int v = h.load(std::memory_order_relaxed);
  while (v > 0 && !h.compare_exchange_weak(v, std::max(0, v - by), std::memory_order_relaxed)) {
  }
}

}  // namespace

bool Core::remote_health_applies(const PeerNi* lpni) const {
  // A peer with one NI has nothing to choose between, unless it is a gateway or this
  // node routes (facts §5.3).
  if (routing()) return true;
  std::size_t nis = 0;
  for (const auto& pn : lpni->peer->nets) nis += pn->nis.size();
  if (nis > 1) return true;
  const net::RouteTable* rt = routes_.table();
  for (std::size_t i = 0; rt && i < rt->routes.size(); ++i)
    if (rt->routes[i].cfg.gateway == lpni->nid) return true;
  return false;
}

void Core::account_health(Message* msg) {
  int by = health_sensitivity_.load(std::memory_order_relaxed);
  Ni* ni = msg->txni;
  if (ni && ni->nid.is_lo()) ni = nullptr;  // the loopback NI has no health
  PeerNi* lpni = msg->txpeer;
  if (msg->status == 0) {
    if (by == 0) return;
    if (ni) raise(ni->health, by);
    if (lpni) {
      if (routing())
        lpni->health.store(kMaxHealth, std::memory_order_relaxed);
      else
        raise(lpni->health, by);
    }
    return;
  }
  HealthStatus h = msg->health == HealthStatus::Ok ? HealthStatus::LocalError : msg->health;
  bool local = false, remote = false;
  switch (h) {
    case HealthStatus::Ok: break;
    case HealthStatus::LocalInterrupt:
      if (ni) ni->health_counts.interrupts.fetch_add(1, std::memory_order_relaxed);
      local = true;
      break;
    case HealthStatus::LocalDropped:
      if (ni) ni->health_counts.dropped.fetch_add(1, std::memory_order_relaxed);
      local = true;
      break;
    case HealthStatus::LocalAborted:
      if (ni) ni->health_counts.aborted.fetch_add(1, std::memory_order_relaxed);
      local = true;
      break;
    case HealthStatus::LocalNoRoute:
      if (ni) ni->health_counts.no_route.fetch_add(1, std::memory_order_relaxed);
      local = true;
      break;
    case HealthStatus::LocalTimeout:
      if (ni) ni->health_counts.timeouts.fetch_add(1, std::memory_order_relaxed);
      local = true;
      break;
    case HealthStatus::LocalError:
      if (ni) ni->health_counts.error.fetch_add(1, std::memory_order_relaxed);
      local = true;
      break;
    case HealthStatus::RemoteDropped:
      if (lpni) lpni->hc_dropped.fetch_add(1, std::memory_order_relaxed);
      remote = true;
      break;
    case HealthStatus::RemoteError:
      if (lpni) lpni->hc_error.fetch_add(1, std::memory_order_relaxed);
      remote = true;
      break;
    case HealthStatus::RemoteTimeout:
      if (lpni) lpni->hc_timeout.fetch_add(1, std::memory_order_relaxed);
      remote = true;
      break;
    case HealthStatus::NetworkTimeout:
      if (lpni) lpni->hc_network_timeout.fetch_add(1, std::memory_order_relaxed);
      local = remote = true;
      break;
  }
  if (by == 0) return;
  if (local && ni) lower(ni->health, by);
  if (remote && lpni && remote_health_applies(lpni)) lower(lpni->health, by);
}

void Core::note_received_from(PeerNi* lpni) {
  int by = health_sensitivity_.load(std::memory_order_relaxed);
  if (by) raise(lpni->health, by);
}

}  // namespace lnet::core
