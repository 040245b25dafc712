// MPI LND transmit: the host's sends become short messages (IMMEDIATE, BULK header,
// GET_REQ) or wait for the handshake or a credit; what waited goes out PACKED; QUERY,
// RESPONSE and NOOP are the driver's own.
#include <lnet/lnd/fragments.hpp>
#include <lnet/lnd/pool.hpp>
#include <lnet/mutex.hpp>

#include "mpi_ni.hpp"

namespace lnet::mpi {

namespace {

constexpr int kShortTag = 0;

// The monotonic clock at its tick resolution (a few ms), for deadlines of seconds: half
// a plain read's cost, and half the sends under load wait for a credit.
Clock::time_point coarse_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

// Appends one message to `buf`: header `h` (its size filled in), then, when there is an
// LNet message, its header and the first `body` bytes of its payload.
void append_message(Bytes& buf, MsgHdr h, const LndMessage* m, std::uint32_t body) {
  std::size_t at = buf.size();
  h.nob = static_cast<std::uint32_t>(kMsgHdrSize + (m ? kHeaderSize : 0) + body);
  buf.resize(at + h.nob);
  std::uint8_t* b = buf.data() + at;
  encode_msg_hdr(h, std::span<std::uint8_t, kMsgHdrSize>(b, kMsgHdrSize));
  if (!m) return;
  encode_header(m->hdr, std::span<std::uint8_t, kHeaderSize>(b + kMsgHdrSize, kHeaderSize));
  if (body) copy_from_fragments(b + kMsgHdrSize + kHeaderSize, m->iov, m->niov, m->offset, body);
}

// Buffers this big are reclaimed (put_tx); smaller messages go eagerly (a copy by MPI,
// not a read of our buffer by the peer) with every MPI we know of.
constexpr std::size_t kReclaimMin = 2048;
constexpr std::size_t kCacheLine = 64;

}  // namespace

Tx* MpiNi::get_tx() { return Pool<Tx>::take(); }

void MpiNi::put_tx(Tx* tx) {
  // A peer may have read the buffer straight from our memory (a rendezvous by single
  // copy, as Open MPI's shared memory does above its eager size): its cache holds the
  // lines, and our next write to each would first have to take it back. Take them back
  // now, one store a line, while the thread would be waiting anyway: the next message
  // copied in here then writes to lines it owns (a 4 KiB copy took 0.32 us instead of
  // 0.10 us on the test host, on the critical path of every request-response).
  if (tx->buf.size() >= kReclaimMin) {
    std::uint8_t* b = tx->buf.data();
    for (std::size_t i = 0; i < tx->buf.size(); i += kCacheLine) b[i] = 0;
  }
  tx->peer = nullptr;
  tx->msg = tx->reply = nullptr;
  tx->bulk = nullptr;
  tx->kind = MsgKind::Noop;
  tx->tag = 0;
  tx->status = 0;
  tx->pending = 0;
  tx->rc = 0;
  tx->health = HealthStatus::Ok;
  tx->deadline = {};
  tx->members = {};
  Pool<Tx>::give(tx);  // its buffer keeps its capacity
}

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
  add_request(r, Owner::TxShort, tx, tx->deadline);
  return kSent;
}

int MpiNi::send(LndMessage& msg) {
  int to = rank_of(msg.next_hop);
  if (to < 0) return -EHOSTUNREACH;
  Done done;
  {
    MutexLock g(mu_);
    if (stopped_) return -ESHUTDOWN;
    Tx* tx = get_tx();
    tx->msg = &msg;
    tx->peer = peer_locked(to);
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
  // One deadline from now, as ksocklnd gives a tx: for the handshake, a credit and the
  // transfer together (an attempt ends within the LND's timeout).
  tx->deadline = coarse_now() + std::chrono::seconds(timeout_);
  if (p.state == Peer::State::Ready && (p.tx_credits <= 0 || !p.queue.empty()))
    stats_.credit_waits.fetch_add(1, std::memory_order_relaxed);
  p.queue.push_back(tx);
  flush_locked(p, done);
}

void MpiNi::flush_locked(Peer& p, Done& done) {
  if (p.state == Peer::State::New) {
    // Nothing but the QUERY goes to a peer before its RESPONSE.
    p.state = Peer::State::Querying;
    p.query_deadline = Clock::now() + std::chrono::seconds(timeout_);
    post_control_locked(p, MsgKind::Query);
    return;
  }
  if (p.state != Peer::State::Ready) return;
  while (!p.queue.empty() && p.tx_credits > 0) {
    Tx* tx = p.queue.pop_front();
    // Messages that waited for a credit go out together when they can: one MPI message
    // and one credit for all of them, which is what lets a slow receiver catch up.
    if (opts_.pack && !p.queue.empty() && packable(p, tx) && packable(p, p.queue.front()))
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

void MpiNi::post_control_locked(Peer& p, MsgKind kind) {
  Tx* tx = get_tx();
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
  if (sent != kSent) put_tx(tx);
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
  Tx* c = get_tx();
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
    Tx* next = p.queue.front();
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

// Optimised GET: the sink is posted first, so the target may ready-send into it. False
// (the Tx failed) when it cannot be.
bool MpiNi::post_get_sink_locked(Tx* tx, std::uint32_t tag, Done& done) {
  Peer& p = *tx->peer;
  const LndMessage& m = *tx->msg;
  Bulk* b = get_bulk();
  b->peer = &p;
  b->tag = tag;
  b->own_tag = true;
  b->sink = true;
  b->msg = tx->reply;
  b->due = tx->deadline;
  b->iov = m.iov;
  b->niov = m.niov;
  b->offset = m.offset;
  b->len = static_cast<std::uint32_t>(b->total = m.hdr.msg.get.sink_length);
  b->nchunks = chunk_count(b->total, chunk_for(p));
  tx->reply = nullptr;  // the sink finalizes it now
  if (!post_bulk_locked(b)) {
    b->rc = -EIO;
    bulk_finished_locked(b, done);
    fail_tx_locked(tx, -EIO, HealthStatus::LocalError, done);
    return false;
  }
  p.sinks.push_back(b);
  stats_.rdma_gets.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// A BULK's payload, once its header has gone: MPI_Issend on the tag.
void MpiNi::post_bulk_payload_locked(Tx* tx, std::uint32_t tag, Done& done) {
  const LndMessage& m = *tx->msg;
  Bulk* bk = get_bulk();
  bk->send = true;
  bk->peer = tx->peer;
  bk->tag = tag;
  bk->own_tag = true;
  bk->tx = tx;
  bk->due = tx->deadline;
  bk->iov = m.iov;
  bk->niov = m.niov;
  bk->offset = m.offset;
  bk->len = m.len;
  bk->total = m.len;
  bk->nchunks = chunk_count(bk->total, chunk_for(*tx->peer));
  tx->bulk = bk;
  if (!post_bulk_locked(bk)) {
    // The header went: the peer waits for a payload that will not come until its own
    // timeout. Ours fails now.
    bk->rc = -EIO;
    bulk_finished_locked(bk, done);
  }
}

// Posts a queued Tx (the handshake is done and a credit is free).
void MpiNi::post_locked(Tx* tx, Done& done) {
  Peer& p = *tx->peer;
  std::uint32_t body = 0;
  std::uint32_t tag = tx->msg ? 0 : tx->tag;  // a GET_NAK has no LNet message
  if (tx->msg) {
    LndMessage& m = *tx->msg;
    if (plain_get(m)) tx->reply = host_.create_reply(ni_, m);
    if (tx->reply) {
      tx->kind = MsgKind::GetReq;
      tag = alloc_tag(p, true);
      if (!post_get_sink_locked(tx, tag, done)) return;
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
  bool bulk = tx->kind == MsgKind::Bulk;
  tx->pending = bulk ? 2 : 1;
  int sent = isend_locked(tx);
  if (sent == kSendFailed) {
    ++p.tx_credits;
    p.owed += h.credits;
    if (bulk) free_tag(p, tag);
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
  if (sent == kSentDone) tx_part_done_locked(tx, 0, done);  // a bulk Tx still waits for its payload
  if (bulk) post_bulk_payload_locked(tx, tag, done);
}

void MpiNi::fail_tx_locked(Tx* tx, int rc, HealthStatus h, Done& done) {
  tx->rc = rc;
  tx->health = h;
  tx->pending = 0;
  if (tx->msg) {
    tx_finished_locked(tx, done);
  } else {
    put_tx(tx);
  }
}

void MpiNi::tx_finished_locked(Tx* tx, Done& done) {
  if (done.nsent < Done::kInline) {
    done.sent[done.nsent++] = Done::Sent{tx->msg, tx->rc, tx->health};
    put_tx(tx);
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
    put_tx(tx);
  }
}

}  // namespace lnet::mpi
