// The connection handshake's decisions (handshake.hpp), as ko2iblnd makes them.
#include "handshake.hpp"

#include <cerrno>

#include <lnet/lnd/byteorder.hpp>
#include <lnet/nid.hpp>

namespace lnet::o2ib {

namespace {

constexpr std::uint32_t kLnetProtoMagic = 0xeebc0ded;

std::size_t make(std::span<std::uint8_t> out, MsgType type, const LocalNi& me, std::uint64_t dst_nid,
                 std::uint64_t dst_stamp, const ConnParams& p, std::uint16_t version) {
  MsgHeader h;
  h.version = version;
  h.type = type;
  h.nob = static_cast<std::uint32_t>(put_conn_params(out, p));
  h.src_nid = me.nid;
  h.src_stamp = me.incarnation;
  h.dst_nid = dst_nid;
  h.dst_stamp = dst_stamp;
  finish(out, h, false);
  return h.nob;
}

std::string nid(std::uint64_t n) { return Nid(n).to_string(); }

Verdict refuse(Verdict v, RejectReason why, std::string text) {
  v.accept = false;
  v.reject.why = why;
  v.why = std::move(text);
  return v;
}

// The request's parameters against ours (the connection request checks of §1.3).
Verdict check_params(Verdict v, const Msg& m, const LocalNi& me) {
  const ConnParams& p = m.params;
  bool v2 = m.h.version == kVersion2;
  if (p.queue_depth > me.queue_depth)
    return refuse(
        v, v2 ? RejectReason::MsgQueueSize : RejectReason::Fatal,
        "queue depth " + std::to_string(p.queue_depth) + " too large (at most " + std::to_string(me.queue_depth) + ")");
  if (p.queue_depth == 0) return refuse(v, RejectReason::Fatal, "queue depth 0");
  if (p.max_frags > me.max_frags || p.max_frags == 0)
    return refuse(v, v2 ? RejectReason::RdmaFrags : RejectReason::Fatal,
                  "max_frags " + std::to_string(p.max_frags) + " (1.." + std::to_string(me.max_frags) + ")");
  if (p.max_msg_size > kMsgSize)
    return refuse(v, RejectReason::Fatal, "message size " + std::to_string(p.max_msg_size) + " too big (4096 max)");
  return v;
}

}  // namespace

std::size_t make_connreq(std::span<std::uint8_t> out, const LocalNi& me, std::uint64_t dst_nid, std::uint64_t dst_stamp,
                         const ConnParams& offer, std::uint16_t version) {
  return make(out, MsgType::ConnReq, me, dst_nid, dst_stamp, offer, version);
}

std::size_t make_connack(std::span<std::uint8_t> out, const LocalNi& me, std::uint64_t dst_nid, std::uint64_t dst_stamp,
                         const ConnParams& granted, std::uint16_t version) {
  return make(out, MsgType::ConnAck, me, dst_nid, dst_stamp, granted, version);
}

Verdict judge_connreq(std::span<const std::uint8_t> req, const LocalNi& me, const KnownPeer& peer) {
  Verdict v;
  v.reject.incarnation = me.incarnation;
  v.reject.params = ConnParams{me.queue_depth, me.max_frags, static_cast<std::uint32_t>(kMsgSize)};
  if (req.size() >= 4 &&
      (wire::get_le32(req.data()) == kLnetProtoMagic || wire::get_be32(req.data()) == kLnetProtoMagic))
    return refuse(v, RejectReason::Fatal, "a peer speaking a newer protocol (LNET_PROTO_MAGIC)");
  auto m = unpack(req);
  if (!m) return refuse(v, RejectReason::Fatal, "cannot parse the connection request: " + m.message());
  v.version = m->h.version;
  v.reject.version = m->h.version;
  v.peer_nid = m->h.src_nid;
  v.peer_stamp = m->h.src_stamp;
  if (m->h.type != MsgType::ConnReq)
    return refuse(v, RejectReason::Fatal, std::string("a ") + msg_type_name(m->h.type) + " as connection request");
  if (m->h.dst_nid != me.nid)
    return refuse(v, RejectReason::Fatal, "bad destination NID " + nid(m->h.dst_nid) + " (we are " + nid(me.nid) + ")");
  if (m->h.dst_stamp != 0 && m->h.dst_stamp != me.incarnation)
    return refuse(v, RejectReason::ConnStale, "stale connection request (for an earlier incarnation of ours)");
  v = check_params(v, *m, me);
  if (!v.why.empty()) return v;
  if (peer.known && (peer.incarnation != m->h.src_stamp || peer.version != m->h.version)) {
    v.stale_peer = true;  // it restarted: its old connections go, and it connects again
    return refuse(v, RejectReason::ConnStale, "the peer restarted (new incarnation)");
  }
  // Known or not (a first contact, both sides dialling at once): ko2iblnd takes an unknown
  // peer's incarnation from its request and then breaks the tie all the same.
  if (peer.connecting && m->h.src_nid < me.nid && peer.races < kMaxConnRaces) {
    v.race = true;  // both sides connect: the higher NID's connection wins
    return refuse(v, RejectReason::ConnRace, "connection race: the higher NID's wins");
  }
  v.accept = true;
  v.granted = m->params;
  v.granted.max_msg_size = kMsgSize;
  return v;
}

Retry after_reject(std::span<const std::uint8_t> private_data, bool consumer_reject, const ConnParams& offered,
                   int retries, int retry_count) {
  Retry r;
  r.offer = offered;
  if (!consumer_reject) {  // no listener (IB: invalid service id): retry_count more tries, as ko2iblnd
    r.reconnect = retries < retry_count;
    r.why = r.reconnect ? "no listener" : "retry count exceeded: no listener";
    return r;
  }
  auto rej = unpack_reject(private_data);
  if (!rej) {
    r.why = "rejected: " + rej.message();
    return r;
  }
  r.why = std::string("rejected: ") + reject_reason_name(rej->why);
  switch (rej->why) {
    case RejectReason::RdmaFrags:
      if (!rej->full || rej->params.max_frags == 0 || rej->params.max_frags >= offered.max_frags) {
        r.why += ": cannot negotiate max frags";
        return r;
      }
      r.offer.max_frags = rej->params.max_frags;
      r.reconnect = true;
      return r;
    case RejectReason::MsgQueueSize:
      if (!rej->full || rej->params.queue_depth == 0 || rej->params.queue_depth >= offered.queue_depth) {
        r.why += ": cannot negotiate queue depth";
        return r;
      }
      r.offer.queue_depth = rej->params.queue_depth;
      r.reconnect = true;
      return r;
    case RejectReason::ConnStale:
    case RejectReason::ConnRace:
    case RejectReason::ConnUncompat: r.reconnect = true; return r;
    default:  // fatal, no resources, too early, unknown: the connect fails
      return r;
  }
}

Result<ConnParams> check_connack(std::span<const std::uint8_t> ack, const LocalNi& me, std::uint64_t peer_nid,
                                 const ConnParams& offered) {
  auto m = unpack(ack);
  if (!m) return Failure{-EPROTO, "cannot parse the connection reply: " + m.message()};
  if (m->h.type != MsgType::ConnAck)
    return Failure{-EPROTO, std::string("a ") + msg_type_name(m->h.type) + " as connection reply"};
  if (m->h.src_nid != peer_nid)
    return Failure{-EPROTO, "connection reply from " + nid(m->h.src_nid) + ", not " + nid(peer_nid)};
  if (m->h.dst_nid != me.nid || m->h.dst_stamp != me.incarnation)
    return Failure{-ESTALE, "stale connection reply (for another NID or incarnation of ours)"};
  const ConnParams& p = m->params;
  if (p.queue_depth == 0 || p.queue_depth > offered.queue_depth)
    return Failure{-EPROTO, "connection reply with queue depth " + std::to_string(p.queue_depth) + " (asked " +
                                std::to_string(offered.queue_depth) + ")"};
  if (p.max_frags == 0 || p.max_frags > offered.max_frags)
    return Failure{-EPROTO, "connection reply with max_frags " + std::to_string(p.max_frags) + " (asked " +
                                std::to_string(offered.max_frags) + ")"};
  if (p.max_msg_size > kMsgSize)
    return Failure{-EPROTO, "connection reply with message size " + std::to_string(p.max_msg_size)};
  return p;
}

}  // namespace lnet::o2ib
