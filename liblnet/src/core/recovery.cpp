// Recovery (lnet-facts §5.1): a local NI or peer NI whose health a failure lowered goes
// on a recovery queue; the monitor pings it (a GET of the ping buffer on the reserved
// portal) with a back-off of 2^ping_count seconds, at most max_recovery_ping_interval,
// one ping out at a time. A ping that succeeds raises health like any success and starts
// the back-off again; at 1000 it leaves the queue. A peer NI leaves it after
// recovery_limit seconds (0: never) and comes back when it is heard from again.
//
// A peer NI's ping goes to exactly that NID. A local NI's goes from it to the healthiest
// peer NI on its net: a ping of its own NID (what the kernel sends) would prove nothing
// here, since our own address answers even when the link is cut.
#include <algorithm>
#include <array>

#include <lnet/log.hpp>

#include "base/clock.hpp"
#include "core/core.hpp"

namespace lnet::core {

int recovery_backoff(unsigned ping_count, int max_interval) {
  return std::min(1 << std::min(ping_count, 9U), max_interval);
}

std::int64_t Core::recovery_interval_ns(unsigned ping_count) const {
  return recovery_backoff(ping_count, max_recovery_ping_interval_.load(std::memory_order_relaxed)) * kNsPerSec;
}

void Core::queue_recovery_locked(RecoveryState& st, std::int64_t now) {
  st.queued = true;
  if (st.since == 0) st.since = now;
  st.next_ping = now + recovery_interval_ns(st.ping_count);
}

void Core::queue_recovery(Ni* ni) {
  {
    MutexLock g(recovery_mutex_);
    if (ni->recovery.queued) return;
    queue_recovery_locked(ni->recovery, steady_now_ns());
    ni_recovery_.push_back(ni);
  }
  if (monitor_idle_.load()) wake_monitor();
}

void Core::queue_recovery(PeerNi* lpni) {
  {
    MutexLock g(recovery_mutex_);
    if (lpni->recovery.queued) return;
    std::int64_t now = steady_now_ns();
    int limit = recovery_limit_.load(std::memory_order_relaxed);
    if (limit > 0 && lpni->recovery.since && now - lpni->recovery.since > limit * kNsPerSec) {
      lpni->recovery.since = 0;  // aged out: a message from it starts a new period
      return;
    }
    queue_recovery_locked(lpni->recovery, now);
    peer_recovery_.push_back(lpni);
  }
  if (monitor_idle_.load()) wake_monitor();
}

bool Core::recovering() const {
  MutexLock g(recovery_mutex_);
  return !ni_recovery_.empty() || !peer_recovery_.empty();
}

bool Core::recover(std::int64_t now) {
  struct Due {
    Nid src;
    Nid dst;
    RecoveryState* st;
  };
  std::vector<Due> due;
  int limit = recovery_limit_.load(std::memory_order_relaxed);
  {
    MutexLock g(recovery_mutex_);
    auto done = [](RecoveryState& st, bool aged) {
      st.queued = false;
      st.ping_count = 0;
      st.next_ping = 0;
      if (!aged) st.since = 0;
    };
    auto step = [&](RecoveryState& st, Nid src, Nid dst) {
      if (st.pending || now < st.next_ping) return;
      st.pending = true;
      ++st.ping_count;
      st.next_ping = now + recovery_interval_ns(st.ping_count);
      due.push_back(Due{src, dst, &st});
    };
    std::erase_if(ni_recovery_, [&](Ni* ni) {
      if (ni->deleted.load() || ni->health.load() >= kMaxHealth) {
        done(ni->recovery, false);
        return true;
      }
      step(ni->recovery, ni->nid, Nid::any());
      return false;
    });
    std::erase_if(peer_recovery_, [&](PeerNi* lpni) {
      bool aged = limit > 0 && now - lpni->recovery.since > limit * kNsPerSec;
      if (lpni->removed || lpni->health.load() >= kMaxHealth || aged) {
        if (aged)
          LNET_LOG(Info, kLogCore, "%s leaves recovery after recovery_limit %d s", lpni->nid.to_string().c_str(),
                   limit);
        done(lpni->recovery, aged);
        return true;
      }
      step(lpni->recovery, Nid::any(), lpni->nid);
      return false;
    });
  }
  for (Due& d : due) {
    if (d.dst.is_any()) d.dst = recovery_peer_for(d.src);
    if (d.dst.is_any()) {  // nobody to ping on its net yet
      MutexLock g(recovery_mutex_);
      d.st->pending = false;
      continue;
    }
    recovery_ping(d.src, d.dst, d.st);
  }
  return recovering();
}

Nid Core::recovery_peer_for(Nid local) {
  ExclusiveLock x(net_locks_);
  Nid best = Nid::any();
  int best_health = -1;
  for (const auto& p : peers_.peers()) {
    if (p->deleted) continue;
    for (const auto& lpni : p->nis) {
      int h = lpni->health.load();
      if (!lpni->removed && lpni->nid.net() == local.net() && h > best_health) {
        best = lpni->nid;
        best_health = h;
      }
    }
  }
  return best;
}

void Core::recovery_ping(Nid src, Nid dst, RecoveryState* st) {
  // The answer is not read (only that it came): a buffer of the smallest ping info,
  // truncated. It lives as long as the MD's handler.
  auto buf = std::make_shared<std::array<std::uint8_t, kPingInfoMinSize>>();
  MdDesc d;
  d.start = buf->data();
  d.length = buf->size();
  d.threshold = 2;  // SEND + REPLY
  d.options = kMdTruncate;
  d.handler = [this, buf, st, dst](const Event& ev) {
    if (ev.type == EventType::Reply || (ev.type == EventType::Send && ev.status))
      LNET_LOG(Debug, kLogCore, "recovery ping of %s: %s %d", dst.to_string().c_str(), event_type_name(ev.type),
               ev.status);
    if (ev.type == EventType::Reply && ev.status == 0) {
      MutexLock g(recovery_mutex_);
      st->ping_count = 0;  // it answers: the back-off starts again
      if (st->queued) st->next_ping = steady_now_ns() + recovery_interval_ns(0);
    }
    // A failed send gets no REPLY: the MD goes now.
    if (ev.type == EventType::Send && ev.status != 0 && !ev.unlinked) (void)md_unlink(ev.md_handle);
    if (ev.unlinked) {
      MutexLock g(recovery_mutex_);
      st->pending = false;
    }
  };
  auto md = md_bind(d, Unlink::Unlink);
  if (md) {
    int rc = send_get(src, *md, ProcessId{dst, kPidLustre}, kReservedPortal, kPingMatchBits, 0, true);
    LNET_LOG(Debug, kLogCore, "recovery ping of %s from %s: %d", dst.to_string().c_str(), src.to_string().c_str(), rc);
    if (rc == 0) return;
    (void)md_unlink(*md);
  }
  MutexLock g(recovery_mutex_);
  st->pending = false;
}

std::vector<Nid> Core::recovery_queue(bool local) const {
  MutexLock g(recovery_mutex_);
  std::vector<Nid> out;
  if (local)
    for (Ni* ni : ni_recovery_) out.push_back(ni->nid);
  else
    for (PeerNi* lpni : peer_recovery_) out.push_back(lpni->nid);
  return out;
}

Status Core::set_ni_health(Nid nid, int value) {
  if (value < 0 || value > kMaxHealth)
    return Failure{-EINVAL, "health " + std::to_string(value) + " is outside 0..1000"};
  bool any = false;
  for (Ni* ni : table().nis) {
    if (ni == lo_ni_ || (!nid.is_any() && ni->nid != nid)) continue;
    ni->health.store(value);
    if (value < kMaxHealth) queue_recovery(ni);
    any = true;
  }
  if (!any) return Failure{-ENOENT, "no local NI " + nid.to_string()};
  return {};
}

Status Core::set_peer_ni_health(Nid nid, int value) {
  if (value < 0 || value > kMaxHealth)
    return Failure{-EINVAL, "health " + std::to_string(value) + " is outside 0..1000"};
  std::vector<PeerNi*> set;
  {
    ExclusiveLock x(net_locks_);
    for (const auto& p : peers_.peers()) {
      if (p->deleted) continue;
      for (const auto& lpni : p->nis) {
        if (lpni->removed || (!nid.is_any() && lpni->nid != nid)) continue;
        lpni->health.store(value);
        set.push_back(lpni.get());
      }
    }
  }
  if (set.empty()) return Failure{-ENOENT, "no peer NI " + nid.to_string()};
  if (value < kMaxHealth)
    for (PeerNi* lpni : set) queue_recovery(lpni);
  return {};
}

}  // namespace lnet::core
