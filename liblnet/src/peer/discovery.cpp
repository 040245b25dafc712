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
// post events; the discovery thread runs them, and never holds mutex_ while it sends
// or finalizes (both can call back into the handlers).
#include <algorithm>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

#include "base/clock.hpp"
#include "peer/discovery.hpp"
#include "peer_flags.hpp"

namespace lnet::peer {

namespace {

constexpr unsigned kMaxBadReplies = 3;  // corrupt ping replies before a round fails

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

bool Discovery::exempt(const Message* msg) {
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

void Discovery::queue_locked(Peer* peer) {
  set_state(peer, DcState::Queued);
  if (!peer->dc.queued) {
    peer->dc.queued = true;
    queue_.push_back(peer);
  }
  cv_.notify_one();
}

void Discovery::post(DcEvent ev) {
  MutexLock g(mutex_);
  events_.push_back(std::move(ev));
  cv_.notify_one();
}

bool Discovery::idle() {
  MutexLock g(mutex_);
  if (working_ || !events_.empty() || !queue_.empty()) return false;
  ExclusiveLock x(st_.locks);
  for (const auto& p : st_.peers.peers()) {
    DcState s = p->dc.state.load();
    if (s == DcState::Queued || s == DcState::PingSent || s == DcState::PushSent) return false;
  }
  return true;
}

// ---------------------------------------------------------------- event: send

Discovery::Hold Discovery::hold(Peer* peer, Message* msg) {
  MutexLock g(mutex_);
  if (st_.stopping.load()) return Hold::Go;  // the thread is gone or going: the send fails
  switch (peer->dc.state.load(std::memory_order_relaxed)) {
    case DcState::Discovered: return Hold::Go;
    case DcState::Merged: return Hold::Again;  // its NID is another peer's now
    case DcState::Undiscovered:
      if (!st_.tun.discovery.load()) return Hold::Go;  // turned off meanwhile
      peer->dc.error = 0;
      queue_locked(peer);
      [[fallthrough]];
    case DcState::Queued:
    case DcState::PingSent:
    case DcState::PushSent: peer->dc.waiting.push_back(msg); return Hold::Held;
  }
  return Hold::Go;
}

// ---------------------------------------------------------------- the thread

void Discovery::start() {
  thread_ = std::thread([this] { loop(); });
}

void Discovery::stop() {
  {
    MutexLock g(mutex_);
    cv_.notify_all();
    done_cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();  // fails the messages it held
}

void Discovery::loop() {
  MutexLock lk(mutex_);
  while (!st_.stopping.load()) {
    if (!events_.empty()) {
      DcEvent ev = std::move(events_.front());
      events_.pop_front();
      working_ = true;
      lk.unlock();
      switch (ev.kind) {
        case DcEvent::PingDone: ping_done(ev.peer, ev.status, ev.data); break;
        case DcEvent::PushDone: push_done(ev.peer, ev.status); break;
        case DcEvent::PushReceived: push_received(ev.from, ev.data, ev.rlength); break;
      }
      lk.lock();
      working_ = false;
      continue;
    }
    if (!queue_.empty()) {
      Peer* peer = queue_.front();
      queue_.pop_front();
      peer->dc.queued = false;
      working_ = true;
      lk.unlock();
      step(peer);
      lk.lock();
      working_ = false;
      continue;
    }
    lk.wait(cv_);  // idle: no timer, nothing spins
  }
  // Shutting down: what is held fails.
  MsgQueue failed, none;
  for (Peer* peer : queue_) peer->dc.queued = false;
  queue_.clear();
  events_.clear();
  lk.unlock();
  {
    MutexLock g(mutex_);
    ExclusiveLock x(st_.locks);
    for (const auto& p : st_.peers.peers()) {
      while (FifoLink* l = p->dc.waiting.pop_front()) failed.push_back(as_message(l));
      if (p->dc.state.load() != DcState::Discovered) set_state(p.get(), DcState::Undiscovered);
    }
    done_cv_.notify_all();
  }
  host_.release_held(none, failed, -ESHUTDOWN);
}

// The next step of a queued peer: merge pushed data, ping, push, or done.
void Discovery::step(Peer* peer) {
  MsgQueue resend, failed;
  enum { Nothing, Ping, Push } action = Nothing;
  std::size_t bytes = 0;
  {
    MutexLock g(mutex_);
    if (peer->dc.state.load(std::memory_order_relaxed) != DcState::Queued) return;  // stale entry
    if (has(peer, ps::kDataPresent)) {
      clear_flags(peer, ps::kDataPresent);
      std::vector<std::uint8_t> data = std::move(peer->dc.data);
      auto info = decode_ping_info(data, st_.tun.max_interfaces.load());
      if (info) {
        merge_large(*info);
        Peer* into = merge_ping_info(peer, *info, false, resend);
        if (into != peer) {  // it joined another peer: that one goes on
          if (into->dc.state.load() != DcState::PingSent && into->dc.state.load() != DcState::PushSent)
            queue_locked(into);
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
      if (force_ping || (st_.tun.discovery.load() && !has(peer, ps::kNidsUptodate))) {
        clear_flags(peer, ps::kForcePing);
        set_state(peer, DcState::PingSent);
        bytes = std::max(kPingInfoMinSize, peer->dc.ping_bytes);
        action = Ping;
      } else if (force_push || (st_.tun.discovery.load() && needs_push_locked(peer))) {
        clear_flags(peer, ps::kForcePush);
        set_state(peer, DcState::PushSent);
        action = Push;
      } else {
        complete_locked(peer, 0, resend, failed);
        if (!st_.tun.discovery.load() && !has(peer, ps::kNidsUptodate)) set_state(peer, DcState::Undiscovered);
      }
    }
  }
  if (action == Ping) send_ping(peer, bytes);
  if (action == Push) send_push(peer);
  host_.release_held(resend, failed, 0);
}

// ---------------------------------------------------------------- event: ping done

void Discovery::ping_done(Peer* peer, int status, std::vector<std::uint8_t>& data) {
  MsgQueue resend, failed;
  {
    MutexLock g(mutex_);
    switch (peer->dc.state.load(std::memory_order_relaxed)) {
      case DcState::PingSent: {
        if (status != 0) {
          LNET_LOG(Info, kLogCore, "discovery of %s: ping failed: %s", peer->primary.to_string().c_str(),
                   errno_string(status).c_str());
          complete_locked(peer, status, resend, failed);
          break;
        }
        std::size_t needed = 0;
        auto info = decode_ping_info(data, st_.tun.max_interfaces.load(), &needed);
        if (!info && info.code() == -E2BIG && needed > data.size()) {
          peer->dc.ping_bytes = needed;  // more NIs than the buffer held: ping again, bigger
          set_flags(peer, ps::kForcePing);
          queue_locked(peer);
          break;
        }
        if (!info) {
          st_.counters.add(0, kErrors);
          LNET_LOG(Warn, kLogCore, "discovery of %s: bad ping reply: %s", peer->primary.to_string().c_str(),
                   info.message().c_str());
          if (++peer->dc.bad_replies >= kMaxBadReplies) {
            complete_locked(peer, -EPROTO, resend, failed);
          } else {
            set_flags(peer, ps::kForcePing);
            queue_locked(peer);
          }
          break;
        }
        peer->dc.ping_bytes = info->wire_size();
        merge_large(*info);
        Peer* into = merge_ping_info(peer, *info, true, resend);
        DcState s = into->dc.state.load(std::memory_order_relaxed);
        if (into == peer || (s != DcState::PingSent && s != DcState::PushSent)) queue_locked(into);
        break;
      }
      case DcState::Merged: break;  // its NIs went to another peer meanwhile
      default: impossible(peer, "ping reply"); break;
    }
  }
  host_.release_held(resend, failed, status);
}

// ---------------------------------------------------------------- event: push done

void Discovery::push_done(Peer* peer, int status) {
  MsgQueue resend, failed;
  {
    MutexLock g(mutex_);
    switch (peer->dc.state.load(std::memory_order_relaxed)) {
      case DcState::PushSent:
        if (status != 0) {
          LNET_LOG(Info, kLogCore, "discovery of %s: push failed: %s", peer->primary.to_string().c_str(),
                   errno_string(status).c_str());
          complete_locked(peer, status, resend, failed);
        } else {
          peer->dc.node_seqno = std::max(peer->dc.node_seqno, peer->dc.push_seqno);
          queue_locked(peer);
        }
        break;
      case DcState::Merged: break;
      default: impossible(peer, "push ACK"); break;
    }
  }
  host_.release_held(resend, failed, status);
}

// ---------------------------------------------------------------- event: push received

void Discovery::push_received(Nid from, std::vector<std::uint8_t>& data, std::uint32_t rlength) {
  Peer* peer = nullptr;
  {
    MutexLock g(st_.locks[st_.cpts.of_nid(from)]);
    if (PeerNi* lpni = st_.peers.find(from)) peer = lpni->peer;
  }
  if (!peer) {
    LNET_LOG(Info, kLogCore, "push from unknown peer %s ignored", from.to_string().c_str());
    return;
  }
  MutexLock g(mutex_);
  while (peer->dc.state.load() == DcState::Merged) peer = peer->dc.merged_into;
  if (rlength > data.size()) {
    // More than the push target held (it has grown since: on_push): we ping for the whole.
    LNET_LOG(Info, kLogCore, "push from %s truncated (%u bytes): pinging it", from.to_string().c_str(), rlength);
    set_flags(peer, ps::kForcePing);
    clear_flags(peer, ps::kNidsUptodate);
  } else if (auto info = decode_ping_info(data, st_.tun.max_interfaces.load()); !info) {
    st_.counters.add(0, kErrors);
    LNET_LOG(Warn, kLogCore, "bad push from %s: %s: pinging it", from.to_string().c_str(), info.message().c_str());
    set_flags(peer, ps::kForcePing);
    clear_flags(peer, ps::kNidsUptodate);
  } else if (!(info->features & kPingFeatMultiRail)) {
    st_.counters.add(0, kErrors);
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
    case DcState::Discovered: queue_locked(peer); break;
    case DcState::Queued:
    case DcState::PingSent:
    case DcState::PushSent: break;  // the step after the current one sees it
    case DcState::Merged: break;    // not reached (followed above)
  }
}

// ---------------------------------------------------------------- actions

bool Discovery::needs_push_locked(const Peer* peer) const {
  if (!peer->multi_rail) return false;  // pushes go to multi-rail peers only
  if (has(peer, ps::kForcePush)) return true;
  if (!st_.tun.discovery.load() || has(peer, ps::kNoDiscovery)) return false;
  return peer->dc.node_seqno < st_.ping_seq.load();
}

void Discovery::complete_locked(Peer* peer, int rc, MsgQueue& resend, MsgQueue& failed) {
  peer->dc.error = rc;
  peer->dc.bad_replies = 0;
  ++peer->dc.rounds;
  // A gateway that does not answer is down; one that answers again is said so (its
  // silence was, by check_routers()).
  if (!peer->reachable.exchange(rc == 0, std::memory_order_relaxed) && rc == 0) {
    if (Nid gw = st_.gateway_nid(peer); !gw.is_any())
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
  done_cv_.notify_all();
}

void Discovery::send_ping(Peer* peer, std::size_t bytes) {
  auto buf = std::make_shared<std::vector<std::uint8_t>>(bytes);
  auto fired = std::make_shared<std::atomic<bool>>(false);
  MdDesc d = portals::ping_md(buf->data(), buf->size(), [this, peer, buf, fired](const Event& ev) {
    bool failed_send = ev.type == EventType::Send && ev.status != 0;
    if (failed_send && !ev.unlinked) (void)host_.md_unlink(ev.md_handle);  // no REPLY will come
    // UNLINK: the REPLY did not come in time (response tracking unlinked the MD).
    if (!failed_send && ev.type != EventType::Reply && ev.type != EventType::Unlink) return;
    if (fired->exchange(true)) return;
    DcEvent e{DcEvent::PingDone, peer, {}, ev.type == EventType::Unlink ? -ETIMEDOUT : ev.status, 0, {}};
    if (ev.type == EventType::Reply && ev.status == 0) e.data.assign(buf->begin(), buf->begin() + ev.mlength);
    post(std::move(e));
  });
  Nid target;
  {
    MutexLock g(mutex_);
    target = peer->primary;
  }
  auto md = host_.md_bind(d, Unlink::Unlink);
  int rc = md ? host_.send_ping(*md, target) : md.code();
  if (rc) {  // no message was made: no event will come
    if (md) (void)host_.md_unlink(*md);
    if (!fired->exchange(true)) post(DcEvent{DcEvent::PingDone, peer, {}, rc, 0, {}});
  }
}

void Discovery::send_push(Peer* peer) {
  PingInfo info = host_.ping_info();
  auto buf = std::make_shared<std::vector<std::uint8_t>>(encode_ping_info(info));
  auto fired = std::make_shared<std::atomic<bool>>(false);
  MdDesc d;
  d.start = buf->data();
  d.length = buf->size();
  d.threshold = 2;  // SEND + ACK
  d.options = 0;
  d.handler = [this, peer, buf, fired](const Event& ev) {
    bool failed_send = ev.type == EventType::Send && ev.status != 0;
    if (failed_send && !ev.unlinked) (void)host_.md_unlink(ev.md_handle);  // no ACK will come
    if (!failed_send && ev.type != EventType::Ack && ev.type != EventType::Unlink) return;
    if (fired->exchange(true)) return;
    post(DcEvent{DcEvent::PushDone, peer, {}, ev.type == EventType::Unlink ? -ETIMEDOUT : ev.status, 0, {}});
  };
  Nid target;
  {
    MutexLock g(mutex_);
    target = peer->primary;
    peer->dc.push_seqno = info.nis[0].status;
  }
  auto md = host_.md_bind(d, Unlink::Unlink);
  int rc = md ? host_.send_push(*md, target) : md.code();
  if (rc) {
    if (md) (void)host_.md_unlink(*md);
    if (!fired->exchange(true)) post(DcEvent{DcEvent::PushDone, peer, {}, rc, 0, {}});
  }
}

// ---------------------------------------------------------------- local changes, discover

void Discovery::push_update(bool force) {
  MutexLock g(mutex_);
  ExclusiveLock x(st_.locks);
  for (const auto& p : st_.peers.peers()) {
    if (!p->multi_rail || p->dc.state.load() != DcState::Discovered) continue;
    if (!force && (!st_.tun.discovery.load() || has(p.get(), ps::kNoDiscovery))) continue;
    if (force) set_flags(p.get(), ps::kForcePush);
    queue_locked(p.get());
  }
}

bool Discovery::all_told() {
  MutexLock g(mutex_);
  ExclusiveLock x(st_.locks);
  std::uint32_t seq = st_.ping_seq.load();
  for (const auto& p : st_.peers.peers()) {
    if (p->primary.is_lo() || p->dc.node_seqno >= seq) continue;  // it ACKed
    DcState s = p->dc.state.load();
    bool idle = s == DcState::Discovered || s == DcState::Undiscovered || s == DcState::Merged;
    if (idle && p->dc.error != 0) continue;  // unreachable (its last round failed): not sending to us either
    if (s == DcState::Merged) continue;      // the peer it went into answers for it
    return false;
  }
  return true;
}

unsigned Discovery::start_round_locked(Peer* peer, bool force) {
  // Asked for: it pings even with discovery off (and pushes when forced).
  clear_flags(peer, ps::kNidsUptodate);
  set_flags(peer, ps::kForcePing | (force ? ps::kForcePush : 0));
  DcState s = peer->dc.state.load();
  if (s == DcState::Undiscovered || s == DcState::Discovered) {
    peer->dc.error = 0;
    queue_locked(peer);
  }
  return peer->dc.rounds;
}

Result<Peer*> Discovery::wait_round_locked(Peer* peer, unsigned round, Nid nid, MutexLock& g,
                                           std::chrono::steady_clock::time_point deadline,
                                           std::chrono::milliseconds timeout) {
  for (;;) {
    DcState s = peer->dc.state.load();
    if (s == DcState::Merged) {
      peer = peer->dc.merged_into;  // it went into another peer: that one answers
      s = peer->dc.state.load();
      if (s == DcState::Discovered) return peer;
      if (s == DcState::Undiscovered) queue_locked(peer);
      round = peer->dc.rounds;
      continue;
    }
    if (peer->dc.rounds != round) {
      if (s == DcState::Discovered || (s == DcState::Undiscovered && peer->dc.error == 0)) return peer;
      if (s == DcState::Undiscovered)
        return Failure{peer->dc.error, "discovery of " + nid.to_string() + " failed: " + errno_string(peer->dc.error)};
      round = peer->dc.rounds;  // another round started meanwhile
    }
    if (st_.stopping.load()) return Failure{-ESHUTDOWN, "LNet is shutting down"};
    if (done_cv_.wait_until(g.native(), deadline) == std::cv_status::timeout && peer->dc.rounds == round &&
        peer->dc.state.load() != DcState::Merged)
      return Failure{-ETIMEDOUT, "discovery of " + nid.to_string() + " did not end within " +
                                     std::to_string(timeout.count()) + " ms"};
  }
}

Status Discovery::set_peer_state(Nid nid, std::uint32_t state) {
  constexpr std::uint32_t kSettable =
      ps::kMultiRail | ps::kNoDiscovery | ps::kRouterEnabled | ps::kConfigured | ps::kLockPrimary;
  MutexLock g(mutex_);
  ExclusiveLock x(st_.locks);
  PeerNi* lpni = st_.peers.find(nid);
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
  st_.config_gen.fetch_add(1, std::memory_order_relaxed);
  return {};
}

Peer* Discovery::follow(Peer* peer) {
  MutexLock g(mutex_);
  while (peer->dc.state.load() == DcState::Merged) peer = peer->dc.merged_into;
  return peer;
}

Result<Peer*> Discovery::discover(Peer* peer, Nid nid, bool force, std::chrono::milliseconds timeout) {
  MutexLock g(mutex_);
  while (peer->dc.state.load() == DcState::Merged) peer = peer->dc.merged_into;
  unsigned round = start_round_locked(peer, force);
  return wait_round_locked(peer, round, nid, g, std::chrono::steady_clock::now() + timeout, timeout);
}

std::vector<Result<Peer*>> Discovery::rounds(const std::vector<std::pair<Peer*, Nid>>& peers,
                                             std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock g(mutex_);
  std::vector<Peer*> started;
  std::vector<unsigned> round;
  for (auto [peer, nid] : peers) {
    while (peer->dc.state.load() == DcState::Merged) peer = peer->dc.merged_into;
    started.push_back(peer);
    round.push_back(start_round_locked(peer, false));
  }
  std::vector<Result<Peer*>> out;
  for (std::size_t i = 0; i < peers.size(); ++i)
    out.push_back(wait_round_locked(started[i], round[i], peers[i].second, g, deadline, timeout));
  return out;
}

}  // namespace lnet::peer
