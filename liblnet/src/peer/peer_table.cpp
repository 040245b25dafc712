// Building peers out of peer NIs.
#include "peer/peer_table.hpp"

#include <cerrno>

namespace lnet::core {

PeerNi* PeerTable::make_ni(Peer* peer, Nid nid, int credits) {
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
  pnet->nis.push_back(lpni);
  index_[lpni->cpt][nid] = lpni;
  return lpni;
}

int PeerTable::add_ni(Nid primary, Nid nid, bool multi_rail, int credits) {
  PeerNi* prim = find(primary);
  PeerNi* existing = find(nid);
  if (existing && (prim == nullptr || existing->peer != prim->peer)) return -EEXIST;
  Peer* peer = prim ? prim->peer : nullptr;
  if (!peer) {
    peers_.push_back(std::make_unique<Peer>());
    peer = peers_.back().get();
    peer->primary = primary;
    make_ni(peer, primary, credits);
  }
  if (multi_rail) peer->multi_rail = true;
  if (!find(nid)) make_ni(peer, nid, credits);
  return 0;
}

void PeerTable::clear() {
  for (auto& shard : index_) shard.clear();
  peers_.clear();
}

}  // namespace lnet::core
