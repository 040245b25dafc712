// The LNet core of one instance: the message lifecycle (commit, send, parse, forward,
// finalize) over the portals and the net layer's NIs, peers, selector, routes and
// selection rules. It is the LndHost its drivers call back, and the host of the parts it
// holds: the local nets, discovery, health, the router, the ping target, fault rules.
// Admin (admin.hpp) is the Control that configures them.
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
#include "core/local_nets.hpp"
#include "core/ping_target.hpp"
#include "health/health.hpp"
#include "msg/credits.hpp"
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
                   private router::RouterHost,
                   private FaultHost,
                   private PingTargetHost {
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
  // What the parts share (NIs, peers, routes, tunables) and the portals (MEs are attached
  // there directly; what may match a message goes through the calls below).
  net::State& state() { return st_; }
  const net::State& state() const { return st_; }
  portals::PortalTable& portals() { return portals_; }

  // ---- API (see lnet::Instance; ping() is in ping.cpp) ----
  int me_unlink(MeHandle me) override { return portals_.me_unlink(me, *this); }
  Result<MdHandle> md_attach(MeHandle me, const MdDesc& desc, Unlink unlink) override;
  Result<MdHandle> md_bind(const MdDesc& desc, Unlink unlink) override { return portals_.md_bind(desc, unlink); }
  int md_unlink(MdHandle md) override { return portals_.md_unlink(md, *this); }
  int clear_lazy_portal(unsigned portal);
  int put(Nid self, MdHandle md, AckReq ack, ProcessId target, unsigned portal, std::uint64_t match_bits,
          std::uint32_t offset, std::uint64_t hdr_data);
  int get(Nid self, MdHandle md, ProcessId target, unsigned portal, std::uint64_t match_bits, std::uint32_t offset,
          bool recovery = false);
  PingInfo ping_info() const override { return ping_target_.info(); }

  // The Control that configures this instance (admin.hpp).
  Control& control();
  const Control& control() const;

  // ---- LndHost ----
  int parse(NetInterface& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req) override;
  void finalize(LndMessage* msg, int status) override;  // also router::RouterHost
  void notify_peer(NetInterface& ni, Nid peer, bool alive) override;
  void link_up(NetInterface& ni) override;
  void link_state(NetInterface& ni, bool up) override;
  int lnd_timeout() const override;
  bool large_nids() const override { return st_.large_nids.load(std::memory_order_relaxed); }
  bool memory_alive(std::uint64_t memory) const override;
  std::uintptr_t keep_memory(LndMessage& msg) override;
  void release_memory(std::uintptr_t token) override;
  LndMessage* create_reply(NetInterface& ni, LndMessage& get) override;
  void set_reply_length(LndMessage& reply, std::uint32_t len) override;

  // ---- internals for tests ----
  // Marks a local NI up or down (its status in our ping info, which peers are pushed).
  Status set_ni_up(Nid nid, bool up);
  // The parts: tests drive discovery's events and the router checker's rounds.
  peer::Discovery& discovery() { return discovery_; }
  router::Router& router() { return router_; }

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
  // Our ping info again if an NI's status moved with its health.
  void push_status_changes();
  // router::RouterHost (also finalize)
  Message* new_msg(unsigned cpt) override;
  int send(Nid self, Message* msg, Nid dst) override;
  void ping_info_changed() override LNET_EXCLUDES(nets_.mutex());

  void free_msg(Message* msg);

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
  // A sent message gives its credits back; the messages they let go are sent.
  void return_credits(Message* msg);
  void ni_send(Message* msg);

  // Receiving (receive.cpp). `delayed`: a fault rule held it (parse() returned long ago).
  int parse_received(Ni& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req, bool delayed) override;
  // A received message for us, counted, its event filled (`initiator`: the sender's
  // primary NID).
  Message* new_rx(Ni& ni, const Header& hdr, Nid from, Nid initiator, unsigned cpt);
  void parse_put(Message* msg);
  void parse_get(Message* msg);
  void parse_reply(Message* msg);
  // A REPLY to a ping of ours: its round trip goes to the NI and the peer NI.
  void note_response(Message* msg, LatencyStats OpLatencyStats::*which);
  void note_egress(Message* msg);
  void parse_ack(Message* msg);
  void lnd_recv(Message* msg, bool delayed, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t mlen,
                std::uint32_t rlen);
  void drop_rx(Message* msg);
  // Counts a received message as dropped and has its driver discard the payload.
  void drop_payload(Ni& ni, unsigned cpt, const Header& hdr, void* lnd_private, bool delayed) override;
  void receive_matched(portals::DeliveryQueue& matched, portals::DeliveryQueue& dropped);

  // Resend (finalize.cpp): a failed request that health says may go again, sent again.
  void resend(Message* msg);

  Config config_;
  Pid pid_;
  net::State st_;  // what the parts share: CPTs, net locks, counters, NIs, peers, routes, tunables
  portals::PortalTable portals_;
  net::Selector selector_{st_.peers, st_.routes};
  peer::Discovery discovery_{st_, *this};
  health::Health health_{st_, *this};
  router::Router router_{st_, discovery_, health_, *this};
  LocalNets nets_{st_, *this, pid_};  // its mutex is the configuration mutex
  Faults faults_{st_.cpts, health_, *this};
  PingTarget ping_target_{st_, portals_, discovery_, *this, pid_};

  std::atomic<bool> started_{false};
  std::unique_ptr<Admin> admin_;  // the Control (made with the core)
};

// ping() of lnet::Instance: a GET of `target`'s ping info (asked again, once, with room
// for all of them when it has more NIs than `max_nids`).
Result<PingResult> ping(Core& core, ProcessId target, std::chrono::milliseconds timeout, unsigned max_nids, Nid source);

}  // namespace lnet::core
