// The LNet core of one instance: local NIs, peers, portals, credits and the message
// lifecycle (commit, send, parse, finalize). It is the LndHost its drivers call back.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <lnet/api.hpp>
#include <lnet/config.hpp>
#include <lnet/lnd.hpp>

#include "core/counters.hpp"
#include "core/cpt.hpp"
#include "core/message.hpp"
#include "core/ni.hpp"
#include "peer/peer_table.hpp"
#include "portals/portal_table.hpp"
#include "router/router.hpp"

namespace lnet::core {

class Core final : public LndHost, private portals::MsgCompleter {
 public:
  Core(const Config& config, Pid pid);
  ~Core() override;
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // Brings up 0@lo, the configured NIs and the ping/push targets.
  Status startup();
  void shutdown();

  Pid pid() const { return pid_; }
  std::vector<Nid> nids() const;
  int dist(Nid nid, Nid* src, std::uint32_t* order) const;

  // ---- API (see lnet::Instance) ----
  Result<MeHandle> me_attach(unsigned portal, ProcessId id, std::uint64_t bits, std::uint64_t ignore, Unlink unlink,
                             InsPos pos) {
    return portals_->me_attach(portal, id, bits, ignore, unlink, pos);
  }
  Result<MeHandle> me_insert(MeHandle cur, ProcessId id, std::uint64_t bits, std::uint64_t ignore, Unlink unlink,
                             InsPos pos) {
    return portals_->me_insert(cur, id, bits, ignore, unlink, pos);
  }
  int me_unlink(MeHandle me) { return portals_->me_unlink(me, *this); }
  Result<MdHandle> md_attach(MeHandle me, const MdDesc& desc, Unlink unlink);
  Result<MdHandle> md_bind(const MdDesc& desc, Unlink unlink) { return portals_->md_bind(desc, unlink); }
  int md_unlink(MdHandle md) { return portals_->md_unlink(md, *this); }
  int set_lazy_portal(unsigned portal) { return portals_->set_lazy(portal); }
  int clear_lazy_portal(unsigned portal);
  int put(Nid self, MdHandle md, AckReq ack, ProcessId target, unsigned portal, std::uint64_t match_bits,
          std::uint32_t offset, std::uint64_t hdr_data);
  int get(Nid self, MdHandle md, ProcessId target, unsigned portal, std::uint64_t match_bits, std::uint32_t offset);
  Result<PingResult> ping(ProcessId target, std::chrono::milliseconds timeout, unsigned max_nids);
  PingInfo ping_info() const;

  Counters counters() const { return counters_.snapshot(); }
  void reset_counters();
  std::vector<NiInfo> ni_info() const;
  std::vector<PeerInfo> peer_info() const;

  // ---- configuration (the DLC) ----
  // Adds `nid` to the peer `primary` (configuration, tests). -EEXIST: owned by another peer.
  int add_peer_ni(Nid primary, Nid nid, bool multi_rail, bool configured = false);
  // Removes NIDs of a peer (the whole peer when `nids` is empty or holds the primary).
  int del_peer(Nid primary, const std::vector<Nid>& nids);
  std::vector<PeerConfig> configured_peers() const;
  // Brings an NI up at run time; returns its NID.
  Result<Nid> add_ni(const NetConfig& nc);
  // Takes an NI down (0@lo cannot go). -ENOENT: no such NI.
  int del_ni(Nid nid);
  std::vector<NetConfig> net_configs() const;  // the NIs as configured, lo excluded
  Status add_route(const RouteConfig& r);
  int del_route(NetId net, Nid gateway);  // gateway ANY: every route to net
  std::vector<RouteInfo> route_info() const;
  std::vector<RouteConfig> route_configs() const;
  Status set_routing(bool on);
  bool routing() const { return routing_.load(std::memory_order_relaxed); }
  Status set_buffers(const BufferConfig& b);
  BufferConfig buffers() const;
  std::vector<RouterCptInfo> router_pools() const;
  GlobalTunables globals() const;
  Status set_global(std::string_view name, long value);
  // Selection rules; idx -1 appends. del_udsp(-1) removes all.
  Status add_udsp(const UdspRule& rule, int idx);
  int del_udsp(int idx);
  std::vector<UdspRule> udsp_rules() const;

  // ---- LndHost ----
  int parse(NetInterface& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req) override;
  void finalize(LndMessage* msg, int status) override;
  void notify_peer(NetInterface& ni, Nid peer, bool alive) override;
  LndMessage* create_reply(NetInterface& ni, LndMessage& get) override;
  void set_reply_length(LndMessage& reply, std::uint32_t len) override;

  // ---- internals for tests and tools ----
  const CptTable& cpts() const { return cpts_; }
  portals::PortalTable& portals() { return *portals_; }
  // The NI with this NID (nullptr if none); NIs live until shutdown.
  Ni* find_ni(Nid nid) const { return table().find_ni(nid); }
  PeerNi* find_peer_ni(Nid nid);
  int numa_range() const { return numa_range_.load(std::memory_order_relaxed); }
  void set_numa_range(int r) { numa_range_.store(r, std::memory_order_relaxed); }
  // Pings every gateway once now (the router checker's work; tests call it directly).
  void check_routers();

 private:
  void complete(Message* msg) override;  // MsgCompleter
  void process(Message* msg);

  Message* new_msg(unsigned cpt);
  void free_msg(Message* msg);
  const NetTable& table() const { return *table_.load(std::memory_order_acquire); }
  const NetView* find_net(NetId id) const { return table().find(id); }
  bool is_local_nid(Nid nid) const { return find_ni(nid) != nullptr; }
  int peer_credits_for(NetId net) const;
  int peer_rtr_credits_for(NetId net) const;
  Result<Ni*> bring_up(const NetConfig& nc);  // under config_mutex_
  void publish(std::unique_ptr<NetTable> t);  // under config_mutex_
  void refresh_ping_target();                 // under config_mutex_
  void checker_loop();
  void apply_udsp();                    // under config_mutex_
  void udsp_new_peer_ni(PeerNi* lpni);  // under every net lock

  // Sending
  // A PUT/GET message with its MD committed and its SEND event prepared; nullptr and *rc
  // (-EINVAL, -ENOENT, -EMSGSIZE) when it cannot be made.
  Message* new_request(MdHandle mdh, MsgType type, ProcessId target, unsigned portal, std::uint64_t match_bits,
                       std::uint32_t offset, int* rc);
  void launch(Nid self, Message* msg);  // sends; a failure is reported by the SEND event
  int send(Nid self, Message* msg, Nid dst);
  int send_local(Message* msg, Nid dst);
  struct Path {
    Ni* ni = nullptr;
    PeerNi* lpni = nullptr;  // next hop
    Nid dest;                // final destination NID (the peer NI chosen, or the routed target)
  };
  int select_path_locked(unsigned cpt, const Message* msg, Ni* src_ni, PeerNi* dst, Path& out);
  int select_route_locked(unsigned cpt, Ni* src_ni, Nid dst, Path& out);
  Ni* best_ni_on(const NetView& net, unsigned cpt);
  PeerNi* best_peer_ni_on(PeerNet* pn, Ni* ni);
  bool post_send_locked(Message* msg);  // true: send now; false: queued for credits
  void return_credits_locked(Message* msg, MsgQueue& to_send);
  void ni_send(Message* msg);

  // Receiving
  void parse_put(Message* msg);
  void parse_get(Message* msg);
  void parse_reply(Message* msg);
  void parse_ack(Message* msg);
  void lnd_recv(Message* msg, bool delayed, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t mlen,
                std::uint32_t rlen);
  void drop_rx(Message* msg);
  void receive_matched(MsgQueue& matched, MsgQueue& dropped);
  PeerNi* rx_peer(Nid from);

  // Forwarding (router)
  void forward(Message* msg);
  // Takes the router credit, then a buffer; false: the message waits for one of them.
  bool take_router_resources_locked(Message* msg);
  void forward_received(Message* msg);  // the payload is in the buffer: send it on
  int send_forward(Message* msg);
  void release_router_resources(Message* msg);
  void router_recv(Message* msg);  // hand the payload to its buffer

  // Ping and push targets
  int setup_ping_target();
  void post_push_target();
  void on_push(const Event& ev);

  Config config_;
  Pid pid_;
  CptTable cpts_;
  CptLocks net_locks_;
  GlobalCounters counters_;
  std::unique_ptr<portals::PortalTable> portals_;
  PeerTable peers_;
  std::atomic<std::uint64_t> config_gen_{0};
  std::atomic<int> numa_range_{0};

  // Configuration: changes are serialised by config_mutex_; readers use snapshots.
  mutable std::mutex config_mutex_;
  std::map<std::uint32_t, std::unique_ptr<Lnd>> lnds_;
  std::vector<std::unique_ptr<Net>> all_nets_;
  std::vector<std::unique_ptr<Ni>> all_nis_;
  std::atomic<const NetTable*> table_{nullptr};
  std::vector<std::unique_ptr<NetTable>> tables_;
  Ni* lo_ni_ = nullptr;
  GlobalTunables globals_;

 public:
  struct CompiledRule;  // a selection rule with its patterns parsed

 private:
  std::vector<UdspRule> udsp_;                                      // under config_mutex_
  std::shared_ptr<const std::vector<CompiledRule>> udsp_compiled_;  // read under a net lock

  // Routing.
  std::atomic<const RouteTable*> routes_{nullptr};
  std::vector<std::unique_ptr<RouteTable>> route_tables_;
  std::atomic<bool> routing_{false};
  BufferConfig buffers_;
  std::unique_ptr<RtrPool[]> pools_;  // ncpts x kNumPools, under the net lock of their CPT
  std::thread checker_;
  std::mutex checker_mutex_;
  std::condition_variable checker_cv_;
  std::atomic<std::uint32_t> ping_seq_{1};

  MeHandle ping_me_;
  MdHandle ping_md_;
  std::vector<std::uint8_t> push_buf_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> pushes_received_{0};
  std::atomic<bool> started_{false};
};

}  // namespace lnet::core
