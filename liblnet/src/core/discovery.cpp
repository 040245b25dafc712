// Dynamic discovery (lnet-facts §4.2, seeds 000 and 004): a peer met for the first time
// is pinged; its ping info names its primary NID and all its NIs, which are merged into
// the peer table (joining peers that turn out to be one); a multi-rail peer is then
// pushed our own ping info, and the messages held meanwhile go. A push from a peer is
// merged the same way, without a ping.
//
// The state machine lives here, one function per event, each a switch on the peer's
// state (docs/design/discovery.md has the table):
//
//   event              Undiscovered  Queued     PingSent          PushSent          Discovered
//   send (held)        -> Queued     (held)     (held)            (held)            goes
//                      (goes when discovery is off)
//   step (thread)      -            ping/push/  -                 -                 -
//                                   Discovered
//   ping done          impossible   impossible  merge -> Queued   impossible        impossible
//                                               fail  -> Undisc.
//   push ACKed/failed  impossible   impossible  impossible        -> Queued / Und.  impossible
//   push received      -> Queued    (data kept, merged by the next step)           -> Queued
//   local NIs changed  -            -           -                 -                 -> Queued (MR)
//   discover           -> Queued    -           -                 -                 -> Queued
//
// A Merged peer (its NIs went to another) ignores every event. Event handlers of MDs only
// post events; the discovery thread runs them, and never holds dc_mutex_ while it sends
// or finalizes (both can call back into the handlers).
#include <algorithm>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

#include "base/clock.hpp"
#include "core/core.hpp"

namespace lnet::core {

using net::DcState;
namespace ps = net::peer_state;

namespace {

constexpr unsigned kMaxBadReplies = 3;  // corrupt ping replies before a round fails

void set_flags(Peer* p, std::uint32_t bits) { p->dc.flags.fetch_or(bits, std::memory_order_relaxed); }
void clear_flags(Peer* p, std::uint32_t bits) { p->dc.flags.fetch_and(~bits, std::memory_order_relaxed); }
bool has(const Peer* p, std::uint32_t bits) { return (p->dc.flags.load(std::memory_order_relaxed) & bits) != 0; }
void set_state(Peer* p, DcState s) { p->dc.state.store(s, std::memory_order_release); }

const char* state_name(DcState s) {
  switch (s) {
    case DcState::Undiscovered: return "undiscovered";
    case DcState::Queued: return "queued";
    case DcState::PingSent: return "ping sent";
    case DcState::PushSent: return "push sent";
    case DcState::Discovered: return "discovered";
    case DcState::Merged: return "merged";
  }
  return "?";
}

void impossible(const Peer* p, const char* event) {
  LNET_LOG(Warn, kLogCore, "discovery of %s: %s while %s: ignored", p->primary.to_string().c_str(), event,
           state_name(p->dc.state.load()));
}

}  // namespace

bool Core::discovery_exempt(const Message* msg) {
  if (msg->routing || msg->recovery) return true;
  // A user-flag pid names a process at exactly that NID (an MPI rank, an application
  // behind a proxy), not the node's LNet that discovery would ping.
  if (msg->target.pid & kPidUserFlag) return true;
  switch (msg->hdr.type) {
    case MsgType::Put: return msg->hdr.msg.put.ptl_index == kReservedPortal;
    case MsgType::Get: return msg->hdr.msg.get.ptl_index == kReservedPortal;
    default: return true;  // responses go back at once
  }
}

void Core::queue_peer_locked(Peer* peer) {
  set_state(peer, DcState::Queued);
  if (!peer->dc.queued) {
    peer->dc.queued = true;
    dc_queue_.push_back(peer);
  }
  dc_cv_.notify_one();
}

void Core::post_dc_event(DcEvent ev) {
  MutexLock g(dc_mutex_);
  dc_events_.push_back(std::move(ev));
  dc_cv_.notify_one();
}

bool Core::dc_idle() {
  MutexLock g(dc_mutex_);
  if (dc_working_ || !dc_events_.empty() || !dc_queue_.empty()) return false;
  ExclusiveLock x(net_locks_);
  for (const auto& p : peers_.peers()) {
    DcState s = p->dc.state.load();
    if (s == DcState::Queued || s == DcState::PingSent || s == DcState::PushSent) return false;
  }
  return true;
}

// ---------------------------------------------------------------- event: send

Core::Hold Core::hold_for_discovery(Peer* peer, Message* msg) {
  MutexLock g(dc_mutex_);
  if (stopping_.load()) return Hold::Go;  // the thread is gone or going: the send fails
  switch (peer->dc.state.load(std::memory_order_relaxed)) {
    case DcState::Discovered: return Hold::Go;
    case DcState::Merged: return Hold::Again;  // its NID is another peer's now
    case DcState::Undiscovered:
      if (!discovery_.load()) return Hold::Go;  // turned off meanwhile
      peer->dc.error = 0;
      queue_peer_locked(peer);
      [[fallthrough]];
    case DcState::Queued:
    case DcState::PingSent:
    case DcState::PushSent: peer->dc.waiting.push_back(msg); return Hold::Held;
  }
  return Hold::Go;
}

// ---------------------------------------------------------------- the thread

void Core::discovery_loop() {
  MutexLock lk(dc_mutex_);
  while (!stopping_.load()) {
    if (!dc_events_.empty()) {
      DcEvent ev = std::move(dc_events_.front());
      dc_events_.pop_front();
      dc_working_ = true;
      lk.unlock();
      switch (ev.kind) {
        case DcEvent::PingDone: dc_ping_done(ev.peer, ev.status, ev.data); break;
        case DcEvent::PushDone: dc_push_done(ev.peer, ev.status); break;
        case DcEvent::PushReceived: dc_push_received(ev.from, ev.data, ev.rlength); break;
      }
      lk.lock();
      dc_working_ = false;
      continue;
    }
    if (!dc_queue_.empty()) {
      Peer* peer = dc_queue_.front();
      dc_queue_.pop_front();
      peer->dc.queued = false;
      dc_working_ = true;
      lk.unlock();
      dc_step(peer);
      lk.lock();
      dc_working_ = false;
      continue;
    }
    lk.wait(dc_cv_);  // idle: no timer, nothing spins
  }
  // Shutting down: what is held fails.
  MsgQueue failed, none;
  for (Peer* peer : dc_queue_) peer->dc.queued = false;
  dc_queue_.clear();
  dc_events_.clear();
  lk.unlock();
  {
    MutexLock g(dc_mutex_);
    ExclusiveLock x(net_locks_);
    for (const auto& p : peers_.peers()) {
      while (FifoLink* l = p->dc.waiting.pop_front()) failed.push_back(as_message(l));
      if (p->dc.state.load() != DcState::Discovered) set_state(p.get(), DcState::Undiscovered);
    }
    dc_done_cv_.notify_all();
  }
  release_held(none, failed, -ESHUTDOWN);
}

// The next step of a queued peer: merge pushed data, ping, push, or done.
void Core::dc_step(Peer* peer) {
  MsgQueue resend, failed;
  enum { Nothing, Ping, Push } action = Nothing;
  std::size_t bytes = 0;
  {
    MutexLock g(dc_mutex_);
    if (peer->dc.state.load(std::memory_order_relaxed) != DcState::Queued) return;  // stale entry
    if (has(peer, ps::kDataPresent)) {
      clear_flags(peer, ps::kDataPresent);
      std::vector<std::uint8_t> data = std::move(peer->dc.data);
      auto info = decode_ping_info(data, max_interfaces_.load());
      if (info) {
        Peer* into = merge_ping_info(peer, *info, false, resend);
        if (into != peer) {  // it joined another peer: that one goes on
          if (into->dc.state.load() != DcState::PingSent && into->dc.state.load() != DcState::PushSent)
            queue_peer_locked(into);
          peer = nullptr;
        }
      } else {
        set_flags(peer, ps::kForcePing);
      }
    }
    if (peer) {
      // Forced pings and pushes go even with discovery off (discover, turning it off);
      // otherwise a peer met while it is off stays as it is (seed 000's UNDISCOVERED).
      bool force_ping = has(peer, ps::kForcePing);
      bool force_push = has(peer, ps::kForcePush) && peer->multi_rail;
      if (force_ping || (discovery_.load() && !has(peer, ps::kNidsUptodate))) {
        clear_flags(peer, ps::kForcePing);
        set_state(peer, DcState::PingSent);
        bytes = std::max(kPingInfoMinSize, peer->dc.ping_bytes);
        action = Ping;
      } else if (force_push || (discovery_.load() && needs_push_locked(peer))) {
        clear_flags(peer, ps::kForcePush);
        set_state(peer, DcState::PushSent);
        action = Push;
      } else {
        dc_complete_locked(peer, 0, resend, failed);
        if (!discovery_.load() && !has(peer, ps::kNidsUptodate)) set_state(peer, DcState::Undiscovered);
      }
    }
  }
  if (action == Ping) send_discovery_ping(peer, bytes);
  if (action == Push) send_push(peer);
  release_held(resend, failed, 0);
}

// ---------------------------------------------------------------- event: ping done

void Core::dc_ping_done(Peer* peer, int status, std::vector<std::uint8_t>& data) {
  MsgQueue resend, failed;
  {
    MutexLock g(dc_mutex_);
    switch (peer->dc.state.load(std::memory_order_relaxed)) {
      case DcState::PingSent: {
        if (status != 0) {
          LNET_LOG(Info, kLogCore, "discovery of %s: ping failed: %s", peer->primary.to_string().c_str(),
                   errno_string(status).c_str());
          dc_complete_locked(peer, status, resend, failed);
          break;
        }
        std::size_t needed = 0;
        auto info = decode_ping_info(data, max_interfaces_.load(), &needed);
        if (!info && info.code() == -E2BIG && needed > data.size()) {
          peer->dc.ping_bytes = needed;  // more NIs than the buffer held: ping again, bigger
          set_flags(peer, ps::kForcePing);
          queue_peer_locked(peer);
          break;
        }
        if (!info) {
          counters_.add(0, kErrors);
          LNET_LOG(Warn, kLogCore, "discovery of %s: bad ping reply: %s", peer->primary.to_string().c_str(),
                   info.message().c_str());
          if (++peer->dc.bad_replies >= kMaxBadReplies) {
            dc_complete_locked(peer, -EPROTO, resend, failed);
          } else {
            set_flags(peer, ps::kForcePing);
            queue_peer_locked(peer);
          }
          break;
        }
        peer->dc.ping_bytes = info->wire_size();
        Peer* into = merge_ping_info(peer, *info, true, resend);
        DcState s = into->dc.state.load(std::memory_order_relaxed);
        if (into == peer || (s != DcState::PingSent && s != DcState::PushSent)) queue_peer_locked(into);
        break;
      }
      case DcState::Merged: break;  // its NIs went to another peer meanwhile
      default: impossible(peer, "ping reply"); break;
    }
  }
  release_held(resend, failed, status);
}

// ---------------------------------------------------------------- event: push done

void Core::dc_push_done(Peer* peer, int status) {
  MsgQueue resend, failed;
  {
    MutexLock g(dc_mutex_);
    switch (peer->dc.state.load(std::memory_order_relaxed)) {
      case DcState::PushSent:
        if (status != 0) {
          LNET_LOG(Info, kLogCore, "discovery of %s: push failed: %s", peer->primary.to_string().c_str(),
                   errno_string(status).c_str());
          dc_complete_locked(peer, status, resend, failed);
        } else {
          peer->dc.node_seqno = std::max(peer->dc.node_seqno, peer->dc.push_seqno);
          queue_peer_locked(peer);
        }
        break;
      case DcState::Merged: break;
      default: impossible(peer, "push ACK"); break;
    }
  }
  release_held(resend, failed, status);
}

// ---------------------------------------------------------------- event: push received

void Core::dc_push_received(Nid from, std::vector<std::uint8_t>& data, std::uint32_t rlength) {
  Peer* peer = nullptr;
  {
    MutexLock g(net_locks_[cpts_.of_nid(from)]);
    if (PeerNi* lpni = peers_.find(from)) peer = lpni->peer;
  }
  if (!peer) {
    LNET_LOG(Info, kLogCore, "push from unknown peer %s ignored", from.to_string().c_str());
    return;
  }
  MutexLock g(dc_mutex_);
  while (peer->dc.state.load() == DcState::Merged) peer = peer->dc.merged_into;
  if (rlength > data.size()) {
    // More than the push target held (it has grown since: on_push): we ping for the whole.
    LNET_LOG(Info, kLogCore, "push from %s truncated (%u bytes): pinging it", from.to_string().c_str(), rlength);
    set_flags(peer, ps::kForcePing);
    clear_flags(peer, ps::kNidsUptodate);
  } else if (auto info = decode_ping_info(data, max_interfaces_.load()); !info) {
    counters_.add(0, kErrors);
    LNET_LOG(Warn, kLogCore, "bad push from %s: %s: pinging it", from.to_string().c_str(), info.message().c_str());
    set_flags(peer, ps::kForcePing);
    clear_flags(peer, ps::kNidsUptodate);
  } else if (!(info->features & kPingFeatMultiRail)) {
    counters_.add(0, kErrors);
    LNET_LOG(Warn, kLogCore, "push from non-multi-rail peer %s dropped", from.to_string().c_str());
    return;
  } else {
    if (info->features & kPingFeatDiscovery)
      clear_flags(peer, ps::kNoDiscovery);
    else
      set_flags(peer, ps::kNoDiscovery);
    std::uint32_t seq = info->nis[0].status;
    // Data waiting already is replaced only by newer data.
    if (has(peer, ps::kDataPresent) && seq < peer->dc.peer_seqno) return;
    peer->dc.peer_seqno = seq;
    peer->dc.data = std::move(data);
    set_flags(peer, ps::kDataPresent);
    clear_flags(peer, ps::kNidsUptodate);
  }
  switch (peer->dc.state.load(std::memory_order_relaxed)) {
    case DcState::Undiscovered:
    case DcState::Discovered: queue_peer_locked(peer); break;
    case DcState::Queued:
    case DcState::PingSent:
    case DcState::PushSent: break;  // the step after the current one sees it
    case DcState::Merged: break;    // not reached (followed above)
  }
}

// ---------------------------------------------------------------- actions

bool Core::needs_push_locked(const Peer* peer) const {
  if (!peer->multi_rail) return false;  // pushes go to multi-rail peers only
  if (has(peer, ps::kForcePush)) return true;
  if (!discovery_.load() || has(peer, ps::kNoDiscovery)) return false;
  return peer->dc.node_seqno < ping_seq_.load();
}

void Core::dc_complete_locked(Peer* peer, int rc, MsgQueue& resend, MsgQueue& failed) {
  peer->dc.error = rc;
  peer->dc.bad_replies = 0;
  ++peer->dc.rounds;
  // A gateway that does not answer is down; one that answers again is said so (its
  // silence was, by check_routers()).
  if (!peer->reachable.exchange(rc == 0, std::memory_order_relaxed) && rc == 0) {
    if (Nid gw = gateway_nid(peer); !gw.is_any())
      LNET_LOG(Warn, kLogRouter, "gateway %s answers again: its routes are up", gw.to_string().c_str());
  }
  if (rc) {
    set_flags(peer, ps::kRediscover);
    set_state(peer, DcState::Undiscovered);
  } else {
    clear_flags(peer, ps::kRediscover);
    set_state(peer, DcState::Discovered);
  }
  MsgQueue& to = rc ? failed : resend;
  while (FifoLink* l = peer->dc.waiting.pop_front()) to.push_back(as_message(l));
  dc_done_cv_.notify_all();
}

void Core::release_held(MsgQueue& resend, MsgQueue& failed, int rc) {
  std::int64_t now = resend.empty() ? 0 : coarse_now_ns();
  while (Message* m = resend.pop_front()) {
    if (m->deadline_ns && now >= m->deadline_ns) {
      // It waited for discovery past its deadline (held again round after round, say):
      // too late, as for one that waited for credits.
      m->health = HealthStatus::LocalTimeout;
      finalize(m, -ETIMEDOUT);
      continue;
    }
    if (int err = send(m->self, m, m->target.nid)) {
      m->health = HealthStatus::LocalError;
      finalize(m, err);
    }
  }
  while (Message* m = failed.pop_front()) {
    m->health = HealthStatus::LocalError;
    finalize(m, rc ? rc : -EHOSTUNREACH);
  }
}

void Core::send_discovery_ping(Peer* peer, std::size_t bytes) {
  auto buf = std::make_shared<std::vector<std::uint8_t>>(bytes);
  auto fired = std::make_shared<std::atomic<bool>>(false);
  MdDesc d;
  d.start = buf->data();
  d.length = buf->size();
  d.threshold = 2;  // SEND + REPLY
  d.options = kMdTruncate;
  d.handler = [this, peer, buf, fired](const Event& ev) {
    bool failed_send = ev.type == EventType::Send && ev.status != 0;
    if (failed_send && !ev.unlinked) (void)md_unlink(ev.md_handle);  // no REPLY will come
    if (!failed_send && ev.type != EventType::Reply) return;
    if (fired->exchange(true)) return;
    DcEvent e{DcEvent::PingDone, peer, {}, ev.status, 0, {}};
    if (ev.type == EventType::Reply && ev.status == 0) e.data.assign(buf->begin(), buf->begin() + ev.mlength);
    post_dc_event(std::move(e));
  };
  Nid target;
  {
    MutexLock g(dc_mutex_);
    target = peer->primary;
  }
  auto md = md_bind(d, Unlink::Unlink);
  int rc = md ? send_get(Nid::any(), *md, ProcessId{target, kPidLustre}, kReservedPortal, kPingMatchBits, 0, false)
              : md.code();
  if (rc) {  // no message was made: no event will come
    if (md) (void)md_unlink(*md);
    if (!fired->exchange(true)) post_dc_event(DcEvent{DcEvent::PingDone, peer, {}, rc, 0, {}});
  }
}

void Core::send_push(Peer* peer) {
  PingInfo info = ping_info();
  auto buf = std::make_shared<std::vector<std::uint8_t>>(encode_ping_info(info));
  auto fired = std::make_shared<std::atomic<bool>>(false);
  MdDesc d;
  d.start = buf->data();
  d.length = buf->size();
  d.threshold = 2;  // SEND + ACK
  d.options = 0;
  d.handler = [this, peer, buf, fired](const Event& ev) {
    bool failed_send = ev.type == EventType::Send && ev.status != 0;
    if (failed_send && !ev.unlinked) (void)md_unlink(ev.md_handle);  // no ACK will come
    if (!failed_send && ev.type != EventType::Ack) return;
    if (fired->exchange(true)) return;
    post_dc_event(DcEvent{DcEvent::PushDone, peer, {}, ev.status, 0, {}});
  };
  Nid target;
  {
    MutexLock g(dc_mutex_);
    target = peer->primary;
    peer->dc.push_seqno = info.nis[0].status;
  }
  auto md = md_bind(d, Unlink::Unlink);
  int rc = md ? put(Nid::any(), *md, AckReq::Ack, ProcessId{target, kPidLustre}, kReservedPortal, kPingMatchBits, 0, 0)
              : md.code();
  if (rc) {
    if (md) (void)md_unlink(*md);
    if (!fired->exchange(true)) post_dc_event(DcEvent{DcEvent::PushDone, peer, {}, rc, 0, {}});
  }
}

// ---------------------------------------------------------------- merging

void Core::absorb_locked(Peer* into, Peer* victim, MsgQueue& resend) {
  if (into->health_sensitivity.load() == 0) into->health_sensitivity.store(victim->health_sensitivity.load());
  std::vector<PeerNi*> nis;
  for (auto& lpni : victim->nis)
    if (!lpni->removed) nis.push_back(lpni.get());
  for (PeerNi* lpni : nis) peers_.move_ni(lpni, into);
  LNET_LOG(Info, kLogCore, "peer %s is %s: merged", victim->primary.to_string().c_str(),
           into->primary.to_string().c_str());
  while (FifoLink* l = victim->dc.waiting.pop_front()) resend.push_back(as_message(l));
  victim->dc.merged_into = into;
  set_state(victim, DcState::Merged);
  ++victim->dc.rounds;
  dc_done_cv_.notify_all();
  peers_.retire(victim);
  config_gen_.fetch_add(1, std::memory_order_relaxed);
}

Peer* Core::merge_ping_info(Peer* peer, const PingInfo& info, bool from_ping, MsgQueue& resend) {
  ExclusiveLock x(net_locks_);
  bool peer_mr = (info.features & kPingFeatMultiRail) != 0;
  bool local_dc = discovery_.load();
  if ((info.features & kPingFeatDiscovery) && local_dc)
    clear_flags(peer, ps::kNoDiscovery);
  else
    set_flags(peer, ps::kNoDiscovery);
  if (info.features & kPingFeatRteDisabled)
    clear_flags(peer, ps::kRouterEnabled);
  else
    set_flags(peer, ps::kRouterEnabled);
  bool no_dc = has(peer, ps::kNoDiscovery);
  if (!peer->configured) {
    if (peer_mr && !no_dc)
      peer->multi_rail = true;
    else if (!peer_mr && peer->multi_rail)
      peer->multi_rail = false;  // its multi-rail state vanished
  }
  Nid primary = info.nis.size() > 1 ? info.nis[1].nid : Nid::any();
  if (from_ping && peer_mr && primary == peer->primary) peer->dc.peer_seqno = info.nis[0].status;

  // Status only unless discovery runs on both sides for a multi-rail peer.
  // 0@lo stays what it is: the loopback NID never joins the node's other NIDs.
  bool full = local_dc && peer_mr && !no_dc && !primary.is_any() && !primary.is_lo() && !peer->primary.is_lo();
  Peer* target = peer;
  if (full && !peer->configured && !has(peer, ps::kLockPrimary)) {
    // A peer that holds one of the listed NIDs as a locked primary keeps it: this one
    // joins that peer rather than the other way round.
    for (std::size_t i = 1; i < info.nis.size() && target == peer; ++i) {
      PeerNi* o = peers_.find(info.nis[i].nid);
      if (o && o->peer != peer && o->nid == o->peer->primary && has(o->peer, ps::kLockPrimary) && !o->peer->configured)
        target = o->peer;
    }
    if (target != peer) {
      constexpr std::uint32_t kLearned = ps::kNoDiscovery | ps::kRouterEnabled;
      target->dc.flags.store((target->dc.flags.load() & ~kLearned) | (peer->dc.flags.load() & kLearned));
      target->multi_rail = true;
      target->dc.peer_seqno = peer->dc.peer_seqno;
      target->dc.ping_bytes = peer->dc.ping_bytes;
      absorb_locked(target, peer, resend);
    }
  }
  if (full && target == peer && primary != peer->primary) {
    PeerNi* owner = peers_.find(primary);
    if (owner && owner->peer != peer) {
      target = owner->peer;  // the peer that has its primary NID goes on, with what we learned
      if (peer->configured || has(peer, ps::kLockPrimary)) {
        LNET_LOG(Warn, kLogCore, "configured peer %s says its primary NID is %s, which peer %s has: left alone",
                 peer->primary.to_string().c_str(), primary.to_string().c_str(), target->primary.to_string().c_str());
        target = peer;
        full = false;
      } else {
        constexpr std::uint32_t kLearned = ps::kNoDiscovery | ps::kRouterEnabled;
        target->dc.flags.store((target->dc.flags.load() & ~kLearned) | (peer->dc.flags.load() & kLearned));
        target->multi_rail = target->multi_rail || peer->multi_rail;
        target->dc.peer_seqno = peer->dc.peer_seqno;
        target->dc.ping_bytes = peer->dc.ping_bytes;
        absorb_locked(target, peer, resend);
      }
    } else if (!has(peer, ps::kLockPrimary)) {
      if (!owner)
        (void)peers_.make_ni(peer, primary, peer_credits_for(primary.net()), peer_rtr_credits_for(primary.net()));
      LNET_LOG(Info, kLogCore, "peer %s: primary NID %s", peer->primary.to_string().c_str(),
               primary.to_string().c_str());
      peer->primary = primary;
    }
  }
  if (full) {
    // The node's own NIDs are a peer like any other (as LNet makes one for any
    // destination); they join no peer but that one.
    bool self = is_local_nid(target->primary);
    for (std::size_t i = 1; i < info.nis.size(); ++i) {
      const NiStatus& ns = info.nis[i];
      if (ns.nid.is_any() || ns.nid.is_lo() || (!self && is_local_nid(ns.nid))) continue;
      PeerNi* lpni = peers_.find(ns.nid);
      if (!lpni) {
        lpni = peers_.make_ni(target, ns.nid, peer_credits_for(ns.nid.net()), peer_rtr_credits_for(ns.nid.net()));
        udsp_.apply_new(lpni, table());
      } else if (lpni->peer != target) {
        Peer* other = lpni->peer;
        if (other->configured || lpni->configured || has(other, ps::kLockPrimary)) {
          LNET_LOG(Warn, kLogCore, "peer %s lists %s, configured for peer %s: left there",
                   target->primary.to_string().c_str(), ns.nid.to_string().c_str(), other->primary.to_string().c_str());
          continue;
        }
        if (ns.nid == other->primary)
          absorb_locked(target, other, resend);
        else
          peers_.move_ni(lpni, target);
        if (other->nets.empty() && !other->deleted) peers_.retire(other);
      }
      lpni->ns_status.store(ns.status, std::memory_order_relaxed);
    }
    // NIs it no longer lists go, unless configuration put them there.
    std::vector<PeerNi*> gone;
    for (auto& lpni : target->nis) {
      if (lpni->removed) continue;
      bool listed = false;
      for (std::size_t i = 1; i < info.nis.size() && !listed; ++i) listed = info.nis[i].nid == lpni->nid;
      if (listed) continue;
      if (lpni->configured || target->configured || lpni->nid == target->primary)
        lpni->ns_status.store(kNiStatusDown, std::memory_order_relaxed);
      else
        gone.push_back(lpni.get());
    }
    // Each net's NIs in the order the peer lists them (as LNet shows them).
    auto rank = [&info](const PeerNi* n) {
      for (std::size_t i = 1; i < info.nis.size(); ++i)
        if (info.nis[i].nid == n->nid) return i;
      return info.nis.size();
    };
    for (auto& pn : target->nets)
      std::stable_sort(pn->nis.begin(), pn->nis.end(),
                       [&rank](const PeerNi* m, const PeerNi* n) { return rank(m) < rank(n); });
    for (PeerNi* lpni : gone) {
      LNET_LOG(Info, kLogCore, "peer %s no longer lists %s", target->primary.to_string().c_str(),
               lpni->nid.to_string().c_str());
      peers_.remove_ni(lpni);
      // Messages waiting for its credits go again, by another NI.
      while (FifoLink* l = lpni->txq.pop_front()) {
        Message* m = as_message(l);
        m->peer_tx_credit = m->tx_delayed = m->tx_committed = false;
        m->txni = nullptr;
        m->txpeer = nullptr;
        resend.push_back(m);
      }
    }
  } else {
    for (std::size_t i = 1; i < info.nis.size(); ++i)
      if (PeerNi* lpni = peers_.find(info.nis[i].nid); lpni && lpni->peer == target)
        lpni->ns_status.store(info.nis[i].status, std::memory_order_relaxed);
  }
  set_flags(target, ps::kNidsUptodate);
  update_routes_locked(target, info);
  config_gen_.fetch_add(1, std::memory_order_relaxed);
  return target;
}

// ---------------------------------------------------------------- local changes, discover

void Core::push_update(bool force) {
  MutexLock g(dc_mutex_);
  ExclusiveLock x(net_locks_);
  for (const auto& p : peers_.peers()) {
    if (!p->multi_rail || p->dc.state.load() != DcState::Discovered) continue;
    if (!force && (!discovery_.load() || has(p.get(), ps::kNoDiscovery))) continue;
    if (force) set_flags(p.get(), ps::kForcePush);
    queue_peer_locked(p.get());
  }
}

unsigned Core::start_round_locked(Peer* peer, bool force) {
  // Asked for: it pings even with discovery off (and pushes when forced).
  clear_flags(peer, ps::kNidsUptodate);
  set_flags(peer, ps::kForcePing | (force ? ps::kForcePush : 0));
  DcState s = peer->dc.state.load();
  if (s == DcState::Undiscovered || s == DcState::Discovered) {
    peer->dc.error = 0;
    queue_peer_locked(peer);
  }
  return peer->dc.rounds;
}

Result<Peer*> Core::wait_round_locked(Peer* peer, unsigned round, Nid nid, MutexLock& g,
                                      std::chrono::steady_clock::time_point deadline,
                                      std::chrono::milliseconds timeout) {
  for (;;) {
    DcState s = peer->dc.state.load();
    if (s == DcState::Merged) {
      peer = peer->dc.merged_into;  // it went into another peer: that one answers
      s = peer->dc.state.load();
      if (s == DcState::Discovered) return peer;
      if (s == DcState::Undiscovered) queue_peer_locked(peer);
      round = peer->dc.rounds;
      continue;
    }
    if (peer->dc.rounds != round) {
      if (s == DcState::Discovered || (s == DcState::Undiscovered && peer->dc.error == 0)) return peer;
      if (s == DcState::Undiscovered)
        return Failure{peer->dc.error, "discovery of " + nid.to_string() + " failed: " + errno_string(peer->dc.error)};
      round = peer->dc.rounds;  // another round started meanwhile
    }
    if (stopping_.load()) return Failure{-ESHUTDOWN, "LNet is shutting down"};
    if (dc_done_cv_.wait_until(g.native(), deadline) == std::cv_status::timeout && peer->dc.rounds == round &&
        peer->dc.state.load() != DcState::Merged)
      return Failure{-ETIMEDOUT, "discovery of " + nid.to_string() + " did not end within " +
                                     std::to_string(timeout.count()) + " ms"};
  }
}

Status Core::set_peer_state(Nid nid, std::uint32_t state) {
  constexpr std::uint32_t kSettable =
      ps::kMultiRail | ps::kNoDiscovery | ps::kRouterEnabled | ps::kConfigured | ps::kLockPrimary;
  MutexLock g(dc_mutex_);
  ExclusiveLock x(net_locks_);
  PeerNi* lpni = peers_.find(nid);
  if (!lpni || lpni->removed) return Failure{-ENOENT, "no peer has NID " + nid.to_string()};
  Peer* peer = lpni->peer;
  std::uint32_t now = peer->state_bits();
  if (std::uint32_t odd = (state ^ now) & ~kSettable; odd) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%x", odd);
    return Failure{-EOPNOTSUPP, std::string("not supported yet: peer state bits ") + hex +
                                    " (discovery's own; settable: MULTI_RAIL, NO_DISCOVERY, ROUTER_ENABLED, "
                                    "CONFIGURED, LOCK_PRIMARY)"};
  }
  peer->multi_rail = (state & ps::kMultiRail) != 0;
  peer->configured = (state & ps::kConfigured) != 0;
  constexpr std::uint32_t kFlags = ps::kNoDiscovery | ps::kRouterEnabled | ps::kLockPrimary;
  peer->dc.flags.store((peer->dc.flags.load() & ~kFlags) | (state & kFlags));
  config_gen_.fetch_add(1, std::memory_order_relaxed);
  return {};
}

Result<PeerInfo> Core::discover(Nid nid, bool force, std::chrono::milliseconds timeout) {
  if (nid.is_any()) return Failure{-EINVAL, "cannot discover " + nid.to_string()};
  if (!started_.load() || stopping_.load()) return Failure{-ESHUTDOWN, "LNet is not running"};
  PeerNi* lpni = peer_ni_for(nid);
  if (!lpni) return Failure{-ENOMEM, "cannot make the peer of " + nid.to_string()};
  {
    MutexLock g(dc_mutex_);
    Peer* peer;
    {
      MutexLock n(net_locks_[cpts_.of_nid(nid)]);
      peer = lpni->peer;
    }
    while (peer->dc.state.load() == DcState::Merged) peer = peer->dc.merged_into;
    unsigned round = start_round_locked(peer, force);
    auto r = wait_round_locked(peer, round, nid, g, std::chrono::steady_clock::now() + timeout, timeout);
    if (!r) return r.failure();
  }
  for (const PeerInfo& p : peer_info())
    for (const PeerNiInfo& n : p.nis)
      if (n.nid == nid) return p;
  return Failure{-ENOENT, "peer of " + nid.to_string() + " went away"};
}

}  // namespace lnet::core
