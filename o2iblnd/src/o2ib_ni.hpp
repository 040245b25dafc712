// The o2ib driver's objects (docs/design/o2iblnd.md §2.5): an O2ibNi per NI with its device,
// progress thread and message buffers; a Peer per peer NID with its connection; the
// Tx (a message buffer of ours and what it carries) and Rx (a receive buffer).
//
// Threads and locks: LNet's threads call send() and recv(); the O2ibNi's progress thread
// handles the device's CM events and completions, dials, timeouts and keepalives. A
// peer's mutex guards the peer, its connections and their Txs and Rxs; the peer map has
// its own (shared) mutex; the free Txs theirs. The host is never called with one held.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <lnet/lnd/fifo.hpp>
#include <lnet/lnd/lnd.hpp>
#include <lnet/mutex.hpp>
#include <lnet/o2ib/o2iblnd.hpp>
#include <lnet/o2ib/wire.hpp>

#include "credits.hpp"
#include "handshake.hpp"
#include "reg_cache.hpp"
#include "verbs.hpp"

namespace lnet::o2ib {

using Clock = std::chrono::steady_clock;

struct Conn;
struct Peer;
class O2ibNi;

// What a NI runs with (its tunables, checked).
struct NetParams {
  unsigned queue_depth = 8;  // peer_credits
  unsigned hiw = 4;          // peer_credits_hiw (in effect)
  unsigned concurrent = 8;   // concurrent_sends (in effect)
  unsigned ntx = 512;
  int timeout = 50;  // seconds (lnd timeout)
  // ko2iblnd's module parameters (LNET_O2IB_* variables):
  int keepalive = 100;  // seconds of silence before a NOOP (0: never)
  bool cksum = false;   // checksum the messages we send
  std::uint16_t service = kService;
  int retry_count = 5;                           // transport retries; connects refused for want of a listener
  int rnr_retry_count = 6;                       // retries of a send the peer had no receive for (7: no end)
  std::size_t reg_cache = std::size_t{1} << 30;  // bytes of idle cached registrations (0: no cache)
};

// A registered bounce buffer, for a sink of several fragments (one key, one fragment).
struct Bounce {
  Bounce* next = nullptr;
  std::unique_ptr<std::uint8_t[]> mem;
  MemoryRegion mr;
};

inline constexpr std::size_t kBounceSize = 1u << 20;  // LNET_MTU: the largest payload
inline constexpr unsigned kMaxBounce = 64;

// Work request ids: a Tx's or Rx's address, its low bits saying which work it was.
inline constexpr std::uint64_t kWrSend = 0, kWrRecv = 1, kWrWrite = 2, kWrTagMask = 3;
// RDMA writes one message may need (a piece where a local fragment meets a remote one).
inline constexpr unsigned kMaxWritesPerTx = 2 * kMaxFrags;

struct Tx {
  Tx* next = nullptr;
  O2ibNi* net = nullptr;
  std::uint8_t* buf = nullptr;  // kMsgSize bytes of the O2ibNi's registered slab
  bool busy = false;            // taken from the free list
  bool finished = false;        // handed to Done (once)
  Peer* peer = nullptr;
  Conn* conn = nullptr;  // once queued on one
  MsgType type = MsgType::Noop;
  std::uint32_t nob = 0;
  LndMessage* msg = nullptr;    // finalized with `status` when the Tx is done
  LndMessage* reply = nullptr;  // GET_REQ: the REPLY its GET_DONE ends
  std::uint64_t cookie = 0;     // ours: the peer's reply names it
  int status = 0;
  HealthStatus health = HealthStatus::Ok;
  int reply_rc = 0;             // GET_REQ: the GET_DONE's failure
  std::uint32_t reply_len = 0;  // GET_REQ: the bytes it moved
  int sending = 0;              // work requests posted and not completed
  bool waiting = false;         // for the peer's reply (PUT_ACK/NAK, PUT_DONE, GET_DONE)
  Clock::time_point deadline{};
  // The message's memory registered for this transfer, dropped when done, and the cached
  // registrations it holds (reg_cache.hpp), given back when done.
  std::vector<MemoryRegion> mrs;
  std::vector<RegCache::Entry*> cached;
  // RDMA writes posted before the message (PUT_DONE, GET_DONE): local piece, remote address.
  std::uint32_t rd_key = 0;
  std::vector<Sge> wsge;
  std::vector<std::uint64_t> wraddr;
  // A sink in a bounce buffer: copied into these fragments when it is filled.
  Bounce* bounce = nullptr;
  const iovec* sink_iov = nullptr;
  unsigned sink_niov = 0;
  std::uint32_t sink_offset = 0;
  std::uint32_t sink_len = 0;  // what the sink takes: a peer saying more came is refused
};

struct Rx {
  Conn* conn = nullptr;
  std::uint8_t* buf = nullptr;
  std::uint32_t nob = 0;  // what arrived
  Msg msg;                // decoded (views into buf)
  bool posted = false;
};

enum class ConnState : std::uint8_t { Connecting, Established, Closing };

struct Conn {
  Peer* peer = nullptr;
  EndpointId ep = 0;
  ConnState state = ConnState::Connecting;
  bool active = false;
  std::uint16_t version = kVersion2;
  ConnParams params;
  std::uint64_t peer_stamp = 0;
  Credits credits{1, 1, 1};
  Fifo<Tx> queue;            // requests waiting for credits or room, in order
  Fifo<Tx> nocred;           // replies and completions (no credit needed), first
  Fifo<Tx> rsrvd;            // PUT_REQs, GET_REQs waiting for a reserved credit (ko2iblnd's tx_queue_rsrvd)
  unsigned reqs_queued = 0;  // requests moved from rsrvd to queue: each holds a reserved credit
  std::vector<Tx*> waiting;  // Txs awaiting the peer's reply
  std::unique_ptr<std::uint8_t[]> rx_mem;
  MemoryRegion rx_mr;
  std::vector<Rx> rxs;
  int posted = 0;  // work requests (receives, sends, writes) not completed
  int held = 0;    // receives the host holds (a delayed recv)
  // Receives that completed before the connection was up (the CM's event can come after
  // the peer's first message), counted in `held`: handled once it is.
  std::vector<std::pair<Rx*, std::uint32_t>> early;
  bool gone = false;  // the device said the connection is over (or never was)
  int close_rc = 0;
  Clock::time_point last_send{};
};

struct Peer {
  Nid nid;
  std::uint32_t ip = 0;
  Mutex mutex;
  Conn* conn = nullptr;                      // the connection messages go on (established or being accepted)
  Conn* dialing = nullptr;                   // our own connection request in flight
  std::vector<std::unique_ptr<Conn>> conns;  // every connection not yet reaped
  Fifo<Tx> pending;                          // waiting for a connection
  bool dial_wanted = false;                  // the progress thread is to dial
  ConnParams offer;                          // what our next connection request asks
  int retries = 0;                           // connects refused in a row
  int races = 0;                             // its requests rejected for a race
  bool known = false;                        // we connected to it once: its incarnation and version
  std::uint64_t incarnation = 0;
  std::uint16_t version = kVersion2;
};

// Finalizations and peer notices gathered under a lock, delivered after.
struct Done {
  Fifo<Tx> txs;
  std::vector<std::pair<Nid, bool>> notices;
};

class O2ibNi {
 public:
  O2ibNi(NetInterface& ni, std::unique_ptr<Provider> dev, std::uint32_t ip, const NetParams& p);
  ~O2ibNi();
  int start();
  void stop();

  int send(LndMessage& msg);
  int recv(Rx* rx, LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t mlen,
           std::uint32_t rlen);

  const NetParams& params() const { return p_; }
  int timeout() const { return timeout_.load(std::memory_order_relaxed); }
  void set_timeout(int s) { timeout_.store(s, std::memory_order_relaxed); }

  struct Counters {
    std::atomic<std::uint64_t> conns_established{0}, conns_closed{0}, conns_rejected{0}, connect_failed{0},
        bad_messages{0}, timeouts{0}, immediate{0}, rdma_put{0}, rdma_get{0}, rdma_bytes{0}, noops{0}, naks{0},
        registrations{0};  // made for one transfer (the cache's misses are added to them)
  };
  const Counters& counters() const { return n_; }
  RegCache::Stats cache_stats() const { return cache_.stats(); }

 private:
  // ---- progress (progress.cpp)
  void thread_main();
  void wake();
  void close_all(Done& done);
  void request_dial(Peer& p);  // p.mutex held
  void tick(Clock::time_point now, Done& done);
  void sweep_registrations();
  void check_conn(Conn& c, Clock::time_point now, Done& done);
  void on_completion(const Completion& c, Done& done);
  void on_tx_completion(Tx* tx, bool write, const Completion& wc, Done& done);
  void deliver(Done& done);

  // ---- connections (conn.cpp); the peer's mutex held but for on_cm_event, dial
  void on_cm_event(const CmEvent& e, Done& done);
  void on_connect_request(const CmEvent& e, Done& done);
  bool accept_connect(Peer& p, const CmEvent& e, const Verdict& v, Done& done);
  void on_established(Conn& c, const CmEvent& e, Done& done);
  void on_rejected(Conn& c, const CmEvent& e, Done& done);
  void on_gone(Conn& c, int rc, Done& done);
  void dial(Peer& p, Done& done);
  Conn* new_conn(Peer& p, bool active, const ConnParams& params);
  bool post_rxs(Conn& c);
  void conn_up(Conn& c, Done& done);
  void close_conn(Conn& c, int rc, Done& done);
  Conn* next_conn(Peer& p, const Conn& closing);
  bool reap(Conn& c, Done& done);
  void fail_pending(Peer& p, int rc, HealthStatus h, Done& done);

  // ---- messages out (tx.cpp)
  Tx* get_tx();
  void put_tx(Tx* tx);
  Bounce* get_bounce();
  void put_bounce(Bounce* b);
  Peer* peer_of(Nid nid, bool create, std::uint32_t ip = 0);
  Status build(Tx* tx, LndMessage& msg);
  void enqueue(Conn& c, Tx* tx);
  void schedule(Conn& c, Done& done);
  void maybe_noop(Conn& c, bool keepalive_due, Done& done);
  bool post_tx(Conn& c, Tx* tx, Done& done);
  void tx_finish(Tx* tx, Done& done);
  void tx_fail(Tx* tx, int rc, HealthStatus h, Done& done);
  Tx* take_waiting(Conn& c, std::uint64_t cookie);
  Result<MemoryRegion> reg_for(Tx* tx, std::uint64_t memory, const iovec& frag, void* at, std::size_t len,
                               bool remote_write);
  Status make_sink(Tx* tx, const LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset,
                   std::uint32_t len, std::uint32_t& key, RdmaFrag& frag);
  Status add_writes(Tx* tx, const LndMessage* msg, const Msg& rd, const iovec* iov, unsigned niov, std::uint32_t offset,
                    std::uint32_t len);
  Tx* completion_tx(Peer& p, MsgType type, std::uint64_t cookie, std::int32_t status);

  // ---- messages in (rx.cpp); the peer's mutex held but for on_rx_completion
  void on_rx_completion(Rx* rx, const Completion& wc, Done& done, bool replay = false);
  void on_reply(Conn& c, Rx* rx, Done& done);
  void put_ack(Conn& c, Tx* req, const Msg& m);
  void sink_filled(Tx* tx, std::int32_t status);
  void repost(Rx* rx, Repost r, Done& done);
  Tx* sink_for_put(Conn& c, const Msg& m, LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset,
                   std::uint32_t mlen, int& rc);
  Tx* reply_for_get(Conn& c, const Msg& m, LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset,
                    std::uint32_t mlen);

  NetInterface& ni_;
  LndHost& host_;
  std::unique_ptr<Provider> dev_;
  std::uint32_t ip_;
  NetParams p_;
  RegCache cache_;
  LocalNi me_;
  std::atomic<int> timeout_;

  SharedMutex peers_mutex_;
  std::map<std::uint64_t, std::unique_ptr<Peer>> peers_ LNET_GUARDED_BY(peers_mutex_);

  Mutex tx_mutex_;
  Tx* free_tx_ LNET_GUARDED_BY(tx_mutex_) = nullptr;
  std::vector<Tx> txs_;
  std::unique_ptr<std::uint8_t[]> tx_mem_;
  MemoryRegion tx_mr_;
  Bounce* free_bounce_ LNET_GUARDED_BY(tx_mutex_) = nullptr;
  std::vector<std::unique_ptr<Bounce>> bounces_ LNET_GUARDED_BY(tx_mutex_);

  Mutex dial_mutex_;
  std::vector<Peer*> dial_q_ LNET_GUARDED_BY(dial_mutex_);  // peers the progress thread is to dial
  std::atomic<int> nconns_{0};                              // connections not yet reaped
  std::vector<std::pair<Rx*, std::uint32_t>> early_;        // the progress thread's: receives to handle now
  std::atomic<std::uint64_t> next_cookie_{1};
  int wake_fd_ = -1, epfd_ = -1;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  Counters n_;
};

// The counters in `lnetctl stats show`'s order.
std::vector<std::pair<std::string, std::uint64_t>> counter_list(const O2ibNi::Counters& n,
                                                                const RegCache::Stats& cache);

// The driver: an Lnd whose NIs are Nets.
class O2ibLnd final : public Lnd {
 public:
  explicit O2ibLnd(ProviderFactory open) : open_(std::move(open)) {}
  std::uint32_t net_type() const override { return kO2ibLnd; }
  Status check_config(const NetConfig& config) const override;
  int startup(NetInterface& ni) override;
  void shutdown(NetInterface& ni) override;
  int send(NetInterface& ni, LndMessage& msg) override;
  int recv(NetInterface& ni, void* lnd_private, LndMessage* msg, bool delayed, const iovec* iov, unsigned niov,
           std::uint32_t offset, std::uint32_t mlen, std::uint32_t rlen) override;
  int timeout(const NetInterface& ni) const override;
  int set_timeout(NetInterface& ni, int seconds) override;
  long tunable_in_effect(const NetInterface& ni, std::string_view name, long configured) const override;
  std::vector<std::pair<std::string, std::uint64_t>> counters() const override;
  std::string counters_name() const override { return "o2ib"; }

 private:
  ProviderFactory open_;
  mutable Mutex mutex_;
  std::vector<O2ibNi*> nets_ LNET_GUARDED_BY(mutex_);
};

// The health status of a transfer failed with `rc` (or a work completion's status).
HealthStatus health_of(int rc, WcStatus wc);

// The tunables of `config` as an O2ibNi runs with them (check_config's rules).
Result<NetParams> net_params(const NetConfig& config);

}  // namespace lnet::o2ib
