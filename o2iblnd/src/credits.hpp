// One o2ib connection's flow control (docs/design/o2iblnd.md §1.4), as ko2iblnd keeps it,
// apart from any device: the credits the peer granted (its posted receive buffers we may
// fill), the credits we owe it (buffers of ours re-posted since our last message), the
// reserved credits that bound our PUT_REQs and GET_REQs (each brings back a reply that
// takes a buffer of ours without a credit), the sends in flight (concurrent_sends), and
// when a NOOP must carry credits back. Not thread-safe: the connection's lock guards it.
#pragma once

#include <cstdint>

#include <lnet/o2ib/wire.hpp>

namespace lnet::o2ib {

// What re-posting a received message's buffer gives back.
enum class Repost : std::uint8_t {
  PeerCredit,      // a credit we owe the peer (it took one of ours)
  ReservedCredit,  // a reserved credit of ours (the reply to our PUT_REQ or GET_REQ came)
  NoCredit,        // nothing: a V2 NOOP, or a PUT_REQ's buffer kept for its PUT_DONE
};

class Credits {
 public:
  // queue_depth: granted each way; hiw: owed credits returned by a NOOP once this many
  // (peer_credits_hiw); concurrent: sends in flight at most; version: V1 NOOPs take a
  // credit, V2 ones do not (out of band).
  Credits(unsigned queue_depth, unsigned hiw, unsigned concurrent, std::uint16_t version = kVersion2);

  // Whether a message of type `t` takes a credit of the peer's.
  bool takes_credit(MsgType t) const;
  // Whether a message of type `t` may go now: a credit if it takes one (V1: never the
  // last one unless it is a NOOP), a reserved credit for PUT_REQ and GET_REQ, and room
  // among the sends in flight.
  bool can_send(MsgType t) const;
  // It goes: takes what can_send() checked; returns the credits it carries back (all we
  // owe, now owed no more).
  std::uint8_t on_send(MsgType t);
  // A send completed (its work request is done): room for another.
  void on_send_done();
  // A message arrived carrying `returned` credits. False: more than the peer could owe
  // (a protocol error: the connection closes).
  bool on_recv(std::uint8_t returned);
  // Its buffer is posted again, giving back what `r` says (repost_of()).
  void on_repost(Repost r);
  // What a received message's buffer gives back: a PUT_REQ's nothing once it is answered
  // with a PUT_ACK (the buffer waits for the PUT_DONE, whose arrival returns the
  // PUT_REQ's credit), a credit when it was NAKed; replies to our requests a reserved
  // credit; V2 NOOPs nothing; the rest a credit.
  Repost repost_of(MsgType t, bool put_acked = false) const;
  // Whether a NOOP must go now to return credits (or keep the connection alive): when
  // `hiw` credits are owed (or `keepalive_due`: the connection was silent for `keepalive`
  // seconds) and no queued message will carry them — a reply (`reply_queued`: it needs
  // no credit) or a request (`request_queued`) that has a credit to go with.
  bool need_noop(bool reply_queued, bool request_queued, bool keepalive_due) const;

  unsigned credits() const { return credits_; }
  unsigned owed() const { return owed_; }
  unsigned reserved() const { return reserved_; }
  unsigned in_flight() const { return in_flight_; }

 private:
  unsigned depth_, hiw_, concurrent_;
  std::uint16_t version_;
  unsigned credits_;        // the peer's buffers we may fill
  unsigned owed_ = 0;       // credits to return (ko2iblnd's outstanding credits)
  unsigned reserved_;       // requests we may have awaiting their replies
  unsigned in_flight_ = 0;  // sends posted, not completed
};

}  // namespace lnet::o2ib
