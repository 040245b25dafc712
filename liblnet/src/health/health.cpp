// Health (lnet-facts §5.3): the outcome of every sent message moves the health of the
// local NI and the peer NI it used. Success raises the local NI by health_sensitivity
// (up to 1000); a peer NI rises only when heard from (note_received_from; a gateway's, or
// on a router, to 1000); a failure lowers the one its health status blames. Selection
// prefers the healthier NIs (net/selection.cpp). Also resend and response timeouts.
#include "health/health.hpp"
#include "base/clock.hpp"

#include <algorithm>

namespace lnet::health {

namespace {

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

bool Health::remote_applies(const PeerNi* lpni) const {
  // A peer with one NI has nothing to choose between, unless it is a gateway or this
  // node routes (facts §5.3).
  return st_.routing.load(std::memory_order_relaxed) || st_.peer_ni_count(lpni) > 1 || st_.is_gateway(lpni);
}

void Health::account(const Message* msg) {
  int by = st_.tun.health_sensitivity.load(std::memory_order_relaxed);
  Ni* ni = msg->txni;
  if (ni && ni->nid.is_lo()) ni = nullptr;  // the loopback NI has no health
  PeerNi* lpni = msg->txpeer;
  if (msg->status == 0) {
    // A send that completed proves the local NI works; that the peer NI does is proved
    // only by hearing from it (note_received_from): a driver may complete a send into a
    // connection that is already dead (as LNet, facts §5.3).
    if (by && ni) raise(ni->health, by);
    return;
  }
  HealthStatus h = msg->health == HealthStatus::Ok ? HealthStatus::LocalError : msg->health;
  // LOCAL_* blame the local NI, REMOTE_* the peer NI, NETWORK_TIMEOUT both.
  bool remote = h >= HealthStatus::RemoteError;
  bool local = !remote || h == HealthStatus::NetworkTimeout;
  if (local && ni) ni->failures.add(h);
  if (remote && lpni) lpni->failures.add(h);
  if (local && ni && by) {
    lower(ni->health, by);
    queue(ni);
  }
  if (remote && lpni) lower_peer_ni(lpni);
}

void Health::lower_peer_ni(PeerNi* lpni) {
  // A gateway's routes may set what a failure costs it (LNet's route health_sensitivity).
  unsigned own = lpni->peer->health_sensitivity.load(std::memory_order_relaxed);
  int by = own ? static_cast<int>(own) : st_.tun.health_sensitivity.load(std::memory_order_relaxed);
  if (by == 0 || !remote_applies(lpni)) return;
  lower(lpni->health, by);
  queue(lpni);
}

// A failed PUT or GET of ours goes again, on the path selection now prefers (the failure
// lowered the health of the NI it blamed), when the failure says another path may work
// (facts §5.3): a local failure while this node has another NI, a remote drop while the
// peer has another NI; at most retry_count times and never past its deadline.
bool Health::may_resend(const Message* msg) const {
  if (msg->deadline_ns == 0 || msg->routing || msg->recovery || st_.stopping.load(std::memory_order_relaxed))
    return false;
  int retries = st_.tun.retry_count.load(std::memory_order_relaxed);
  if (retries == 0 || st_.tun.health_sensitivity.load(std::memory_order_relaxed) == 0) return false;
  if (msg->retries >= static_cast<unsigned>(retries) || steady_now_ns() >= msg->deadline_ns) return false;
  switch (msg->health) {
    case HealthStatus::LocalInterrupt:
    case HealthStatus::LocalDropped:
    case HealthStatus::LocalAborted:
    case HealthStatus::LocalNoRoute:
    case HealthStatus::LocalTimeout: return st_.nets().nis.size() > 2;  // besides 0@lo
    case HealthStatus::RemoteDropped: return msg->txpeer && st_.peer_ni_count(msg->txpeer) > 1;
    default: return false;
  }
}

// A response that never came counts against the peer NI the request last went to, as a
// remote failure would (facts §5.3).
void Health::response_timed_out(Nid next_hop) {
  st_.counters.add(next_hop.is_any() ? 0 : st_.cpts.of_nid(next_hop), kResponseTimeout);
  if (next_hop.is_any()) return;  // sent to ourselves, or never handed to a driver
  if (PeerNi* lpni = st_.find_peer_ni(next_hop)) lower_peer_ni(lpni);
}

void Health::note_received_from(PeerNi* lpni) {
  int by = st_.tun.health_sensitivity.load(std::memory_order_relaxed);
  if (by == 0 || lpni->health.load(std::memory_order_relaxed) >= kMaxHealth) return;  // the common case
  // A router (or this node routing) is taken as fully healthy once heard from.
  if (st_.routing.load(std::memory_order_relaxed) || st_.is_gateway(lpni))
    lpni->health.store(kMaxHealth, std::memory_order_relaxed);
  else
    raise(lpni->health, by);
  // One that aged out of recovery (recovery_limit) goes on recovering once it speaks.
  if (lpni->health.load(std::memory_order_relaxed) < kMaxHealth) queue(lpni);
}

}  // namespace lnet::health
