// The send path: PUT and GET commit their MD, pick a local NI and a peer NI (multi-rail
// selection), take a peer credit then an NI credit (queueing when either goes negative)
// and hand the message to the NI's driver.
#include <sched.h>

#include <algorithm>

#include <lnet/log.hpp>

#include "base/clock.hpp"
#include "core/core.hpp"

namespace lnet::core {

Message* Core::new_request(MdHandle mdh, MsgType type, bool response, ProcessId target, unsigned portal,
                           std::uint64_t match_bits, std::uint32_t offset, int* rc) {
  *rc = portal >= kMaxPortals || target.nid.is_any() ? -EINVAL : 0;
  if (*rc) return nullptr;
  Message* msg = new_msg(st_.cpts.current());
  // Every request of ours has a deadline (resends stop there); its ACK or REPLY is
  // awaited until then when response_tracking says so (pings and pushes always).
  msg->deadline_ns =
      coarse_now_ns() + std::int64_t{st_.tun.transaction_timeout.load(std::memory_order_relaxed)} * kNsPerSec;
  msg->start_ns = steady_now_ns();
  int mode = st_.tun.response_tracking.load(std::memory_order_relaxed);
  bool track = response && (portal == kReservedPortal || (mode & (type == MsgType::Get ? 1 : 2)));
  if ((*rc = portals_.commit_send(mdh, msg, kMaxPayload, track ? msg->deadline_ns : 0))) {
    free_msg(msg);
    return nullptr;
  }
  if (track) health_.wake();
  msg->iov = msg->md->iov;  // the MD does not change while the message holds it
  msg->niov = msg->md->niov;
  msg->memory = msg->md->memory();
  msg->offset = 0;
  msg->len = msg->md->length;
  msg->hdr.type = type;
  msg->hdr.dest_pid = target.pid;
  msg->target = target;
  msg->sending = true;
  Event& ev = msg->ev;
  ev.type = EventType::Send;
  ev.target = target;
  ev.pt_index = portal;
  ev.match_bits = match_bits;
  ev.rlength = ev.mlength = msg->len;
  ev.offset = offset;
  ev.msg_type = type;
  return msg;
}

void Core::launch(Nid self, Message* msg) {
  msg->self = self;  // kept by resends
  if (int rc = send(self, msg, msg->target.nid)) {
    msg->health = HealthStatus::LocalError;
    finalize(msg, rc);  // reported through the SEND event, as LNetPut/LNetGet do
  }
}

int Core::put(Nid self, MdHandle mdh, AckReq ack, ProcessId target, unsigned portal, std::uint64_t match_bits,
              std::uint32_t offset, std::uint64_t hdr_data) {
  int rc;
  Message* msg = new_request(mdh, MsgType::Put, ack == AckReq::Ack, target, portal, match_bits, offset, &rc);
  if (!msg) return rc;
  Header& h = msg->hdr;
  h.payload_length = msg->len;
  h.msg.put.ack_wmd = ack == AckReq::Ack ? WireHandle{portals_.interface_cookie(), mdh.cookie} : WireHandle::none();
  h.msg.put.match_bits = match_bits;
  h.msg.put.hdr_data = hdr_data;
  h.msg.put.ptl_index = portal;
  h.msg.put.offset = offset;
  msg->ev.hdr_data = hdr_data;
  if (ack == AckReq::Ack) msg->md->rsp_sent_ns.store(msg->start_ns, std::memory_order_relaxed);
  launch(self, msg);
  return 0;
}

int Core::get(Nid self, MdHandle mdh, ProcessId target, unsigned portal, std::uint64_t match_bits, std::uint32_t offset,
              bool recovery) {
  return send_get(self, mdh, target, portal, match_bits, offset, recovery);
}

int Core::send_get(Nid self, MdHandle mdh, ProcessId target, unsigned portal, std::uint64_t match_bits,
                   std::uint32_t offset, bool recovery) {
  int rc;
  Message* msg = new_request(mdh, MsgType::Get, true, target, portal, match_bits, offset, &rc);
  if (!msg) return rc;
  msg->recovery = recovery;
  Header& h = msg->hdr;
  h.payload_length = 0;
  h.msg.get.return_wmd = WireHandle{portals_.interface_cookie(), mdh.cookie};
  h.msg.get.match_bits = match_bits;
  h.msg.get.ptl_index = portal;
  h.msg.get.src_offset = offset;
  h.msg.get.sink_length = msg->len;
  msg->len = 0;  // a GET carries no payload; the MD is the REPLY's sink
  msg->md->rsp_sent_ns.store(msg->start_ns, std::memory_order_relaxed);
  launch(self, msg);
  return 0;
}

int Core::send_local(Message* msg, Nid dst) {
  msg->txni = st_.lo_ni;
  msg->txpeer = nullptr;
  msg->hdr.dest_nid = dst;
  msg->hdr.src_nid = dst;
  msg->hdr.src_pid = pid_;
  msg->next_hop = dst;
  if (msg->ev.type == EventType::Send) {
    msg->ev.initiator = msg->ev.source = ProcessId{dst, pid_};
    msg->ev.sender = dst;
  }
  msg->tx_committed = true;
  st_.counters.add(msg->cpt, kSendCount);
  st_.counters.add(msg->cpt, kSendLength, msg->len);
  ni_send(msg);
  return 0;
}

namespace {

// Moves `lk` from the lock of CPT *cpt to that of `want`: false when the configuration
// changed while no lock was held (the path must be chosen again).
bool relock(net::State& st, std::unique_lock<Mutex>& lk, unsigned* cpt, unsigned want) {
  if (want == *cpt) return true;
  std::uint64_t gen = st.config_gen.load(std::memory_order_relaxed);
  lk.unlock();
  *cpt = want;
  lk = std::unique_lock(st.locks[want]);
  return st.config_gen.load(std::memory_order_relaxed) == gen;
}

}  // namespace

int Core::send(Nid self, Message* msg, Nid dst) {
  if (!started_.load(std::memory_order_acquire) || st_.stopping.load(std::memory_order_relaxed)) return -ESHUTDOWN;
  Ni* src_ni = self.is_any() ? nullptr : st_.find_ni(self);
  if (!self.is_any() && !src_ni) return -EINVAL;  // not one of our NIDs
  bool forward = msg->routing;
  if (!forward && dst == Nid::lo()) return send_local(msg, dst);
  if (!forward && st_.find_ni(dst)) {
    (void)st_.peer_ni_for(dst);  // one of our own NIDs is a peer like any destination
    return send_local(msg, dst);
  }
  if (dst.is_lo()) return -EHOSTUNREACH;  // 0@lo is the only loopback NID

  unsigned cpt = st_.cpts.of_nid(dst);
  // A request of ours waits for the discovery of its peer, or of the gateway a route
  // takes (once: a peer that stays undiscovered with discovery off lets it go).
  bool may_wait = st_.tun.discovery.load(std::memory_order_relaxed) && !peer::Discovery::exempt(msg);
  std::unique_lock lk(st_.locks[cpt]);
  // Hands msg to the discovery of `peer`; true when it is held there.
  auto held_for = [&](Peer* peer) {
    lk.unlock();
    peer::Discovery::Hold h = discovery_.hold(peer, msg);
    if (h == peer::Discovery::Hold::Held) return true;
    may_wait = h == peer::Discovery::Hold::Again;  // Go: no more waiting; Again: the peer merged, look again
    lk.lock();
    return false;
  };
  for (;;) {
    PeerNi* lpni = st_.peers.find(dst);
    if (!lpni) {
      lk.unlock();
      if (!st_.peer_ni_for(dst)) return -ENOMEM;
      lk.lock();
      continue;
    }
    if (may_wait && lpni->peer->dc.state.load(std::memory_order_acquire) != net::DcState::Discovered) {
      if (held_for(lpni->peer)) return 0;
      continue;
    }
    net::Path path;
    if (int rc = selector_.select(query(msg, lpni, src_ni, cpt, may_wait), path)) {
      if (rc != -EAGAIN) return rc;
      if (held_for(path.lpni->peer)) return 0;  // the route's gateway, discovered on first use
      continue;
    }
    if (!relock(st_, lk, &cpt, path.lpni->cpt)) continue;  // the peer NI's credits are under its CPT's lock
    if (forward && !router_.next_hop_alive(msg, path.lpni)) {
      lk.unlock();
      return drop_for_silent_hop(msg, path.lpni, cpt);
    }
    take_path(msg, path, cpt);
    if (st_.stopping.load(std::memory_order_relaxed)) return -ESHUTDOWN;  // shutdown drains the queues
    bool now = msg::take_credits_locked(msg);
    lk.unlock();
    if (now) ni_send(msg);
    return 0;
  }
}

net::Selector::Query Core::query(const Message* msg, PeerNi* dst, Ni* src, unsigned cpt, bool may_wait) const {
  net::Selector::Query q;
  q.cpt = cpt;
  q.nets = &st_.nets();
  q.dst = dst;
  q.src = src;
  // Responses go back exactly where the request came from; forwarded messages go to
  // the NID their header names. So do recovery pings: they probe that one peer NI.
  q.exact = msg->hdr.type == MsgType::Ack || msg->hdr.type == MsgType::Reply || msg->routing || msg->recovery;
  q.numa_range = st_.tun.numa_range.load(std::memory_order_relaxed);
  q.gw_min_health = st_.gateway_min_health();
  q.gw_discovery = may_wait;
  return q;
}

void Core::take_path(Message* msg, const net::Path& path, unsigned cpt) {
  bool forward = msg->routing;
  msg->txni = path.ni;
  msg->txpeer = path.lpni;
  if (!forward) {  // a forwarded message keeps its source
    msg->hdr.src_nid = path.ni->nid;
    msg->hdr.src_pid = pid_;
  }
  msg->hdr.dest_nid = path.dest;
  msg->next_hop = path.lpni->nid;
  portals::PortalTable::note_next_hop(msg, path.lpni->nid);
  if (msg->ev.type == EventType::Send) {  // not the event of a request we answer
    msg->ev.initiator = msg->ev.source = ProcessId{path.ni->nid, pid_};
    msg->ev.sender = path.ni->nid;
  }
  msg->cpt = cpt;  // credits of the peer NI's CPT from here on
  msg->tx_committed = true;
  st_.counters.add(cpt, forward ? kRouteCount : kSendCount);
  st_.counters.add(cpt, forward ? kRouteLength : kSendLength, msg->len);
}

int Core::drop_for_silent_hop(Message* msg, const PeerNi* hop, unsigned cpt) {
  st_.counters.add(cpt, kDropCount);
  st_.counters.add(cpt, kDropLength, msg->len);
  LNET_LOG(Warn, kLogRouter, "dropping a %s for %s: %s has been silent and down for its peer_timeout",
           msg_type_name(msg->hdr.type), msg->target.to_string().c_str(), hop->nid.to_string().c_str());
  msg->health = HealthStatus::RemoteDropped;
  return -EHOSTUNREACH;
}

void Core::ni_send(Message* msg) {
  Ni* ni = msg->txni;
  if (faults_.rules.send_rules() && faults_.on_send(msg)) [[unlikely]]
    return;
  ni->stats.add(TypeStats::kSent, msg->hdr.type);
  if (msg->txpeer) msg->txpeer->stats.add(TypeStats::kSent, msg->hdr.type);
  int rc = ni->lnd->send(*ni, *msg);  // msg may be finalized and gone once this returns 0
  if (rc < 0) {
    msg->health = HealthStatus::LocalError;
    finalize(msg, rc);
  }
}

}  // namespace lnet::core
