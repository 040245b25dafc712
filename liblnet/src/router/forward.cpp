// Forwarding on a router: a message for another node takes a router credit of the peer
// it came from and a buffer of the pool that fits it (both may queue), is received into
// the buffer, and is sent on towards its destination with its header unchanged.
#include <time.h>

#include <lnet/log.hpp>

#include "router/router.hpp"

#include <lnet/mutex.hpp>

namespace lnet::router {

namespace {

// Seconds on the monotonic clock at its tick resolution: peer aliveness counts seconds.
std::int64_t coarse_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec);
}

}  // namespace

int Router::parse_forward(Ni& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req) {
  unsigned cpt = st_.cpts.of_nid(from);
  auto reject = [&]() {
    st_.counters.add(cpt, kErrors);
    st_.counters.add(cpt, kDropCount);
    st_.counters.add(cpt, kDropLength, hdr.payload_length);
    ni.stats.add(TypeStats::kDropped, hdr.type);
    return -EPROTO;
  };
  // Something on our own net should have been sent to its NID directly.
  if (hdr.dest_nid.net() == ni.nid.net() || st_.is_local_nid(hdr.dest_nid)) return reject();
  if (rdma_req && hdr.type == MsgType::Get) return reject();
  if (!st_.routing.load(std::memory_order_relaxed) || &ni == st_.lo_ni) {
    // Not a router: drop what is not ours.
    st_.counters.add(cpt, kDropCount);
    st_.counters.add(cpt, kDropLength, hdr.payload_length);
    ni.stats.add(TypeStats::kDropped, hdr.type);
    (void)ni.lnd->recv(ni, lnd_private, nullptr, false, nullptr, 0, 0, 0, hdr.payload_length);
    return 0;
  }
  PeerNi* rxpeer = st_.peer_ni_for(from);
  if (!rxpeer) return reject();
  note_alive(ni, rxpeer);
  health_.note_received_from(rxpeer);
  Message* msg = host_.new_msg(cpt);
  msg->receiving = true;
  msg->routing = true;
  msg->rxni = &ni;
  msg->from = from;
  msg->lnd_private = lnd_private;
  msg->hdr = hdr;
  msg->target = ProcessId{hdr.dest_nid, hdr.dest_pid};
  msg->rxpeer = rxpeer;
  msg->rtr_cpt = rxpeer->cpt;
  ni.stats.add(TypeStats::kReceived, hdr.type);
  rxpeer->stats.add(TypeStats::kReceived, hdr.type);
  forward(msg);
  return 0;
}

void Router::note_alive(Ni& ni, PeerNi* lpni) {
  if (!st_.routing.load(std::memory_order_relaxed)) return;
  std::int64_t now = coarse_seconds();
  lpni->last_alive.store(now, std::memory_order_relaxed);
  if (ni.last_rx.load(std::memory_order_relaxed) != now) ni.last_rx.store(now, std::memory_order_relaxed);
}

void Router::link_up(Ni& n) {
  n.last_rx.store(coarse_seconds(), std::memory_order_relaxed);
  if (st_.routing.load(std::memory_order_relaxed) && n.silent.load()) check_ni_liveness();
}

void Router::check_ni_liveness() {
  // A router's NI that has heard nothing for router_ping_timeout + the check interval
  // is reported down in its ping info (seed 003; the pings of its peers on that side
  // would have kept it alive), so the gateways' users apply avoid_asym_router_failure;
  // an NI whose driver knows its link is alive (a proxy attached to the UP LND) is not.
  // The router itself still uses it (as LNet: the status is what peers are told).
  int interval = st_.tun.alive_router_check_interval.load(std::memory_order_relaxed);
  if (interval <= 0) return;
  std::int64_t now = coarse_seconds(), limit = st_.tun.router_ping_timeout.load(std::memory_order_relaxed) + interval;
  bool changed = false;
  for (Ni* ni : st_.nets().nis) {
    if (ni == st_.lo_ni || ni->deleted.load()) continue;
    bool silent = now - ni->last_rx.load(std::memory_order_relaxed) > limit &&
                  !(ni->net && ni->net->lnd && ni->net->lnd->link_alive(*ni));
    if (ni->silent.exchange(silent) == silent) continue;
    changed = true;
    if (silent)
      LNET_LOG(Warn, kLogRouter, "%s has heard nothing for %lld s: reported down", ni->nid.to_string().c_str(),
               static_cast<long long>(limit));
    else
      LNET_LOG(Warn, kLogRouter, "%s hears again: reported up", ni->nid.to_string().c_str());
  }
  if (changed) host_.ping_info_changed();  // the new status, pushed to the peers
}

bool Router::next_hop_alive(const Message* msg, const PeerNi* lpni) const {
  // LNet's peer aliveness on routers: responses always go, and a userspace target is
  // not judged; otherwise a next hop that has sent us nothing for its net's
  // peer_timeout goes only while its driver does not report it down.
  if (msg->hdr.type == MsgType::Ack || msg->hdr.type == MsgType::Reply) return true;
  if (msg->target.pid & kPidUserFlag) return true;
  const net::NetView* v = st_.find_net(lpni->nid.net());
  int timeout = v && !v->nis.empty() ? v->nis.front()->config.tunables.peer_timeout : 0;
  if (timeout <= 0) return true;
  if (coarse_seconds() - lpni->last_alive.load(std::memory_order_relaxed) < timeout) return true;
  return lpni->alive.load(std::memory_order_relaxed);
}

bool Router::take_resources_locked(Message* msg) {
  PeerNi* lp = msg->rxpeer;
  if (!msg->rtr_credit) {
    msg->rtr_credit = true;
    if (--lp->rtr_credits < lp->min_rtr_credits) lp->min_rtr_credits = lp->rtr_credits;
    if (lp->rtr_credits < 0) {
      lp->rtrq.push_back(msg);
      return false;
    }
  }
  int kind = net::pool_for(msg->hdr.payload_length);
  net::RtrPool& pool = buffers_.pool(msg->rtr_cpt, kind);
  if (msg->rtr_pool < 0) {
    msg->rtr_pool = kind;
    if (--pool.credits < pool.min_credits) pool.min_credits = pool.credits;
    if (pool.credits < 0) {
      pool.waiting.push_back(msg);
      return false;
    }
  }
  msg->rtrbuf = buffers_.take(pool, kind);  // made the first time it is needed
  return true;
}

void Router::recv(Message* msg) {
  std::uint32_t len = msg->hdr.payload_length;
  Ni* ni = msg->rxni;
  msg->memory = kHostMemory;  // router buffers live as long as the host
  int rc = ni->lnd->recv(*ni, msg->lnd_private, msg, msg->rx_delayed, &msg->rtrbuf->iov, 1, 0, len, len);
  if (rc < 0) {
    msg->health = HealthStatus::LocalError;
    host_.finalize(msg, rc);
  }
}

void Router::drain_waiting(Fifo<FifoLink>& to) {
  for (unsigned c = 0; c < st_.cpts.count(); ++c)
    for (int k = 0; k < net::kNumPools; ++k) to.splice(buffers_.pool(c, k).waiting);
}

void Router::forward(Message* msg) {
  bool ready;
  {
    MutexLock g(st_.locks[msg->rtr_cpt]);
    ready = take_resources_locked(msg);
  }
  // When it waits, the driver keeps the payload until a credit or a buffer comes back.
  if (ready) recv(msg);
}

void Router::forward_received(Message* msg) {
  msg->receiving = false;
  msg->sending = true;
  msg->iov = &msg->rtrbuf->iov;
  msg->niov = 1;
  msg->memory = kHostMemory;
  msg->offset = 0;
  msg->len = msg->hdr.payload_length;
  if (int rc = host_.send(Nid::any(), msg, msg->hdr.dest_nid)) {
    if (msg->health == HealthStatus::Ok) msg->health = HealthStatus::LocalNoRoute;
    if (rc == -EHOSTUNREACH) no_route_onward(*msg);
    host_.finalize(msg, rc);
  }
}

// A peer routes a net through us that we cannot reach (its route table names a net we
// have no NI on and no route to: a kernel peer's route to a net we cannot name, say).
// Nothing tells the sender; this line tells the operator, at most every ten seconds.
void Router::no_route_onward(const Message& msg) {
  static LogLimiter limit(std::chrono::seconds(10));
  std::uint64_t held = 0;
  if (!limit.allow(&held)) return;
  std::string also = held ? " (" + std::to_string(held) + " more like it since the last line)" : "";
  LNET_LOG(Warn, kLogRouter,
           "dropped a %s from %s for %s: this router reaches no %s (no NI there, no route), yet %s "
           "sent it here to be routed%s",
           msg_type_name(msg.hdr.type), msg.hdr.src_nid.to_string().c_str(), msg.target.to_string().c_str(),
           msg.hdr.dest_nid.net().to_string().c_str(), msg.from.to_string().c_str(), also.c_str());
}

std::uintptr_t Router::keep_buffer(Message* msg) {
  MutexLock g(st_.locks[msg->rtr_cpt]);
  net::RtrBuffer* b = msg->rtrbuf;
  if (!b || msg->rtr_pool < 0) return 0;
  msg->rtrbuf = nullptr;
  b->kept_cpt = msg->rtr_cpt;
  b->kept_kind = msg->rtr_pool;
  return reinterpret_cast<std::uintptr_t>(b) | kBufferToken;
}

void Router::release_buffer(std::uintptr_t token) {
  auto* b = reinterpret_cast<net::RtrBuffer*>(token & ~kBufferToken);
  MutexLock g(st_.locks[b->kept_cpt]);
  buffers_.give(buffers_.pool(b->kept_cpt, b->kept_kind), b);
}

void Router::release_resources(Message* msg) {
  MsgQueue ready;
  {
    MutexLock g(st_.locks[msg->rtr_cpt]);
    if (msg->rtr_pool >= 0) {
      net::RtrPool& pool = buffers_.pool(msg->rtr_cpt, msg->rtr_pool);
      if (msg->rtrbuf) {
        buffers_.give(pool, msg->rtrbuf);
        msg->rtrbuf = nullptr;
      }
      msg->rtr_pool = -1;
      if (++pool.credits <= 0) {
        if (FifoLink* l = pool.waiting.pop_front()) {
          Message* w = as_message(l);
          if (take_resources_locked(w)) ready.push_back(w);
        }
      }
    }
    if (msg->rtr_credit) {
      msg->rtr_credit = false;
      PeerNi* lp = msg->rxpeer;
      if (++lp->rtr_credits <= 0) {
        if (FifoLink* l = lp->rtrq.pop_front()) {
          Message* w = as_message(l);
          if (take_resources_locked(w)) ready.push_back(w);
        }
      }
    }
  }
  while (Message* w = ready.pop_front()) recv(w);
}

}  // namespace lnet::router
