// o2ib messages on their way out (o2ib_ni.hpp): an LNet message becomes an IMMEDIATE
// (header and payload in one 4 KiB buffer), a PUT_REQ (its payload RDMA-written once the
// sink's PUT_ACK names where) or a GET_REQ (naming the sink the target writes the REPLY
// into); queued on the peer until a connection is up, on the connection until credits
// allow, posted with the credits we owe the peer. Message memory is registered for the
// transfer, or taken from the registration cache when it outlives the message; a sink of
// several fragments goes through a registered bounce buffer.
#include <algorithm>
#include <cassert>
#include <cstring>

#include <lnet/lnd/fragments.hpp>
#include <lnet/log.hpp>

#include "o2ib_ni.hpp"

namespace lnet::o2ib {

Tx* O2ibNi::get_tx() {
  MutexLock g(tx_mutex_);
  Tx* tx = free_tx_;
  if (!tx) return nullptr;
  free_tx_ = tx->next;
  tx->next = nullptr;
  tx->busy = true;
  tx->finished = false;
  tx->peer = nullptr;
  tx->conn = nullptr;
  tx->type = MsgType::Noop;
  tx->nob = 0;
  tx->msg = tx->reply = nullptr;
  tx->cookie = 0;
  tx->status = tx->reply_rc = 0;
  tx->reply_len = 0;
  tx->health = HealthStatus::Ok;
  tx->sending = 0;
  tx->waiting = false;
  tx->deadline = Clock::now() + std::chrono::seconds(timeout());
  tx->mrs.clear();
  tx->cached.clear();
  tx->rd_key = 0;
  tx->wsge.clear();
  tx->wraddr.clear();
  tx->bounce = nullptr;
  tx->sink_iov = nullptr;
  tx->sink_niov = 0;
  tx->sink_offset = 0;
  tx->sink_len = 0;
  return tx;
}

void O2ibNi::put_tx(Tx* tx) {
  for (const MemoryRegion& mr : tx->mrs) dev_->dereg(mr);
  tx->mrs.clear();
  for (RegCache::Entry* e : tx->cached) cache_.put(e);
  tx->cached.clear();
  if (tx->bounce) put_bounce(std::exchange(tx->bounce, nullptr));
  MutexLock g(tx_mutex_);
  tx->busy = false;
  tx->next = free_tx_;
  free_tx_ = tx;
}

Bounce* O2ibNi::get_bounce() {
  MutexLock g(tx_mutex_);
  if (Bounce* b = free_bounce_) {
    free_bounce_ = b->next;
    return b;
  }
  if (bounces_.size() >= kMaxBounce) return nullptr;
  auto b = std::make_unique<Bounce>();
  b->mem = std::make_unique<std::uint8_t[]>(kBounceSize);
  auto mr = dev_->reg(b->mem.get(), kBounceSize, true);
  if (!mr) return nullptr;
  b->mr = *mr;
  bounces_.push_back(std::move(b));
  return bounces_.back().get();
}

void O2ibNi::put_bounce(Bounce* b) {
  MutexLock g(tx_mutex_);
  b->next = free_bounce_;
  free_bounce_ = b;
}

Peer* O2ibNi::peer_of(Nid nid, bool create, std::uint32_t ip) {
  {
    ReadLock g(peers_mutex_);
    auto it = peers_.find(nid.value());
    if (it != peers_.end()) return it->second.get();
  }
  if (!create) return nullptr;
  WriteLock g(peers_mutex_);
  auto& p = peers_[nid.value()];
  if (!p) {
    p = std::make_unique<Peer>();
    p->nid = nid;
    p->ip = ip;
  }
  return p.get();
}

int O2ibNi::send(LndMessage& msg) {
  if (stopping_.load(std::memory_order_acquire)) return -ESHUTDOWN;
  if (msg.next_hop.net() != ni_.nid.net() || msg.next_hop.is_large()) return -EHOSTUNREACH;
  Tx* tx = get_tx();
  if (!tx) {
    LNET_LOG(Warn, kLogLnd, "o2ib: %s: all %u message buffers in use (ntx)", ni_.nid.to_string().c_str(), p_.ntx);
    return -ENOMEM;
  }
  tx->msg = &msg;
  if (Status s = build(tx, msg); !s) {
    LNET_LOG(Warn, kLogLnd, "o2ib: sending to %s: %s", msg.next_hop.to_string().c_str(), s.message().c_str());
    LndMessage* reply = std::exchange(tx->reply, nullptr);
    tx->msg = nullptr;
    put_tx(tx);  // its memory let go before the host hears
    if (reply) host_.finalize(reply, s.code());
    return s.code();
  }
  Peer& p = *peer_of(msg.next_hop, true, msg.next_hop.addr());
  Done done;
  {
    MutexLock g(p.mutex);
    tx->peer = &p;
    if (p.conn && p.conn->state == ConnState::Established) {
      enqueue(*p.conn, tx);
      schedule(*p.conn, done);
    } else {
      p.pending.push_back(tx);
      if (!p.conn && !p.dialing) request_dial(p);
    }
  }
  deliver(done);
  return 0;
}

// The message in tx's buffer: an optimised GET (GET_REQ) when the REPLY's sink is too big
// for an IMMEDIATE, a PUT_REQ when the payload is, else an IMMEDIATE.
Status O2ibNi::build(Tx* tx, LndMessage& msg) {
  const Header& h = msg.hdr;
  std::span<std::uint8_t> buf(tx->buf, kMsgSize);
  bool own_get = h.type == lnet::MsgType::Get && h.src_nid == ni_.nid && msg.next_hop == msg.target.nid;
  if (own_get && h.msg.get.sink_length > kMaxImmediatePayload) tx->reply = host_.create_reply(ni_, msg);
  if (tx->reply) {
    RdmaFrag frag;
    std::uint32_t key = 0;
    if (Status s = make_sink(tx, &msg, msg.iov, msg.niov, msg.offset, h.msg.get.sink_length, key, frag); !s) return s;
    tx->type = MsgType::GetReq;
    tx->cookie = next_cookie_.fetch_add(1, std::memory_order_relaxed);
    tx->nob = static_cast<std::uint32_t>(put_get_req(buf, h, tx->cookie, key, {&frag, 1}));
    tx->waiting = true;
    n_.rdma_get.fetch_add(1, std::memory_order_relaxed);
    return {};
  }
  if (msg.len <= kMaxImmediatePayload) {
    tx->type = MsgType::Immediate;
    tx->nob = static_cast<std::uint32_t>(put_immediate(buf, h, msg.len));
    if (msg.len) copy_from_fragments(tx->buf + kImmediatePayloadOffset, msg.iov, msg.niov, msg.offset, msg.len);
    n_.immediate.fetch_add(1, std::memory_order_relaxed);
    return {};
  }
  tx->type = MsgType::PutReq;
  tx->cookie = next_cookie_.fetch_add(1, std::memory_order_relaxed);
  tx->nob = static_cast<std::uint32_t>(put_put_req(buf, h, tx->cookie));
  tx->waiting = true;
  n_.rdma_put.fetch_add(1, std::memory_order_relaxed);
  return {};
}

void O2ibNi::enqueue(Conn& c, Tx* tx) {
  tx->conn = &c;
  if (tx->type == MsgType::PutReq || tx->type == MsgType::GetReq)
    c.rsrvd.push_back(tx);  // a reserved credit first (a buffer of ours for its reply)
  else if (c.credits.takes_credit(tx->type) || tx->type == MsgType::Noop)
    c.queue.push_back(tx);
  else
    c.nocred.push_back(tx);  // replies and completions: the peer has a buffer reserved for them
}

// Posts what may go: replies first, then requests in order. A request whose reply has no
// reserved buffer yet waits aside, so that it holds up neither the messages behind it
// nor the NOOPs returning credits.
void O2ibNi::schedule(Conn& c, Done& done) {
  while (Tx* tx = c.nocred.front()) {
    if (c.state != ConnState::Established || !c.credits.can_send(tx->type)) break;
    c.nocred.pop_front();
    if (!post_tx(c, tx, done)) return;
  }
  while (!c.rsrvd.empty()) {
    if (c.credits.reserved() <= c.reqs_queued) break;
    c.queue.push_back(c.rsrvd.pop_front());
    ++c.reqs_queued;
  }
  while (Tx* tx = c.queue.front()) {
    if (c.state != ConnState::Established || !c.credits.can_send(tx->type)) break;
    c.queue.pop_front();
    if (tx->type == MsgType::PutReq || tx->type == MsgType::GetReq) --c.reqs_queued;
    if (!post_tx(c, tx, done)) return;
  }
  maybe_noop(c, false, done);
}

// A NOOP when credits owed (or the keepalive) need one and nothing queued carries them.
void O2ibNi::maybe_noop(Conn& c, bool keepalive_due, Done& done) {
  if (c.state != ConnState::Established) return;
  if (!c.credits.need_noop(!c.nocred.empty(), !c.queue.empty(), keepalive_due)) return;
  if (!c.credits.can_send(MsgType::Noop)) return;
  Tx* tx = get_tx();
  if (!tx) return;
  tx->peer = c.peer;
  tx->conn = &c;
  tx->type = MsgType::Noop;
  tx->nob = static_cast<std::uint32_t>(put_noop({tx->buf, kMsgSize}));
  n_.noops.fetch_add(1, std::memory_order_relaxed);
  (void)post_tx(c, tx, done);
}

bool O2ibNi::post_tx(Conn& c, Tx* tx, Done& done) {
  Peer& p = *c.peer;
  tx->conn = &c;
  MsgHeader h;
  h.version = c.version;
  h.type = tx->type;
  h.credits = c.credits.on_send(tx->type);
  h.nob = tx->nob;
  h.src_nid = me_.nid;
  h.src_stamp = me_.incarnation;
  h.dst_nid = p.nid.value();
  h.dst_stamp = c.peer_stamp;
  finish({tx->buf, tx->nob}, h, p_.cksum);
  Status s;
  for (std::size_t i = 0; s && i < tx->wsge.size(); ++i) {
    s = dev_->post_write(c.ep, {&tx->wsge[i], 1}, tx->wraddr[i], tx->rd_key,
                         reinterpret_cast<std::uint64_t>(tx) | kWrWrite);
    if (s) ++tx->sending, ++c.posted;
  }
  if (s) {
    s = dev_->post_send(c.ep, Sge{reinterpret_cast<std::uint64_t>(tx->buf), tx->nob, tx_mr_.lkey},
                        reinterpret_cast<std::uint64_t>(tx));
    if (s) ++tx->sending, ++c.posted;
  }
  c.last_send = Clock::now();
  if (tx->waiting) c.waiting.push_back(tx);
  if (!s) {
    c.credits.on_send_done();
    LNET_LOG(Warn, kLogLnd, "o2ib: posting to %s: %s", p.nid.to_string().c_str(), s.message().c_str());
    if (tx->sending == 0) {
      if (tx->waiting) c.waiting.pop_back();
      tx_fail(tx, -EIO, HealthStatus::LocalError, done);
    } else if (tx->status >= 0) {
      tx->status = -EIO;
      tx->health = HealthStatus::LocalError;
    }
    close_conn(c, -EIO, done);
    return false;
  }
  return true;
}

void O2ibNi::tx_finish(Tx* tx, Done& done) {
  assert(!tx->finished);
  if (tx->finished) return;  // never twice: its message would be finalized twice
  tx->finished = true;
  done.txs.push_back(tx);
}

void O2ibNi::tx_fail(Tx* tx, int rc, HealthStatus h, Done& done) {
  if (tx->status >= 0) {
    tx->status = rc;
    tx->health = h;
  }
  tx->waiting = false;
  tx_finish(tx, done);
}

Tx* O2ibNi::take_waiting(Conn& c, std::uint64_t cookie) {
  for (auto it = c.waiting.begin(); it != c.waiting.end(); ++it) {
    if ((*it)->cookie != cookie) continue;
    Tx* tx = *it;
    c.waiting.erase(it);
    return tx;
  }
  return nullptr;
}

// A registration holding `len` bytes at `at` in the fragment `frag` of the message's
// memory, held by tx until it ends. A source of memory that outlives the message takes
// the cached one of its whole fragment (local access only). Anything else, sinks above
// all, is registered for this transfer over exactly its bytes: the key a peer gets lets
// it write there and nowhere else, and is gone once the transfer ends.
Result<MemoryRegion> O2ibNi::reg_for(Tx* tx, std::uint64_t memory, const iovec& frag, void* at, std::size_t len,
                                     bool remote_write) {
  if (!remote_write && memory != 0 && cache_.takes(frag.iov_len)) {
    auto e = cache_.get(memory, frag);
    if (e) {
      tx->cached.push_back(*e);
      return RegCache::region(*e);
    }
    // The whole fragment could not be (locked memory?): the idle ones go, and this
    // transfer registers its piece alone.
    LNET_LOG(Warn, kLogLnd, "o2ib: %s: caching the registration of %zu bytes: %s; registering %zu for the transfer",
             ni_.nid.to_string().c_str(), frag.iov_len, e.message().c_str(), len);
    cache_.drop_idle();
  }
  n_.registrations.fetch_add(1, std::memory_order_relaxed);
  auto mr = dev_->reg(at, len, remote_write);
  if (mr) tx->mrs.push_back(*mr);
  return mr;
}

// Where the peer writes `len` bytes for this message: the fragment itself when one holds
// them (registered for remote writes), else a bounce buffer copied out on arrival.
Status O2ibNi::make_sink(Tx* tx, const LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset,
                         std::uint32_t len, std::uint32_t& key, RdmaFrag& frag) {
  tx->sink_iov = iov;
  tx->sink_niov = niov;
  tx->sink_offset = offset;
  tx->sink_len = len;
  unsigned i = 0;
  std::size_t off = offset;
  while (i < niov && off >= iov[i].iov_len) off -= iov[i++].iov_len;
  if (i < niov && iov[i].iov_len - off >= len) {
    auto* at = static_cast<std::uint8_t*>(iov[i].iov_base) + off;
    auto mr = reg_for(tx, msg ? msg->memory : 0, iov[i], at, len, true);
    if (!mr) return Failure{mr.code(), "registering a sink of " + std::to_string(len) + " bytes: " + mr.message()};
    key = mr->rkey;
    frag = RdmaFrag{len, reinterpret_cast<std::uint64_t>(at)};
    return {};
  }
  if (len > kBounceSize) return Failure{-EMSGSIZE, "a sink of " + std::to_string(len) + " bytes"};
  tx->bounce = get_bounce();
  if (!tx->bounce) return Failure{-ENOMEM, "no bounce buffer free for a sink of several fragments"};
  key = tx->bounce->mr.rkey;
  frag = RdmaFrag{len, reinterpret_cast<std::uint64_t>(tx->bounce->mem.get())};
  return {};
}

// The RDMA writes that move `len` bytes of the fragments from `offset` into the peer's
// descriptor (tx->rd_key, `rd`): one per piece where a local fragment meets a remote one.
Status O2ibNi::add_writes(Tx* tx, const LndMessage* msg, const Msg& rd, const iovec* iov, unsigned niov,
                          std::uint32_t offset, std::uint32_t len) {
  tx->rd_key = rd.rd_key;
  std::uint32_t ri = 0, roff = 0;
  unsigned i = 0;
  std::size_t off = offset;
  while (i < niov && off >= iov[i].iov_len) off -= iov[i++].iov_len;
  for (std::uint32_t left = len; left > 0; ++i, off = 0) {
    if (i >= niov) return Failure{-EPROTO, "the message has fewer bytes than it says"};
    auto* at = static_cast<std::uint8_t*>(iov[i].iov_base) + off;
    auto n = static_cast<std::uint32_t>(std::min<std::size_t>(iov[i].iov_len - off, left));
    auto mr = reg_for(tx, msg ? msg->memory : 0, iov[i], at, n, false);
    if (!mr) return Failure{mr.code(), "registering " + std::to_string(n) + " bytes: " + mr.message()};
    for (std::uint32_t done = 0; done < n;) {
      if (ri >= rd.rd_nfrags) return Failure{-EMSGSIZE, "the peer's descriptor is too small for the message"};
      RdmaFrag f = rd.frag(ri);
      std::uint32_t m = std::min(n - done, f.nob - roff);
      if (tx->wsge.size() >= kMaxWritesPerTx) return Failure{-EMSGSIZE, "too many fragments for one transfer"};
      tx->wsge.push_back(Sge{reinterpret_cast<std::uint64_t>(at + done), m, mr->lkey});
      tx->wraddr.push_back(f.addr + roff);
      done += m;
      roff += m;
      if (roff == f.nob) ++ri, roff = 0;
    }
    left -= n;
  }
  return {};
}

// A completion (PUT_NAK, PUT_DONE, GET_DONE) naming the peer's `cookie`.
Tx* O2ibNi::completion_tx(Peer& p, MsgType type, std::uint64_t cookie, std::int32_t status) {
  Tx* tx = get_tx();
  if (!tx) return nullptr;
  tx->peer = &p;
  tx->type = type;
  tx->nob = static_cast<std::uint32_t>(put_completion({tx->buf, kMsgSize}, cookie, status));
  return tx;
}

}  // namespace lnet::o2ib
