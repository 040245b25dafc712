// Building peers out of peer NIs.
#include "net/peer_table.hpp"

#include <algorithm>
#include <cerrno>

namespace lnet::net {

namespace {

PeerNet* net_of(Peer* peer, NetId net) {
  for (auto& pn : peer->nets)
    if (pn->net == net) return pn.get();
  peer->nets.push_back(std::make_unique<PeerNet>());
  PeerNet* pnet = peer->nets.back().get();
  pnet->net = net;
  pnet->peer = peer;
  return pnet;
}

// Takes `lpni` off its peer net; a net left empty goes (removed peer NIs still point at it).
void unlink_from_net(PeerNi* lpni) {
  Peer* peer = lpni->peer;
  auto& v = lpni->peer_net->nis;
  v.erase(std::remove(v.begin(), v.end(), lpni), v.end());
  for (auto it = peer->nets.begin(); it != peer->nets.end(); ++it) {
    if (it->get() == lpni->peer_net && (*it)->nis.empty()) {
      peer->dead_nets.push_back(std::move(*it));
      peer->nets.erase(it);
      break;
    }
  }
}

}  // namespace

std::uint32_t Peer::state_bits() const {
  using namespace peer_state;
  std::uint32_t bits = dc.flags.load(std::memory_order_relaxed);
  if (multi_rail) bits |= kMultiRail;
  if (configured) bits |= kConfigured;
  switch (dc.state.load(std::memory_order_relaxed)) {
    case DcState::Undiscovered:
    case DcState::Merged: break;
    case DcState::Queued: bits |= kDiscovering; break;
    case DcState::PingSent: bits |= kDiscovering | kPingSent; break;
    case DcState::PushSent: bits |= kDiscovering | kPushSent; break;
    case DcState::Discovered: bits |= kDiscovered; break;
  }
  return bits;
}

PeerNi* PeerTable::make_ni(Peer* peer, Nid nid, int credits, int rtr_credits) {
  PeerNet* pnet = net_of(peer, nid.net());
  peer->nis.push_back(std::make_unique<PeerNi>());
  PeerNi* lpni = peer->nis.back().get();
  lpni->nid = nid;
  lpni->cpt = cpts_.of_nid(nid);
  lpni->peer = peer;
  lpni->peer_net = pnet;
  lpni->max_tx_credits = credits;
  lpni->tx_credits.store(credits, std::memory_order_relaxed);
  lpni->min_tx_credits = credits;
  lpni->max_rtr_credits = lpni->rtr_credits = lpni->min_rtr_credits = rtr_credits;
  pnet->nis.push_back(lpni);
  index_[lpni->cpt][nid] = lpni;
  return lpni;
}

void PeerTable::move_ni(PeerNi* lpni, Peer* to) {
  Peer* from = lpni->peer;
  if (from == to) return;
  unlink_from_net(lpni);
  auto it = std::find_if(from->nis.begin(), from->nis.end(), [&](const auto& p) { return p.get() == lpni; });
  to->nis.push_back(std::move(*it));
  from->nis.erase(it);
  lpni->peer = to;
  lpni->peer_net = net_of(to, lpni->nid.net());
  lpni->peer_net->nis.push_back(lpni);
}

void PeerTable::remove_ni(PeerNi* lpni) {
  index_[lpni->cpt].erase(lpni->nid);
  lpni->removed = true;
  unlink_from_net(lpni);
}

void PeerTable::retire(Peer* peer) {
  peer->deleted = true;
  for (auto it = peers_.begin(); it != peers_.end(); ++it) {
    if (it->get() == peer) {
      removed_.push_back(std::move(*it));
      peers_.erase(it);
      return;
    }
  }
}

int PeerTable::add_ni(Nid primary, Nid nid, bool multi_rail, int credits, int rtr_credits) {
  PeerNi* prim = find(primary);
  PeerNi* existing = find(nid);
  if (existing && (prim == nullptr || existing->peer != prim->peer)) return -EEXIST;
  Peer* peer = prim ? prim->peer : nullptr;
  if (!peer) {
    peers_.push_back(std::make_unique<Peer>());
    peer = peers_.back().get();
    peer->primary = primary;
    make_ni(peer, primary, credits, rtr_credits);
  }
  if (multi_rail) peer->multi_rail = true;
  if (!find(nid)) make_ni(peer, nid, credits, rtr_credits);
  return 0;
}

int PeerTable::remove(Nid primary, const std::vector<Nid>& nids, std::vector<PeerNi*>* removed) {
  PeerNi* prim = find(primary);
  if (!prim || prim->peer->primary != primary) return -ENOENT;
  Peer* peer = prim->peer;
  std::vector<Nid> gone = nids;
  if (gone.empty() || std::find(gone.begin(), gone.end(), primary) != gone.end()) {
    gone.clear();
    for (auto& lpni : peer->nis)
      if (!lpni->removed) gone.push_back(lpni->nid);
  }
  for (Nid n : gone) {
    PeerNi* lpni = find(n);
    if (!lpni || lpni->peer != peer) return -ENOENT;
  }
  for (Nid n : gone) {
    PeerNi* lpni = find(n);
    remove_ni(lpni);
    if (removed) removed->push_back(lpni);
  }
  if (peer->nets.empty()) retire(peer);
  return 0;
}

void PeerTable::clear() {
  for (auto& shard : index_) shard.clear();
  peers_.clear();
  removed_.clear();
}

}  // namespace lnet::net
