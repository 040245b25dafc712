// The socket LND (tcp nets), wire-compatible with the kernel's ksocklnd: an acceptor on
// each NI's address (port 988 by default), connections with the acceptor request and a
// HELLO, typed connections (CONTROL, BULK_IN, BULK_OUT), 24-byte framing, NOOPs for
// zero-copy ACK cookies and keepalives. epoll I/O threads drive every socket; a sender
// writes directly when its connection is idle.
#pragma once

#include <netinet/in.h>

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <lnet/lnd/fifo.hpp>
#include <lnet/lnd/lnd.hpp>
#include <lnet/log.hpp>
#include <lnet/mutex.hpp>
#include <lnet/socklnd.hpp>

#include "io_thread.hpp"
#include "ip_addr.hpp"
#include "link_watch.hpp"
#include "sock_wire.hpp"

namespace lnet::sock {

using Clock = std::chrono::steady_clock;

class SocketLnd;
class Conn;
struct SockNi;

// One message (or NOOP) on its way out: ksock header + LNet header (72 bytes, or 96 on
// an IPv6 NI's protocol V4) + payload.
struct Tx {
  Tx* next = nullptr;
  NetInterface* ni = nullptr;
  LndMessage* msg = nullptr;  // nullptr: a NOOP
  std::uint8_t hdr[kMsgHdrSize + kHeaderLargeSize] = {};
  std::uint32_t hdr_len = 0;
  std::uint64_t total = 0;
  std::uint64_t sent = 0;
  Clock::time_point deadline;
};

using TxList = Fifo<Tx>;

Tx* tx_alloc();
void tx_free(Tx* t);

// A remote NI we talk to on one local NI.
struct SockPeer {
  Nid nid;
  Pid pid = kPidLustre;
  IpAddr ip;
  Mutex mutex;
  std::vector<std::shared_ptr<Conn>> conns LNET_GUARDED_BY(mutex);  // established
  int connecting LNET_GUARDED_BY(mutex) = 0;                        // active attempts in flight
  std::uint32_t version LNET_GUARDED_BY(mutex) = kProtoV3;          // what to offer next time
  std::uint64_t incarnation LNET_GUARDED_BY(mutex) = 0;             // 0: not heard yet
  TxList pending LNET_GUARDED_BY(mutex);                            // waiting for a connection
  Clock::time_point next_connect LNET_GUARDED_BY(mutex){};
  int backoff_ms LNET_GUARDED_BY(mutex) = 0;
  // Connections of each bulk type to keep: the NI's conns_per_peer when we last dialled
  // with none up (0: never dialled), as ksocklnd's connection set remembers it; a change
  // (net set) reaches a peer when it connects again.
  int max_conns LNET_GUARDED_BY(mutex) = 0;
  std::uint64_t post_seq LNET_GUARDED_BY(mutex) = 0;  // orders the choices (round robin)
  // Incoming connections of each type taken and not established yet: counted against
  // conns_per_peer, so that two I/O threads cannot both take the last place.
  int accepting[4] LNET_GUARDED_BY(mutex) = {};
  bool userspace = false;  // identified by source port: we never connect to it
  // Reaped: no longer in its NI's table (it had no connection and nothing queued for
  // peer_idle seconds); whoever still holds it looks it up again.
  bool gone LNET_GUARDED_BY(mutex) = false;
  Clock::time_point idle_since LNET_GUARDED_BY(mutex){};  // {}: not idle
};

// Per-NI state of the driver.
struct SockNi {
  NetInterface* ni = nullptr;
  SocketLnd* lnd = nullptr;
  IpAddr ip;  // IPv6 for a large NID: its connections speak protocol V4
  std::uint64_t incarnation = 0;
  std::atomic<int> timeout{50};        // seconds; lnetctl net set --lnd-timeout changes it at run time
  std::atomic<int> conns_per_peer{1};  // in effect (0 configured: from the link speed); net set changes it
  std::string ifname;                  // the interface of `ip`, whose speed the automatic value follows
  SharedMutex mutex;                   // the peer map
  // Keyed by (NID, pid), as the kernel keys its peers: a userspace client identified by
  // its source port is not the kernel-like peer on the same address.
  std::map<std::pair<std::uint64_t, Pid>, std::shared_ptr<SockPeer>> peers LNET_GUARDED_BY(mutex);
  Mutex conns_mutex;  // every connection of this NI, established or not
  std::vector<std::shared_ptr<Conn>> conns LNET_GUARDED_BY(conns_mutex);
  std::atomic<bool> stopping{false};
  // Its link (link_watch.hpp; `ifname`'s), under the driver's nis_mutex_: the address
  // it must hold (0: an address not on it, as an explicit NID on lo), the state last told.
  IpAddr link_ip;
  bool link_up = true;
  // The HELLO version this NI offers: V4 on IPv6 (large NIDs), else V3 (V2 untyped).
  std::uint32_t proto(bool typed_conns) const { return ip.v6() ? kProtoV4 : typed_conns ? kProtoV3 : kProtoV2; }
};

// Why an incoming connection is refused (answered with a HELLO of type NONE).
enum class Refusal {
  None,    // taken
  Race,    // both sides dialling: the greater NID keeps its own connections
  Excess,  // the peer has conns_per_peer connections of that type already
  Gone,    // the peer's entry was reaped meanwhile: look it up again
};

class SocketLnd final : public Lnd {
 public:
  SocketLnd();
  ~SocketLnd() override;

  std::uint32_t net_type() const override { return kSockLnd; }
  int startup(NetInterface& ni) override;
  void shutdown(NetInterface& ni) override;
  int send(NetInterface& ni, LndMessage& msg) override;
  int recv(NetInterface& ni, void* lnd_private, LndMessage* msg, bool delayed, const iovec* iov, unsigned niov,
           std::uint32_t offset, std::uint32_t mlen, std::uint32_t rlen) override;
  Status check_config(const NetConfig& config) const override;
  int timeout(const NetInterface& ni) const override;
  long tunable_in_effect(const NetInterface& ni, std::string_view name, long configured) const override;
  int set_timeout(NetInterface& ni, int seconds) override;
  int set_tunable(NetInterface& ni, std::string_view name, long value) override;
  std::vector<std::pair<std::string, std::uint64_t>> counters() const override;
  std::string counters_name() const override { return "tcp"; }

  const SocketParams& params() const { return params_; }
  IoThread& io_for(std::uint64_t key) { return *io_[key % io_.size()]; }

  // Called by connections.
  std::shared_ptr<SockPeer> find_or_add_peer(SockNi& sni, Nid nid, Pid pid, const IpAddr& ip);
  void conn_established(SockNi& sni, const std::shared_ptr<SockPeer>& peer, const std::shared_ptr<Conn>& conn);
  void conn_closed(SockNi& sni, const std::shared_ptr<SockPeer>& peer, Conn* conn, bool was_established, bool active,
                   int rc);
  // Whether an incoming connection of `type` (as we record it) from `peer` is refused:
  // we are racing it, or it has as many of that type as conns_per_peer allows. Counted.
  // One taken holds a place among them until conn_established or release_incoming.
  Refusal refuse_incoming(SockNi& sni, SockPeer& peer, ConnType type, std::uint64_t incarnation);
  void release_incoming(SockPeer& peer, ConnType type);
  // A handshake refused for its bytes (a bad acceptor request or HELLO, a protocol
  // version or NID size not of the connection's address family): counted.
  void refused_protocol() { conns_refused_protocol_.fetch_add(1, std::memory_order_relaxed); }
  // An accepted connection starts its handshake: false when max_handshakes_per_ip are
  // under way from its address (it is closed, counted: a flood from one address cannot
  // keep other peers out); at max_handshakes in all the oldest is closed to make room.
  // Each true is ended once (handshake_end), established or closed.
  bool handshake_begin(const std::shared_ptr<Conn>& c);
  void handshake_end(const IpAddr& from);
  // Lines a stranger can make us repeat (refused or failed handshakes): one per 10 s,
  // with the count of those held back.
  LogLimiter& stranger_log() { return stranger_log_; }
  void launch_connect(SockNi& sni, const std::shared_ptr<SockPeer>& peer) LNET_REQUIRES(peer->mutex);
  // The NI on address `ip` whose NID is `target` (an acceptor request names it), if any.
  SockNi* ni_for_accept(const IpAddr& ip, Nid target);

 private:
  void tick(Clock::time_point now);
  // Links: the NI's initial state, and every NI's again after a change the kernel told.
  void watch_link(SockNi& sni);
  void check_links();
  void stop_if_idle();
  int listen_locked(NetInterface& ni, SockNi* sni) LNET_REQUIRES(nis_mutex_);
  struct Listener;
  void accept_ready(Listener& l);
  void queue_tx(SockNi& sni, std::shared_ptr<SockPeer> peer, Tx* tx, bool bulk);
  // Forgets the peers of `sni` idle for peer_idle seconds (no connection, nothing queued
  // or being dialled): a table an outsider could otherwise fill with one entry per
  // (NID, pid) it ever used.
  void reap_peers(SockNi& sni, Clock::time_point now);
  // accept() ran out of descriptors or memory: the listener rests rather than spin on a
  // socket that stays readable; the housekeeping tick wakes it.
  void pause_listener(Listener& l);
  void resume_listeners(Clock::time_point now);
  static void fail_txs(TxList& txs, int rc, HealthStatus h);

  int auto_conns_per_peer(const SockNi& sni) const;

  SocketParams params_;
  std::atomic<std::uint64_t> conns_established_{0};
  std::atomic<std::uint64_t> conns_refused_race_{0};
  std::atomic<std::uint64_t> conns_refused_excess_{0};
  std::atomic<std::uint64_t> conns_refused_protocol_{0};
  std::atomic<std::uint64_t> conns_refused_port_{0};  // accept=secure, an unprivileged source port
  std::atomic<std::uint64_t> conns_refused_busy_{0};  // max_handshakes under way
  std::atomic<std::uint64_t> peers_reaped_{0};
  Mutex handshakes_mutex_;
  int handshaking_ LNET_GUARDED_BY(handshakes_mutex_) = 0;
  std::map<std::array<std::uint8_t, 16>, int> handshaking_from_ LNET_GUARDED_BY(handshakes_mutex_);
  std::deque<std::weak_ptr<Conn>> pending_ LNET_GUARDED_BY(handshakes_mutex_);  // by age
  std::atomic<std::uint64_t> handshakes_evicted_{0};
  LogLimiter stranger_log_{std::chrono::seconds(10), 20};
  std::vector<std::unique_ptr<IoThread>> io_;
  Mutex nis_mutex_;
  std::vector<SockNi*> nis_ LNET_GUARDED_BY(nis_mutex_);
  std::vector<std::unique_ptr<Listener>> listeners_ LNET_GUARDED_BY(nis_mutex_);
  // Made by the first startup(), gone with the last shutdown() (both of which the host
  // serializes); its thread takes nis_mutex_, so it is never destroyed under it.
  std::unique_ptr<LinkWatch> links_;
};

// How a socket error maps to a health status (facts §5.3).
HealthStatus health_of_errno(int err);

}  // namespace lnet::sock
