// The o2ib connection handshake's decisions (docs/design/o2iblnd.md §1.3, §1.4), apart
// from any device: the CONNREQ and CONNACK a side sends, what the passive side answers
// a request (accept with the parameters it grants, or reject with a reason and its own
// parameters), and what the active side does with a reject (connect again with lower
// parameters, or give up). ko2iblnd's rules; the driver applies them.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <lnet/o2ib/wire.hpp>

namespace lnet::o2ib {

inline constexpr int kMaxConnRaces = 20;  // then the lower NID's request is let through

// What the local NI offers.
struct LocalNi {
  std::uint64_t nid = 0;
  std::uint64_t incarnation = 0;  // this NI's epoch (its start time)
  std::uint16_t queue_depth = 8;  // peer_credits
  std::uint16_t max_frags = kMaxFrags;
};

// A CONNREQ (connect's private data) or CONNACK (accept's), 56 bytes.
std::size_t make_connreq(std::span<std::uint8_t> out, const LocalNi& me, std::uint64_t dst_nid, std::uint64_t dst_stamp,
                         const ConnParams& offer, std::uint16_t version = kVersion2);
std::size_t make_connack(std::span<std::uint8_t> out, const LocalNi& me, std::uint64_t dst_nid, std::uint64_t dst_stamp,
                         const ConnParams& granted, std::uint16_t version);

// What the passive side knows of the asking peer.
struct KnownPeer {
  bool known = false;
  std::uint64_t incarnation = 0;
  std::uint16_t version = 0;
  bool connecting = false;  // we are connecting to it ourselves
  int races = 0;            // requests of its rejected for a race so far
};

struct Verdict {
  bool accept = false;
  Reject reject;       // when not accepted: what to send (reason, our incarnation, params)
  ConnParams granted;  // when accepted: the connection's queue depth and fragments
  std::uint16_t version = kVersion2;
  std::uint64_t peer_nid = 0, peer_stamp = 0;
  bool stale_peer = false;  // the peer restarted: close its old connections
  bool race = false;        // rejected for a race: count it
  std::string why;          // for the log line (empty when accepted quietly)
};

// The answer to a connection request whose private data is `req`.
Verdict judge_connreq(std::span<const std::uint8_t> req, const LocalNi& me, const KnownPeer& peer);

// What the active side does after a reject.
struct Retry {
  bool reconnect = false;
  ConnParams offer;  // what to ask for next time
  std::string why;
};
// `offered`: what the rejected request asked; `retries`: connects refused before this
// one. Without a listener the connect is made again retry_count times at most.
Retry after_reject(std::span<const std::uint8_t> private_data, bool consumer_reject, const ConnParams& offered,
                   int retries, int retry_count);

// The active side's check of the CONNACK it got: the parameters granted, or why not.
Result<ConnParams> check_connack(std::span<const std::uint8_t> ack, const LocalNi& me, std::uint64_t peer_nid,
                                 const ConnParams& offered);

}  // namespace lnet::o2ib
