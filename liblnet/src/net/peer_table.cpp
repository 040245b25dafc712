// Building peers out of peer NIs.
#include "net/peer_table.hpp"

#include <algorithm>
#include <cerrno>

namespace lnet::net {

PeerNi* PeerTable::make_ni(Peer* peer, Nid nid, int credits, int rtr_credits) {
  PeerNet* pnet = nullptr;
  for (auto& pn : peer->nets)
    if (pn->net == nid.net()) pnet = pn.get();
  if (!pnet) {
    peer->nets.push_back(std::make_unique<PeerNet>());
    pnet = peer->nets.back().get();
    pnet->net = nid.net();
    pnet->peer = peer;
  }
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
    index_[lpni->cpt].erase(n);
    lpni->removed = true;
    auto& v = lpni->peer_net->nis;
    v.erase(std::remove(v.begin(), v.end(), lpni), v.end());
    if (removed) removed->push_back(lpni);
  }
  for (auto it = peer->nets.begin(); it != peer->nets.end();) {
    if ((*it)->nis.empty()) {
      peer->dead_nets.push_back(std::move(*it));  // removed peer NIs still point at it
      it = peer->nets.erase(it);
    } else {
      ++it;
    }
  }
  if (peer->nets.empty()) {
    peer->deleted = true;
    for (auto it = peers_.begin(); it != peers_.end(); ++it) {
      if (it->get() == peer) {
        removed_.push_back(std::move(*it));
        peers_.erase(it);
        break;
      }
    }
  }
  return 0;
}

void PeerTable::clear() {
  for (auto& shard : index_) shard.clear();
  peers_.clear();
  removed_.clear();
}

}  // namespace lnet::net
