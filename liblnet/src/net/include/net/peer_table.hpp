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

#include "base/counters.hpp"
#include "base/cpt.hpp"
#include "base/recovery.hpp"

namespace lnet::net {

struct Ni;
struct Peer;
struct PeerNet;

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
  std::atomic<bool> alive{true};            // its driver's (or the router checker's) last word
  std::atomic<std::int64_t> last_alive{0};  // routers: when it last sent us something (s)
  bool removed = false;                     // taken out of its peer by configuration
  std::vector<Nid> pref_local;              // preferred local NIDs (selection rules)
  TypeStats stats;
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

 private:
  PeerNi* make_ni(Peer* peer, Nid nid, int credits, int rtr_credits);

  const CptTable& cpts_;
  std::vector<std::unordered_map<Nid, PeerNi*>> index_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<std::unique_ptr<Peer>> removed_;  // kept until clear()
};

}  // namespace lnet::net
