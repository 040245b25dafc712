// Peers: peer -> peer_net -> peer_ni, with each peer NI indexed by NID in the table of its
// CPT. Created on first send or receive (or by configuration); the primary NID names the
// peer to the layers above.
#pragma once

#include <atomic>
#include <climits>
#include <memory>
#include <unordered_map>
#include <vector>

#include <lnet/lnd/fifo.hpp>
#include <lnet/nid.hpp>
#include <lnet/nid_range.hpp>
#include <lnet/wire.hpp>

#include "base/counters.hpp"
#include "base/cpt.hpp"
#include "base/recovery.hpp"

namespace lnet::net {

struct Ni;
struct Peer;
struct PeerNet;

// The bits of a peer's state as LNet numbers them (`peer state` of lnetctl peer show).
namespace peer_state {
inline constexpr std::uint32_t kMultiRail = 0x1;
inline constexpr std::uint32_t kNoDiscovery = 0x2;  // the peer has discovery off
inline constexpr std::uint32_t kRouterEnabled = 0x4;
inline constexpr std::uint32_t kConfigured = 0x8;
inline constexpr std::uint32_t kDiscovered = 0x10;
inline constexpr std::uint32_t kRediscover = 0x20;  // the last round failed
inline constexpr std::uint32_t kDiscovering = 0x40;
inline constexpr std::uint32_t kDataPresent = 0x80;  // a push waits to be merged
inline constexpr std::uint32_t kNidsUptodate = 0x100;
inline constexpr std::uint32_t kPingSent = 0x200;
inline constexpr std::uint32_t kPushSent = 0x400;
inline constexpr std::uint32_t kPingFailed = 0x800;
inline constexpr std::uint32_t kPushFailed = 0x1000;
inline constexpr std::uint32_t kForcePing = 0x2000;
inline constexpr std::uint32_t kForcePush = 0x4000;
inline constexpr std::uint32_t kLockPrimary = 0x100000;
}  // namespace peer_state

// Where a peer is in discovery (peer/discovery.cpp has the transitions).
enum class DcState : std::uint8_t {
  Undiscovered,  // nothing learned yet, or the last round failed
  Queued,        // waiting for the discovery thread
  PingSent,      // a ping is out; its REPLY is awaited
  PushSent,      // our ping info is pushed; the ACK is awaited
  Discovered,    // its NIDs are known and it has ours: messages go
  Merged,        // it turned out to be another peer, which took its NIs
};

// A peer's discovery data, under the core's discovery lock except where marked.
struct PeerDiscovery {
  std::atomic<DcState> state{DcState::Undiscovered};  // the send path reads it without the lock
  std::atomic<std::uint32_t> flags{0};                // peer_state bits besides those of `state`
  std::vector<std::uint8_t> data;                     // pushed ping info waiting to be merged
  std::uint32_t peer_seqno = 0;                       // its ping buffer's sequence number, last merged
  std::uint32_t node_seqno = 0;                       // ours that it has (its ACK of our push)
  std::uint32_t push_seqno = 0;                       // ours in the push that is out
  std::size_t ping_bytes = 0;                         // what its ping info needed last time
  unsigned bad_replies = 0;                           // corrupt replies in this round
  int error = 0;                                      // how the last round ended
  unsigned rounds = 0;                                // rounds ended (discover waits for one)
  bool queued = false;                                // on the discovery thread's queue
  Fifo<FifoLink> waiting;                             // the core's messages held until the round ends
  Peer* merged_into = nullptr;                        // state Merged: the peer that took its NIs
};

struct PeerNi {
  Nid nid;
  unsigned cpt = 0;
  Peer* peer = nullptr;
  PeerNet* peer_net = nullptr;
  // Under the net lock of `cpt`; tx_credits is atomic so selection can read it from any CPT.
  int max_tx_credits = 0;
  std::atomic<int> tx_credits{0};
  int min_tx_credits = 0;
  std::atomic<std::uint64_t> txq_nob{0};  // written under the lock, read by route selection
  Fifo<FifoLink> txq;                     // the core's messages waiting for a tx credit
  int max_rtr_credits = 0;                // router credits: messages it may have us forward at once
  int rtr_credits = 0;
  int min_rtr_credits = 0;
  Fifo<FifoLink> rtrq;    // messages to forward waiting for a router credit
  Ni* pref_ni = nullptr;  // non-multi-rail peers always hear from this local NI
  std::atomic<int> health{1000};
  FailureCounts failures;  // those that blamed it
  RecoveryState recovery;  // under the core's recovery lock
  std::atomic<std::uint32_t> sel_priority{UINT_MAX};
  std::atomic<std::uint32_t> seq{0};
  std::atomic<bool> alive{true};                      // its driver's last word (notify_peer)
  std::atomic<std::int64_t> last_alive{0};            // routers: when it last sent us something (s)
  bool removed = false;                               // taken out of its peer by configuration
  bool configured = false;                            // added by configuration (discovery keeps it)
  std::atomic<std::uint32_t> ns_status{kNiStatusUp};  // what the peer's ping info says of it
  std::vector<Nid> pref_local;                        // preferred local NIDs (selection rules)
  std::vector<NidMatcher> pref_rtr;                   // preferred gateways (router rules)
  TypeStats stats;
  OpLatencyStats latency;  // of our operations that went through it
};

struct PeerNet {
  NetId net;
  Peer* peer = nullptr;
  std::vector<PeerNi*> nis;
  std::uint32_t sel_priority = UINT_MAX;
};

struct Peer {
  Nid primary;
  bool multi_rail = false;
  bool configured = false;  // added by configuration (exported), not just met
  bool deleted = false;
  std::atomic<bool> reachable{true};  // its last discovery round did not fail (gateways: alive)
  // A gateway's health sensitivity (its routes'); 0: the global one.
  std::atomic<unsigned> health_sensitivity{0};
  PeerDiscovery dc;
  // The state bits lnetctl shows: discovery's flags and state, multi-rail, configured.
  std::uint32_t state_bits() const;
  std::vector<std::unique_ptr<PeerNet>> nets;
  std::vector<std::unique_ptr<PeerNi>> nis;  // also the removed ones, kept for messages in flight
  std::vector<std::unique_ptr<PeerNet>> dead_nets;
};

// Lookups need the net lock of cpts.of_nid(nid); changes need every net lock.
class PeerTable {
 public:
  explicit PeerTable(const CptTable& cpts) : cpts_(cpts), index_(cpts.count()) {}

  PeerNi* find(Nid nid) const {
    const auto& shard = index_[cpts_.of_nid(nid)];
    auto it = shard.find(nid);
    return it == shard.end() ? nullptr : it->second;
  }
  // Adds `nid` to the peer whose primary NID is `primary` (made if missing). Fails with
  // -EEXIST if `nid` belongs to another peer.
  int add_ni(Nid primary, Nid nid, bool multi_rail, int credits, int rtr_credits);
  // Takes NIDs (all of the peer when `nids` is empty) out of the index; the objects stay
  // alive (messages may point at them) until clear(). -ENOENT: no such peer or NID.
  int remove(Nid primary, const std::vector<Nid>& nids, std::vector<PeerNi*>* removed);
  const std::vector<std::unique_ptr<Peer>>& peers() const { return peers_; }
  void clear();

  // What discovery does to peers (every net lock held).
  // A new NI of `peer`.
  PeerNi* make_ni(Peer* peer, Nid nid, int credits, int rtr_credits);
  // Moves `lpni` (with its credits and queues) to the peer `to`.
  void move_ni(PeerNi* lpni, Peer* to);
  // Takes `lpni` out of the index and its peer; it stays allocated until clear().
  void remove_ni(PeerNi* lpni);
  // A peer with no NIs left leaves the table (kept allocated until clear()).
  void retire(Peer* peer);

  const CptTable& cpts_;
  std::vector<std::unordered_map<Nid, PeerNi*>> index_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<std::unique_ptr<Peer>> removed_;  // kept until clear()
};

}  // namespace lnet::net
