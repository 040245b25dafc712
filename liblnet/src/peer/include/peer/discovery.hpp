// Peers and discovery: the per-peer discovery state machine, its thread, and merging what
// a peer says of itself (its ping info, or a push) into the peer table. It owns the
// discovery lock (`mutex_`), which comes before the net locks, and its thread; it sends
// and releases held messages through its host (the core), never under its lock.
#pragma once

#include <condition_variable>
#include <deque>
#include <thread>
#include <utility>
#include <vector>

#include <lnet/api.hpp>
#include <lnet/mutex.hpp>
#include <lnet/result.hpp>

#include "msg/message.hpp"
#include "net/state.hpp"

namespace lnet::peer {

using msg::as_message;
using msg::Message;
using msg::MsgQueue;
using net::Peer;
using net::PeerNi;

// What discovery asks of the engine it runs in.
class DiscoveryHost {
 public:
  virtual Result<MdHandle> md_bind(const MdDesc& desc, Unlink unlink) = 0;
  virtual int md_unlink(MdHandle md) = 0;
  // A discovery ping (a GET of `target`'s ping info into `md`) and a push (a PUT of ours
  // from `md`, ACK asked): 0, or why no message was made (then no event comes).
  virtual int send_ping(MdHandle md, Nid target) = 0;
  virtual int send_push(MdHandle md, Nid target) = 0;
  virtual PingInfo ping_info() const = 0;
  // Messages discovery held: `resend` go (or fail past their deadline), `failed` fail
  // with `rc` (-EHOSTUNREACH when 0).
  virtual void release_held(MsgQueue& resend, MsgQueue& failed, int rc) = 0;
  // A gateway's ping info came: the routes through it follow. Under every net lock.
  virtual void gateway_said(const Peer* gw, const PingInfo& info) = 0;

 protected:
  ~DiscoveryHost() = default;
};

class Discovery {
 public:
  Discovery(net::State& st, DiscoveryHost& host) : st_(st), host_(host) {}
  Discovery(const Discovery&) = delete;
  Discovery& operator=(const Discovery&) = delete;

  void start();
  // Ends the thread; what it held fails with -ESHUTDOWN (st.stopping is set before).
  void stop() LNET_EXCLUDES(mutex_);

  // Whether a message waits for its peer's discovery: a PUT or GET of ours, not on the
  // reserved portal (lnet-facts §4.2), to a peer not yet discovered.
  static bool exempt(const Message* msg);
  // Holds `msg` until `peer` is discovered (starting a round if none is under way).
  enum class Hold { Held, Go, Again };  // Again: the peer merged into another: look again
  Hold hold(Peer* peer, Message* msg) LNET_EXCLUDES(mutex_);

  // A discovery round of `peer` (named `nid`) that pings it, pushing too when `force`;
  // the peer that answered (it may have merged into another), or why not.
  Result<Peer*> discover(Peer* peer, Nid nid, bool force, std::chrono::milliseconds timeout) LNET_EXCLUDES(mutex_);
  // Rounds of several peers at once (the router checker's pings of the gateways), each
  // waited for until `timeout` has passed since the first started.
  std::vector<Result<Peer*>> rounds(const std::vector<std::pair<Peer*, Nid>>& peers, std::chrono::milliseconds timeout)
      LNET_EXCLUDES(mutex_);
  // Our ping info changed (an NI came or went, discovery toggled): multi-rail peers are
  // pushed it (`force`: even those that have discovery off).
  void push_update(bool force) LNET_EXCLUDES(mutex_);
  // Whether every peer has ACKed a push of our current ping info or is unreachable (a
  // router's drain: then none can still be choosing us on what it was told before).
  bool all_told() LNET_EXCLUDES(mutex_);
  // lnetctl peer set --state: the configuration bits of a peer's state.
  Status set_peer_state(Nid nid, std::uint32_t state) LNET_EXCLUDES(mutex_);
  // The peer a merged one went into (itself when not merged).
  Peer* follow(Peer* peer) LNET_EXCLUDES(mutex_);

  // True when discovery has nothing to do: no event or peer queued, none being handled,
  // no peer waiting for a ping reply or push ACK.
  bool idle() LNET_EXCLUDES(mutex_);

  // The events (the thread runs them; tests may too): each a switch on the peer's state.
  struct DcEvent {
    enum Kind { PingDone, PushDone, PushReceived } kind = PingDone;
    Peer* peer = nullptr;  // PingDone, PushDone: the peer of the ping or push
    Nid from;              // PushReceived: the NID it came from
    int status = 0;
    std::uint32_t rlength = 0;  // PushReceived: the length it had
    std::vector<std::uint8_t> data;
  };
  void post(DcEvent ev) LNET_EXCLUDES(mutex_);
  void ping_done(Peer* peer, int status, std::vector<std::uint8_t>& data) LNET_EXCLUDES(mutex_);
  void push_done(Peer* peer, int status) LNET_EXCLUDES(mutex_);
  void push_received(Nid from, std::vector<std::uint8_t>& data, std::uint32_t rlength) LNET_EXCLUDES(mutex_);
  // The thread's next step for a queued peer.
  void step(Peer* peer) LNET_EXCLUDES(mutex_);

 private:
  void loop();
  void queue_locked(Peer* peer) LNET_REQUIRES(mutex_);
  bool needs_push_locked(const Peer* peer) const LNET_REQUIRES(mutex_);
  void send_ping(Peer* peer, std::size_t bytes);
  void send_push(Peer* peer);
  // Ends a round: held messages go (rc 0) or fail with rc.
  void complete_locked(Peer* peer, int rc, MsgQueue& resend, MsgQueue& failed) LNET_REQUIRES(mutex_);
  unsigned start_round_locked(Peer* peer, bool force) LNET_REQUIRES(mutex_);
  Result<Peer*> wait_round_locked(Peer* peer, unsigned round, Nid nid, MutexLock& g,
                                  std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds timeout)
      LNET_REQUIRES(mutex_);

  // Merging (merge.cpp): a peer's ping info into the peer table; the peer that holds its
  // NIDs afterwards. Messages held by peers it absorbed go to `resend`.
  Peer* merge_ping_info(Peer* peer, const PingInfo& info, bool from_ping, MsgQueue& resend) LNET_REQUIRES(mutex_);
  // What the ping info says of the peer itself (discovery, routing, multi-rail).
  void take_features_locked(Peer* peer, const PingInfo& info) LNET_REQUIRES(mutex_, st_.locks);
  // The peer that goes on with what `peer` says (a peer holding its primary NID, or one
  // of its NIDs as a locked primary, absorbs it); `full` cleared when it is left alone.
  Peer* merge_target_locked(Peer* peer, const PingInfo& info, bool& full, MsgQueue& resend)
      LNET_REQUIRES(mutex_, st_.locks);
  // The peer's NIs become those it lists, in its order; those it no longer lists go.
  void merge_nis_locked(Peer* target, const PingInfo& info, MsgQueue& resend) LNET_REQUIRES(mutex_, st_.locks);
  void drop_unlisted_locked(Peer* target, const PingInfo& info, MsgQueue& resend) LNET_REQUIRES(mutex_, st_.locks);
  // `victim`'s NIs (and held messages) go to `into`; adopt_locked also takes what was
  // learned of it.
  void absorb_locked(Peer* into, Peer* victim, MsgQueue& resend) LNET_REQUIRES(mutex_, st_.locks);
  void adopt_locked(Peer* into, Peer* peer, MsgQueue& resend) LNET_REQUIRES(mutex_, st_.locks);

  net::State& st_;
  DiscoveryHost& host_;
  std::thread thread_;
  mutable Mutex mutex_;
  std::condition_variable cv_;       // wakes the thread
  std::condition_variable done_cv_;  // a round ended (discover() waits for it)
  std::deque<Peer*> queue_ LNET_GUARDED_BY(mutex_);
  std::deque<DcEvent> events_ LNET_GUARDED_BY(mutex_);
  bool working_ LNET_GUARDED_BY(mutex_) = false;  // the thread handles an event or a peer
};

}  // namespace lnet::peer
