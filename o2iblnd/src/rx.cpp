// o2ib messages coming in (o2ib_ni.hpp): each receive decoded with the connection's
// fragment limit and checked against the connection (the peer's NID and incarnation,
// ours, its version, the credits it returns); a bad one closes the connection, counted,
// the NI and other peers unaffected. IMMEDIATE, PUT_REQ and GET_REQ go to LNet; replies
// and completions end the Tx waiting for them. Buffers are posted again with the credit
// they give back.
#include <cstring>

#include <lnet/lnd/fragments.hpp>
#include <lnet/log.hpp>

#include "o2ib_ni.hpp"

namespace lnet::o2ib {

namespace {

// What is wrong with `m` on connection `c` (empty: nothing).
std::string check_msg(const Msg& m, const Conn& c, const LocalNi& me) {
  const Peer& p = *c.peer;
  if (m.h.type == MsgType::ConnReq || m.h.type == MsgType::ConnAck)
    return std::string("a ") + msg_type_name(m.h.type) + " on an established connection";
  if (m.h.src_nid != p.nid.value() || m.h.src_stamp != c.peer_stamp)
    return "a message from " + Nid(m.h.src_nid).to_string() + " (or an earlier incarnation)";
  if (m.h.dst_nid != me.nid || m.h.dst_stamp != me.incarnation)
    return "a stale message (for another NID or incarnation of ours)";
  if (m.h.version != c.version) return "a message of protocol version " + std::to_string(m.h.version);
  return {};
}

}  // namespace

void O2ibNi::on_rx_completion(Rx* rx, const Completion& wc, Done& done, bool replay) {
  Conn& c = *rx->conn;
  Peer& p = *c.peer;
  MutexLock g(p.mutex);
  if (replay) {
    --c.held;
  } else {
    --c.posted;
    rx->posted = false;
    if (wc.status == WcStatus::Success && c.state == ConnState::Connecting) {  // kept until it is up
      ++c.held;
      c.early.emplace_back(rx, wc.byte_len);
      return;
    }
  }
  if (wc.status != WcStatus::Success || c.state != ConnState::Established) {
    if (wc.status != WcStatus::Flushed && c.state != ConnState::Closing) {
      LNET_LOG(Warn, kLogLnd, "o2ib: a receive from %s failed: %s; closing the connection", p.nid.to_string().c_str(),
               wc_status_name(wc.status));
      close_conn(c, -EIO, done);
    }
    reap(c, done);
    return;
  }
  auto m = unpack({rx->buf, wc.byte_len}, c.params.max_frags);
  std::string bad = m ? check_msg(*m, c, me_) : m.message();
  if (bad.empty() && !c.credits.on_recv(m->h.credits))
    bad = "returns " + std::to_string(m->h.credits) + " credits, more than it could owe";
  if (!bad.empty()) {
    n_.bad_messages.fetch_add(1, std::memory_order_relaxed);
    LNET_LOG(Warn, kLogLnd, "o2ib: closing the connection to %s: %s", p.nid.to_string().c_str(), bad.c_str());
    close_conn(c, -EPROTO, done);
    reap(c, done);
    return;
  }
  rx->msg = *m;
  rx->nob = wc.byte_len;
  MsgType type = m->h.type;
  if (type == MsgType::Noop) {
    repost(rx, c.credits.repost_of(type), done);
    schedule(c, done);
    return;
  }
  if (type != MsgType::Immediate && type != MsgType::PutReq && type != MsgType::GetReq) {
    on_reply(c, rx, done);
    return;
  }
  schedule(c, done);  // the credits it returned
  ++c.held;
  g.unlock();
  int rc = host_.parse(ni_, rx->msg.lnet, p.nid, rx, type == MsgType::GetReq);
  if (rc >= 0) return;
  MutexLock again(p.mutex);  // the host calls no recv() for it
  --c.held;
  n_.bad_messages.fetch_add(1, std::memory_order_relaxed);
  LNET_LOG(Warn, kLogLnd, "o2ib: closing the connection to %s: LNet refused a %s (%d)", p.nid.to_string().c_str(),
           msg_type_name(type), rc);
  close_conn(c, -EPROTO, done);
}

// A reply or completion: it ends (or moves on) the Tx waiting for it.
void O2ibNi::on_reply(Conn& c, Rx* rx, Done& done) {
  const Msg& m = rx->msg;
  MsgType type = m.h.type;
  std::uint64_t cookie = type == MsgType::PutAck ? m.src_cookie : m.cookie;
  MsgType want = type == MsgType::PutDone   ? MsgType::PutAck
                 : type == MsgType::GetDone ? MsgType::GetReq
                                            : MsgType::PutReq;
  Tx* tx = take_waiting(c, cookie);
  if (!tx || tx->type != want) {
    if (tx) c.waiting.push_back(tx);
    n_.bad_messages.fetch_add(1, std::memory_order_relaxed);
    LNET_LOG(Warn, kLogLnd, "o2ib: closing the connection to %s: a %s for no message of ours (cookie %#llx)",
             c.peer->nid.to_string().c_str(), msg_type_name(type), static_cast<unsigned long long>(cookie));
    close_conn(c, -EPROTO, done);
    return;
  }
  tx->waiting = false;
  switch (type) {
    case MsgType::PutAck: put_ack(c, tx, m); break;
    case MsgType::PutNak:
      n_.naks.fetch_add(1, std::memory_order_relaxed);
      if (m.status < 0) tx->status = m.status, tx->health = HealthStatus::RemoteError;
      break;
    case MsgType::PutDone:  // our sink is filled (or not)
    case MsgType::GetDone: sink_filled(tx, m.status); break;
    default: break;
  }
  if (tx->sending == 0) tx_finish(tx, done);
  repost(rx, c.credits.repost_of(type), done);
  schedule(c, done);
}

// The sink's descriptor for our PUT: a PUT_DONE carries the message on, behind the RDMA
// writes of its payload (or its failure).
void O2ibNi::put_ack(Conn& c, Tx* req, const Msg& m) {
  LndMessage* msg = std::exchange(req->msg, nullptr);
  std::uint32_t nob = 0;
  for (std::uint32_t i = 0; i < m.rd_nfrags; ++i) nob += m.frag(i).nob;
  Tx* tx = get_tx();
  if (!tx) {  // the PUT fails; the sink times out waiting for its PUT_DONE
    req->msg = msg;
    req->status = -ENOMEM;
    req->health = HealthStatus::LocalError;
    return;
  }
  tx->peer = c.peer;
  tx->msg = msg;
  Status s = nob > msg->len ? Status(Failure{-EPROTO, "the sink asks for more than the PUT has"})
                            : add_writes(tx, msg, m, msg->iov, msg->niov, msg->offset, nob);
  if (!s) {
    LNET_LOG(Warn, kLogLnd, "o2ib: PUT to %s: %s", c.peer->nid.to_string().c_str(), s.message().c_str());
    tx->wsge.clear();
    tx->wraddr.clear();
    tx->status = s.code();
    tx->health = HealthStatus::LocalError;
  }
  tx->type = MsgType::PutDone;
  tx->nob = static_cast<std::uint32_t>(
      put_completion({tx->buf, kMsgSize}, m.cookie, s ? static_cast<std::int32_t>(nob) : s.code()));
  enqueue(c, tx);
}

void O2ibNi::sink_filled(Tx* tx, std::int32_t status) {
  if (status < 0) {
    tx->reply_rc = status;
    if (status != -ENODATA) tx->health = HealthStatus::RemoteError;
    if (tx->type == MsgType::PutAck) tx->status = status;
    return;
  }
  auto n = static_cast<std::uint32_t>(status);
  if (n > tx->sink_len) {  // more than the sink we offered: a peer that lies
    LNET_LOG(Warn, kLogLnd, "o2ib: %s says %u bytes came into a sink of %u", tx->peer->nid.to_string().c_str(), n,
             tx->sink_len);
    status = -EPROTO;
    tx->reply_rc = status;
    if (tx->type == MsgType::PutAck) tx->status = status;
    tx->health = HealthStatus::RemoteError;
    return;
  }
  if (tx->bounce && n > 0)
    copy_to_fragments(tx->sink_iov, tx->sink_niov, tx->sink_offset, tx->bounce->mem.get(),
                      std::min<std::uint32_t>(n, static_cast<std::uint32_t>(kBounceSize)));
  tx->reply_len = n;
}

void O2ibNi::repost(Rx* rx, Repost r, Done& done) {
  Conn& c = *rx->conn;
  if (c.state != ConnState::Established) return;
  c.credits.on_repost(r);
  Status s = dev_->post_recv(c.ep, Sge{reinterpret_cast<std::uint64_t>(rx->buf), kMsgSize, c.rx_mr.lkey},
                             reinterpret_cast<std::uint64_t>(rx) | kWrRecv);
  if (!s) {
    LNET_LOG(Warn, kLogLnd, "o2ib: posting a receive for %s: %s", c.peer->nid.to_string().c_str(), s.message().c_str());
    close_conn(c, -EIO, done);
    return;
  }
  rx->posted = true;
  ++c.posted;
}

// The host's answer to a message we parsed: its payload delivered (IMMEDIATE), its sink
// offered (PUT_REQ: PUT_ACK, or PUT_NAK for nothing), its REPLY written (GET_REQ:
// GET_DONE, -ENODATA for nothing).
int O2ibNi::recv(Rx* rx, LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t mlen,
                 std::uint32_t rlen) {
  (void)rlen;
  Conn& c = *rx->conn;
  Peer& p = *c.peer;
  const Msg& m = rx->msg;
  MsgType type = MsgType::Noop;
  int rc = 0;
  Done done;
  {
    MutexLock g(p.mutex);
    --c.held;
    type = m.h.type;  // the Rx is the device's again once reposted: nothing of it is read after
    Tx* tx = nullptr;
    Repost r = c.credits.repost_of(type);
    if (c.state != ConnState::Established) {
      rc = -ECONNABORTED;
    } else if (type == MsgType::Immediate) {
      if (msg && mlen > m.payload.size()) rc = -EPROTO;
      if (msg && mlen && rc == 0) copy_to_fragments(iov, niov, offset, m.payload.data(), mlen);
    } else if (type == MsgType::PutReq) {
      tx = sink_for_put(c, m, msg, iov, niov, offset, mlen, rc);
      if (tx && tx->type == MsgType::PutAck) r = c.credits.repost_of(MsgType::PutReq, true);
    } else {
      tx = reply_for_get(c, m, msg, iov, niov, offset, mlen);
    }
    if (tx) {
      enqueue(c, tx);
      schedule(c, done);
    } else if (msg && type != MsgType::Immediate && rc == 0) {
      rc = -ENOMEM;
    }
    repost(rx, r, done);
    schedule(c, done);
    if (c.state == ConnState::Closing) wake();  // it may be reaped now
  }
  deliver(done);
  if (!msg) return 0;
  if (rc < 0) return rc;                            // the host finalizes it
  bool kept = type == MsgType::PutReq && mlen > 0;  // the PUT_ACK's Tx finalizes it
  kept = kept || type == MsgType::GetReq;           // the GET_DONE's
  if (!kept) host_.finalize(msg, 0);
  return 0;
}

// PUT_REQ: a PUT_ACK naming the sink, or a PUT_NAK when nothing is to land (the message,
// if any, then done).
Tx* O2ibNi::sink_for_put(Conn& c, const Msg& m, LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset,
                         std::uint32_t mlen, int& rc) {
  if (!msg || mlen == 0) return completion_tx(*c.peer, MsgType::PutNak, m.cookie, 0);
  Tx* tx = get_tx();
  if (!tx) return nullptr;
  tx->peer = c.peer;
  RdmaFrag frag;
  std::uint32_t key = 0;
  if (Status s = make_sink(tx, msg, iov, niov, offset, mlen, key, frag); !s) {
    LNET_LOG(Warn, kLogLnd, "o2ib: PUT from %s: %s", c.peer->nid.to_string().c_str(), s.message().c_str());
    put_tx(tx);
    rc = s.code();
    return completion_tx(*c.peer, MsgType::PutNak, m.cookie, s.code());
  }
  tx->msg = msg;
  tx->type = MsgType::PutAck;
  tx->cookie = next_cookie_.fetch_add(1, std::memory_order_relaxed);
  tx->nob = static_cast<std::uint32_t>(put_put_ack({tx->buf, kMsgSize}, m.cookie, tx->cookie, key, {&frag, 1}));
  tx->waiting = true;
  return tx;
}

// GET_REQ: the REPLY's payload RDMA-written into the sink it names, then GET_DONE with
// the bytes; -ENODATA when the GET matched nothing.
Tx* O2ibNi::reply_for_get(Conn& c, const Msg& m, LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset,
                          std::uint32_t mlen) {
  if (!msg) return completion_tx(*c.peer, MsgType::GetDone, m.cookie, -ENODATA);
  Tx* tx = get_tx();
  if (!tx) return nullptr;
  tx->peer = c.peer;
  tx->msg = msg;
  std::int32_t status = static_cast<std::int32_t>(mlen);
  if (mlen > 0) {
    if (Status s = add_writes(tx, msg, m, iov, niov, offset, mlen); !s) {
      LNET_LOG(Warn, kLogLnd, "o2ib: REPLY to %s: %s", c.peer->nid.to_string().c_str(), s.message().c_str());
      tx->wsge.clear();
      tx->wraddr.clear();
      tx->status = status = s.code();
      tx->health = HealthStatus::LocalError;
    }
  }
  tx->type = MsgType::GetDone;
  tx->nob = static_cast<std::uint32_t>(put_completion({tx->buf, kMsgSize}, m.cookie, status));
  return tx;
}

}  // namespace lnet::o2ib
