// One NI of the MPI LND (seed 002 §2.3): its communicator, peers, short-message pool,
// sends, bulk transfers and progress. Written against the driver SPI only, so that any
// host runs it (liblnet's core, the proxy's bridge).
//   - short messages go unsolicited into a pool of persistent receives (reserved tag
//     0, MPI_ANY_SOURCE) and are copied out on arrival; senders hold per-peer credits
//     that the receiver returns as it reposts buffers, so it is never flooded;
//   - larger payloads are tagged bulk transfers: the sender posts MPI_Issend on a tag
//     it picked, the header and tag go as a short message, and the receiver posts the
//     receive straight into the MD once the host has matched the header;
//   - an optimised GET posts the sink on a tag first; the target ready-sends the source;
//   - the first message to a peer is a QUERY; nothing else goes before its RESPONSE.
// Every MPI call is made under mu_ (one MPI user at a time, as MPI_THREAD_SERIALIZED
// needs) and never while calling the host. Files: ni.cpp (start, stop), peer.cpp (peers
// and tags), tx.cpp (short messages out), bulk.cpp (tagged transfers), receive.cpp (the
// pool and recv()), progress.cpp (rounds of progress and the thread).
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <lnet/lnd/fifo.hpp>
#include <lnet/lnd/lnd.hpp>
#include <lnet/mpi.hpp>
#include <lnet/mutex.hpp>

#include "mpi_wire.hpp"

namespace lnet::mpi {

using Clock = std::chrono::steady_clock;

struct Peer;
struct Bulk;
struct Kept;
struct ChunkSegments;

// Bytes written before they are read: growing the vector does not zero them (a message
// buffer is filled right after it is sized; zeroing 4 KiB first cost a tenth of a
// microsecond per message).
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};
using Bytes = std::vector<std::uint8_t, UninitializedAllocator<std::uint8_t>>;

// A short message on its way out (and the LNet message it carries, if any). Pooled.
struct Tx {
  Tx* next = nullptr;
  Peer* peer = nullptr;
  MsgKind kind = MsgKind::Noop;  // decided when posted (the peer's limits are known then)
  LndMessage* msg = nullptr;     // finalized when everything of this Tx is done
  LndMessage* reply = nullptr;   // optimised GET: the REPLY the sink completes
  Bulk* bulk = nullptr;          // BULK: the payload; GET_REQ: the sink
  Bytes buf;                     // header + body (capacity kept across uses)
  std::uint32_t tag = 0;         // GET_NAK
  std::int32_t status = 0;       // GET_NAK
  int pending = 0;               // MPI operations still running
  int rc = 0;
  HealthStatus health = HealthStatus::Ok;
  Clock::time_point deadline{};  // when it fails: for want of a handshake or credit, or of the transfer
  Fifo<Tx> members;              // PACKED: the Txs whose messages it carries (finalized with it)
};

// A tagged bulk transfer: one MPI message per chunk on the same tag. Pooled.
struct Bulk {
  Bulk* next = nullptr;
  bool send = false;
  bool ready = false;    // MPI_Irsend (the GET source: the sink is posted)
  bool sink = false;     // an optimised GET's sink: msg is the REPLY
  bool own_tag = false;  // we picked the tag (free it at the end)
  Peer* peer = nullptr;
  // What moves: `total` bytes on the wire; the first `len` in (iov, niov) from `offset`.
  const iovec* iov = nullptr;
  unsigned niov = 0;
  std::uint32_t offset = 0;
  std::uint32_t len = 0;
  std::uint64_t total = 0;
  std::uint32_t tag = 0;
  std::uint32_t nchunks = 0;
  std::uint32_t done = 0;   // chunks completed
  std::uint64_t bytes = 0;  // received so far
  int rc = 0;
  bool cancelled = false;
  Kept* kept = nullptr;                     // a receive that timed out: the memory its requests keep
  bool left = false;                        // a receive left to MPI at shutdown: its memory kept for good
  Clock::time_point due{};                  // the deadline of its Tx ({}: none)
  Tx* tx = nullptr;                         // BULK send and GET sink: the short message's Tx
  LndMessage* msg = nullptr;                // a receive (or the target's REPLY) to finalize at the end
  std::unique_ptr<std::uint8_t[]> discard;  // receive: room for bytes nobody wants
  std::uint32_t discard_len = 0;
};

// The memory of a bulk receive that timed out, failed at once while MPI may still write
// into it (a receive it matched cannot be cancelled): the host keeps the MD's (token; 0:
// it has none, only a discard buffer), the discard buffer is kept here, until MPI has
// completed each of the receive's cancelled requests.
struct Kept {
  std::uintptr_t token = 0;
  std::unique_ptr<std::uint8_t[]> discard;
  Nid from = Nid::any();  // the peer
  unsigned requests = 0;  // cancelled requests MPI has not completed
};

// A message received into the pool, handed to the host as the driver's cookie. Pooled.
struct Rx {
  Rx* next = nullptr;
  MsgKind kind = MsgKind::Immediate;
  Peer* peer = nullptr;
  std::uint32_t tag = 0;
  std::uint32_t sink_length = 0;          // GET_REQ
  Mutex mutex;                            // recv() against the payload moving to the heap
  const std::uint8_t* payload = nullptr;  // IMMEDIATE: in a pool buffer or `heap`
  std::uint32_t payload_len = 0;
  Bytes heap;                                    // the payload when the host delays the receive
  bool received LNET_GUARDED_BY(mutex) = false;  // recv() ran
  bool parsed LNET_GUARDED_BY(mutex) = false;    // parse() returned (whoever comes second frees it)
  // The common case: the host receives an IMMEDIATE within parse(), on the thread that
  // handles the pool buffer. Then neither the mutex nor the flags above are needed.
  std::atomic<std::thread::id> parser{};
  bool received_in_parse = false;
};

struct Peer {
  enum class State { New, Querying, Ready };
  int rank = 0;
  Nid nid;
  State state = State::New;
  Clock::time_point query_deadline{};
  std::uint64_t stamp = 0;      // its incarnation (0: not heard from)
  std::uint32_t short_max = 0;  // from its hello
  std::uint32_t chunk = INT_MAX;
  int tx_credits = 0;
  int owed = 0;       // credits to return to it
  bool down = false;  // we told the host it is down
  // Sends waiting for the handshake or a credit. At most the host's peer_credits of
  // them carry LNet messages (the SPI's flow control); GET_NAKs answer the peer's GETs,
  // which its own credits bound.
  Fifo<Tx> queue;
  std::uint32_t next_even = 2;      // tags of payloads we send
  std::uint32_t next_odd = 1;       // tags of GET sinks we post
  std::vector<std::uint32_t> tags;  // tags in use with this peer
  std::vector<Bulk*> sinks;         // posted GET sinks (for GET_NAK)
};

class MpiNi {
 public:
  // `nids`: the NID of each rank (empty: rank r is r@mpi<N>), checked by the driver.
  MpiNi(NetInterface& ni, MPI_Comm comm, const std::vector<Nid>& nids, const Options& opts);
  ~MpiNi();
  int start();  // posts the pool, starts progress (a thread, or ni.poll for the host)
  // Fails what is queued, cancels what is posted, frees the requests: those still
  // running after `grace` are left to MPI (their messages fail).
  void stop(std::chrono::milliseconds grace);

  int send(LndMessage& msg);
  int recv(void* priv, LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t mlen,
           std::uint32_t rlen);
  // One round of progress: true if anything completed or started.
  bool progress();
  // No transfer or queued send outstanding (a collective end drains until then).
  bool idle();
  bool has_thread() const { return thread_.joinable(); }
  // MPI_Ibarrier on `comm` (the NI's when MPI_COMM_NULL), progressing while it runs (a
  // collective end).
  int barrier(Clock::time_point deadline, MPI_Comm comm);
  Stats stats() const;
  int timeout() const { return timeout_; }

 private:
  struct Owner {
    // Held: a send that timed out, its message failed, left to MPI until it completes:
    // obj is a short send's buffer (a Bytes, freed then), or nullptr for a bulk send's
    // chunk (whose memory is the MD's). KeptChunk: a bulk receive chunk that timed out and
    // was cancelled, its transfer failed, its memory kept until it completes (obj: the
    // Kept). Cancelled: the same when the host cannot keep the memory: the transfer
    // waits for it (obj: the Bulk).
    enum Kind : std::uint8_t { PoolRx, TxShort, BulkChunk, Held, KeptChunk, Cancelled } kind;
    void* obj;
  };
  // A send or bulk transfer request that completed.
  struct Completion {
    Owner owner;
    MPI_Status status;
    int err;  // MPI_ERR_IN_STATUS: the request's own error
  };
  // A pool receive that completed in this progress round. Everything but the host's
  // parse() is done under the mutex: before it (decode, credits, the handshake, an Rx
  // for the host) in the round's first locked section, after it (the Rx's fate, the
  // restart of the receive, the credit owed) in one locked section for the whole batch.
  struct PoolWork {
    int index;             // into the pool (-1: a message packed in the one before);
                           // restarted in the order the batch completed
    Peer* peer = nullptr;  // nullptr: the message did not decode and its source is unknown
    MsgKind kind = MsgKind::Noop;
    Rx* rx = nullptr;      // for the host to parse (IMMEDIATE, BULK, GET_REQ)
    bool free_rx = false;  // the host refused it: nothing else holds the Rx
    Header lnet;           // with rx: the LNet header
  };
  // Completed things to act on once the mutex is released.
  struct Done {
    // Sends to finalize. The first few are kept by value so that their Txs go back to
    // the pool at once, under the lock already held; more wait as Txs.
    struct Sent {
      LndMessage* msg;
      int rc;
      HealthStatus health;
    };
    static constexpr unsigned kInline = 16;
    Sent sent[kInline];
    unsigned nsent = 0;
    Fifo<Tx> txs;      // finalize tx->msg with tx->rc, then free
    Fifo<Bulk> bulks;  // receives and GET sources: finalize bulk->msg with bulk->rc, then free
    // Peers to report down, or up again after that, in the order it happened (rare).
    std::vector<std::pair<Nid, bool>> health;
    std::vector<std::uintptr_t> released;  // kept memory MPI is done with (LndHost::release_memory)
  };

  bool may_call_mpi() const;
  bool check(int rc, const char* what);
  // ni.cpp: stop()'s steps
  void fail_queued_locked(Done& done) LNET_REQUIRES(mu_);
  void cancel_receives_locked() LNET_REQUIRES(mu_);
  void abandon_requests_locked(Done& done) LNET_REQUIRES(mu_);

  // peer.cpp
  Peer* peer_locked(int rank) LNET_REQUIRES(mu_);
  Nid nid_of(int rank) const;
  int rank_of(Nid nid) const;  // -1: not a rank of the communicator
  std::uint32_t alloc_tag(Peer& p, bool odd);
  void free_tag(Peer& p, std::uint32_t tag);
  std::uint32_t chunk_for(const Peer& p) const;
  std::uint8_t take_owed(Peer& p);
  // `due`: when the message it is part of fails (its Tx's deadline); {}: a timeout after
  // the first scan that sees it running.
  void add_request(MPI_Request r, Owner::Kind kind, void* obj, Clock::time_point due = {}) LNET_REQUIRES(mu_);

  // tx.cpp
  enum { kSendFailed, kSent, kSentDone };
  int isend_locked(Tx* tx) LNET_REQUIRES(mu_);
  void enqueue_locked(Tx* tx, Done& done) LNET_REQUIRES(mu_);
  void flush_locked(Peer& p, Done& done) LNET_REQUIRES(mu_);
  void post_locked(Tx* tx, Done& done) LNET_REQUIRES(mu_);
  bool post_get_sink_locked(Tx* tx, std::uint32_t tag, Done& done) LNET_REQUIRES(mu_);
  void post_bulk_payload_locked(Tx* tx, std::uint32_t tag, Done& done) LNET_REQUIRES(mu_);
  bool plain_get(const LndMessage& m) const;
  bool packable(const Peer& p, const Tx* tx) const;
  void post_packed_locked(Peer& p, Tx* first, Done& done) LNET_REQUIRES(mu_);
  void post_control_locked(Peer& p, MsgKind kind) LNET_REQUIRES(mu_);
  void fail_tx_locked(Tx* tx, int rc, HealthStatus h, Done& done) LNET_REQUIRES(mu_);
  void tx_part_done_locked(Tx* tx, int rc, Done& done) LNET_REQUIRES(mu_);
  void tx_finished_locked(Tx* tx, Done& done) LNET_REQUIRES(mu_);  // tx->msg is to be finalized
  Tx* get_tx();
  void put_tx(Tx* tx);

  // bulk.cpp
  bool post_bulk_locked(Bulk* b) LNET_REQUIRES(mu_);
  bool address_chunk(const Bulk* b, std::uint64_t lo, std::uint64_t hi, ChunkSegments& seg);
  bool post_chunk_locked(Bulk* b, ChunkSegments& seg) LNET_REQUIRES(mu_);
  void bulk_chunk_done_locked(Bulk* b, const MPI_Status& st, int err, Done& done) LNET_REQUIRES(mu_);
  void bulk_finished_locked(Bulk* b, Done& done) LNET_REQUIRES(mu_);
  void cancel_requests_of_locked(void* obj) LNET_REQUIRES(mu_);
  Bulk* get_bulk();
  void put_bulk(Bulk* b);

  // receive.cpp
  void pool_rx_locked(int index, const MPI_Status& st, int err, Done& done) LNET_REQUIRES(mu_, progress_mu_);
  void on_hello(PoolWork& w, const Decoded& d, Done& done) LNET_REQUIRES(mu_, progress_mu_);
  void on_lnet(PoolWork& w, const Decoded& d, Done& done) LNET_REQUIRES(mu_, progress_mu_);
  void on_get_nak(PoolWork& w, const Decoded& d, Done& done) LNET_REQUIRES(mu_, progress_mu_);
  void on_noop(PoolWork& w, const Decoded& d, Done& done) LNET_REQUIRES(mu_, progress_mu_);
  void on_packed(PoolWork& w, const Decoded& d, Done& done) LNET_REQUIRES(mu_, progress_mu_);
  void drop_bad_locked(int source, const std::string& why, Done& done) LNET_REQUIRES(mu_, progress_mu_);
  void replace_pool_rx_locked(int index) LNET_REQUIRES(mu_);
  bool init_pool_rx_locked(std::size_t i) LNET_REQUIRES(mu_);
  void hand_to_host_locked(PoolWork& w, const Decoded& d) LNET_REQUIRES(mu_, progress_mu_);
  void parse_pool_work() LNET_REQUIRES(progress_mu_);
  void finish_pool_work_locked(Done& done) LNET_REQUIRES(mu_, progress_mu_);
  void repost_locked(int index) LNET_REQUIRES(mu_);
  void receive_bulk_locked(Rx* rx, LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset,
                           std::uint32_t mlen, std::uint32_t rlen, Done& done) LNET_REQUIRES(mu_);
  Rx* get_rx();
  void put_rx(Rx* rx);

  // progress.cpp
  // Tests the requests outstanding besides the pool (MPI_Testsome), drops the finished
  // ones from the table and hands each completion to its owner. The number completed,
  // or -1 when the test itself failed.
  // progress(): a round, with progress_mu_ held; completions for complete().
  bool round_locked(Done& done) LNET_REQUIRES(progress_mu_);
  int reap_locked(Done& done) LNET_REQUIRES(mu_, progress_mu_);
  void test_pool_locked(Done& done, bool* worked) LNET_REQUIRES(mu_, progress_mu_);
  void check_timeouts_locked(Clock::time_point now, Done& done) LNET_REQUIRES(mu_);
  // A cancelled receive MPI did not complete: left to it, its transfer finished (or its
  // kept memory released).
  void abandon_locked(std::size_t r, Done& done) LNET_REQUIRES(mu_);
  // A bulk receive chunk that timed out: cancelled; the transfer fails now with its
  // memory kept (KeptChunk) when the host can keep it, else waits for it (Cancelled).
  void give_up_receive_locked(std::size_t r, Bulk* b, Clock::time_point now, Done& done) LNET_REQUIRES(mu_);
  // One of a Kept's requests is done (completed, or left to MPI).
  void kept_done_locked(Kept* k, Done& done) LNET_REQUIRES(mu_);
  // Shutdown: a kept receive's request (or a receive's, not kept yet) is left to MPI,
  // which may write its memory as long as the process lives: it is never given back.
  void leave_kept_locked(Kept* k) LNET_REQUIRES(mu_);
  void leave_receive_locked(Bulk* b) LNET_REQUIRES(mu_);
  // Gives up the requests running longer than the timeout (a peer that died in the
  // middle of a transfer: MPI never completes them); their messages fail.
  void expire_requests_locked(Clock::time_point now, Done& done) LNET_REQUIRES(mu_);
  void compact_requests_locked() LNET_REQUIRES(mu_);
  void complete(Done& done);
  void thread_main();
  void kick();  // work for the progress thread (a no-op without one, or on it)

  NetInterface& ni_;
  LndHost& host_;
  Options opts_;
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 0;
  std::vector<Nid> nids_;                    // by rank (empty: rank r is r@mpi<N>)
  std::vector<std::pair<Nid, int>> by_nid_;  // sorted, for rank_of
  int thread_level_ = MPI_THREAD_SINGLE;
  std::thread::id owner_;
  std::uint64_t stamp_ = 0;
  std::uint32_t tag_ub_ = 32767;
  int grant_ = 8;     // credits we give each peer
  int timeout_ = 50;  // seconds a send waits for a handshake or a credit
  std::size_t buf_size_ = 0;

  // The driver's state, and every MPI call on the communicator (a thread level below
  // MPI_THREAD_MULTIPLE allows no two at once). The peers' fields are under it too.
  mutable Mutex mu_;
  std::vector<MPI_Request> reqs_ LNET_GUARDED_BY(mu_);  // [0, pool) persistent pool receives, then the rest
  std::vector<Owner> owners_ LNET_GUARDED_BY(mu_);
  // By request (beside reqs_): when a timeout scan first saw it running ({}: not yet).
  std::vector<Clock::time_point> seen_ LNET_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<std::uint8_t[]>> pool_ LNET_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<std::uint8_t[]>> retired_ LNET_GUARDED_BY(mu_);  // buffers of receives left to MPI
  std::vector<std::unique_ptr<Peer>> peers_ LNET_GUARDED_BY(mu_);              // by rank, made on first contact
  std::vector<Peer*> contacted_ LNET_GUARDED_BY(mu_);
  Fifo<Tx> deferred_ LNET_GUARDED_BY(mu_);         // sends from threads that may not call MPI
  Fifo<Bulk> deferred_bulk_ LNET_GUARDED_BY(mu_);  // receives likewise
  Clock::time_point next_timeout_check_ LNET_GUARDED_BY(mu_){};
  std::uint32_t rounds_ LNET_GUARDED_BY(mu_) = 0;   // progress rounds, to read the clock now and then
  std::size_t pool_head_ LNET_GUARDED_BY(mu_) = 0;  // the pool receive started longest ago
  bool stopped_ LNET_GUARDED_BY(mu_) = false;

  // One progressing thread at a time; the round's scratch is its. Taken before mu_.
  Mutex progress_mu_ LNET_ACQUIRED_BEFORE(mu_);
  std::vector<int> indices_ LNET_GUARDED_BY(progress_mu_);
  std::vector<MPI_Status> statuses_ LNET_GUARDED_BY(progress_mu_);
  std::vector<Completion> completed_ LNET_GUARDED_BY(progress_mu_);
  std::vector<PoolWork> pool_work_ LNET_GUARDED_BY(progress_mu_);
  bool pool_busy_ LNET_GUARDED_BY(progress_mu_) = false;  // the last round found messages in the pool

  std::thread thread_;
  bool setup_ok_ = true;       // the constructor's MPI queries succeeded
  std::thread::id thread_id_;  // the progress thread's, set before it runs
  std::atomic<bool> stopping_{false};
  // The progress thread naps when idle; work started by other threads wakes it.
  Mutex nap_mu_;
  std::condition_variable nap_cv_;
  std::atomic<bool> napping_{false};
  std::atomic<bool> kicked_{false};
  std::atomic<bool> in_flight_{false};  // MPI requests besides the pool are outstanding

  struct Counters {
    std::atomic<std::uint64_t> handshakes{0}, immediate{0}, packed{0}, bulk{0}, chunks{0}, rdma_gets{0}, noops{0},
        credit_waits{0}, bad_messages{0}, timeouts{0}, mpi_errors{0}, held{0}, abandoned{0}, left_kept{0};
  } stats_;
};

}  // namespace lnet::mpi
