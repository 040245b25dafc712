// The core's memory descriptor and match entry objects, and the matching of one incoming
// PUT/GET against one ME/MD (portals semantics).
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <lnet/event.hpp>
#include <lnet/lnd/fifo.hpp>
#include <lnet/md.hpp>
#include <lnet/nid.hpp>

namespace lnet::portals {

// The MD a ping's answer lands in (discovery, recovery pings, lnetctl ping): `length`
// bytes at `start`, for the GET's SEND and its REPLY, a longer answer truncated.
inline MdDesc ping_md(void* start, std::size_t length, EventHandler handler) {
  MdDesc d;
  d.start = start;
  d.length = length;
  d.threshold = 2;  // SEND + REPLY
  d.options = kMdTruncate;
  d.handler = std::move(handler);
  return d;
}

struct LibMe;
struct Delivery;

struct LibMd {
  // Matching reads these: kept together at the front (one cache line).
  int threshold = 0;
  unsigned options = 0;
  std::uint32_t length = 0;
  std::uint32_t offset = 0;
  int max_size = 0;
  unsigned niov = 0;
  iovec* iov = nullptr;  // &iov_inline or iov_storage.data()
  LibMe* me = nullptr;

  std::uint64_t cookie = kInvalidCookie;
  unsigned cpt = 0;
  void* start = nullptr;  // as the user gave it (an iovec array for kMdIovec)
  iovec iov_inline{};
  std::vector<iovec> iov_storage;  // keeps its capacity while pooled
  void* user_ptr = nullptr;
  EventHandler handler;
  std::shared_ptr<EventQueue> eq;

  int refcount = 0;          // messages using it
  bool auto_unlink = false;  // unlink once exhausted and idle
  bool zombie = false;       // unlinked, waiting for refcount 0
  // Unlinked by the user or by a response timeout (LNet's "aborted"): a message still
  // using it that ends well reports -ETIMEDOUT all the same.
  bool aborted = false;
  bool on_portal = false;   // made by MDAttach: never takes ACK/REPLY
  bool lasting = false;     // made with kMdThreshInf: its memory serves operation after operation
  bool dead = false;        // handle gone; freed when the last delivery ends
  bool delivering = false;  // a thread is running this MD's event sink
  Fifo<Delivery> deferred;  // finalized messages whose event waits
  // What a message using it tells drivers of its memory (LndMessage::memory): its handle
  // when it is lasting (PortalTable::md_alive answers for it), else 0.
  std::uint64_t memory() const { return lasting ? cookie : 0; }
  LibMd* next_free = nullptr;

  // Response tracking: the ACK or REPLY this MD awaits until rsp_deadline
  // (steady clock, ns; 0: none), on its CPT's list in deadline order, and the peer NI
  // the request went to last (whose health a response that never comes lowers).
  std::int64_t rsp_deadline = 0;
  LibMd* rsp_prev = nullptr;
  LibMd* rsp_next = nullptr;
  std::atomic<std::uint64_t> rsp_next_hop{Nid::kAnyValue};
  // When the latest GET, or PUT asking for an ACK, went out from it (steady ns; 0: none
  // awaited): its REPLY or ACK gives the round trip (get_rtt_*, put_ack_* of the NI and
  // peer NI it comes back through).
  std::atomic<std::int64_t> rsp_sent_ns{0};

  bool exhausted() const {
    if (threshold == 0) return true;
    return (options & kMdMaxSize) && std::int64_t{offset} + max_size > std::int64_t{length};
  }
  bool has_sink() const { return static_cast<bool>(handler) || eq != nullptr; }
};

struct LibMe {
  // Matching reads these: kept together in the first cache line.
  LibMe* next = nullptr;  // in its match list or hash bucket
  std::uint64_t match_bits = 0;
  std::uint64_t ignore_bits = 0;
  ProcessId match_id;
  LibMd* md = nullptr;

  LibMe* prev = nullptr;
  std::uint64_t cookie = kInvalidCookie;
  unsigned cpt = 0;
  unsigned portal = 0;
  Unlink unlink = Unlink::Retain;
  LibMe* next_free = nullptr;
};

// What an incoming PUT or GET asks for.
struct MatchInfo {
  ProcessId initiator;      // primary NID of the peer, source pid
  Nid source = Nid::any();  // the NID it came from, when not the primary
  unsigned op = 0;          // kMdOpPut or kMdOpGet
  unsigned portal = 0;
  std::uint64_t match_bits = 0;
  std::uint32_t rlength = 0;
  std::uint32_t roffset = 0;
};

enum class MatchStatus { None, Ok, Drop };

struct MatchResult {
  MatchStatus status = MatchStatus::None;
  LibMe* me = nullptr;
  LibMd* md = nullptr;
  std::uint32_t offset = 0;
  std::uint32_t mlength = 0;
};

// Tries one ME (with its MD); None lets the caller go on to the next ME, Drop stops the
// search ("too big" without kMdTruncate). Does not change anything.
MatchResult try_match(LibMe* me, const MatchInfo& info);

// Consumes a successful match: threshold, local offset, reference. Returns true when the
// MD is now exhausted and must leave its ME (auto-unlink).
bool commit_match(const MatchResult& r);

}  // namespace lnet::portals
