// The send path: PUT and GET commit their MD, pick a local NI and a peer NI (multi-rail
// selection), take a peer credit then an NI credit (queueing when either goes negative)
// and hand the message to the NI's driver.
#include <sched.h>

#include <algorithm>
#include <tuple>

#include "core/core.hpp"
#include "select/selection.hpp"

namespace lnet::core {

Message* Core::new_request(MdHandle mdh, MsgType type, ProcessId target, unsigned portal, std::uint64_t match_bits,
                           std::uint32_t offset, int* rc) {
  *rc = portal >= kMaxPortals || target.nid.is_any() ? -EINVAL : 0;
  if (*rc) return nullptr;
  Message* msg = new_msg(cpts_.current());
  if ((*rc = portals_->commit_send(mdh, msg, kMaxPayload))) {
    free_msg(msg);
    return nullptr;
  }
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
  if (int rc = send(self, msg, msg->target.nid)) {
    msg->health = HealthStatus::LocalError;
    finalize(msg, rc);  // reported through the SEND event, as LNetPut/LNetGet do
  }
}

int Core::put(Nid self, MdHandle mdh, AckReq ack, ProcessId target, unsigned portal, std::uint64_t match_bits,
              std::uint32_t offset, std::uint64_t hdr_data) {
  int rc;
  Message* msg = new_request(mdh, MsgType::Put, target, portal, match_bits, offset, &rc);
  if (!msg) return rc;
  Header& h = msg->hdr;
  h.payload_length = msg->len;
  h.msg.put.ack_wmd = ack == AckReq::Ack ? WireHandle{portals_->interface_cookie(), mdh.cookie} : WireHandle::none();
  h.msg.put.match_bits = match_bits;
  h.msg.put.hdr_data = hdr_data;
  h.msg.put.ptl_index = portal;
  h.msg.put.offset = offset;
  msg->ev.hdr_data = hdr_data;
  launch(self, msg);
  return 0;
}

int Core::get(Nid self, MdHandle mdh, ProcessId target, unsigned portal, std::uint64_t match_bits,
              std::uint32_t offset) {
  int rc;
  Message* msg = new_request(mdh, MsgType::Get, target, portal, match_bits, offset, &rc);
  if (!msg) return rc;
  Header& h = msg->hdr;
  h.payload_length = 0;
  h.msg.get.return_wmd = WireHandle{portals_->interface_cookie(), mdh.cookie};
  h.msg.get.match_bits = match_bits;
  h.msg.get.ptl_index = portal;
  h.msg.get.src_offset = offset;
  h.msg.get.sink_length = msg->len;
  msg->len = 0;  // a GET carries no payload; the MD is the REPLY's sink
  launch(self, msg);
  return 0;
}

int Core::send_local(Message* msg, Nid dst) {
  msg->txni = lo_ni_;
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
  counters_.add(msg->cpt, kSendCount);
  counters_.add(msg->cpt, kSendLength, msg->len);
  ni_send(msg);
  return 0;
}

int Core::send(Nid self, Message* msg, Nid dst) {
  if (!started_.load(std::memory_order_acquire) || stopping_.load(std::memory_order_relaxed)) return -ESHUTDOWN;
  Ni* src_ni = nullptr;
  if (!self.is_any()) {
    src_ni = find_ni(self);
    if (!src_ni) return -EINVAL;  // not one of our NIDs
  }
  bool forward = msg->routing;
  if (!forward && (dst == Nid::lo() || find_ni(dst))) return send_local(msg, dst);
  if (dst.is_lo()) return -EHOSTUNREACH;  // 0@lo is the only loopback NID

  unsigned cpt = cpts_.of_nid(dst);
  std::unique_lock lk(net_locks_[cpt]);
  for (;;) {
    PeerNi* lpni = peers_.find(dst);
    if (!lpni) {
      // First message to this NID: make its peer (a configuration change, all CPTs).
      lk.unlock();
      {
        ExclusiveLock x(net_locks_);
        if (!peers_.find(dst)) {
          if (peers_.add_ni(dst, dst, false, peer_credits_for(dst.net()), peer_rtr_credits_for(dst.net())) == 0)
            udsp_new_peer_ni(peers_.find(dst));
        }
      }
      lk.lock();
      continue;
    }
    Path path;
    if (int rc = select_path_locked(cpt, msg, src_ni, lpni, path)) return rc;
    if (path.lpni->cpt != cpt) {
      // Credits of the chosen peer NI live under its own CPT lock.
      std::uint64_t gen = config_gen_.load(std::memory_order_relaxed);
      lk.unlock();
      cpt = path.lpni->cpt;
      lk = std::unique_lock(net_locks_[cpt]);
      if (config_gen_.load(std::memory_order_relaxed) != gen) continue;
    }
    msg->txni = path.ni;
    msg->txpeer = path.lpni;
    if (!forward) {  // a forwarded message keeps its source
      msg->hdr.src_nid = path.ni->nid;
      msg->hdr.src_pid = pid_;
    }
    msg->hdr.dest_nid = path.dest;
    msg->next_hop = path.lpni->nid;
    if (msg->ev.type == EventType::Send) {  // not the event of a request we answer
      msg->ev.initiator = msg->ev.source = ProcessId{path.ni->nid, pid_};
      msg->ev.sender = path.ni->nid;
    }
    msg->cpt = cpt;  // credits of the peer NI's CPT from here on
    msg->tx_committed = true;
    counters_.add(cpt, forward ? kRouteCount : kSendCount);
    counters_.add(cpt, forward ? kRouteLength : kSendLength, msg->len);
    if (stopping_.load(std::memory_order_relaxed)) return -ESHUTDOWN;  // shutdown drains the queues
    bool now = post_send_locked(msg);
    lk.unlock();
    if (now) ni_send(msg);
    return 0;
  }
}

Ni* Core::best_ni_on(const NetView& net, unsigned cpt) {
  const auto& nis = net.nis;
  if (nis.empty()) return nullptr;
  if (nis.size() == 1) {
    Ni* ni = nis.front();
    return ni->fatal_error.load(std::memory_order_relaxed) || !ni->up.load(std::memory_order_relaxed) ? nullptr : ni;
  }
  unsigned cpu = 0, node = 0;
  (void)getcpu(&cpu, &node);
  int best = select::best_local_ni(
      static_cast<int>(nis.size()),
      [&](int i) {
        Ni* ni = nis[static_cast<std::size_t>(i)];
        select::LocalNiScore s;
        s.fatal = ni->fatal_error.load(std::memory_order_relaxed) || !ni->up.load(std::memory_order_relaxed);
        s.health = ni->health.load(std::memory_order_relaxed);
        s.priority = ni->sel_priority.load(std::memory_order_relaxed);
        s.dev_prio = ni->dev_prio;
        s.numa_distance = ni->numa_node < 0 || ni->numa_node == static_cast<int>(node) ? 0 : 1;
        s.credits = ni->tq[cpt].credits;
        s.seq = ni->seq.load(std::memory_order_relaxed);
        return s;
      },
      numa_range());
  Ni* ni = nis[static_cast<std::size_t>(best)];
  if (ni->fatal_error.load(std::memory_order_relaxed) || !ni->up.load(std::memory_order_relaxed)) return nullptr;
  ni->seq.fetch_add(1, std::memory_order_relaxed);
  return ni;
}

PeerNi* Core::best_peer_ni_on(PeerNet* pn, Ni* ni) {
  const auto& lpnis = pn->nis;
  int best = select::best_peer_ni(static_cast<int>(lpnis.size()), [&](int i) {
    PeerNi* p = lpnis[static_cast<std::size_t>(i)];
    select::PeerNiScore s;
    s.health = p->health.load(std::memory_order_relaxed);
    s.priority = p->sel_priority.load(std::memory_order_relaxed);
    s.preferred = std::find(p->pref_local.begin(), p->pref_local.end(), ni->nid) != p->pref_local.end();
    s.credits = p->tx_credits.load(std::memory_order_relaxed);
    s.seq = p->seq.load(std::memory_order_relaxed);
    return s;
  });
  if (best < 0) return nullptr;
  PeerNi* p = lpnis[static_cast<std::size_t>(best)];
  p->seq.fetch_add(1, std::memory_order_relaxed);
  return p;
}

int Core::select_route_locked(unsigned cpt, Ni* src_ni, Nid dst, Path& out) {
  // Routes in the order of lnet_compare_routes: priority, hops, gateway health, queued
  // bytes, credits, then round robin.
  const RouteTable* rt = routes_.load(std::memory_order_acquire);
  PeerNi* best = nullptr;
  const RouteEntry* best_r = nullptr;
  const NetView* best_net = nullptr;
  auto key = [](const RouteEntry& r, PeerNi* gw) {
    return std::make_tuple(r.cfg.priority, r.cfg.hops < 0 ? 1 : r.cfg.hops, -gw->health.load(std::memory_order_relaxed),
                           gw->txq_nob.load(std::memory_order_relaxed), -gw->tx_credits.load(std::memory_order_relaxed),
                           gw->seq.load(std::memory_order_relaxed));
  };
  for (std::size_t i = 0; rt && i < rt->routes.size(); ++i) {
    const RouteEntry& r = rt->routes[i];
    if (r.cfg.net != dst.net() || !r.state->up.load(std::memory_order_relaxed)) continue;
    PeerNi* gw = peers_.find(r.cfg.gateway);  // holding one net lock keeps the index still
    if (!gw || !gw->alive.load(std::memory_order_relaxed)) continue;
    const NetView* v = find_net(r.cfg.gateway.net());
    if (!v || (src_ni && src_ni->net->id != v->net->id)) continue;
    if (!best || key(r, gw) < key(*best_r, best)) {
      best = gw;
      best_r = &r;
      best_net = v;
    }
  }
  if (!best) return -EHOSTUNREACH;
  Ni* ni = src_ni ? src_ni : best_ni_on(*best_net, cpt);
  if (!ni) return -EHOSTUNREACH;
  best->seq.fetch_add(1, std::memory_order_relaxed);
  out = {ni, best, dst};
  return 0;
}

int Core::select_path_locked(unsigned cpt, const Message* msg, Ni* src_ni, PeerNi* dst, Path& out) {
  Peer* peer = dst->peer;
  NetId dst_net = dst->nid.net();
  // Responses go back exactly where the request came from; forwarded messages go to
  // the NID their header names.
  bool exact = msg->hdr.type == MsgType::Ack || msg->hdr.type == MsgType::Reply || msg->routing;
  const NetView* local = dst_net.type() == kLoLnd ? nullptr : find_net(dst_net);

  if (exact || (src_ni && !peer->multi_rail)) {
    if (!local) return select_route_locked(cpt, src_ni, dst->nid, out);
    Ni* ni = src_ni;
    if (!ni || ni->net->id != dst_net) ni = best_ni_on(*local, cpt);
    if (!ni) return -EHOSTUNREACH;
    out = {ni, dst, dst->nid};
    return 0;
  }
  if (src_ni) {
    for (auto& pn : peer->nets) {
      if (pn->net != src_ni->net->id) continue;
      PeerNi* p = best_peer_ni_on(pn.get(), src_ni);
      out = {src_ni, p, p ? p->nid : Nid::any()};
      return p ? 0 : -EHOSTUNREACH;
    }
    return select_route_locked(cpt, src_ni, dst->nid, out);
  }
  if (!peer->multi_rail) {
    // A non-multi-rail peer always hears from the same local NI.
    if (!local) return select_route_locked(cpt, nullptr, dst->nid, out);
    Ni* ni = dst->pref_ni;
    if (!ni || ni->fatal_error.load(std::memory_order_relaxed) || !ni->up.load(std::memory_order_relaxed)) {
      ni = best_ni_on(*local, cpt);
      if (!ni) return -EHOSTUNREACH;
      dst->pref_ni = ni;
    }
    out = {ni, dst, dst->nid};
    return 0;
  }
  // Multi-rail: the best local NI over every peer net we share, then the best peer NI
  // on that net for it.
  PeerNet* best_pn = nullptr;
  Ni* best_ni = nullptr;
  std::uint32_t best_prio[2] = {UINT_MAX, UINT_MAX};
  select::LocalNiScore best_score;
  unsigned cpu = 0, node = 0;
  (void)getcpu(&cpu, &node);
  for (auto& pn : peer->nets) {
    const NetView* net = pn->net.type() == kLoLnd ? nullptr : find_net(pn->net);
    if (!net) continue;
    std::uint32_t prio[2] = {pn->sel_priority, net->net->sel_priority.load(std::memory_order_relaxed)};
    if (best_ni && std::lexicographical_compare(best_prio, best_prio + 2, prio, prio + 2)) continue;
    bool better_net = !best_ni || std::lexicographical_compare(prio, prio + 2, best_prio, best_prio + 2);
    for (Ni* ni : net->nis) {
      select::LocalNiScore s;
      s.fatal = ni->fatal_error.load(std::memory_order_relaxed) || !ni->up.load(std::memory_order_relaxed);
      if (s.fatal) continue;
      s.health = ni->health.load(std::memory_order_relaxed);
      s.priority = ni->sel_priority.load(std::memory_order_relaxed);
      s.dev_prio = ni->dev_prio;
      s.numa_distance = ni->numa_node < 0 || ni->numa_node == static_cast<int>(node) ? 0 : 1;
      s.credits = ni->tq[cpt].credits;
      s.seq = ni->seq.load(std::memory_order_relaxed);
      if (!best_ni || better_net || select::compare_local_ni(s, best_score, numa_range()) < 0) {
        best_ni = ni;
        best_pn = pn.get();
        best_score = s;
        best_prio[0] = prio[0];
        best_prio[1] = prio[1];
        better_net = false;
      }
    }
  }
  if (!best_ni) return select_route_locked(cpt, nullptr, dst->nid, out);
  best_ni->seq.fetch_add(1, std::memory_order_relaxed);
  PeerNi* lpni = best_peer_ni_on(best_pn, best_ni);
  if (!lpni) return -EHOSTUNREACH;
  out = {best_ni, lpni, lpni->nid};
  return 0;
}

bool Core::post_send_locked(Message* msg) {
  PeerNi* lpni = msg->txpeer;
  TxQueue& tq = msg->txni->tq[msg->cpt];
  if (!msg->peer_tx_credit) {
    msg->peer_tx_credit = true;
    lpni->txq_nob.fetch_add(msg->len + kHeaderSize, std::memory_order_relaxed);
    int c = lpni->tx_credits.fetch_sub(1, std::memory_order_relaxed) - 1;
    lpni->min_tx_credits = std::min(lpni->min_tx_credits, c);
    if (c < 0) {
      msg->tx_delayed = true;
      lpni->txq.push_back(msg);
      return false;
    }
  }
  if (!msg->tx_credit) {
    msg->tx_credit = true;
    int c = --tq.credits;
    tq.min_credits = std::min(tq.min_credits, c);
    if (c < 0) {
      msg->tx_delayed = true;
      tq.delayed.push_back(msg);
      return false;
    }
  }
  return true;
}

void Core::return_credits_locked(Message* msg, MsgQueue& to_send) {
  PeerNi* lpni = msg->txpeer;
  TxQueue& tq = msg->txni->tq[msg->cpt];
  if (msg->tx_credit) {
    msg->tx_credit = false;
    if (++tq.credits <= 0) {
      // The head waiter already holds its peer credit: it can go.
      if (Message* next = tq.delayed.pop_front()) to_send.push_back(next);
    }
  }
  if (msg->peer_tx_credit) {
    msg->peer_tx_credit = false;
    lpni->txq_nob.fetch_sub(msg->len + kHeaderSize, std::memory_order_relaxed);
    int c = lpni->tx_credits.fetch_add(1, std::memory_order_relaxed) + 1;
    if (c <= 0) {
      if (Message* next = lpni->txq.pop_front()) {
        if (post_send_locked(next)) to_send.push_back(next);
      }
    }
  }
}

void Core::ni_send(Message* msg) {
  Ni* ni = msg->txni;
  ni->stats.add(TypeStats::kSent, msg->hdr.type);
  if (msg->txpeer) msg->txpeer->stats.add(TypeStats::kSent, msg->hdr.type);
  int rc = ni->lnd->send(*ni, *msg);  // msg may be finalized and gone once this returns 0
  if (rc < 0) {
    msg->health = HealthStatus::LocalError;
    finalize(msg, rc);
  }
}

}  // namespace lnet::core
