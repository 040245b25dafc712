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
#include "health/health.hpp"

namespace lnet::health {

int recovery_backoff(unsigned ping_count, int max_interval) {
  return std::min(1 << std::min(ping_count, 9U), max_interval);
}

std::int64_t Health::interval_ns(unsigned ping_count) const {
  return recovery_backoff(ping_count, st_.tun.max_recovery_ping_interval.load(std::memory_order_relaxed)) * kNsPerSec;
}

void Health::queue_locked(RecoveryState& rs, std::int64_t now) {
  rs.queued = true;
  if (rs.since == 0) rs.since = now;
  rs.next_ping = now + interval_ns(rs.ping_count);
}

void Health::queue(Ni* ni) {
  {
    MutexLock g(mutex_);
    if (ni->recovery.queued) return;
    queue_locked(ni->recovery, steady_now_ns());
    ni_recovery_.push_back(ni);
  }
  wake();
}

void Health::queue(PeerNi* lpni) {
  {
    MutexLock g(mutex_);
    if (lpni->recovery.queued) return;
    std::int64_t now = steady_now_ns();
    int limit = st_.tun.recovery_limit.load(std::memory_order_relaxed);
    if (limit > 0 && lpni->recovery.since && now - lpni->recovery.since > limit * kNsPerSec) {
      lpni->recovery.since = 0;  // aged out: a message from it starts a new period
      return;
    }
    queue_locked(lpni->recovery, now);
    peer_recovery_.push_back(lpni);
  }
  wake();
}

bool Health::recovering() const {
  MutexLock g(mutex_);
  return !ni_recovery_.empty() || !peer_recovery_.empty();
}

bool Health::recover(std::int64_t now) {
  struct Due {
    Nid src;
    Nid dst;
    RecoveryState* st;
  };
  std::vector<Due> due;
  int limit = st_.tun.recovery_limit.load(std::memory_order_relaxed);
  {
    MutexLock g(mutex_);
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
      st.next_ping = now + interval_ns(st.ping_count);
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
      MutexLock g(mutex_);
      d.st->pending = false;
      continue;
    }
    ping(d.src, d.dst, d.st);
  }
  return recovering();
}

Nid Health::recovery_peer_for(Nid local) const {
  ExclusiveLock x(st_.locks);
  Nid best = Nid::any();
  int best_health = -1;
  for (const auto& p : st_.peers.peers()) {
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

void Health::ping(Nid src, Nid dst, RecoveryState* rs) {
  // The answer is not read (only that it came): a buffer of the smallest ping info,
  // truncated. It lives as long as the MD's handler.
  auto buf = std::make_shared<std::array<std::uint8_t, kPingInfoMinSize>>();
  MdDesc d = portals::ping_md(buf->data(), buf->size(), [this, buf, rs, dst](const Event& ev) {
    if (ev.type == EventType::Reply || (ev.type == EventType::Send && ev.status))
      LNET_LOG(Debug, kLogCore, "recovery ping of %s: %s %d", dst.to_string().c_str(), event_type_name(ev.type),
               ev.status);
    if (ev.type == EventType::Reply && ev.status == 0) {
      MutexLock g(mutex_);
      rs->ping_count = 0;  // it answers: the back-off starts again
      if (rs->queued) rs->next_ping = steady_now_ns() + interval_ns(0);
    }
    // A failed send gets no REPLY: the MD goes now.
    if (ev.type == EventType::Send && ev.status != 0 && !ev.unlinked) (void)host_.md_unlink(ev.md_handle);
    if (ev.unlinked) {
      MutexLock g(mutex_);
      rs->pending = false;
    }
  });
  auto md = host_.md_bind(d, Unlink::Unlink);
  if (md) {
    int rc = host_.send_recovery_ping(*md, src, dst);
    LNET_LOG(Debug, kLogCore, "recovery ping of %s from %s: %d", dst.to_string().c_str(), src.to_string().c_str(), rc);
    if (rc == 0) return;
    (void)host_.md_unlink(*md);
  }
  MutexLock g(mutex_);
  rs->pending = false;
}

std::vector<Nid> Health::recovery_queue(bool local) const {
  MutexLock g(mutex_);
  std::vector<Nid> out;
  if (local)
    for (Ni* ni : ni_recovery_) out.push_back(ni->nid);
  else
    for (PeerNi* lpni : peer_recovery_) out.push_back(lpni->nid);
  return out;
}

Status Health::set_ni_health(Nid nid, int value) {
  if (value < 0 || value > kMaxHealth)
    return Failure{-EINVAL, "health " + std::to_string(value) + " is outside 0..1000"};
  bool any = false;
  for (Ni* ni : st_.nets().nis) {
    if (ni == st_.lo_ni || (!nid.is_any() && ni->nid != nid)) continue;
    ni->health.store(value);
    if (value < kMaxHealth) queue(ni);
    any = true;
  }
  if (!any) return Failure{-ENOENT, "no local NI " + nid.to_string()};
  return {};
}

Status Health::set_peer_ni_health(Nid nid, int value) {
  if (value < 0 || value > kMaxHealth)
    return Failure{-EINVAL, "health " + std::to_string(value) + " is outside 0..1000"};
  std::vector<PeerNi*> set;
  {
    ExclusiveLock x(st_.locks);
    for (const auto& p : st_.peers.peers()) {
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
    for (PeerNi* lpni : set) queue(lpni);
  return {};
}

}  // namespace lnet::health

namespace lnet::health {

std::pair<unsigned, std::int64_t> Health::recovery_of(const RecoveryState& rs) const {
  MutexLock g(mutex_);
  return {rs.ping_count, rs.queued ? rs.next_ping / kNsPerSec : 0};
}

}  // namespace lnet::health
