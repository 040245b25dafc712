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
#include "health/health.hpp"
#include "msg/message.hpp"
#include "net/selection.hpp"
#include "net/state.hpp"
#include "peer/discovery.hpp"
#include "portals/portal_table.hpp"
#include "router/router.hpp"

namespace lnet::core {

using msg::as_message;
using msg::Message;
using msg::MsgQueue;
using net::Ni;
using net::Peer;
using net::PeerNi;
using net::TxQueue;

class Admin;

class Core final : public LndHost,
                   private portals::Completer,
                   private msg::Owner,
                   private peer::DiscoveryHost,
                   private health::HealthHost,
                   private router::RouterHost {
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
  Result<MdHandle> md_bind(const MdDesc& desc, Unlink unlink) override { return portals_.md_bind(desc, unlink); }
  int md_unlink(MdHandle md) override { return portals_.md_unlink(md, *this); }
  int set_lazy_portal(unsigned portal) { return portals_.set_lazy(portal); }
  int clear_lazy_portal(unsigned portal);
  int put(Nid self, MdHandle md, AckReq ack, ProcessId target, unsigned portal, std::uint64_t match_bits,
          std::uint32_t offset, std::uint64_t hdr_data);
  int get(Nid self, MdHandle md, ProcessId target, unsigned portal, std::uint64_t match_bits, std::uint32_t offset,
          bool recovery = false);
  Result<PingResult> ping(ProcessId target, std::chrono::milliseconds timeout, unsigned max_nids, Nid source);
  PingInfo ping_info() const override;

  // The Control that configures this instance (admin.hpp).
  Control& control();
  const Control& control() const;

  // ---- LndHost ----
  int parse(NetInterface& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req) override;
  void finalize(LndMessage* msg, int status) override;  // also router::RouterHost
  void notify_peer(NetInterface& ni, Nid peer, bool alive) override;
  void link_up(NetInterface& ni) override;
  int lnd_timeout() const override;
  LndMessage* create_reply(NetInterface& ni, LndMessage& get) override;
  void set_reply_length(LndMessage& reply, std::uint32_t len) override;

  // ---- internals for tests ----
  const CptTable& cpts() const { return st_.cpts; }
  portals::PortalTable& portals() { return portals_; }
  // The NI with this NID (nullptr if none); NIs live until shutdown.
  Ni* find_ni(Nid nid) const { return st_.find_ni(nid); }
  PeerNi* find_peer_ni(Nid nid) const { return st_.find_peer_ni(nid); }
  // Pings every gateway once now (the router checker's work; tests call it directly).
  void check_routers() { router_.check_routers(); }
  // Marks a local NI up or down (its status in our ping info, which peers are pushed).
  Status set_ni_up(Nid nid, bool up);
  // Discovery (peer/): tests drive its events.
  peer::Discovery& discovery() { return discovery_; }

 private:
  friend class Admin;

  void complete(portals::Delivery* d) override;  // portals::Completer
  void process(Message* msg) override;           // msg::Owner
  // peer::DiscoveryHost
  int send_ping(MdHandle md, Nid target) override;
  int send_push(MdHandle md, Nid target) override;
  void release_held(MsgQueue& resend, MsgQueue& failed, int rc) override;
  void gateway_said(const Peer* gw, const PingInfo& info) override LNET_NO_THREAD_SAFETY_ANALYSIS;
  // health::HealthHost
  int send_recovery_ping(MdHandle md, Nid src, Nid dst) override;
  std::int64_t expire(std::int64_t now) override;
  bool awaiting() override;
  bool periodic() override;
  // router::RouterHost (also finalize)
  Message* new_msg(unsigned cpt) override;
  int send(Nid self, Message* msg, Nid dst) override;
  void ping_info_changed() override LNET_EXCLUDES(config_mutex_);

  void free_msg(Message* msg);

  // The NIs of the configuration and the ping target (startup()).
  Status start_nets() LNET_EXCLUDES(config_mutex_);
  // Local NIs (nets.cpp); under config_mutex_.
  Result<Lnd*> driver_for(const NetConfig& nc) LNET_REQUIRES(config_mutex_);
  Result<Ni*> bring_up(const NetConfig& nc) LNET_REQUIRES(config_mutex_);
  // The NI's tx credits shared out over its CPTs (its configured list).
  void share_credits(Ni& ni) const;
  void take_down(Ni* ni) LNET_REQUIRES(config_mutex_);
  void publish(std::unique_ptr<net::NetTable> t) LNET_REQUIRES(config_mutex_);
  Status set_globals_locked(const GlobalTunables& g) LNET_REQUIRES(config_mutex_);
  void refresh_ping_target(bool force_push = false);

  // Sending (send.cpp).
  // A PUT/GET message with its MD committed and its SEND event prepared; nullptr and *rc
  // (-EINVAL, -ENOENT, -EMSGSIZE) when it cannot be made.
  // `response`: a GET, or a PUT asking for an ACK (tracked per response_tracking).
  Message* new_request(MdHandle mdh, MsgType type, bool response, ProcessId target, unsigned portal,
                       std::uint64_t match_bits, std::uint32_t offset, int* rc);
  void launch(Nid self, Message* msg);  // sends; a failure is reported by the SEND event
  int send_get(Nid self, MdHandle mdh, ProcessId target, unsigned portal, std::uint64_t match_bits,
               std::uint32_t offset, bool recovery);
  int send_local(Message* msg, Nid dst);
  // The selector's question for `msg` to `dst` (from `src`, or any NI when null).
  net::Selector::Query query(const Message* msg, PeerNi* dst, Ni* src, unsigned cpt, bool may_wait) const;
  // The path chosen: the message takes it (its header, event and counters say so).
  void take_path(Message* msg, const net::Path& path, unsigned cpt);
  // A forwarded message whose next hop has been silent and down: dropped.
  [[gnu::cold]] int drop_for_silent_hop(Message* msg, const PeerNi* hop, unsigned cpt);
  bool post_send_locked(Message* msg);  // true: send now; false: queued for credits
  void return_credits_locked(Message* msg, MsgQueue& to_send);
  // A sent message gives its credits back; the messages they let go are sent.
  void return_credits(Message* msg);
  void ni_send(Message* msg);

  // Receiving (receive.cpp). `delayed`: a fault rule held it (parse() returned long ago).
  int parse_received(Ni& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req, bool delayed);
  // A received message for us, counted, its event filled (`initiator`: the sender's
  // primary NID).
  Message* new_rx(Ni& ni, const Header& hdr, Nid from, Nid initiator, unsigned cpt);
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

  // Resend (finalize.cpp): a failed request that health says may go again, sent again.
  void resend(Message* msg);

  // Ping and push targets (ping.cpp).
  int setup_ping_target();
  void post_push_target();
  void on_push(const Event& ev);
  // One ping (a GET of `target`'s ping info into `size` bytes): the reply's bytes.
  Result<std::vector<std::uint8_t>> ping_once(ProcessId target, Nid source, std::size_t size,
                                              std::chrono::milliseconds timeout);

  Config config_;
  Pid pid_;
  net::State st_;  // what the parts share: CPTs, net locks, counters, NIs, peers, routes, tunables
  portals::PortalTable portals_;
  net::Selector selector_{st_.peers, st_.routes};
  peer::Discovery discovery_{st_, *this};
  health::Health health_{st_, *this};
  router::Router router_{st_, discovery_, health_, *this};

  // Configuration: changes are serialised by config_mutex_; readers use snapshots.
  mutable Mutex config_mutex_;
  std::map<std::uint32_t, std::shared_ptr<Lnd>> lnds_ LNET_GUARDED_BY(config_mutex_);  // drivers in use
  std::vector<std::unique_ptr<net::Net>> all_nets_ LNET_GUARDED_BY(config_mutex_);
  std::vector<std::unique_ptr<Ni>> all_nis_ LNET_GUARDED_BY(config_mutex_);
  std::vector<std::unique_ptr<net::NetTable>> tables_ LNET_GUARDED_BY(config_mutex_);
  GlobalTunables globals_ LNET_GUARDED_BY(config_mutex_);

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

  MeHandle ping_me_;
  MdHandle ping_md_;
  std::vector<std::uint8_t> push_buf_;             // the push target's buffer (its MD's handler alone uses it)
  std::atomic<std::size_t> push_target_bytes_{0};  // what it should hold (a truncated push grows it)

  std::atomic<std::uint64_t> pushes_received_{0};
  std::atomic<bool> started_{false};
  std::unique_ptr<Admin> admin_;  // the Control (made with the core)
};

}  // namespace lnet::core
