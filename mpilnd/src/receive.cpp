// MPI LND receive: the pool of persistent short-message receives, one handler per kind
// of message that arrives in it, the hand-over of LNet headers to the host's parse(),
// and the host's recv() of their payloads.
#include <lnet/lnd/fragments.hpp>
#include <lnet/lnd/pool.hpp>
#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

#include "mpi_ni.hpp"

namespace lnet::mpi {

namespace {
constexpr int kShortTag = 0;
}  // namespace

// Not analysed: a new Rx is shared with nobody yet, and locking it for its flags would
// cost every message a lock.
Rx* MpiNi::get_rx() LNET_NO_THREAD_SAFETY_ANALYSIS {
  Rx* rx = Pool<Rx>::take();
  rx->received = rx->parsed = rx->received_in_parse = false;
  rx->parser.store(std::thread::id(), std::memory_order_relaxed);
  return rx;
}

void MpiNi::put_rx(Rx* rx) {
  rx->peer = nullptr;
  rx->payload = nullptr;
  rx->payload_len = 0;
  rx->heap.clear();
  Pool<Rx>::give(rx);
}

// ---------------------------------------------------------------- the host's recv()

int MpiNi::recv(void* priv, LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t mlen,
                std::uint32_t rlen) {
  auto* rx = static_cast<Rx*>(priv);
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
      MutexLock g(rx->mutex);
      if (msg && mlen) copy_to_fragments(iov, niov, offset, rx->payload, std::min(mlen, rx->payload_len));
      rx->received = true;
      free_it = rx->parsed;
    }
    if (free_it) put_rx(rx);
    if (msg) host_.finalize(msg, 0);
    return 0;
  }
  Done done;
  {
    MutexLock g(mu_);
    receive_bulk_locked(rx, msg, iov, niov, offset, mlen, rlen, done);
    bool free_it;
    {
      MutexLock rg(rx->mutex);
      rx->received = true;
      free_it = rx->parsed;
    }
    if (free_it) put_rx(rx);
  }
  complete(done);
  kick();
  return 0;
}

// The payload of a BULK (into the MD, or drained), the source of an optimised GET
// (ready-sent into the initiator's sink), or a GET_NAK when the GET matched nothing.
void MpiNi::receive_bulk_locked(Rx* rx, LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset,
                                std::uint32_t mlen, std::uint32_t rlen, Done& done) {
  Peer& p = *rx->peer;
  if (rx->kind == MsgKind::GetReq && !msg) {
    // The GET matched nothing: tell the initiator, whose sink waits.
    Tx* tx = get_tx();
    tx->peer = &p;
    tx->kind = MsgKind::GetNak;
    tx->tag = rx->tag;
    tx->status = -ENODATA;
    if (stopped_)
      put_tx(tx);
    else if (may_call_mpi())
      enqueue_locked(tx, done);
    else
      deferred_.push_back(tx);
    return;
  }
  Bulk* b = get_bulk();
  b->peer = &p;
  b->tag = rx->tag;
  b->msg = msg;
  b->iov = iov;
  b->niov = niov;
  b->offset = offset;
  if (rx->kind == MsgKind::GetReq) {
    // In as many messages as the initiator posted for its sink.
    b->send = b->ready = true;
    b->len = mlen;
    b->total = mlen;
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

// ---------------------------------------------------------------- the pool

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
// reported down to the host until a good message comes from it.
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
// credits it returns, and hand it to the handler of its kind. The receive is restarted
// by finish_pool_work_locked(), after the host has seen the buffer.
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
  Peer* p = peer_locked(source);
  w.peer = p;
  w.kind = dec.hdr.kind;
  if (p->down) {
    p->down = false;
    done.health.emplace_back(p->nid, true);
  }
  if (dec.hdr.credits) p->tx_credits += dec.hdr.credits;
  // One handler per kind (decode_msg refused any other); the compiler checks that
  // every kind has one.
  switch (w.kind) {
    case MsgKind::Query:
    case MsgKind::Response: on_hello(w, dec, done); return;
    case MsgKind::Immediate:
    case MsgKind::Bulk:
    case MsgKind::GetReq: on_lnet(w, dec, done); return;
    case MsgKind::GetNak: on_get_nak(w, dec, done); return;
    case MsgKind::Noop: on_noop(w, dec, done); return;
    case MsgKind::Packed: on_packed(w, dec, done); return;
  }
}

void MpiNi::on_hello(PoolWork& w, const Decoded& d, Done&) {
  if (opts_.mute) return;
  Peer* p = w.peer;
  if (p->stamp && p->stamp != d.hdr.stamp)
    LNET_LOG(Warn, kLogLnd, "%s: rank %d restarted (new incarnation)", ni_.nid.to_string().c_str(), p->rank);
  p->stamp = d.hdr.stamp;
  p->short_max = d.hello.short_max;
  p->chunk = d.hello.chunk;
  if (w.kind == MsgKind::Query) {
    post_control_locked(*p, MsgKind::Response);
  } else if (p->state != Peer::State::Ready) {
    p->state = Peer::State::Ready;
    p->tx_credits = static_cast<int>(std::min<std::uint32_t>(d.hello.credits, 255));
    stats_.handshakes.fetch_add(1, std::memory_order_relaxed);
  }
}

void MpiNi::on_lnet(PoolWork& w, const Decoded& d, Done&) { hand_to_host_locked(w, d); }

void MpiNi::on_get_nak(PoolWork& w, const Decoded& d, Done&) {
  for (Bulk* s : w.peer->sinks)
    if (s->tag == d.hdr.tag) {
      s->rc = d.hdr.status;
      cancel_requests_of_locked(s);
    }
}

void MpiNi::on_noop(PoolWork&, const Decoded&, Done&) {}  // its credits are taken already

// Each packed IMMEDIATE is parsed on its own; the buffer is restarted (by the carrier's
// entry) once all of them are done with it.
void MpiNi::on_packed(PoolWork& w, const Decoded& d, Done& done) {
  Peer* p = w.peer;
  std::span<const std::uint8_t> rest = d.payload;
  std::string why;
  while (!rest.empty()) {
    Decoded sub;
    if (!next_packed(rest, sub, &why)) {
      stats_.bad_messages.fetch_add(1, std::memory_order_relaxed);
      LNET_LOG(Warn, kLogLnd, "%s: dropped the rest of a PACKED from rank %d: %s", ni_.nid.to_string().c_str(), p->rank,
               why.c_str());
      p->down = true;
      done.health.emplace_back(p->nid, false);
      return;
    }
    PoolWork& sw = pool_work_.emplace_back();  // `w` is not used after this
    sw.index = -1;
    sw.peer = p;
    sw.kind = MsgKind::Immediate;
    hand_to_host_locked(sw, sub);
  }
}

// An Rx for the LNet message `d` (decoded from w's pool buffer), for the host to parse.
void MpiNi::hand_to_host_locked(PoolWork& w, const Decoded& d) {
  Rx* rx = get_rx();
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
    // The host refused the header. Whatever the sender posted must still be consumed:
    // drain a bulk payload, tell a GET's sink that nothing comes.
    stats_.bad_messages.fetch_add(1, std::memory_order_relaxed);
    LNET_LOG(Warn, kLogLnd, "%s: dropped a %s from %s: the LNet header was refused: %s", ni_.nid.to_string().c_str(),
             kind_name(w.kind), w.peer->nid.to_string().c_str(), errno_string(rc).c_str());
    if (w.kind != MsgKind::Immediate) {
      {
        MutexLock rg(rx->mutex);
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
      put_rx(rx);
      continue;
    }
    rx->parser.store(std::thread::id(), std::memory_order_relaxed);  // from now on recv() may come from any thread
    bool free_it;
    {
      MutexLock rg(rx->mutex);
      rx->parsed = true;
      if (!rx->received && rx->kind == MsgKind::Immediate) {
        // The host delays this receive (a lazy portal, a router buffer): keep the payload
        // aside so the pool buffer goes back now.
        rx->heap.assign(rx->payload, rx->payload + rx->payload_len);
        rx->payload = rx->heap.data();
      }
      free_it = rx->received;
    }
    if (free_it) put_rx(rx);
  }
  for (const PoolWork& w : pool_work_)
    if (w.index >= 0) repost_locked(w.index);
  for (const PoolWork& w : pool_work_)
    if (w.index >= 0 && w.peer && takes_credit(w.kind)) ++w.peer->owed;  // packed ones rode on their carrier's
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

}  // namespace lnet::mpi
