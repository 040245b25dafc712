// Routing: the routes and their state, the router buffers, forwarding what is not for
// this node, and the router checker that pings the gateways (through discovery) to tell
// which routes are up. It owns its configuration lock (before the core's configuration
// mutex) and the checker's lock and thread; router buffers and credits are under the
// net locks of their CPT.
#pragma once

#include <condition_variable>
#include <memory>
#include <thread>
#include <vector>

#include <lnet/config.hpp>
#include <lnet/lnd/lnd.hpp>
#include <lnet/mutex.hpp>
#include <lnet/result.hpp>
#include <lnet/stats.hpp>

#include "health/health.hpp"
#include "msg/message.hpp"
#include "net/selection.hpp"
#include "net/state.hpp"
#include "peer/discovery.hpp"

namespace lnet::router {

using msg::as_message;
using msg::Message;
using msg::MsgQueue;
using net::Ni;
using net::Peer;
using net::PeerNi;

// What the router asks of the engine it runs in.
class RouterHost {
 public:
  virtual Message* new_msg(unsigned cpt) = 0;
  // Sends `msg` towards `dst` (0, or why not: then it is not finalized).
  virtual int send(Nid self, Message* msg, Nid dst) = 0;
  virtual void finalize(LndMessage* msg, int status) = 0;
  // What this node tells its peers of itself changed (routing, an NI's status): the ping
  // target is made again and peers are pushed it. Takes the configuration mutex.
  virtual void ping_info_changed() = 0;

 protected:
  ~RouterHost() = default;
};

class Router {
 public:
  Router(net::State& st, peer::Discovery& discovery, health::Health& health, RouterHost& host)
      : st_(st), discovery_(discovery), health_(health), host_(host), buffers_(st.cpts.count()) {}
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // The driver whose memory holds router buffers (kept until the router goes).
  void set_memory(std::shared_ptr<Lnd> owner, BufferMemory* memory);
  void start();
  void stop();  // st.stopping is set before

  // Control.
  Status add_route(const RouteConfig& r) LNET_EXCLUDES(mutex_);
  Status del_route(NetId net, Nid gateway) LNET_EXCLUDES(mutex_);
  std::vector<RouteInfo> route_info() const;
  // Off while on: drains (announced at once, forwarding until drain_step stops it).
  Status set_routing(bool on) LNET_EXCLUDES(mutex_);
  // The monitor's look at a drain: routing stops once nothing was forwarded for
  // drain_quiet() seconds, or drain_most() after the drain began.
  void drain_step() LNET_EXCLUDES(mutex_);
  int drain_quiet() const;
  int drain_most() const;
  Status set_buffers(const BufferConfig& b) LNET_EXCLUDES(mutex_);
  BufferConfig buffers() const LNET_EXCLUDES(mutex_);
  std::vector<RouterCptInfo> router_pools() const;
  // The router checker sees a new alive_router_check_interval at once.
  void wake_checker();
  // Pings every gateway once now (the checker's work; tests call it directly).
  void check_routers();

  // Routes through a gateway whose ping info this is: up when it routes and (a single
  // hop) lists an NI up on the route's net. Under every net lock.
  void update_routes_locked(const Peer* gw, const PingInfo& info) LNET_REQUIRES(st_.locks);
  // drop_asym_route: a message routed to us through `gw` from a network we would not
  // reach through `gw`.
  bool asymmetric(Nid src, const PeerNi* gw) const;

  // Forwarding. A message for another node arrived on `ni`.
  int parse_forward(Ni& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req);
  // Its payload is in the router buffer: on to the next hop.
  void forward_received(Message* msg);
  // It is finalized: its router credit and buffer go back (to a message waiting for them).
  void release_resources(Message* msg);
  // A driver's network may still write into the message's buffer after it fails
  // (LndHost::keep_memory): the buffer leaves the message (its credit does not) and is
  // lent to no one until release_buffer(token). 0: the message holds no buffer.
  std::uintptr_t keep_buffer(Message* msg);
  void release_buffer(std::uintptr_t token);
  // Tokens of keep_buffer() have this bit set (an MD's never do: they are aligned).
  static constexpr std::uintptr_t kBufferToken = 1;
  // The messages waiting for router buffers (shutdown fails them). Under every net lock
  // (the caller's name for them is not ours, so the analysis cannot check it).
  void drain_waiting(Fifo<FifoLink>& to) LNET_NO_THREAD_SAFETY_ANALYSIS;
  // Whether a router may still send `msg` (forwarded) to its next hop `lpni`: not when
  // the peer NI has been silent for longer than its net's peer_timeout and its driver
  // reports it down (LNet's peer aliveness on routers).
  bool next_hop_alive(const Message* msg, const PeerNi* lpni) const;
  // A message came from `lpni` on `ni`: a router notes when.
  void note_alive(Ni& ni, PeerNi* lpni);
  // A driver says `ni`'s link is up.
  void link_up(Ni& ni);
  // A router's NIs that heard nothing for router_ping_timeout + alive_router_check_interval
  // go down, and up again when they hear (the monitor, while routing).
  void check_ni_liveness();

 private:
  void checker_loop();
  void switch_routing_locked(bool on) LNET_REQUIRES(mutex_);
  void forward(Message* msg);
  void no_route_onward(const Message& msg);  // logs a message we were sent to route but cannot
  // Takes the router credit, then a buffer; false: the message waits for one of them.
  bool take_resources_locked(Message* msg);
  void recv(Message* msg);  // hand the payload to its buffer

  net::State& st_;
  peer::Discovery& discovery_;
  health::Health& health_;
  RouterHost& host_;
  std::shared_ptr<Lnd> memory_owner_;  // outlives the buffers
  net::RouterBuffers buffers_;
  mutable Mutex mutex_;  // route and buffer changes, the routing switch
  BufferConfig config_ LNET_GUARDED_BY(mutex_);
  struct Drain {
    std::int64_t started = 0, last_forward = 0;  // coarse steady ns
    std::int64_t forwarded = 0;                  // route_count when last looked at
    std::int64_t during = 0;                     // forwarded since it began
  };
  Drain drain_ LNET_GUARDED_BY(mutex_);
  std::thread checker_;
  Mutex checker_mutex_;
  std::condition_variable checker_cv_;
};

}  // namespace lnet::router
