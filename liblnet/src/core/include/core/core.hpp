// The LNet core of one instance: the message lifecycle (commit, send, parse, forward,
// finalize) over the portals and the net layer's NIs, peers, selector, routes and
// selection rules. It is the LndHost its drivers call back and the Control that
// configures it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include <lnet/api.hpp>
#include <lnet/config.hpp>
#include <lnet/control.hpp>
#include <lnet/lnd/lnd.hpp>
#include <lnet/mutex.hpp>

#include "base/counters.hpp"
#include "base/cpt.hpp"
#include "core/fault.hpp"
#include "core/message.hpp"
#include "net/ni.hpp"
#include "net/peer_table.hpp"
#include "net/routing.hpp"
#include "net/selection.hpp"
#include "net/udsp.hpp"
#include "portals/portal_table.hpp"

namespace lnet::core {

using net::Ni;
using net::Peer;
using net::PeerNi;
using net::TxQueue;

// Seconds between recovery pings after `ping_count` of them: 2^ping_count (the count
// capped at 9), at most max_interval (lnet-facts §5.1).
int recovery_backoff(unsigned ping_count, int max_interval);

class Core final : public LndHost, public Control, private portals::Completer {
 public:
  Core(const Config& config, Pid pid, std::vector<std::shared_ptr<Lnd>> drivers);
  ~Core() override;
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // The core of an instance (white-box tests; liblnet itself goes through Instance).
  static Core& of(Instance& lnet) { return *lnet.core_; }

  // Brings up 0@lo, the configured NIs and the ping/push targets.
  Status startup();
  void shutdown();

  Pid pid() const { return pid_; }
  std::vector<Nid> nids() const;
  int dist(Nid nid, Nid* src, std::uint32_t* order) const;

  // ---- API (see lnet::Instance) ----
  Result<MeHandle> me_attach(unsigned portal, ProcessId id, std::uint64_t bits, std::uint64_t ignore, Unlink unlink,
                             InsPos pos) {
    return portals_.me_attach(portal, id, bits, ignore, unlink, pos);
  }
  Result<MeHandle> me_insert(MeHandle cur, ProcessId id, std::uint64_t bits, std::uint64_t ignore, Unlink unlink,
                             InsPos pos) {
    return portals_.me_insert(cur, id, bits, ignore, unlink, pos);
  }
  int me_unlink(MeHandle me) { return portals_.me_unlink(me, *this); }
  Result<MdHandle> md_attach(MeHandle me, const MdDesc& desc, Unlink unlink);
  Result<MdHandle> md_bind(const MdDesc& desc, Unlink unlink) { return portals_.md_bind(desc, unlink); }
  int md_unlink(MdHandle md) { return portals_.md_unlink(md, *this); }
  int set_lazy_portal(unsigned portal) { return portals_.set_lazy(portal); }
  int clear_lazy_portal(unsigned portal);
  int put(Nid self, MdHandle md, AckReq ack, ProcessId target, unsigned portal, std::uint64_t match_bits,
          std::uint32_t offset, std::uint64_t hdr_data);
  int get(Nid self, MdHandle md, ProcessId target, unsigned portal, std::uint64_t match_bits, std::uint32_t offset,
          bool recovery = false);
  Result<PingResult> ping(ProcessId target, std::chrono::milliseconds timeout, unsigned max_nids, Nid source);
  PingInfo ping_info() const;

  // ---- Control ----
  Result<Nid> add_ni(const NetConfig& nc) override;
  Status del_ni(Nid nid) override;
  std::vector<NetConfig> net_configs() const override;
  std::vector<NiInfo> ni_info() const override;
  Status add_peer(const PeerConfig& p, bool configured) override;
  Status del_peer(Nid primary, const std::vector<Nid>& nids, bool force) override;
  std::vector<PeerConfig> configured_peers() const override;
  std::vector<PeerInfo> peer_info() const override;
  Result<PeerInfo> discover(Nid nid, bool force, std::chrono::milliseconds timeout) override;
  Status add_route(const RouteConfig& r) override;
  Status del_route(NetId net, Nid gateway) override;
  std::vector<RouteConfig> route_configs() const override { return routes_.configs(); }
  std::vector<RouteInfo> route_info() const override;
  Status set_routing(bool on) override;
  bool routing() const override { return routing_.load(std::memory_order_relaxed); }
  Status set_buffers(const BufferConfig& b) override;
  BufferConfig buffers() const override;
  std::vector<RouterCptInfo> router_pools() const override;
  GlobalTunables globals() const override;
  Status set_global(std::string_view name, long value) override;
  Status set_globals(const GlobalTunables& g) override;
  Status set_ni_health(Nid nid, int value) override;
  Status set_lnd_timeout(NetId net, int seconds) override;
  Status set_peer_ni_health(Nid nid, int value) override;
  Status set_peer_state(Nid nid, std::uint32_t state) override;
  std::vector<Nid> recovery_queue(bool local) const override;
  Status add_fault(const FaultRule& rule) override;
  int del_faults(bool delay, Nid source, Nid dest) override { return faults_.del(delay, source, dest); }
  void reset_faults(bool delay) override { faults_.reset(delay); }
  std::vector<FaultRuleInfo> faults(bool delay) const override { return faults_.list(delay); }
  Status add_udsp(const UdspRule& rule, int idx) override;
  Status del_udsp(int idx) override;
  std::vector<UdspRule> udsp_rules() const override;
  Counters counters() const override { return counters_.snapshot(); }
  void reset_counters() override;
  unsigned cpt_count() const override { return cpts_.count(); }
  unsigned cpt_of_nid(Nid nid) const override { return cpts_.of_nid(nid); }

  // ---- LndHost ----
  int parse(NetInterface& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req) override;
  void finalize(LndMessage* msg, int status) override;
  void notify_peer(NetInterface& ni, Nid peer, bool alive) override;
  void link_up(NetInterface& ni) override;
  int lnd_timeout() const override;
  LndMessage* create_reply(NetInterface& ni, LndMessage& get) override;
  void set_reply_length(LndMessage& reply, std::uint32_t len) override;

  // ---- internals for tests ----
  const CptTable& cpts() const { return cpts_; }
  portals::PortalTable& portals() { return portals_; }
  // The NI with this NID (nullptr if none); NIs live until shutdown.
  Ni* find_ni(Nid nid) const { return table().find_ni(nid); }
  PeerNi* find_peer_ni(Nid nid);
  // Pings every gateway once now (the router checker's work; tests call it directly).
  void check_routers();
  // Marks a local NI up or down (its status in our ping info, which peers are pushed).
  Status set_ni_up(Nid nid, bool up);
  // True when discovery has nothing to do: no event or peer queued, none being handled,
  // no peer waiting for a ping reply or push ACK.
  bool dc_idle();
  // Discovery's events (discovery.cpp; the thread runs them, tests may too): each a
  // switch on the peer's state.
  struct DcEvent {
    enum Kind { PingDone, PushDone, PushReceived } kind = PingDone;
    Peer* peer = nullptr;  // PingDone, PushDone: the peer of the ping or push
    Nid from;              // PushReceived: the NID it came from
    int status = 0;
    std::uint32_t rlength = 0;  // PushReceived: the length it had
    std::vector<std::uint8_t> data;
  };
  void dc_ping_done(Peer* peer, int status, std::vector<std::uint8_t>& data) LNET_EXCLUDES(dc_mutex_);
  void dc_push_done(Peer* peer, int status) LNET_EXCLUDES(dc_mutex_);
  void dc_push_received(Nid from, std::vector<std::uint8_t>& data, std::uint32_t rlength) LNET_EXCLUDES(dc_mutex_);
  // The thread's next step for a queued peer.
  void dc_step(Peer* peer) LNET_EXCLUDES(dc_mutex_);

 private:
  void complete(portals::Delivery* d) override;  // portals::Completer
  void process(Message* msg);

  Message* new_msg(unsigned cpt);
  void free_msg(Message* msg);
  const net::NetTable& table() const { return *table_.load(std::memory_order_acquire); }
  const net::NetView* find_net(NetId id) const { return table().find(id); }
  bool is_local_nid(Nid nid) const { return find_ni(nid) != nullptr; }

  // The NIs of the configuration and the ping target (startup()).
  Status start_nets() LNET_EXCLUDES(config_mutex_);
  // Local NIs (nets.cpp); under config_mutex_.
  Result<Lnd*> driver_for(const NetConfig& nc) LNET_REQUIRES(config_mutex_);
  Result<Ni*> bring_up(const NetConfig& nc) LNET_REQUIRES(config_mutex_);
  void take_down(Ni* ni) LNET_REQUIRES(config_mutex_);
  void publish(std::unique_ptr<net::NetTable> t) LNET_REQUIRES(config_mutex_);
  Status set_globals_locked(const GlobalTunables& g) LNET_REQUIRES(config_mutex_);
  void refresh_ping_target(bool force_push = false);

  // Peers. The peer NI of `nid`, made (single-rail, unconfigured) if missing; takes every
  // net lock to make one. nullptr: it could not be made. `primary`: its peer's primary NID.
  PeerNi* peer_ni_for(Nid nid, Nid* primary = nullptr);
  int add_peer_ni_locked(Nid primary, Nid nid, bool multi_rail) LNET_REQUIRES(net_locks_);
  int peer_credits_for(NetId net) const;
  int peer_rtr_credits_for(NetId net) const;

  // Sending (send.cpp).
  // A PUT/GET message with its MD committed and its SEND event prepared; nullptr and *rc
  // (-EINVAL, -ENOENT, -EMSGSIZE) when it cannot be made.
  // `response`: a GET, or a PUT asking for an ACK (tracked per response_tracking).
  Message* new_request(MdHandle mdh, MsgType type, bool response, ProcessId target, unsigned portal,
                       std::uint64_t match_bits, std::uint32_t offset, int* rc);
  void launch(Nid self, Message* msg);  // sends; a failure is reported by the SEND event
  int send_get(Nid self, MdHandle mdh, ProcessId target, unsigned portal, std::uint64_t match_bits,
               std::uint32_t offset, bool recovery);
  int send(Nid self, Message* msg, Nid dst);
  int send_local(Message* msg, Nid dst);
  bool post_send_locked(Message* msg);  // true: send now; false: queued for credits
  void return_credits_locked(Message* msg, MsgQueue& to_send);
  void ni_send(Message* msg);

  // Receiving (receive.cpp). `delayed`: a fault rule held it (parse() returned long ago).
  int parse_received(Ni& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req, bool delayed);
  // Fault rules on receive (fault.cpp): true when they took the message (dropped, or held
  // until the monitor hands it back).
  [[gnu::cold]] bool fault_on_receive(Ni& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req);
  // Health-error rules on transmit: true when one failed the send (finalized).
  [[gnu::cold]] bool fault_on_send(Message* msg);
  // Hands back the held messages that are due (all of them, discarded, with `discard`);
  // the earliest still held (0: none).
  std::int64_t release_delayed(std::int64_t now, bool discard);
  void parse_put(Message* msg);
  void parse_get(Message* msg);
  void parse_reply(Message* msg);
  void parse_ack(Message* msg);
  void lnd_recv(Message* msg, bool delayed, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t mlen,
                std::uint32_t rlen);
  void drop_rx(Message* msg);
  // Counts a received message as dropped and has its driver discard the payload.
  void drop_payload(Ni& ni, unsigned cpt, const Header& hdr, void* lnd_private, bool delayed);
  void receive_matched(portals::DeliveryQueue& matched, portals::DeliveryQueue& dropped);

  // Forwarding (forward.cpp).
  int parse_forward(Ni& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req);
  void forward(Message* msg);
  // Takes the router credit, then a buffer; false: the message waits for one of them.
  bool take_router_resources_locked(Message* msg);
  void forward_received(Message* msg);  // the payload is in the buffer: send it on
  void release_router_resources(Message* msg);
  void router_recv(Message* msg);  // hand the payload to its buffer
  // Whether a router may still send `msg` (forwarded) to its next hop `lpni`: not when
  // the peer NI has been silent for longer than its net's peer_timeout and its driver
  // reports it down (LNet's peer aliveness on routers).
  bool next_hop_alive(const Message* msg, const PeerNi* lpni) const;
  // A message came from `lpni` on `ni`: a router notes when (for next_hop_alive() and
  // check_ni_liveness()).
  void note_alive(Ni& ni, PeerNi* lpni);
  // A router's NIs that heard nothing for router_ping_timeout + alive_router_check_interval
  // go down, and up again when they hear (the monitor, while routing).
  void check_ni_liveness();

  // Health (health.cpp): a sent message's outcome moves its NIs' health; a message
  // received from a peer NI raises its health.
  void account_health(Message* msg);
  void note_received_from(PeerNi* lpni);
  bool remote_health_applies(const PeerNi* lpni) const;
  bool is_gateway(const PeerNi* lpni) const;
  // A remote failure's cost to a peer NI's health (the gateway's own sensitivity or the
  // global one), and recovery.
  void lower_peer_ni(PeerNi* lpni);
  // The NID a route names `peer` by, or ANY when it is no gateway (takes the net locks:
  // not under one).
  Nid gateway_nid(const net::Peer* peer) const;
  std::size_t peer_ni_count(const PeerNi* lpni) const;
  // Resend (health.cpp): whether a failed request goes again on another path, and
  // sending it again.
  bool may_resend(const Message* msg) const;
  void resend(Message* msg);

  // Ping and push targets (ping.cpp).
  int setup_ping_target();
  void post_push_target();
  void on_push(const Event& ev);

  // Discovery (discovery.cpp): the per-peer state machine, its thread, and merging what
  // a peer says of itself into the peer table. Lock order: dc_mutex_, then net locks.
  // Whether a message waits for its peer's discovery: a PUT or GET of ours, not on the
  // reserved portal (lnet-facts §4.2), to a peer not yet discovered.
  static bool discovery_exempt(const Message* msg);
  // Holds `msg` until `peer` is discovered (starting a round if none is under way).
  enum class Hold { Held, Go, Again };  // Again: the peer merged into another: look again
  Hold hold_for_discovery(Peer* peer, Message* msg) LNET_EXCLUDES(dc_mutex_);
  void discovery_loop();
  void post_dc_event(DcEvent ev) LNET_EXCLUDES(dc_mutex_);
  void queue_peer_locked(Peer* peer) LNET_REQUIRES(dc_mutex_);
  // Actions.
  bool needs_push_locked(const Peer* peer) const LNET_REQUIRES(dc_mutex_);
  void send_discovery_ping(Peer* peer, std::size_t bytes);
  void send_push(Peer* peer);
  // Ends a round: held messages go (rc 0) or fail with rc.
  void dc_complete_locked(Peer* peer, int rc, MsgQueue& resend, MsgQueue& failed) LNET_REQUIRES(dc_mutex_);
  void release_held(MsgQueue& resend, MsgQueue& failed, int rc);
  // Merges a peer's ping info; the peer that holds its NIDs afterwards. Messages held by
  // peers it absorbed go to `resend`.
  Peer* merge_ping_info(Peer* peer, const PingInfo& info, bool from_ping, MsgQueue& resend) LNET_REQUIRES(dc_mutex_);
  void absorb_locked(Peer* into, Peer* victim, MsgQueue& resend) LNET_REQUIRES(dc_mutex_, net_locks_);
  // Our ping info changed (an NI came or went, discovery toggled): multi-rail peers are
  // pushed it (`force`: even those that have discovery off).
  void push_update(bool force) LNET_EXCLUDES(dc_mutex_);

  // Starts a discovery round of `peer` that pings it (and pushes when `force`); the
  // rounds it has ended so far. Under dc_mutex_.
  unsigned start_round_locked(Peer* peer, bool force) LNET_REQUIRES(dc_mutex_);
  // Waits for the round after `round` of `peer` (following merges) until `deadline`: the
  // peer that answered, or the failure.
  Result<Peer*> wait_round_locked(Peer* peer, unsigned round, Nid nid, MutexLock& g,
                                  std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds timeout)
      LNET_REQUIRES(dc_mutex_);
  // Routes through a gateway whose ping info this is: up when it routes and (a single
  // hop) lists an NI up on the route's net. Under every net lock.
  void update_routes_locked(const Peer* gw, const PingInfo& info) LNET_REQUIRES(net_locks_);
  // The health a gateway NI needs to be used: router_sensitivity percent of the maximum.
  int gateway_min_health() const { return kMaxHealth * router_sensitivity_.load(std::memory_order_relaxed) / 100; }
  // drop_asym_route: a message routed to us through `gw` from a network we would not
  // reach through `gw`.
  bool asymmetric(Nid src, const PeerNi* gw) const;

  // The router checker (routing.cpp).
  void checker_loop();
  // The monitor (monitor.cpp): expires responses that did not come in time and runs
  // recovery.
  void monitor_loop();
  void wake_monitor();
  // The router checker sees a new alive_router_check_interval at once.
  void wake_checker();
  void response_timed_out(Nid next_hop);

  // Recovery (recovery.cpp): unhealthy NIs and peer NIs are queued and pinged with a
  // back-off until their health is back at 1000.
  void queue_recovery(Ni* ni);
  void queue_recovery(PeerNi* lpni);
  void queue_recovery_locked(RecoveryState& st, std::int64_t now) LNET_REQUIRES(recovery_mutex_);
  // Pings what is due; true while a queue is not empty.
  bool recover(std::int64_t now);
  bool recovering() const;
  void recovery_ping(Nid src, Nid dst, RecoveryState* st);
  // The peer NI a local NI's recovery ping goes to: the healthiest on its net.
  Nid recovery_peer_for(Nid local);
  std::int64_t recovery_interval_ns(unsigned ping_count) const;

  Config config_;
  Pid pid_;
  CptTable cpts_;
  mutable CptLocks net_locks_;
  GlobalCounters counters_;
  portals::PortalTable portals_;
  net::PeerTable peers_;
  net::Routes routes_;
  std::shared_ptr<Lnd> rtr_memory_owner_;  // the driver whose memory holds router buffers (outlives them)
  net::RouterBuffers rtr_buffers_;
  net::Selector selector_{peers_, routes_};
  std::atomic<std::uint64_t> config_gen_{0};
  std::atomic<int> numa_range_{0};
  std::atomic<int> health_sensitivity_{GlobalTunables{}.health_sensitivity};
  std::atomic<int> retry_count_{GlobalTunables{}.retry_count};
  std::atomic<int> transaction_timeout_{GlobalTunables{}.transaction_timeout};
  std::atomic<int> response_tracking_{GlobalTunables{}.response_tracking};
  std::atomic<int> recovery_interval_{GlobalTunables{}.recovery_interval};
  std::atomic<int> router_check_interval_{GlobalTunables{}.alive_router_check_interval};
  std::atomic<int> recovery_limit_{GlobalTunables{}.recovery_limit};
  std::atomic<int> max_recovery_ping_interval_{GlobalTunables{}.max_recovery_ping_interval};
  std::atomic<std::uint32_t> max_interfaces_{kDefaultMaxInterfaces};
  std::atomic<int> router_sensitivity_{GlobalTunables{}.router_sensitivity};
  std::atomic<bool> drop_asym_route_{false};

  // Configuration: changes are serialised by config_mutex_; readers use snapshots.
  mutable Mutex config_mutex_;
  std::map<std::uint32_t, std::shared_ptr<Lnd>> lnds_ LNET_GUARDED_BY(config_mutex_);  // drivers in use
  std::vector<std::unique_ptr<net::Net>> all_nets_ LNET_GUARDED_BY(config_mutex_);
  std::vector<std::unique_ptr<Ni>> all_nis_ LNET_GUARDED_BY(config_mutex_);
  std::atomic<const net::NetTable*> table_{nullptr};
  std::vector<std::unique_ptr<net::NetTable>> tables_ LNET_GUARDED_BY(config_mutex_);
  Ni* lo_ni_ = nullptr;
  GlobalTunables globals_ LNET_GUARDED_BY(config_mutex_);
  // Changed under config_mutex_ and every net lock; peers made on the data path (under
  // every net lock only) read it.
  net::UdspRules udsp_ LNET_GUARDED_BY(net_locks_);

  // Routing.
  std::atomic<bool> routing_{false};
  BufferConfig buffers_ LNET_GUARDED_BY(config_mutex_);
  std::thread checker_;
  Mutex checker_mutex_;
  std::condition_variable checker_cv_;
  std::atomic<std::uint32_t> ping_seq_{1};
  std::thread monitor_;
  Mutex monitor_mutex_;
  std::condition_variable monitor_cv_;
  // The monitor sleeps without a deadline (nothing to expire): a request that starts
  // tracking wakes it.
  std::atomic<bool> monitor_idle_{false};
  // Fault injection, and the received messages delay rules hold (by release time).
  FaultTable faults_;
  struct HeldRx {
    Ni* ni;
    Header hdr;
    Nid from;
    void* lnd_private;
    bool rdma_req;
  };
  Mutex held_mutex_;
  std::multimap<std::int64_t, HeldRx> held_rx_ LNET_GUARDED_BY(held_mutex_);
  // The recovery queues (RecoveryState of NIs and peer NIs is under this lock too).
  mutable Mutex recovery_mutex_;
  std::vector<Ni*> ni_recovery_ LNET_GUARDED_BY(recovery_mutex_);
  std::vector<PeerNi*> peer_recovery_ LNET_GUARDED_BY(recovery_mutex_);

  MeHandle ping_me_;
  MdHandle ping_md_;
  std::vector<std::uint8_t> push_buf_;             // the push target's buffer (its MD's handler alone uses it)
  std::atomic<std::size_t> push_target_bytes_{0};  // what it should hold (a truncated push grows it)

  // Discovery.
  std::atomic<bool> discovery_{true};
  std::thread discovery_thread_;
  mutable Mutex dc_mutex_;
  std::condition_variable dc_cv_;       // wakes the discovery thread
  std::condition_variable dc_done_cv_;  // a round ended (discover() waits for it)
  std::deque<Peer*> dc_queue_ LNET_GUARDED_BY(dc_mutex_);
  std::deque<DcEvent> dc_events_ LNET_GUARDED_BY(dc_mutex_);
  bool dc_working_ LNET_GUARDED_BY(dc_mutex_) = false;  // the thread handles an event or a peer
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> pushes_received_{0};
  std::atomic<bool> started_{false};
};

}  // namespace lnet::core
