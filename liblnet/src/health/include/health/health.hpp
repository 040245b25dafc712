// Health and recovery (lnet-facts §5.1, §5.3): the outcome of every sent message moves
// the health of the NIs it used; unhealthy NIs and peer NIs go on recovery queues and are
// pinged with a back-off until they are back at 1000; a failed request may be resent on
// another path. The monitor thread expires what did not come by its deadline (through its
// host) and runs recovery every recovery_interval. It owns the recovery lock (a leaf:
// taken under nothing but itself) and the monitor's lock and thread.
#pragma once

#include <condition_variable>
#include <thread>
#include <utility>
#include <vector>

#include <lnet/api.hpp>
#include <lnet/mutex.hpp>
#include <lnet/result.hpp>

#include "msg/message.hpp"
#include "net/state.hpp"

namespace lnet::health {

using msg::Message;
using net::Ni;
using net::PeerNi;

// Seconds between recovery pings after `ping_count` of them: 2^ping_count (the count
// capped at 9), at most max_interval (lnet-facts §5.1).
int recovery_backoff(unsigned ping_count, int max_interval);

// What health asks of the engine it runs in.
class HealthHost {
 public:
  virtual Result<MdHandle> md_bind(const MdDesc& desc, Unlink unlink) = 0;
  virtual int md_unlink(MdHandle md) = 0;
  // A recovery ping: a GET of the ping buffer from `src` (ANY: any NI) to exactly `dst`,
  // never resent. 0, or why no message was made (then no event comes).
  virtual int send_recovery_ping(MdHandle md, Nid src, Nid dst) = 0;
  // The monitor's look at `now`: responses past their deadline expire (each tells
  // response_timed_out()), held messages that are due go; the earliest deadline left
  // (steady clock, ns; 0: none).
  virtual std::int64_t expire(std::int64_t now) = 0;
  // Whether anything waits for a deadline (a response tracked, a message held).
  virtual bool awaiting() = 0;
  // Every recovery_interval: the host's own look (a router checks its NIs); true while
  // it wants the monitor to keep looking.
  virtual bool periodic() = 0;

 protected:
  ~HealthHost() = default;
};

class Health {
 public:
  Health(net::State& st, HealthHost& host) : st_(st), host_(host) {}
  Health(const Health&) = delete;
  Health& operator=(const Health&) = delete;

  void start();
  void stop();  // st.stopping is set before
  // The monitor has something new to wait for (a response tracked, a message held, the
  // node began routing).
  void wake() {
    if (idle_.load()) wake_now();
  }
  void wake_now();
  // The host's periodic look (HealthHost::periodic) is due now, not at the next interval.
  void look_now() {
    look_now_.store(true);
    wake_now();
  }

  // A sent message's outcome moves its NIs' health (a failure also queues recovery).
  void account(const Message* msg);
  // A message came from `lpni`: its health rises (to 1000 for a gateway, or on a router).
  void note_received_from(PeerNi* lpni);
  // A response that never came counts against the peer NI it was awaited from.
  void response_timed_out(Nid next_hop);
  // Its driver reports a peer NI down (every connection to it lost).
  void peer_ni_failed(PeerNi* lpni) { lower_peer_ni(lpni); }
  // Whether a failed request goes again on another path (facts §5.3).
  bool may_resend(const Message* msg) const;

  // Control: health set by hand (lnetctl net/peer set --health), the recovery queues.
  Status set_ni_health(Nid nid, int value);
  Status set_peer_ni_health(Nid nid, int value);
  std::vector<Nid> recovery_queue(bool local) const LNET_EXCLUDES(mutex_);
  // Where an NI stands in recovery: its ping count and when the next ping goes (s; 0:
  // not queued).
  std::pair<unsigned, std::int64_t> recovery_of(const RecoveryState& st) const LNET_EXCLUDES(mutex_);

 private:
  void loop();
  bool remote_applies(const PeerNi* lpni) const;
  void lower_peer_ni(PeerNi* lpni);
  void queue(Ni* ni) LNET_EXCLUDES(mutex_);
  void queue(PeerNi* lpni) LNET_EXCLUDES(mutex_);
  void queue_locked(RecoveryState& rs, std::int64_t now) LNET_REQUIRES(mutex_);
  // Pings what is due; true while a queue is not empty.
  bool recover(std::int64_t now) LNET_EXCLUDES(mutex_);
  bool recovering() const LNET_EXCLUDES(mutex_);
  void ping(Nid src, Nid dst, RecoveryState* rs);
  // The peer NI a local NI's recovery ping goes to: the healthiest on its net.
  Nid recovery_peer_for(Nid local) const;
  std::int64_t interval_ns(unsigned ping_count) const;

  net::State& st_;
  HealthHost& host_;
  // The recovery queues (the RecoveryState of NIs and peer NIs is under this lock too).
  mutable Mutex mutex_;
  std::vector<Ni*> ni_recovery_ LNET_GUARDED_BY(mutex_);
  std::vector<PeerNi*> peer_recovery_ LNET_GUARDED_BY(mutex_);
  std::thread monitor_;
  Mutex monitor_mutex_;
  std::condition_variable monitor_cv_;
  // The monitor sleeps without a deadline (nothing to expire): what gives it one wakes it.
  std::atomic<bool> idle_{false};
  std::atomic<bool> look_now_{false};
};

}  // namespace lnet::health
