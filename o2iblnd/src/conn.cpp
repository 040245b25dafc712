// o2ib connections (o2ib_ni.hpp): dialled by the progress thread with a CONNREQ in the
// CM's private data, accepted or rejected by the handshake's rules (handshake.hpp), up
// once the CONNACK checks out, closed on error, timeout or shutdown, reaped once the
// device has returned every posted work request.
#include <unistd.h>

#include <lnet/log.hpp>

#include "o2ib_ni.hpp"

namespace lnet::o2ib {

namespace {

QpAttrs qp_attrs(const ConnParams& params, const NetParams& p) {
  // Each send in flight may carry its RDMA writes (kMaxWritesPerTx at most); the peer's
  // sends and replies fill at most 2 x queue depth receive buffers (+2 for V2 NOOPs).
  return QpAttrs{p.concurrent * (1 + kMaxWritesPerTx), 2u * params.queue_depth + 2,
                 static_cast<std::uint8_t>(p.retry_count), static_cast<std::uint8_t>(p.rnr_retry_count)};
}

}  // namespace

Conn* O2ibNi::new_conn(Peer& p, bool active, const ConnParams& params) {
  auto c = std::make_unique<Conn>();
  c->peer = &p;
  c->active = active;
  c->params = params;
  std::size_t nrx = 2u * params.queue_depth + 2;
  c->rx_mem = std::make_unique<std::uint8_t[]>(nrx * kMsgSize);
  auto mr = dev_->reg(c->rx_mem.get(), nrx * kMsgSize, false);
  if (!mr) {
    LNET_LOG(Warn, kLogLnd, "o2ib: registering receive buffers for %s: %s", p.nid.to_string().c_str(),
             mr.message().c_str());
    return nullptr;
  }
  c->rx_mr = *mr;
  c->rxs = std::vector<Rx>(nrx);
  for (std::size_t i = 0; i < nrx; ++i) {
    c->rxs[i].conn = c.get();
    c->rxs[i].buf = c->rx_mem.get() + i * kMsgSize;
  }
  p.conns.push_back(std::move(c));
  nconns_.fetch_add(1, std::memory_order_relaxed);
  return p.conns.back().get();
}

// Receives go up before the connection can carry anything (the device keeps them until
// its queue pair exists).
bool O2ibNi::post_rxs(Conn& c) {
  for (Rx& rx : c.rxs) {
    Status s = dev_->post_recv(c.ep, Sge{reinterpret_cast<std::uint64_t>(rx.buf), kMsgSize, c.rx_mr.lkey},
                               reinterpret_cast<std::uint64_t>(&rx) | kWrRecv);
    if (!s) {
      LNET_LOG(Warn, kLogLnd, "o2ib: posting receives for %s: %s", c.peer->nid.to_string().c_str(),
               s.message().c_str());
      return false;
    }
    rx.posted = true;
    ++c.posted;
  }
  return true;
}

void O2ibNi::dial(Peer& p, Done& done) {
  MutexLock g(p.mutex);
  p.dial_wanted = false;
  if (stopping_.load(std::memory_order_acquire) || p.dialing || p.conn || p.pending.empty()) return;
  if (p.offer.queue_depth == 0) p.offer = ConnParams{me_.queue_depth, me_.max_frags, kMsgSize};
  Conn* c = new_conn(p, true, p.offer);
  if (!c) return fail_pending(p, -ENOMEM, HealthStatus::LocalError, done);
  std::uint8_t req[kMaxPrivateData];
  std::size_t n = make_connreq(req, me_, p.nid.value(), p.known ? p.incarnation : 0, p.offer, kVersion2);
  c->version = kVersion2;
  auto ep = dev_->connect(p.ip, p_.service, ::geteuid() == 0, qp_attrs(p.offer, p_), {req, n},
                          reinterpret_cast<std::uintptr_t>(c));
  if (!ep) {
    LNET_LOG(Warn, kLogLnd, "o2ib: connecting to %s: %s", p.nid.to_string().c_str(), ep.message().c_str());
    n_.connect_failed.fetch_add(1, std::memory_order_relaxed);
    c->state = ConnState::Closing;
    c->gone = true;
    reap(*c, done);
    fail_pending(p, ep.code(), HealthStatus::LocalError, done);
    return;
  }
  c->ep = *ep;
  p.dialing = c;
  if (!post_rxs(*c)) {
    fail_pending(p, -ENOMEM, HealthStatus::LocalError, done);  // no dialling again at once
    close_conn(*c, -ENOMEM, done);
  }
}

void O2ibNi::on_cm_event(const CmEvent& e, Done& done) {
  if (e.kind == CmEventKind::ConnectRequest) return on_connect_request(e, done);
  auto* c = reinterpret_cast<Conn*>(e.context);
  if (!c) return;
  Peer& p = *c->peer;
  MutexLock g(p.mutex);
  switch (e.kind) {
    case CmEventKind::Established: on_established(*c, e, done); break;
    case CmEventKind::Rejected:  // ours refused, or (passive) the asker gave up before our answer
      if (c->active)
        on_rejected(*c, e, done);
      else
        on_gone(*c, -ECONNRESET, done);
      break;
    case CmEventKind::Unreachable: on_gone(*c, -EHOSTUNREACH, done); break;
    default: on_gone(*c, -ECONNRESET, done); break;
  }
  reap(*c, done);
}

void O2ibNi::on_connect_request(const CmEvent& e, Done& done) {
  auto req = unpack(e.data());
  Peer* pp = nullptr;
  if (req && Nid(req->h.src_nid).net() == ni_.nid.net()) pp = peer_of(Nid(req->h.src_nid), true, e.peer_ip);
  auto refuse = [&](const Reject& r, const std::string& why) {
    auto bytes = pack_reject(r);
    (void)dev_->reject(e.ep, bytes);
    dev_->destroy(e.ep);
    n_.conns_rejected.fetch_add(1, std::memory_order_relaxed);
    LNET_LOG(Info, kLogLnd, "o2ib: refused a connection from %s: %s",
             req ? Nid(req->h.src_nid).to_string().c_str() : "?", why.c_str());
  };
  if (!pp || stopping_.load(std::memory_order_acquire)) {
    Verdict v = judge_connreq(e.data(), me_, KnownPeer{});
    if (v.accept) v.why = pp ? "this NI is shutting down" : "a NID not on " + ni_.nid.net().to_string();
    v.reject.why = pp ? RejectReason::NoResources : RejectReason::Fatal;
    return refuse(v.reject, v.why);
  }
  Peer& p = *pp;
  MutexLock g(p.mutex);
  KnownPeer kp{p.known, p.incarnation, p.version, p.dialing != nullptr, p.races};
  Verdict v = judge_connreq(e.data(), me_, kp);
  if (!v.accept) {
    if (v.race) ++p.races;
    if (v.stale_peer) {
      p.known = false;  // it restarted: its old connections go, it connects again
      for (auto& c : p.conns) close_conn(*c, -ESTALE, done);
    }
    return refuse(v.reject, v.why);
  }
  p.races = 0;
  if (!accept_connect(p, e, v, done)) {
    v.reject.why = RejectReason::NoResources;
    return refuse(v.reject, "no memory for its receive buffers");
  }
}

// Answers an accepted request on a new connection of the peer's (its mutex held): false
// when there is no memory for one, and the request is still to be refused.
bool O2ibNi::accept_connect(Peer& p, const CmEvent& e, const Verdict& v, Done& done) {
  Conn* c = new_conn(p, false, v.granted);
  if (!c) return false;
  c->ep = e.ep;
  c->version = v.version;
  c->peer_stamp = v.peer_stamp;
  std::uint8_t ack[kMaxPrivateData];
  std::size_t n = make_connack(ack, me_, p.nid.value(), v.peer_stamp, v.granted, v.version);
  Status s = Failure{-ENOMEM, "posting receives"};
  if (post_rxs(*c)) {
    s = dev_->accept(e.ep, qp_attrs(v.granted, p_), {ack, n}, reinterpret_cast<std::uintptr_t>(c));
  } else {
    Reject r = v.reject;
    r.why = RejectReason::NoResources;
    (void)dev_->reject(e.ep, pack_reject(r));
    c->posted = 0;  // never to complete: the endpoint goes with them
  }
  if (!s) {
    LNET_LOG(Warn, kLogLnd, "o2ib: accepting %s: %s", p.nid.to_string().c_str(), s.message().c_str());
    c->gone = true;  // no event comes for it; a failed accept flushed its receives
    close_conn(*c, s.code(), done);
    return true;
  }
  p.known = true;
  p.incarnation = v.peer_stamp;
  p.version = v.version;
  // A peer that connects while our connection to it is up: its request crossed ours (its
  // side keeps one of the two and closes the other), or its old connection is dead to it
  // (the disconnect is on its way). Ours carries on until it goes; the new one takes
  // over then (close_conn). One not yet up is replaced at once.
  if (p.conn && p.conn->state == ConnState::Established) return true;
  if (p.conn) close_conn(*p.conn, -ESTALE, done);
  p.conn = c;
  return true;
}

void O2ibNi::on_established(Conn& c, const CmEvent& e, Done& done) {
  Peer& p = *c.peer;
  if (c.state == ConnState::Closing) {  // closed while it came up (rdma-core could not disconnect it then)
    if (!c.gone) dev_->disconnect(c.ep);
    return;
  }
  if (c.active) {
    if (p.dialing == &c) p.dialing = nullptr;
    auto granted = check_connack(e.data(), me_, p.nid.value(), c.params);
    auto ack = unpack(e.data());
    if (!granted || !ack) {
      LNET_LOG(Warn, kLogLnd, "o2ib: connection to %s: %s", p.nid.to_string().c_str(),
               (granted ? ack.message() : granted.message()).c_str());
      n_.connect_failed.fetch_add(1, std::memory_order_relaxed);
      close_conn(c, -EPROTO, done);
      if (!p.conn) fail_pending(p, -EPROTO, HealthStatus::RemoteError, done);
      return;
    }
    c.params = *granted;
    c.version = ack->h.version;
    c.peer_stamp = ack->h.src_stamp;
    p.known = true;
    p.incarnation = c.peer_stamp;
    p.version = c.version;
    p.retries = 0;
    // One of the peer's is in use already (its request crossed ours): ours stays as a
    // spare — the peer may be sending on either — and takes over if that one goes.
    if (!p.conn || p.conn->state != ConnState::Established) p.conn = &c;
  }
  conn_up(c, done);
}

void O2ibNi::conn_up(Conn& c, Done& done) {
  Peer& p = *c.peer;
  unsigned depth = c.params.queue_depth;
  unsigned hiw = std::min(p_.hiw, depth > 1 ? depth - 1 : 1);
  c.credits = Credits(depth, hiw, p_.concurrent, c.version);
  c.state = ConnState::Established;
  c.last_send = Clock::now();
  n_.conns_established.fetch_add(1, std::memory_order_relaxed);
  LNET_LOG(Info, kLogLnd, "o2ib: connected to %s (%s, queue depth %u, max frags %u, version %#x)",
           p.nid.to_string().c_str(), c.active ? "active" : "passive", depth, unsigned{c.params.max_frags},
           unsigned{c.version});
  done.notices.emplace_back(p.nid, true);
  early_.insert(early_.end(), c.early.begin(), c.early.end());  // handled after this event
  c.early.clear();
  if (!p.conn) p.conn = &c;  // what it stood in for went meanwhile
  if (p.conn != &c) return;
  while (Tx* tx = p.pending.pop_front()) enqueue(c, tx);
  schedule(c, done);
}

void O2ibNi::on_rejected(Conn& c, const CmEvent& e, Done& done) {
  Peer& p = *c.peer;
  c.gone = true;
  if (p.dialing == &c) p.dialing = nullptr;
  Retry r = after_reject(e.data(), e.consumer_reject, c.params, p.retries, p_.retry_count);
  close_conn(c, -ECONNREFUSED, done);
  auto rej = unpack_reject(e.data());
  if (rej && rej->why == RejectReason::ConnStale) p.known = false;  // we restarted, or it did
  if (p.conn) return;                                               // its own connection carries the messages
  if (r.reconnect && !stopping_.load(std::memory_order_acquire)) {
    LNET_LOG(Info, kLogLnd, "o2ib: connection to %s %s; connecting again", p.nid.to_string().c_str(), r.why.c_str());
    p.offer = r.offer;
    ++p.retries;
    return request_dial(p);
  }
  LNET_LOG(Warn, kLogLnd, "o2ib: connection to %s %s", p.nid.to_string().c_str(), r.why.c_str());
  n_.connect_failed.fetch_add(1, std::memory_order_relaxed);
  p.retries = 0;
  fail_pending(p, -ECONNREFUSED, HealthStatus::RemoteDropped, done);
}

void O2ibNi::on_gone(Conn& c, int rc, Done& done) {
  Peer& p = *c.peer;
  c.gone = true;
  bool dialing = p.dialing == &c;
  if (c.state != ConnState::Closing) {
    if (c.state == ConnState::Established)
      LNET_LOG(Warn, kLogLnd, "o2ib: connection to %s lost", p.nid.to_string().c_str());
    else
      LNET_LOG(Warn, kLogLnd, "o2ib: cannot connect to %s: %s", p.nid.to_string().c_str(),
               rc == -EHOSTUNREACH ? "unreachable" : "disconnected");
    close_conn(c, rc, done);
  }
  if (dialing && !p.conn) {
    n_.connect_failed.fetch_add(1, std::memory_order_relaxed);
    fail_pending(p, rc, HealthStatus::RemoteDropped, done);
  }
}

void O2ibNi::close_conn(Conn& c, int rc, Done& done) {
  if (c.state == ConnState::Closing) return;
  Peer& p = *c.peer;
  bool was_up = c.state == ConnState::Established;
  c.state = ConnState::Closing;
  c.close_rc = rc;
  if (c.ep && !c.gone) dev_->disconnect(c.ep);
  HealthStatus h = health_of(rc, WcStatus::Success);
  for (Fifo<Tx>* q : {&c.nocred, &c.queue, &c.rsrvd})
    while (Tx* tx = q->pop_front()) tx_fail(tx, rc, h, done);
  c.reqs_queued = 0;
  for (Tx* tx : c.waiting) {
    tx->waiting = false;
    if (tx->status >= 0) {
      tx->status = rc;
      tx->health = h;
    }
    if (tx->sending == 0) tx_finish(tx, done);
  }
  c.waiting.clear();
  c.held -= static_cast<int>(c.early.size());
  c.early.clear();
  if (p.conn == &c && (p.conn = next_conn(p, c))) {
    while (Tx* tx = p.pending.pop_front()) enqueue(*p.conn, tx);
    schedule(*p.conn, done);
  }
  if (p.dialing == &c) p.dialing = nullptr;
  if (was_up) {
    n_.conns_closed.fetch_add(1, std::memory_order_relaxed);
    if (rc != -ESHUTDOWN && rc != -EALREADY && !p.conn) done.notices.emplace_back(p.nid, false);
  }
  if (!p.pending.empty() && !p.conn && !p.dialing && rc != -ESHUTDOWN) request_dial(p);
}

// Another connection of the peer that is up (one it made while ours was), to carry on.
Conn* O2ibNi::next_conn(Peer& p, const Conn& closing) {
  for (auto& o : p.conns)
    if (o.get() != &closing && o->state == ConnState::Established) return o.get();
  return nullptr;
}

void O2ibNi::fail_pending(Peer& p, int rc, HealthStatus h, Done& done) {
  while (Tx* tx = p.pending.pop_front()) tx_fail(tx, rc, h, done);
}

// Frees a closed connection once the device is done with it: true if it went.
bool O2ibNi::reap(Conn& c, Done& done) {
  (void)done;
  if (c.state != ConnState::Closing || !c.gone || c.posted > 0 || c.held > 0) return false;
  Peer& p = *c.peer;
  if (c.ep) dev_->destroy(c.ep);
  if (c.rx_mr.id) dev_->dereg(c.rx_mr);
  for (auto it = p.conns.begin(); it != p.conns.end(); ++it) {
    if (it->get() != &c) continue;
    p.conns.erase(it);
    nconns_.fetch_sub(1, std::memory_order_relaxed);
    return true;
  }
  return false;
}

}  // namespace lnet::o2ib
