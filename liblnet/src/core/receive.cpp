// The receive path: validate a header a driver parsed, find the peer, match PUT/GET
// against the portals (or queue on a lazy portal), turn a matched GET into its REPLY,
// and match ACK/REPLY to the MD that asked for them.
#include "base/clock.hpp"
#include "core/core.hpp"

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

namespace lnet::core {

namespace {
bool valid_for_type(const Header& h) {
  switch (h.type) {
    case MsgType::Ack:
    case MsgType::Get: return h.payload_length == 0;
    case MsgType::Put:
    case MsgType::Reply: return h.payload_length <= kMaxPayload;
    case MsgType::Hello: return false;
  }
  return false;
}
}  // namespace

int Core::parse(NetInterface& nif, const Header& hdr, Nid from, void* lnd_private, bool rdma_req) {
  Ni& ni = static_cast<Ni&>(nif);
  if (faults_.rules.receive_rules() && valid_for_type(hdr) && faults_.on_receive(ni, hdr, from, lnd_private, rdma_req))
      [[unlikely]]
    return 0;
  return parse_received(ni, hdr, from, lnd_private, rdma_req, false);
}

Message* Core::new_rx(Ni& ni, const Header& hdr, Nid from, Nid initiator, unsigned cpt) {
  Message* msg = new_msg(cpt);
  msg->receiving = true;
  msg->rxni = &ni;
  msg->from = from;
  msg->hdr = hdr;
  msg->target = ProcessId{hdr.dest_nid, hdr.dest_pid};
  Event& ev = msg->ev;
  ev.target = ProcessId{hdr.dest_nid, hdr.dest_pid};
  ev.initiator = ProcessId{initiator, hdr.src_pid};
  ev.source = ProcessId{hdr.src_nid, hdr.src_pid};
  ev.sender = from;
  ev.msg_type = hdr.type;
  ev.rlength = hdr.payload_length;
  st_.counters.add(cpt, kRecvCount);
  st_.counters.add(cpt, kRecvLength, hdr.payload_length);
  ni.stats.add(TypeStats::kReceived, hdr.type);
  return msg;
}

int Core::parse_received(Ni& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req, bool delayed) {
  unsigned cpt = st_.cpts.of_nid(from);
  auto reject = [&]() {
    st_.counters.add(cpt, kErrors);
    st_.counters.add(cpt, kDropCount);
    st_.counters.add(cpt, kDropLength, hdr.payload_length);
    if (hdr.type <= MsgType::Hello) ni.stats.add(TypeStats::kDropped, hdr.type);
    return -EPROTO;
  };
  if (!valid_for_type(hdr) || hdr.src_nid.is_any() || from.is_any()) return reject();

  bool for_me = hdr.dest_nid == ni.nid || (&ni == st_.lo_ni && st_.is_local_nid(hdr.dest_nid));
  if (!for_me) return router_.parse_forward(ni, hdr, from, lnd_private, rdma_req);

  Nid initiator = hdr.src_nid;
  if (&ni != st_.lo_ni) {
    Nid primary;
    PeerNi* lpni = st_.peer_ni_for(from, &primary);
    if (!lpni) return reject();
    router_.note_alive(ni, lpni);
    health_.note_received_from(lpni);
    lpni->stats.add(TypeStats::kReceived, hdr.type);
    if (hdr.src_nid == from) {
      initiator = primary;
    } else {
      if (st_.tun.drop_asym_route.load(std::memory_order_relaxed) && hdr.src_nid.net() != from.net() &&
          router_.asymmetric(hdr.src_nid, lpni)) [[unlikely]] {
        LNET_LOG(Warn, kLogRouter, "dropping a %s from %s routed by %s: we do not route back to %s through it",
                 msg_type_name(hdr.type), hdr.src_nid.to_string().c_str(), from.to_string().c_str(),
                 hdr.src_nid.net().to_string().c_str());
        drop_payload(ni, cpt, hdr, lnd_private, delayed);
        return 0;
      }
      MutexLock g(st_.locks[st_.cpts.of_nid(hdr.src_nid)]);
      if (PeerNi* src = st_.peers.find(hdr.src_nid)) initiator = src->peer->primary;
    }
  }

  Message* msg = new_rx(ni, hdr, from, initiator, cpt);
  msg->lnd_private = lnd_private;
  msg->rx_delayed = delayed;
  msg->rdma_get = rdma_req && hdr.type == MsgType::Get;
  switch (hdr.type) {
    case MsgType::Put: parse_put(msg); break;
    case MsgType::Get: parse_get(msg); break;
    case MsgType::Reply: parse_reply(msg); break;
    case MsgType::Ack: parse_ack(msg); break;
    case MsgType::Hello: break;  // rejected above
  }
  return 0;
}

void Core::lnd_recv(Message* msg, bool delayed, const iovec* iov, unsigned niov, std::uint32_t offset,
                    std::uint32_t mlen, std::uint32_t rlen) {
  Ni* ni = msg->rxni;
  msg->memory = msg->md ? msg->md->memory() : 0;
  int rc = ni->lnd->recv(*ni, msg->lnd_private, msg, delayed || msg->rx_delayed, iov, niov, offset, mlen, rlen);
  if (rc < 0) {
    msg->health = HealthStatus::LocalError;
    finalize(msg, rc);
  }
}

void Core::drop_payload(Ni& ni, unsigned cpt, const Header& hdr, void* lnd_private, bool delayed) {
  st_.counters.add(cpt, kDropCount);
  st_.counters.add(cpt, kDropLength, hdr.payload_length);
  ni.stats.add(TypeStats::kDropped, hdr.type);
  (void)ni.lnd->recv(ni, lnd_private, nullptr, delayed, nullptr, 0, 0, 0, hdr.payload_length);
}

void Core::drop_rx(Message* msg) {
  drop_payload(*msg->rxni, msg->cpt, msg->hdr, msg->lnd_private, msg->rx_delayed);
  free_msg(msg);
}

void Core::receive_matched(portals::DeliveryQueue& matched, portals::DeliveryQueue& dropped) {
  while (portals::Delivery* d = matched.pop_front()) {
    Message* m = as_message(d);
    m->ack_wanted = !m->hdr.msg.put.ack_wmd.is_none() && !(m->md->options & kMdAckDisable);
    lnd_recv(m, true, m->md->iov, m->md->niov, m->ev.offset, m->ev.mlength, m->hdr.payload_length);
  }
  while (portals::Delivery* d = dropped.pop_front()) drop_rx(as_message(d));
}

namespace {
// What an incoming PUT or GET is matched by: its initiator and source, and the fields of
// its header (the sink or payload length, the offset it asks for).
portals::MatchInfo match_of(const Message& msg, unsigned op, unsigned portal, std::uint64_t bits, std::uint32_t rlength,
                            std::uint32_t roffset) {
  return portals::MatchInfo{.initiator = msg.ev.initiator,
                            .source = msg.ev.source.nid,
                            .op = op,
                            .portal = portal,
                            .match_bits = bits,
                            .rlength = rlength,
                            .roffset = roffset};
}
}  // namespace

void Core::parse_put(Message* msg) {
  const Header::Put& put = msg->hdr.msg.put;
  msg->ev.type = EventType::Put;
  msg->ev.pt_index = put.ptl_index;
  msg->ev.match_bits = put.match_bits;
  msg->ev.hdr_data = put.hdr_data;
  msg->match = match_of(*msg, kMdOpPut, put.ptl_index, put.match_bits, msg->hdr.payload_length, put.offset);
  switch (portals_.match_incoming(msg)) {
    case portals::RxMatch::Matched: {
      msg->ack_wanted = !put.ack_wmd.is_none() && !(msg->md->options & kMdAckDisable);
      portals::LibMd* md = msg->md;
      lnd_recv(msg, false, md->iov, md->niov, msg->ev.offset, msg->ev.mlength, msg->hdr.payload_length);
      return;
    }
    case portals::RxMatch::Delayed: return;  // the driver keeps the payload until an MD is attached
    case portals::RxMatch::Dropped: drop_rx(msg); return;
  }
}

void Core::parse_get(Message* msg) {
  const Header::Get get = msg->hdr.msg.get;
  msg->ev.type = EventType::Get;
  msg->ev.pt_index = get.ptl_index;
  msg->ev.match_bits = get.match_bits;
  msg->ev.rlength = get.sink_length;
  msg->match = match_of(*msg, kMdOpGet, get.ptl_index, get.match_bits, get.sink_length, get.src_offset);
  if (get.sink_length > kMaxPayload || portals_.match_incoming(msg) != portals::RxMatch::Matched) {
    drop_rx(msg);
    return;
  }
  // The GET becomes its REPLY; its event is delivered once the REPLY has gone.
  Ni* ni = msg->rxni;
  portals::LibMd* md = msg->md;
  Nid src_nid = msg->hdr.src_nid;
  Pid src_pid = msg->hdr.src_pid;
  void* priv = msg->lnd_private;
  msg->receiving = false;
  msg->sending = true;
  msg->target = ProcessId{src_nid, src_pid};
  msg->iov = md->iov;
  msg->niov = md->niov;
  msg->memory = md->memory();
  msg->offset = msg->ev.offset;
  msg->len = msg->ev.mlength;
  Header& h = msg->hdr;
  h.type = MsgType::Reply;
  h.dest_nid = src_nid;
  h.dest_pid = src_pid;
  h.src_nid = ni->nid;
  h.src_pid = pid_;
  h.payload_length = msg->len;
  h.msg.reply.dst_wmd = get.return_wmd;
  if (msg->rdma_get) {
    // The driver moves the payload itself (e.g. into a sink the initiator pre-posted).
    msg->txni = ni;
    msg->tx_committed = true;
    st_.counters.add(msg->cpt, kSendCount);
    st_.counters.add(msg->cpt, kSendLength, msg->len);
    lnd_recv(msg, false, md->iov, md->niov, msg->offset, msg->len, msg->len);
    return;
  }
  (void)ni->lnd->recv(*ni, priv, nullptr, false, nullptr, 0, 0, 0, 0);
  if (int rc = send(ni->nid, msg, src_nid)) {
    msg->health = HealthStatus::LocalError;
    finalize(msg, rc);
  }
}

void Core::parse_reply(Message* msg) {
  msg->ev.type = EventType::Reply;
  std::uint32_t mlength = 0;
  if (portals_.match_response(msg, msg->hdr.msg.reply.dst_wmd, true, msg->hdr.payload_length, &mlength)) {
    drop_rx(msg);
    return;
  }
  msg->ev.mlength = mlength;
  msg->ev.offset = 0;
  portals::LibMd* md = msg->md;
  note_response(msg, &OpLatencyStats::get_rtt);
  lnd_recv(msg, false, md->iov, md->niov, 0, mlength, msg->hdr.payload_length);
}

// A REPLY or ACK to a request of ours: its round trip, on the NI it came in on and the
// peer NI it came from (the way the request went, back: responses take it exactly).
void Core::note_response(Message* msg, LatencyStats OpLatencyStats::*which) {
  std::int64_t sent = msg->md->rsp_sent_ns.exchange(0, std::memory_order_relaxed);
  if (sent == 0) return;
  auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(0, steady_now_ns() - sent));
  if (msg->rxni) (msg->rxni->latency.*which).add(ns);
  MutexLock g(st_.locks[st_.cpts.of_nid(msg->from)]);
  if (PeerNi* lpni = st_.peers.find(msg->from)) (lpni->latency.*which).add(ns);
}

bool Core::memory_alive(std::uint64_t memory) const {
  return memory == kHostMemory || (memory != 0 && portals_.md_alive(memory));
}

std::uintptr_t Core::keep_memory(LndMessage& lmsg) {
  auto& msg = static_cast<Message&>(lmsg);
  if (msg.md) return portals_.md_keep(msg.md);
  return router_.keep_buffer(&msg);  // a router buffer, or nothing to keep
}

void Core::release_memory(std::uintptr_t token) {
  if (token & router::Router::kBufferToken)
    router_.release_buffer(token);
  else
    portals_.md_release(token, *this);
}

LndMessage* Core::create_reply(NetInterface& nif, LndMessage& lget) {
  auto& get = static_cast<Message&>(lget);
  Ni& ni = static_cast<Ni&>(nif);
  const Header& gh = get.hdr;
  unsigned cpt = st_.cpts.of_nid(get.next_hop);
  Message* msg = new_msg(cpt);
  msg->receiving = true;
  msg->rxni = &ni;
  msg->from = get.next_hop;
  msg->reply_from = get.txpeer;
  // The REPLY the target would have sent.
  Header& h = msg->hdr;
  h.type = MsgType::Reply;
  h.src_nid = gh.dest_nid;
  h.src_pid = gh.dest_pid;
  h.dest_nid = gh.src_nid;
  h.dest_pid = gh.src_pid;
  h.payload_length = gh.msg.get.sink_length;
  h.msg.reply.dst_wmd = gh.msg.get.return_wmd;
  msg->target = ProcessId{h.dest_nid, h.dest_pid};
  Event& ev = msg->ev;
  ev.type = EventType::Reply;
  ev.target = msg->target;
  ev.initiator = ev.source = ProcessId{h.src_nid, h.src_pid};
  ev.sender = get.next_hop;
  ev.msg_type = MsgType::Reply;
  ev.rlength = h.payload_length;
  std::uint32_t mlength = 0;
  if (portals_.match_response(msg, h.msg.reply.dst_wmd, true, h.payload_length, &mlength)) {
    free_msg(msg);
    return nullptr;
  }
  ev.mlength = mlength;
  ev.offset = 0;
  note_response(msg, &OpLatencyStats::get_rtt);
  return msg;
}

void Core::set_reply_length(LndMessage& lreply, std::uint32_t len) {
  auto& msg = static_cast<Message&>(lreply);
  msg.hdr.payload_length = len;
  msg.ev.rlength = len;
  if (msg.ev.mlength > len) msg.ev.mlength = len;
  st_.counters.add(msg.cpt, kRecvCount);
  st_.counters.add(msg.cpt, kRecvLength, len);
  msg.rxni->stats.add(TypeStats::kReceived, MsgType::Reply);
}

void Core::parse_ack(Message* msg) {
  const Header::Ack& ack = msg->hdr.msg.ack;
  msg->ev.type = EventType::Ack;
  msg->ev.match_bits = ack.match_bits;
  msg->ev.rlength = msg->hdr.payload_length;  // 0, as LNet reports it
  msg->ev.mlength = ack.mlength;
  msg->ev.offset = 0;
  if (portals_.match_response(msg, ack.dst_wmd, false, 0, nullptr)) {
    drop_rx(msg);
    return;
  }
  note_response(msg, &OpLatencyStats::put_ack);
  lnd_recv(msg, false, nullptr, 0, 0, 0, 0);
}

}  // namespace lnet::core
