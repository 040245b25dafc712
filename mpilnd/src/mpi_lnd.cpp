// The MPI LND: see mpi_lnd.hpp for the protocol and the locking rules.
#include "mpi_lnd.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <random>

#include <sys/prctl.h>
#include <lnet/log.hpp>
#include <lnet/progress.hpp>

namespace lnet::mpi {

namespace {

constexpr int kShortTag = 0;
constexpr auto kTimeoutScan = std::chrono::milliseconds(100);
constexpr int kSpinBeforeYield = 50;  // idle progress rounds (5-10 us) before the thread yields
// While MPI moves our data, the progress thread naps at most kInFlightNapUs, for the
// first kInFlightNapWindow of an idle stretch.
constexpr int kInFlightNapUs = 20;
constexpr auto kInFlightNapWindow = std::chrono::milliseconds(5);

std::string mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<std::size_t>(len));
}

}  // namespace

// ---------------------------------------------------------------- set-up

MpiNi::MpiNi(NetInterface& ni, MPI_Comm comm, const Options& opts)
    : ni_(ni), host_(*ni.host), opts_(opts), comm_(comm) {
  // A failure here (it would be the communicator's) makes start() fail.
  setup_ok_ = check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank") &&
              check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size") &&
              check(MPI_Query_thread(&thread_level_), "MPI_Query_thread");
  if (!setup_ok_) size_ = 0;
  owner_ = std::this_thread::get_id();
  std::random_device rd;
  stamp_ =
      (static_cast<std::uint64_t>(rd()) << 32) ^ static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
  void* ub = nullptr;
  int flag = 0;
  if (check(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag), "MPI_Comm_get_attr(MPI_TAG_UB)") && flag && ub)
    tag_ub_ = static_cast<std::uint32_t>(*static_cast<int*>(ub));  // else the least MPI promises
  grant_ = std::clamp(opts_.credits, 1, 255);
  buf_size_ = kMsgHdrSize + std::max<std::size_t>(kHelloSize, kHeaderSize + opts_.short_max);
  peers_.resize(static_cast<std::size_t>(size_));
}

MpiNi::~MpiNi() = default;

bool MpiNi::may_call_mpi() const {
  return thread_level_ == MPI_THREAD_MULTIPLE || std::this_thread::get_id() == owner_;
}

bool MpiNi::check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return true;
  stats_.mpi_errors.fetch_add(1, std::memory_order_relaxed);
  LNET_LOG(Error, kLogLnd, "%s: %s failed: %s", ni_.nid.to_string().c_str(), what, mpi_error(rc).c_str());
  if (opts_.on_error == OnError::Abort) {
    LNET_LOG(Error, kLogLnd, "%s: LNET_MPI_ON_ERROR=abort: calling MPI_Abort", ni_.nid.to_string().c_str());
    MPI_Abort(comm_, rc);
  }
  return false;
}

int MpiNi::start() {
  if (!setup_ok_) return -EIO;
  std::unique_lock lk(mu_);
  pool_.resize(opts_.pool_depth);
  reqs_.resize(opts_.pool_depth, MPI_REQUEST_NULL);
  owners_.resize(opts_.pool_depth);
  for (unsigned i = 0; i < opts_.pool_depth; ++i) {
    owners_[i] = Owner{Owner::PoolRx, reinterpret_cast<void*>(static_cast<std::uintptr_t>(i))};
    if (!init_pool_rx_locked(i)) return -EIO;
  }
  if (opts_.pool_depth && !check(MPI_Startall(static_cast<int>(opts_.pool_depth), reqs_.data()), "MPI_Startall"))
    return -EIO;
  lk.unlock();

  bool want_thread = opts_.progress == ProgressMode::Thread ||
                     (opts_.progress == ProgressMode::Auto && thread_level_ == MPI_THREAD_MULTIPLE);
  if (want_thread && thread_level_ != MPI_THREAD_MULTIPLE) {
    LNET_LOG(Error, kLogLnd, "%s: LNET_MPI_PROGRESS=thread needs MPI_THREAD_MULTIPLE", ni_.nid.to_string().c_str());
    return -EINVAL;
  }
  if (want_thread) {
    std::unique_lock g(nap_mu_);  // thread_id_ is set before the thread looks
    thread_ = std::thread([this] {
      { std::lock_guard w(nap_mu_); }
      thread_main();
    });
    thread_id_ = thread_.get_id();
  } else {
    progress_id_ = add_progress([](void* self) { return static_cast<MpiNi*>(self)->progress(); }, this);
    if (progress_id_ < 0) return progress_id_;
  }
  LNET_LOG(Info, kLogLnd, "%s up: rank %d of %d, short messages up to %u bytes, %u receives, %d credits, %s progress",
           ni_.nid.to_string().c_str(), rank_, size_, opts_.short_max, opts_.pool_depth, grant_,
           want_thread ? "thread" : "application");
  return 0;
}

void MpiNi::thread_main() {
  // Naps as long as asked (Linux lets a timer run 50 us late by default, more than the
  // nap while a transfer is in flight). Without it the naps are only longer.
  (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  int idle = 0;
  Clock::time_point idle_since;  // the first nap of this idle stretch
  while (!stopping_.load(std::memory_order_acquire)) {
    if (progress()) {
      idle = 0;
      continue;
    }
    // Poll tightly for a while after the last completion, then nap, longer and longer up
    // to idle_us: an idle rank costs next to no CPU, a busy one answers at once.
    if (++idle < 200) {
      // After the first rounds, let a thread that shares our core (the application's,
      // often) run first: its send is what we would be waiting for. Not at once: a
      // yield costs a system call (0.7 us on the test VM), and the answer in
      // request-response traffic comes within those first rounds.
      if (idle > kSpinBeforeYield) std::this_thread::yield();
      continue;
    }
    // While MPI still moves something of ours, nap briefly: a transfer's completion
    // wakes nobody, and a long nap would be added to its time. Only for a while: such
    // naps cost half a core (measured on the test VM), and a transfer that waits on a
    // silent peer would keep them going.
    if (idle == 200) idle_since = Clock::now();
    bool brief = in_flight_.load(std::memory_order_relaxed) && Clock::now() - idle_since < kInFlightNapWindow;
    int cap = brief ? std::min(opts_.idle_us, kInFlightNapUs) : opts_.idle_us;
    int us = std::min(cap, 5 << std::min(idle - 200, 10));
    std::unique_lock lk(nap_mu_);
    napping_.store(true);
    if (!kicked_.exchange(false) && !stopping_.load()) nap_cv_.wait_for(lk, std::chrono::microseconds(us));
    napping_.store(false);
  }
}

void MpiNi::kick() {
  if (!thread_.joinable() || std::this_thread::get_id() == thread_id_) return;
  kicked_.store(true);
  if (napping_.load()) {
    std::lock_guard g(nap_mu_);
    nap_cv_.notify_one();
  }
}

// ---------------------------------------------------------------- pools

Tx* MpiNi::get_tx_locked() {
  if (Tx* t = free_tx_.pop_front()) return t;
  return &tx_store_.emplace_back();
}

void MpiNi::put_tx_locked(Tx* tx) {
  tx->peer = nullptr;
  tx->msg = tx->reply = nullptr;
  tx->bulk = nullptr;
  tx->kind = MsgKind::Noop;
  tx->tag = 0;
  tx->status = 0;
  tx->pending = 0;
  tx->rc = 0;
  tx->health = HealthStatus::Ok;
  free_tx_.push_front(tx);
}

Bulk* MpiNi::get_bulk_locked() {
  if (Bulk* b = free_bulk_.pop_front()) return b;
  return &bulk_store_.emplace_back();
}

void MpiNi::put_bulk_locked(Bulk* b) {
  b->send = b->ready = b->sink = b->own_tag = b->cancelled = false;
  b->peer = nullptr;
  b->tag = b->nchunks = b->done = 0;
  b->bytes = 0;
  b->rc = 0;
  b->tx = nullptr;
  b->msg = nullptr;
  b->discard.reset();
  b->discard_len = 0;
  b->iov = nullptr;
  b->niov = 0;
  b->offset = b->len = 0;
  b->total = 0;
  free_bulk_.push_front(b);
}

Rx* MpiNi::get_rx_locked() {
  Rx* rx = free_rx_.pop_front();
  if (!rx) rx = &rx_store_.emplace_back();
  rx->received = rx->parsed = rx->received_in_parse = false;
  rx->parser.store(std::thread::id(), std::memory_order_relaxed);
  return rx;
}

void MpiNi::put_rx_locked(Rx* rx) {
  rx->peer = nullptr;
  rx->payload = nullptr;
  rx->payload_len = 0;
  rx->heap.clear();
  free_rx_.push_front(rx);
}

// ---------------------------------------------------------------- peers and tags

Peer* MpiNi::peer_locked(int rank) {
  auto& slot = peers_[static_cast<std::size_t>(rank)];
  if (!slot) {
    slot = std::make_unique<Peer>();
    slot->rank = rank;
    slot->nid = Nid::make(ni_.nid.net(), static_cast<std::uint32_t>(rank));
    slot->tags.reserve(16);
    contacted_.push_back(slot.get());
  }
  return slot.get();
}

// Payload tags we send are even, GET sinks we post are odd: the two directions of a
// pair never share a tag. A tag is reused only once its transfer has completed on our
// side, which for a synchronous or ready send, or a receive, means it was matched.
std::uint32_t MpiNi::alloc_tag(Peer& p, bool odd) {
  std::uint32_t& next = odd ? p.next_odd : p.next_even;
  for (;;) {
    std::uint32_t t = next;
    next += 2;
    if (next > tag_ub_) next = odd ? 1 : 2;
    if (std::find(p.tags.begin(), p.tags.end(), t) == p.tags.end()) {
      p.tags.push_back(t);
      return t;
    }
  }
}

void MpiNi::free_tag(Peer& p, std::uint32_t tag) {
  auto it = std::find(p.tags.begin(), p.tags.end(), tag);
  if (it != p.tags.end()) {
    *it = p.tags.back();
    p.tags.pop_back();
  }
}

std::uint32_t MpiNi::chunk_for(const Peer& p) const {
  return std::max<std::uint32_t>(1, std::min(opts_.chunk, p.chunk));
}

void MpiNi::add_request(MPI_Request r, Owner::Kind kind, void* obj) {
  reqs_.push_back(r);
  owners_.push_back(Owner{kind, obj});
  in_flight_.store(true, std::memory_order_relaxed);
}

// ---------------------------------------------------------------- sending

namespace {
// The monotonic clock at its tick resolution (a few ms), for deadlines of seconds: half
// a plain read's cost, and half the sends under load wait for a credit.
Clock::time_point coarse_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

// Appends one message to `buf`: header `h` (its size filled in), then, when there is an
// LNet message, its header and the first `body` bytes of its payload.
void append_message(std::vector<std::uint8_t>& buf, MsgHdr h, const LndMessage* m, std::uint32_t body) {
  std::size_t at = buf.size();
  h.nob = static_cast<std::uint32_t>(kMsgHdrSize + (m ? kHeaderSize : 0) + body);
  buf.resize(at + h.nob);
  std::uint8_t* b = buf.data() + at;
  encode_msg_hdr(h, std::span<std::uint8_t, kMsgHdrSize>(b, kMsgHdrSize));
  if (!m) return;
  encode_header(m->hdr, std::span<std::uint8_t, kHeaderSize>(b + kMsgHdrSize, kHeaderSize));
  if (body) copy_from_fragments(b + kMsgHdrSize + kHeaderSize, m->iov, m->niov, m->offset, body);
}
}  // namespace

// Sends tx->buf as a short message. MPI often completes a small send at once (an eager
// copy): then it is finished here rather than tracked until the next round of progress.
// Returns kSent (tracked), kSentDone (finished already) or kSendFailed (an MPI error:
// the caller fails the send).
int MpiNi::isend_locked(Tx* tx) {
  MPI_Request r;
  int rc = opts_.fail_isend && tx->msg ? MPI_ERR_OTHER  // LNET_MPI_FAULT=isend
                                       : MPI_Isend(tx->buf.data(), static_cast<int>(tx->buf.size()), MPI_BYTE,
                                                   tx->peer->rank, kShortTag, comm_, &r);
  if (!check(rc, "MPI_Isend")) return kSendFailed;
  int flag = 0;
  int trc = MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
  if (trc == MPI_SUCCESS && flag) return kSentDone;
  if (trc != MPI_SUCCESS) {
    // The send failed (a completed request would now be MPI_REQUEST_NULL) or the test
    // itself did: either way the request, if any, is MPI's until the next round reports it.
    check(trc, "MPI_Test");
    if (r == MPI_REQUEST_NULL) return kSendFailed;
  }
  add_request(r, Owner::TxShort, tx);
  return kSent;
}

int MpiNi::send(LndMessage& msg) {
  Nid to = msg.next_hop;
  if (to.net() != ni_.nid.net() || to.addr() >= static_cast<std::uint32_t>(size_)) return -EHOSTUNREACH;
  Done done;
  {
    std::lock_guard g(mu_);
    if (stopped_) return -ESHUTDOWN;
    Tx* tx = get_tx_locked();
    tx->msg = &msg;
    tx->peer = peer_locked(static_cast<int>(to.addr()));
    if (may_call_mpi()) {
      enqueue_locked(tx, done);
    } else {
      deferred_.push_back(tx);  // the thread that may call MPI posts it
    }
  }
  complete(done);
  kick();  // its completion (or its queue) is the progress thread's to handle
  return 0;
}

void MpiNi::enqueue_locked(Tx* tx, Done& done) {
  Peer& p = *tx->peer;
  if (p.state != Peer::State::Ready || p.tx_credits <= 0 || !p.queue.empty()) {
    // It will wait (for the handshake or a credit): from now on, for so long at most.
    tx->deadline = coarse_now() + std::chrono::seconds(opts_.timeout);
    if (p.state == Peer::State::Ready) stats_.credit_waits.fetch_add(1, std::memory_order_relaxed);
  }
  p.queue.push_back(tx);
  flush_locked(p, done);
}

void MpiNi::flush_locked(Peer& p, Done& done) {
  if (p.state == Peer::State::New) {
    // Nothing but the QUERY goes to a peer before its RESPONSE.
    p.state = Peer::State::Querying;
    p.query_deadline = Clock::now() + std::chrono::seconds(opts_.timeout);
    post_control_locked(p, MsgKind::Query);
    return;
  }
  if (p.state != Peer::State::Ready) return;
  while (!p.queue.empty() && p.tx_credits > 0) {
    Tx* tx = p.queue.pop_front();
    // Messages that waited for a credit go out together when they can: one MPI message
    // and one credit for all of them, which is what lets a slow receiver catch up.
    if (opts_.pack && !p.queue.empty() && packable(p, tx) && packable(p, p.queue.head))
      post_packed_locked(p, tx, done);
    else
      post_locked(tx, done);
  }
  // Credits we owe and could not piggyback: return them on their own.
  if (p.owed >= std::max(1, grant_ / 2)) {
    post_control_locked(p, MsgKind::Noop);
    stats_.noops.fetch_add(1, std::memory_order_relaxed);
  }
}

std::uint8_t MpiNi::take_owed(Peer& p) {
  int c = std::min(p.owed, 255);
  p.owed -= c;
  return static_cast<std::uint8_t>(c);
}

void MpiNi::post_control_locked(Peer& p, MsgKind kind) {
  Tx* tx = get_tx_locked();
  tx->peer = &p;
  tx->kind = kind;
  bool hello = kind == MsgKind::Query || kind == MsgKind::Response;
  tx->buf.resize(kMsgHdrSize + (hello ? kHelloSize : 0));
  MsgHdr h;
  h.kind = kind;
  h.credits = kind == MsgKind::Noop ? take_owed(p) : 0;
  h.nob = static_cast<std::uint32_t>(tx->buf.size());
  h.stamp = stamp_;
  encode_msg_hdr(h, std::span<std::uint8_t, kMsgHdrSize>(tx->buf.data(), kMsgHdrSize));
  if (hello) {
    Hello he;
    he.short_max = opts_.short_max;
    he.pool_depth = opts_.pool_depth;
    he.credits = static_cast<std::uint32_t>(grant_);
    he.pid = ni_.pid;
    he.rank = static_cast<std::uint32_t>(rank_);
    he.chunk = opts_.chunk;
    encode_hello(he, std::span<std::uint8_t, kHelloSize>(tx->buf.data() + kMsgHdrSize, kHelloSize));
  }
  tx->pending = 1;
  int sent = isend_locked(tx);
  if (sent == kSendFailed) p.owed += h.credits;  // they go back with the next message
  if (sent != kSent) put_tx_locked(tx);
}

// A GET of ours straight to its target: it goes as an optimised GET (GET_REQ).
bool MpiNi::plain_get(const LndMessage& m) const {
  return m.hdr.type == MsgType::Get && m.hdr.src_nid == ni_.nid && m.next_hop == m.target.nid;
}

// What post_locked() would send as an IMMEDIATE.
bool MpiNi::packable(const Peer& p, const Tx* tx) const {
  return tx->msg && tx->msg->len <= p.short_max && !plain_get(*tx->msg);
}

// Sends `first` and the packable messages queued after it that fit in the peer's receive
// buffer as one PACKED message. Each keeps its own IMMEDIATE header inside; the carrier
// Tx finalizes them all when its send completes.
void MpiNi::post_packed_locked(Peer& p, Tx* first, Done& done) {
  const std::size_t limit = kMsgHdrSize + kHeaderSize + p.short_max;  // the peer's receive buffer
  Tx* c = get_tx_locked();
  c->peer = &p;
  c->kind = MsgKind::Packed;
  c->buf.resize(kMsgHdrSize);
  MsgHdr sub;
  sub.kind = MsgKind::Immediate;
  sub.stamp = stamp_;
  for (Tx* tx = first; tx;) {
    append_message(c->buf, sub, tx->msg, tx->msg->len);
    tx->kind = MsgKind::Immediate;
    c->members.push_back(tx);
    stats_.immediate.fetch_add(1, std::memory_order_relaxed);
    Tx* next = p.queue.head;
    if (!next || !packable(p, next) || c->buf.size() + kMsgHdrSize + kHeaderSize + next->msg->len > limit) break;
    tx = p.queue.pop_front();
  }
  MsgHdr h;
  h.kind = MsgKind::Packed;
  h.credits = take_owed(p);
  h.nob = static_cast<std::uint32_t>(c->buf.size());
  h.stamp = stamp_;
  encode_msg_hdr(h, std::span<std::uint8_t, kMsgHdrSize>(c->buf.data(), kMsgHdrSize));
  stats_.packed.fetch_add(1, std::memory_order_relaxed);
  --p.tx_credits;
  c->pending = 1;
  switch (isend_locked(c)) {
    case kSendFailed:
      ++p.tx_credits;
      p.owed += h.credits;
      tx_part_done_locked(c, -EIO, done);
      break;
    case kSentDone: tx_part_done_locked(c, 0, done); break;
    default: break;
  }
}

// Posts a queued Tx (the handshake is done and a credit is free).
void MpiNi::post_locked(Tx* tx, Done& done) {
  Peer& p = *tx->peer;
  std::uint32_t body = 0;
  std::uint32_t tag = 0;
  if (!tx->msg) {
    // A GET_NAK (the only credit-taking message without an LNet message).
    tag = tx->tag;
  } else {
    LndMessage& m = *tx->msg;
    if (plain_get(m)) tx->reply = host_.create_reply(ni_, m);
    if (tx->reply) {
      // Optimised GET: post the sink first, so the target may ready-send into it.
      tx->kind = MsgKind::GetReq;
      tag = alloc_tag(p, true);
      Bulk* b = get_bulk_locked();
      b->peer = &p;
      b->tag = tag;
      b->own_tag = true;
      b->sink = true;
      b->msg = tx->reply;
      b->iov = m.iov;
      b->niov = m.niov;
      b->offset = m.offset;
      b->len = b->total = m.hdr.msg.get.sink_length;
      b->nchunks = chunk_count(b->total, chunk_for(p));
      if (!post_bulk_locked(b)) {
        b->rc = -EIO;
        bulk_finished_locked(b, done);
        tx->reply = nullptr;
        fail_tx_locked(tx, -EIO, HealthStatus::LocalError, done);
        return;
      }
      p.sinks.push_back(b);
      tx->reply = nullptr;  // the sink finalizes it now
      stats_.rdma_gets.fetch_add(1, std::memory_order_relaxed);
    } else if (m.len <= p.short_max) {
      tx->kind = MsgKind::Immediate;
      body = m.len;
      stats_.immediate.fetch_add(1, std::memory_order_relaxed);
    } else {
      tx->kind = MsgKind::Bulk;
      tag = alloc_tag(p, false);
      stats_.bulk.fetch_add(1, std::memory_order_relaxed);
    }
  }
  MsgHdr h;
  h.kind = tx->kind;
  h.credits = take_owed(p);
  h.tag = tag;
  h.stamp = stamp_;
  h.status = tx->status;
  tx->buf.clear();
  append_message(tx->buf, h, tx->msg, body);
  --p.tx_credits;
  // One part for the short message, one more for a bulk payload (counted before the
  // short send may finish at once).
  tx->pending = tx->kind == MsgKind::Bulk ? 2 : 1;
  int sent = isend_locked(tx);
  if (sent == kSendFailed) {
    ++p.tx_credits;
    p.owed += h.credits;
    if (tx->kind == MsgKind::Bulk) free_tag(p, tag);
    if (tx->kind == MsgKind::GetReq) {
      // The sink will never be written: cancel it; it completes with an error.
      for (Bulk* s : p.sinks)
        if (s->tag == tag) {
          s->rc = -EIO;
          cancel_requests_of_locked(s);
        }
    }
    fail_tx_locked(tx, -EIO, HealthStatus::LocalError, done);
    return;
  }
  bool bulk = tx->kind == MsgKind::Bulk;
  if (sent == kSentDone) tx_part_done_locked(tx, 0, done);  // a bulk Tx still waits for its payload
  if (bulk) {
    LndMessage& m = *tx->msg;
    Bulk* bk = get_bulk_locked();
    bk->send = true;
    bk->peer = &p;
    bk->tag = tag;
    bk->own_tag = true;
    bk->tx = tx;
    bk->iov = m.iov;
    bk->niov = m.niov;
    bk->offset = m.offset;
    bk->len = bk->total = m.len;
    bk->nchunks = chunk_count(bk->total, chunk_for(p));
    tx->bulk = bk;
    if (!post_bulk_locked(bk)) {
      // The header went: the peer waits for a payload that will not come until its
      // own timeout. Ours fails now.
      bk->rc = -EIO;
      bulk_finished_locked(bk, done);
    }
  }
}

void MpiNi::fail_tx_locked(Tx* tx, int rc, HealthStatus h, Done& done) {
  tx->rc = rc;
  tx->health = h;
  tx->pending = 0;
  if (tx->msg) {
    tx_finished_locked(tx, done);
  } else {
    put_tx_locked(tx);
  }
}

// Posts the MPI messages of a bulk transfer: chunk i carries bytes [i*C, (i+1)*C) of the
// `total` bytes on the wire (possibly none, for a GET source shorter than its sink);
// the first `len` of them are in (iov, niov) from `offset`, the rest land in `discard`.
bool MpiNi::post_bulk_locked(Bulk* b) {
  if (b->total > b->len && !b->send) {
    b->discard_len = static_cast<std::uint32_t>(std::min<std::uint64_t>(b->total - b->len, UINT32_MAX));
    b->discard = std::make_unique<std::uint8_t[]>(b->discard_len);
  }
  std::uint32_t chunk = chunk_for(*b->peer);
  for (std::uint32_t c = 0; c < b->nchunks; ++c) {
    auto give_up = [&] {
      b->nchunks = c;  // what was posted still completes
      // The peer may have posted (or may yet post) its side of every chunk on this tag:
      // it is never used again with this peer.
      b->own_tag = false;
      return false;
    };
    std::uint64_t lo = std::min<std::uint64_t>(static_cast<std::uint64_t>(c) * chunk, b->total);
    std::uint64_t hi = std::min<std::uint64_t>(lo + chunk, b->total);
    if (b->send) hi = std::min<std::uint64_t>(hi, b->len);  // a sender sends what it has
    if (b->send) lo = std::min<std::uint64_t>(lo, hi);
    // The segments of [lo, hi): MD fragments, then the discard buffer.
    MPI_Aint displs[kMaxIov + 1];
    int lens[kMaxIov + 1];
    int nseg = 0;
    std::uint64_t pos = 0;  // position in the logical buffer
    std::uint64_t skip = b->offset;
    bool addressed = true;
    for (unsigned f = 0; f < b->niov && pos < std::min<std::uint64_t>(hi, b->len); ++f) {
      std::uint64_t flen = b->iov[f].iov_len;
      if (skip >= flen) {
        skip -= flen;
        continue;
      }
      auto* base = static_cast<std::uint8_t*>(b->iov[f].iov_base) + skip;
      flen -= skip;
      skip = 0;
      flen = std::min<std::uint64_t>(flen, b->len - pos);
      std::uint64_t s = std::max(pos, lo), e = std::min(pos + flen, hi);
      if (s < e) {
        addressed = addressed && check(MPI_Get_address(base + (s - pos), &displs[nseg]), "MPI_Get_address");
        lens[nseg++] = static_cast<int>(e - s);
      }
      pos += flen;
    }
    if (!b->send && hi > b->len) {
      std::uint64_t s = std::max<std::uint64_t>(lo, b->len);
      addressed =
          addressed && check(MPI_Get_address(b->discard.get() + (s - b->len), &displs[nseg]), "MPI_Get_address");
      lens[nseg++] = static_cast<int>(hi - s);
    }
    if (!addressed) return give_up();
    void* buf = nullptr;
    int count = 0;
    MPI_Datatype type = MPI_BYTE;
    bool derived = false;
    if (nseg == 1) {
      buf = reinterpret_cast<void*>(displs[0]);
      count = lens[0];
    } else if (nseg > 1) {
      if (!check(MPI_Type_create_hindexed(nseg, lens, displs, MPI_BYTE, &type), "MPI_Type_create_hindexed") ||
          !check(MPI_Type_commit(&type), "MPI_Type_commit"))
        return give_up();
      derived = true;
      buf = MPI_BOTTOM;
      count = 1;
    } else {
      buf = b->discard ? static_cast<void*>(b->discard.get()) : static_cast<void*>(&b->tag);
      count = 0;
    }
    MPI_Request r;
    int rc;
    int tag = static_cast<int>(b->tag);
    if (!b->send) {
      rc = MPI_Irecv(buf, count, type, b->peer->rank, tag, comm_, &r);
    } else if (b->ready) {
      rc = MPI_Irsend(buf, count, type, b->peer->rank, tag, comm_, &r);
    } else {
      rc = MPI_Issend(buf, count, type, b->peer->rank, tag, comm_, &r);
    }
    if (derived) check(MPI_Type_free(&type), "MPI_Type_free");  // MPI keeps it until the operation is done
    if (!check(rc, b->send ? (b->ready ? "MPI_Irsend" : "MPI_Issend") : "MPI_Irecv")) return give_up();
    add_request(r, Owner::BulkChunk, b);
    stats_.chunks.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

void MpiNi::tx_finished_locked(Tx* tx, Done& done) {
  if (done.nsent < Done::kInline) {
    done.sent[done.nsent++] = Done::Sent{tx->msg, tx->rc, tx->health};
    put_tx_locked(tx);
  } else {
    done.txs.push_back(tx);
  }
}

void MpiNi::tx_part_done_locked(Tx* tx, int rc, Done& done) {
  if (rc && !tx->rc) {
    tx->rc = rc;
    tx->health = HealthStatus::LocalError;
  }
  if (--tx->pending > 0) return;
  while (Tx* m = tx->members.pop_front()) {
    // A PACKED carrier: its messages end as it did.
    m->rc = tx->rc;
    m->health = tx->health;
    tx_finished_locked(m, done);
  }
  if (tx->msg) {
    tx_finished_locked(tx, done);
  } else {
    put_tx_locked(tx);
  }
}

void MpiNi::bulk_chunk_done_locked(Bulk* b, const MPI_Status& st, int err, Done& done) {
  int cancelled = 0;
  if (!check(MPI_Test_cancelled(&st, &cancelled), "MPI_Test_cancelled")) cancelled = 0;  // undefined after an error
  if (cancelled) {
    b->cancelled = true;
  } else if (err != MPI_SUCCESS) {
    if (!b->rc) b->rc = -EIO;
  } else if (!b->send) {
    int n = 0;
    if (!check(MPI_Get_count(&st, MPI_BYTE, &n), "MPI_Get_count"))
      b->rc = b->rc ? b->rc : -EIO;  // how much arrived is unknown
    else if (n > 0)
      b->bytes += static_cast<std::uint64_t>(n);
  }
  if (++b->done >= b->nchunks) bulk_finished_locked(b, done);
}

void MpiNi::bulk_finished_locked(Bulk* b, Done& done) {
  Peer& p = *b->peer;
  if (b->own_tag) free_tag(p, b->tag);
  if (b->sink) {
    auto it = std::find(p.sinks.begin(), p.sinks.end(), b);
    if (it != p.sinks.end()) p.sinks.erase(it);
  }
  if (b->cancelled && !b->rc) b->rc = -ECANCELED;
  if (b->send && b->tx) {
    Tx* tx = b->tx;
    int rc = b->rc;
    put_bulk_locked(b);
    tx_part_done_locked(tx, rc, done);
    return;
  }
  done.bulks.push_back(b);
}

// Cancels the posted MPI requests of `obj` (a GET sink told that nothing will come, or a
// receive at shutdown); they complete as cancelled in a later MPI_Testsome.
void MpiNi::cancel_requests_of_locked(void* obj) {
  for (std::size_t i = opts_.pool_depth; i < reqs_.size(); ++i)
    if (owners_[i].obj == obj && reqs_[i] != MPI_REQUEST_NULL) check(MPI_Cancel(&reqs_[i]), "MPI_Cancel");
}

// ---------------------------------------------------------------- receiving

int MpiNi::recv(void* priv, LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t mlen,
                std::uint32_t rlen) {
  auto* rx = static_cast<Rx*>(priv);
  Done done;
  if (rx->kind == MsgKind::Immediate) {
    if (rx->parser.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
      // Within parse(): the pool buffer is ours until finish_pool_work_locked() frees the Rx.
      if (msg && mlen) copy_to_fragments(iov, niov, offset, rx->payload, std::min(mlen, rx->payload_len));
      rx->received_in_parse = true;
      if (msg) host_.finalize(msg, 0);
      return 0;
    }
    bool free_it;
    {
      std::lock_guard g(rx->mutex);
      if (msg && mlen) copy_to_fragments(iov, niov, offset, rx->payload, std::min(mlen, rx->payload_len));
      rx->received = true;
      free_it = rx->parsed;
    }
    if (free_it) {
      std::lock_guard g(mu_);
      put_rx_locked(rx);
    }
    if (msg) host_.finalize(msg, 0);
    return 0;
  }
  {
    std::lock_guard g(mu_);
    Peer& p = *rx->peer;
    if (rx->kind == MsgKind::GetReq && !msg) {
      // The GET matched nothing: tell the initiator, whose sink waits.
      Tx* tx = get_tx_locked();
      tx->peer = &p;
      tx->kind = MsgKind::GetNak;
      tx->tag = rx->tag;
      tx->status = -ENODATA;
      if (may_call_mpi() && !stopped_)
        enqueue_locked(tx, done);
      else if (!stopped_)
        deferred_.push_back(tx);
      else
        put_tx_locked(tx);
    } else {
      Bulk* b = get_bulk_locked();
      b->peer = &p;
      b->tag = rx->tag;
      b->msg = msg;
      b->iov = iov;
      b->niov = niov;
      b->offset = offset;
      if (rx->kind == MsgKind::GetReq) {
        // The target side of an optimised GET: ready-send the source into the sink,
        // in as many messages as the initiator posted for its sink.
        b->send = b->ready = true;
        b->len = b->total = mlen;
        b->nchunks = chunk_count(rx->sink_length, chunk_for(p));
      } else {
        b->len = msg ? mlen : 0;
        b->total = rlen;
        b->nchunks = chunk_count(rlen, chunk_for(p));
      }
      if (stopped_) {
        b->rc = -ESHUTDOWN;
        done.bulks.push_back(b);
      } else if (!may_call_mpi()) {
        deferred_bulk_.push_back(b);
      } else if (!post_bulk_locked(b)) {
        b->rc = -EIO;
        if (b->done >= b->nchunks) bulk_finished_locked(b, done);
      }
    }
    bool free_it;
    {
      std::lock_guard rg(rx->mutex);
      rx->received = true;
      free_it = rx->parsed;
    }
    if (free_it) put_rx_locked(rx);
  }
  complete(done);
  kick();
  return 0;
}

void MpiNi::repost_locked(int index) {
  if (stopped_ || reqs_[static_cast<std::size_t>(index)] == MPI_REQUEST_NULL) return;
  check(MPI_Start(&reqs_[static_cast<std::size_t>(index)]), "MPI_Start");
}

// A pool receive that a message too long for it matched: MPI may not be done with it
// (Open MPI still moves the truncated message in and will not restart the request), so
// it is left to MPI with its buffer, and a new receive takes its place.
void MpiNi::replace_pool_rx_locked(int index) {
  auto i = static_cast<std::size_t>(index);
  if (reqs_[i] != MPI_REQUEST_NULL) check(MPI_Request_free(&reqs_[i]), "MPI_Request_free");
  retired_.push_back(std::move(pool_[i]));
  if (!init_pool_rx_locked(i)) reqs_[i] = MPI_REQUEST_NULL;  // the pool is one short from now on
}

// A new buffer and an inactive persistent receive into it for pool entry i.
bool MpiNi::init_pool_rx_locked(std::size_t i) {
  pool_[i] = std::make_unique<std::uint8_t[]>(buf_size_);
  return check(
      MPI_Recv_init(pool_[i].get(), static_cast<int>(buf_size_), MPI_BYTE, MPI_ANY_SOURCE, kShortTag, comm_, &reqs_[i]),
      "MPI_Recv_init");
}

// A message from `source` that is not ours to take: counted, logged, and its sender
// reported down to the core until a good message comes from it.
void MpiNi::drop_bad_locked(int source, const std::string& why, Done& done) {
  stats_.bad_messages.fetch_add(1, std::memory_order_relaxed);
  LNET_LOG(Warn, kLogLnd, "%s: dropped a message from rank %d: %s", ni_.nid.to_string().c_str(), source, why.c_str());
  if (source >= 0 && source < size_) {
    Peer* p = peer_locked(source);
    p->down = true;
    done.health.emplace_back(p->nid, false);
  }
}

// A pool receive completed (under the mutex, within progress()): decode it, take the
// credits it returns, answer the handshake, or hand an Rx to parse_pool_work(). The
// receive is restarted by finish_pool_work_locked(), after the host has seen the buffer.
void MpiNi::pool_rx_locked(int index, const MPI_Status& st, int err, Done& done) {
  PoolWork& w = pool_work_.emplace_back();
  w.index = index;
  int source = st.MPI_SOURCE, count = 0;
  if (err != MPI_SUCCESS) {
    int cls = MPI_ERR_OTHER;
    if (MPI_Error_class(err, &cls) == MPI_SUCCESS && cls == MPI_ERR_TRUNCATE) {
      // Longer than any message of ours can be: the sender's doing, not MPI's failure.
      drop_bad_locked(source, "longer than the " + std::to_string(buf_size_) + "-byte receive buffer", done);
      replace_pool_rx_locked(index);
    } else {
      check(err, "pool receive");
    }
    return;
  }
  if (!check(MPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count")) return;  // restarted, like a failed receive
  const std::uint8_t* buf = pool_[static_cast<std::size_t>(index)].get();
  Decoded dec;
  std::string why;
  if (!decode_msg(std::span(buf, static_cast<std::size_t>(std::max(count, 0))), dec, &why)) {
    drop_bad_locked(source, why, done);
    return;
  }
  MsgKind kind = dec.hdr.kind;
  Peer* p = peer_locked(source);
  w.peer = p;
  w.kind = kind;
  if (p->down) {
    p->down = false;
    done.health.emplace_back(p->nid, true);
  }
  if (dec.hdr.credits) p->tx_credits += dec.hdr.credits;
  switch (kind) {
    case MsgKind::Query:
    case MsgKind::Response: {
      if (opts_.mute) break;
      const Hello& he = dec.hello;
      if (p->stamp && p->stamp != dec.hdr.stamp)
        LNET_LOG(Warn, kLogLnd, "%s: rank %d restarted (new incarnation)", ni_.nid.to_string().c_str(), source);
      p->stamp = dec.hdr.stamp;
      p->short_max = he.short_max;
      p->chunk = he.chunk;
      if (kind == MsgKind::Query) {
        post_control_locked(*p, MsgKind::Response);
      } else if (p->state != Peer::State::Ready) {
        p->state = Peer::State::Ready;
        p->tx_credits = static_cast<int>(std::min<std::uint32_t>(he.credits, 255));
        stats_.handshakes.fetch_add(1, std::memory_order_relaxed);
      }
      break;
    }
    case MsgKind::GetNak:
      for (Bulk* s : p->sinks)
        if (s->tag == dec.hdr.tag) {
          s->rc = dec.hdr.status;
          cancel_requests_of_locked(s);
        }
      break;
    case MsgKind::Immediate:
    case MsgKind::Bulk:
    case MsgKind::GetReq: hand_to_host_locked(w, dec); break;
    case MsgKind::Noop: break;
    case MsgKind::Packed: {
      // Each packed IMMEDIATE is parsed on its own; the buffer is restarted (by the
      // carrier's entry, `w`) once all of them are done with it.
      std::span<const std::uint8_t> rest = dec.payload;
      while (!rest.empty()) {
        Decoded sub;
        if (!next_packed(rest, sub, &why)) {
          stats_.bad_messages.fetch_add(1, std::memory_order_relaxed);
          LNET_LOG(Warn, kLogLnd, "%s: dropped the rest of a PACKED from rank %d: %s", ni_.nid.to_string().c_str(),
                   source, why.c_str());
          p->down = true;
          done.health.emplace_back(p->nid, false);
          break;
        }
        PoolWork& sw = pool_work_.emplace_back();  // `w` is not used after this
        sw.index = -1;
        sw.peer = p;
        sw.kind = MsgKind::Immediate;
        hand_to_host_locked(sw, sub);
      }
      break;
    }
  }
}

// An Rx for the LNet message `d` (decoded from w's pool buffer), for the host to parse.
void MpiNi::hand_to_host_locked(PoolWork& w, const Decoded& d) {
  Rx* rx = get_rx_locked();
  rx->kind = w.kind;
  rx->peer = w.peer;
  rx->tag = d.hdr.tag;
  rx->sink_length = d.lnet.msg.get.sink_length;
  rx->payload = d.payload.data();
  rx->payload_len = static_cast<std::uint32_t>(d.payload.size());
  rx->parser.store(std::this_thread::get_id(), std::memory_order_relaxed);
  w.rx = rx;
  w.lnet = d.lnet;
}

// The host parses the batch's LNet headers, no lock held (it may send or receive).
void MpiNi::parse_pool_work() {
  for (PoolWork& w : pool_work_) {
    if (!w.rx) continue;
    Rx* rx = w.rx;
    int rc = host_.parse(ni_, w.lnet, w.peer->nid, rx, w.kind == MsgKind::GetReq);
    if (rc >= 0) continue;
    // The core refused the header. Whatever the sender posted must still be consumed:
    // drain a bulk payload, tell a GET's sink that nothing comes.
    stats_.bad_messages.fetch_add(1, std::memory_order_relaxed);
    LNET_LOG(Warn, kLogLnd, "%s: dropped a %s from %s: the LNet header was refused (%d)", ni_.nid.to_string().c_str(),
             kind_name(w.kind), w.peer->nid.to_string().c_str(), rc);
    if (w.kind != MsgKind::Immediate) {
      {
        std::lock_guard rg(rx->mutex);
        rx->parsed = true;
      }
      recv(rx, nullptr, nullptr, 0, 0, 0, w.kind == MsgKind::Bulk ? w.lnet.payload_length : 0);
      w.rx = nullptr;
    } else {
      w.free_rx = true;
    }
  }
}

// After parse: free or keep each Rx, restart the receives in the order they completed
// (so the oldest started is still the one to test), return the credits.
void MpiNi::finish_pool_work_locked(Done& done) {
  for (PoolWork& w : pool_work_) {
    Rx* rx = w.rx;
    if (!rx) continue;
    if (w.free_rx || rx->received_in_parse) {
      put_rx_locked(rx);
      continue;
    }
    rx->parser.store(std::thread::id(), std::memory_order_relaxed);  // from now on recv() may come from any thread
    bool free_it;
    {
      std::lock_guard rg(rx->mutex);
      rx->parsed = true;
      if (!rx->received && rx->kind == MsgKind::Immediate) {
        // The host delays this receive (a lazy portal, a router buffer): keep the payload
        // aside so the pool buffer goes back now.
        rx->heap.assign(rx->payload, rx->payload + rx->payload_len);
        rx->payload = rx->heap.data();
      }
      free_it = rx->received;
    }
    if (free_it) put_rx_locked(rx);
  }
  for (const PoolWork& w : pool_work_)
    if (w.index >= 0) repost_locked(w.index);
  for (const PoolWork& w : pool_work_)
    if (w.index >= 0 && takes_credit(w.kind)) ++w.peer->owed;  // packed ones rode on their carrier's
  // Credits may have come back or the handshake finished: what waits may go, and what
  // we owe goes back when it is half the grant (flushing a peer twice does no harm).
  Peer* last = nullptr;
  for (const PoolWork& w : pool_work_) {
    if (!w.peer || w.peer == last) continue;
    flush_locked(*w.peer, done);
    last = w.peer;
  }
  pool_work_.clear();
}

// ---------------------------------------------------------------- progress

bool MpiNi::progress() {
  if (!may_call_mpi()) return false;
  std::unique_lock pl(progress_mu_, std::try_to_lock);
  if (!pl) return false;
  Done done;
  bool worked = false;
  completed_.clear();
  {
    std::lock_guard g(mu_);
    if (stopped_) return false;
    while (Tx* tx = deferred_.pop_front()) {
      enqueue_locked(tx, done);
      worked = true;
    }
    while (Bulk* b = deferred_bulk_.pop_front()) {
      if (!post_bulk_locked(b)) {
        b->rc = -EIO;
        if (b->done >= b->nchunks) bulk_finished_locked(b, done);
      }
      worked = true;
    }
    // The clock is read every so many rounds only: a busy loop would spend more time
    // in it than in MPI.
    if ((++rounds_ & 255) == 0) {
      auto now = Clock::now();
      if (now >= next_timeout_check_) {
        check_timeouts_locked(now, done);
        next_timeout_check_ = now + kTimeoutScan;
      }
    }
    // Sends and bulk transfers: MPI_Testsome over what is outstanding (it also runs
    // MPI's progress engine once).
    const std::size_t depth = opts_.pool_depth;
    int n = static_cast<int>(reqs_.size() - depth);
    indices_.resize(reqs_.size());
    statuses_.resize(reqs_.size());
    int out = 0;
    int rc = n ? MPI_Testsome(n, reqs_.data() + depth, &out, indices_.data(), statuses_.data()) : MPI_SUCCESS;
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
      check(rc, "MPI_Testsome");
      out = 0;
    }
    if (out == MPI_UNDEFINED) out = 0;
    for (int k = 0; k < out; ++k) {
      std::size_t i = depth + static_cast<std::size_t>(indices_[static_cast<std::size_t>(k)]);
      const MPI_Status& st = statuses_[static_cast<std::size_t>(k)];
      completed_.push_back(Completion{owners_[i], st, rc == MPI_ERR_IN_STATUS ? st.MPI_ERROR : MPI_SUCCESS});
    }
    if (out > 0) {
      worked = true;
      // Drop the finished one-shot requests (MPI set them to MPI_REQUEST_NULL), keeping
      // the persistent pool at the front.
      std::size_t w = depth;
      for (std::size_t r = depth; r < reqs_.size(); ++r) {
        if (reqs_[r] == MPI_REQUEST_NULL) continue;
        reqs_[w] = reqs_[r];
        owners_[w] = owners_[r];
        ++w;
      }
      reqs_.resize(w);
      owners_.resize(w);
      in_flight_.store(w > depth, std::memory_order_relaxed);
    }
    // Their owners may post more requests, so only now that the array is compact.
    for (const Completion& c : completed_) {
      if (c.owner.kind == Owner::TxShort) {
        if (c.err != MPI_SUCCESS) check(c.err, "MPI_Isend");
        tx_part_done_locked(static_cast<Tx*>(c.owner.obj), c.err == MPI_SUCCESS ? 0 : -EIO, done);
      } else {
        if (c.err != MPI_SUCCESS) check(c.err, "bulk transfer");
        bulk_chunk_done_locked(static_cast<Bulk*>(c.owner.obj), c.status, c.err, done);
      }
    }
    // The pool: its receives match arriving messages in the order they were started
    // (MPI's non-overtaking rule), and they are restarted in the order they complete, so
    // only the oldest one needs testing. The cost is one test per message, whatever the
    // depth, and messages are handled in the order they arrived. After a round that found
    // none, the first goes to the host at once: testing the next receive first would run
    // MPI's progress engine once more and, in request-response traffic, find nothing.
    // While messages keep coming they are taken in batches.
    const std::size_t limit = pool_busy_ ? depth : 1;
    std::size_t found = 0;
    for (; found < limit && reqs_[pool_head_] != MPI_REQUEST_NULL; ++found) {
      int flag = 0;
      MPI_Status st;
      int trc = MPI_Test(&reqs_[pool_head_], &flag, &st);
      if (!flag && trc == MPI_SUCCESS) break;
      pool_rx_locked(static_cast<int>(pool_head_), st, trc, done);
      pool_head_ = pool_head_ + 1 == depth ? 0 : pool_head_ + 1;
    }
    pool_busy_ = found > 0;
    worked |= pool_busy_;
  }
  if (!pool_work_.empty()) {
    parse_pool_work();
    std::lock_guard g(mu_);
    finish_pool_work_locked(done);
  }
  pl.unlock();
  complete(done);
  return worked;
}

void MpiNi::check_timeouts_locked(Clock::time_point now, Done& done) {
  for (Peer* p : contacted_) {
    if (p->state == Peer::State::Querying && now >= p->query_deadline) {
      LNET_LOG(Warn, kLogLnd, "%s: no answer to the handshake from %s within %d s", ni_.nid.to_string().c_str(),
               p->nid.to_string().c_str(), opts_.timeout);
      p->state = Peer::State::New;  // the next send asks again
      while (Tx* tx = p->queue.pop_front()) {
        stats_.timeouts.fetch_add(1, std::memory_order_relaxed);
        fail_tx_locked(tx, -ETIMEDOUT, HealthStatus::RemoteTimeout, done);
      }
      if (!p->down) {
        p->down = true;
        done.health.emplace_back(p->nid, false);
      }
      continue;
    }
    // Sends waiting for a credit that does not come.
    while (!p->queue.empty() && p->queue.head->deadline <= now) {
      Tx* tx = p->queue.pop_front();
      stats_.timeouts.fetch_add(1, std::memory_order_relaxed);
      fail_tx_locked(tx, -ETIMEDOUT, HealthStatus::RemoteTimeout, done);
    }
  }
}

void MpiNi::complete(Done& done) {
  for (const auto& [nid, up] : done.health) host_.notify_peer(ni_, nid, up);
  done.health.clear();
  for (unsigned i = 0; i < done.nsent; ++i) {
    done.sent[i].msg->health = done.sent[i].health;
    host_.finalize(done.sent[i].msg, done.sent[i].rc);
  }
  done.nsent = 0;
  if (done.txs.empty() && done.bulks.empty()) return;
  List<Tx> txs = done.txs;
  List<Bulk> bulks = done.bulks;
  done.txs = {};
  done.bulks = {};
  for (Tx* tx = txs.head; tx; tx = tx->next) {
    tx->msg->health = tx->health;
    host_.finalize(tx->msg, tx->rc);
  }
  for (Bulk* b = bulks.head; b; b = b->next) {
    if (!b->msg) continue;
    if (b->sink && b->rc == 0) host_.set_reply_length(*b->msg, static_cast<std::uint32_t>(b->bytes));
    if (b->rc) b->msg->health = b->rc == -ENODATA ? HealthStatus::Ok : HealthStatus::LocalError;
    host_.finalize(b->msg, b->rc);
  }
  std::lock_guard g(mu_);
  while (Tx* tx = txs.pop_front()) put_tx_locked(tx);
  while (Bulk* b = bulks.pop_front()) put_bulk_locked(b);
}

bool MpiNi::idle() {
  std::lock_guard g(mu_);
  if (reqs_.size() > opts_.pool_depth || !deferred_.empty() || !deferred_bulk_.empty()) return false;
  for (Peer* p : contacted_)
    if (!p->queue.empty()) return false;
  return true;
}

int MpiNi::barrier(Clock::time_point deadline) {
  MPI_Request r;
  {
    std::lock_guard g(mu_);
    if (!check(MPI_Ibarrier(comm_, &r), "MPI_Ibarrier")) return -EIO;
  }
  for (;;) {
    if (!has_thread()) progress();
    int flag = 0;
    {
      std::lock_guard g(mu_);
      if (!check(MPI_Test(&r, &flag, MPI_STATUS_IGNORE), "MPI_Test")) return -EIO;
    }
    if (flag) return 0;
    if (Clock::now() >= deadline) return -ETIMEDOUT;  // the request is left to MPI
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Stats MpiNi::stats() const {
  Stats s;
  s.handshakes = stats_.handshakes.load();
  s.immediate = stats_.immediate.load();
  s.packed = stats_.packed.load();
  s.bulk = stats_.bulk.load();
  s.chunks = stats_.chunks.load();
  s.rdma_gets = stats_.rdma_gets.load();
  s.noops = stats_.noops.load();
  s.credit_waits = stats_.credit_waits.load();
  s.bad_messages = stats_.bad_messages.load();
  s.timeouts = stats_.timeouts.load();
  s.mpi_errors = stats_.mpi_errors.load();
  return s;
}

// ---------------------------------------------------------------- shutdown

void MpiNi::stop() {
  stopping_.store(true);
  if (thread_.joinable()) {
    {
      std::lock_guard g(nap_mu_);
      nap_cv_.notify_one();
    }
    thread_.join();
  }
  if (progress_id_ >= 0) remove_progress(progress_id_);
  progress_id_ = -1;
  std::lock_guard pl(progress_mu_);
  Done done;
  {
    std::lock_guard g(mu_);
    stopped_ = true;
    while (Tx* tx = deferred_.pop_front()) fail_tx_locked(tx, -ESHUTDOWN, HealthStatus::LocalAborted, done);
    while (Bulk* b = deferred_bulk_.pop_front()) {
      b->rc = -ESHUTDOWN;
      done.bulks.push_back(b);
    }
    for (Peer* p : contacted_)
      while (Tx* tx = p->queue.pop_front()) fail_tx_locked(tx, -ESHUTDOWN, HealthStatus::LocalAborted, done);
    // The pool: cancel, complete and free every persistent receive.
    for (unsigned i = 0; i < opts_.pool_depth && i < reqs_.size(); ++i) {
      if (reqs_[i] == MPI_REQUEST_NULL) continue;
      int flag = 0;
      // Inactive or done: nothing to cancel. (A failed test leaves it to the cancel.)
      if (!check(MPI_Test(&reqs_[i], &flag, MPI_STATUS_IGNORE), "MPI_Test")) flag = 0;
      if (!flag) {
        check(MPI_Cancel(&reqs_[i]), "MPI_Cancel");
        check(MPI_Wait(&reqs_[i], MPI_STATUS_IGNORE), "MPI_Wait");
      }
      check(MPI_Request_free(&reqs_[i]), "MPI_Request_free");
    }
    // Receives still posted will never be written: cancel them.
    for (std::size_t i = opts_.pool_depth; i < reqs_.size(); ++i)
      if (owners_[i].kind == Owner::BulkChunk && !static_cast<Bulk*>(owners_[i].obj)->send)
        check(MPI_Cancel(&reqs_[i]), "MPI_Cancel");
  }
  // Let sends and cancellations finish for a moment; what is left after that is
  // abandoned to MPI (its messages fail here).
  auto deadline = Clock::now() + std::chrono::seconds(2);
  for (;;) {
    std::lock_guard g(mu_);
    std::size_t n = reqs_.size() - std::min<std::size_t>(opts_.pool_depth, reqs_.size());
    if (n == 0) break;
    std::vector<int> idx(n);
    std::vector<MPI_Status> st(n);
    int out = 0;
    int rc = MPI_Testsome(static_cast<int>(n), reqs_.data() + opts_.pool_depth, &out, idx.data(), st.data());
    bool broken = rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS;
    if (broken) {
      check(rc, "MPI_Testsome");
      out = 0;
    }
    if (out == MPI_UNDEFINED) out = 0;
    for (int k = 0; k < out; ++k) {
      Owner o = owners_[opts_.pool_depth + static_cast<std::size_t>(idx[static_cast<std::size_t>(k)])];
      int err = rc == MPI_ERR_IN_STATUS ? st[static_cast<std::size_t>(k)].MPI_ERROR : MPI_SUCCESS;
      if (o.kind == Owner::TxShort) tx_part_done_locked(static_cast<Tx*>(o.obj), err ? -EIO : -ESHUTDOWN, done);
      if (o.kind == Owner::BulkChunk)
        bulk_chunk_done_locked(static_cast<Bulk*>(o.obj), st[static_cast<std::size_t>(k)], err, done);
    }
    std::size_t w = opts_.pool_depth;
    for (std::size_t r = opts_.pool_depth; r < reqs_.size(); ++r) {
      if (reqs_[r] == MPI_REQUEST_NULL) continue;
      reqs_[w] = reqs_[r];
      owners_[w] = owners_[r];
      ++w;
    }
    reqs_.resize(w);
    owners_.resize(w);
    if (broken || Clock::now() >= deadline) {
      LNET_LOG(Warn, kLogLnd, "%s: %zu MPI requests still running at shutdown; left to MPI",
               ni_.nid.to_string().c_str(), reqs_.size() - opts_.pool_depth);
      for (std::size_t r = opts_.pool_depth; r < reqs_.size(); ++r) {
        Owner o = owners_[r];
        check(MPI_Request_free(&reqs_[r]), "MPI_Request_free");
        if (o.kind == Owner::TxShort) {
          // MPI may still read the message: its buffer is left to it for good.
          auto* tx = static_cast<Tx*>(o.obj);
          (void)new std::vector<std::uint8_t>(std::move(tx->buf));
          tx_part_done_locked(tx, -ESHUTDOWN, done);
        } else {
          auto* b = static_cast<Bulk*>(o.obj);
          if (!b->rc) b->rc = -ESHUTDOWN;
          if (++b->done >= b->nchunks) bulk_finished_locked(b, done);
        }
      }
      reqs_.resize(opts_.pool_depth);
      owners_.resize(opts_.pool_depth);
      break;
    }
  }
  complete(done);
}

// ---------------------------------------------------------------- the driver

namespace {

struct NetEntry {
  MPI_Comm comm = MPI_COMM_NULL;
  Options opts;
  MpiNi* ni = nullptr;
};

std::mutex g_nets_mutex;
std::map<unsigned, NetEntry>& nets() {
  static auto* m = new std::map<unsigned, NetEntry>;
  return *m;
}

class MpiLnd final : public Lnd {
 public:
  std::uint32_t net_type() const override { return kMpiLnd; }
  int startup(NetInterface& ni) override {
    unsigned net = ni.config.net.num();
    MPI_Comm comm;
    Options opts;
    {
      std::lock_guard g(g_nets_mutex);
      auto it = nets().find(net);
      if (it == nets().end() || it->second.comm == MPI_COMM_NULL) {
        LNET_LOG(Error, kLogLnd,
                 "cannot start %s: no communicator for it (start it with lnet::mpi::Session or "
                 "lnet_mpi_init)",
                 ni.config.net.to_string().c_str());
        return -ENODEV;
      }
      if (it->second.ni) return -EEXIST;
      comm = it->second.comm;
      opts = it->second.opts;
    }
    int rank = 0;
    if (int rc = MPI_Comm_rank(comm, &rank); rc != MPI_SUCCESS) {
      LNET_LOG(Error, kLogLnd, "%s: MPI_Comm_rank failed: %s", ni.config.net.to_string().c_str(),
               mpi_error(rc).c_str());
      return -EIO;
    }
    Nid want = Nid::make(ni.config.net, static_cast<std::uint32_t>(rank));
    if (!ni.nid.is_any() && ni.nid != want) return -EINVAL;
    ni.nid = want;
    auto m = std::make_unique<MpiNi>(ni, comm, opts);
    if (int rc = m->start()) {
      m->stop();
      return rc;
    }
    {
      std::lock_guard g(g_nets_mutex);
      nets()[net].ni = m.get();
    }
    ni.lnd_data = m.release();
    return 0;
  }
  void shutdown(NetInterface& ni) override {
    auto* m = static_cast<MpiNi*>(ni.lnd_data);
    if (!m) return;
    {
      std::lock_guard g(g_nets_mutex);
      auto it = nets().find(ni.config.net.num());
      if (it != nets().end()) it->second.ni = nullptr;
    }
    m->stop();
    delete m;
    ni.lnd_data = nullptr;
  }
  int send(NetInterface& ni, LndMessage& msg) override { return static_cast<MpiNi*>(ni.lnd_data)->send(msg); }
  int recv(NetInterface& ni, void* priv, LndMessage* msg, bool, const iovec* iov, unsigned niov, std::uint32_t offset,
           std::uint32_t mlen, std::uint32_t rlen) override {
    return static_cast<MpiNi*>(ni.lnd_data)->recv(priv, msg, iov, niov, offset, mlen, rlen);
  }
};

}  // namespace

void register_mpi_lnd() {
  static std::once_flag once;
  std::call_once(once, [] { register_lnd(kMpiLnd, [] { return std::unique_ptr<Lnd>(new MpiLnd); }); });
}

void set_comm_for_net(unsigned net_number, MPI_Comm comm, const Options& opts) {
  std::lock_guard g(g_nets_mutex);
  nets()[net_number] = NetEntry{comm, opts, nullptr};
}

void clear_comm_for_net(unsigned net_number) {
  std::lock_guard g(g_nets_mutex);
  nets().erase(net_number);
}

MpiNi* find_ni(unsigned net_number) {
  std::lock_guard g(g_nets_mutex);
  auto it = nets().find(net_number);
  return it == nets().end() ? nullptr : it->second.ni;
}

}  // namespace lnet::mpi
