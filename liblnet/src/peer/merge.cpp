// Merging what a peer says of itself (its ping info, or a push) into the peer table: its
// features, its primary NID (peers that turn out to be one are joined), and its NIs (new
// ones added, others' moved over, unlisted ones dropped). Under the discovery lock and
// every net lock.
#include <algorithm>

#include <lnet/log.hpp>

#include "peer/discovery.hpp"
#include "peer_flags.hpp"

namespace lnet::peer {

void Discovery::absorb_locked(Peer* into, Peer* victim, MsgQueue& resend) {
  if (into->health_sensitivity.load() == 0) into->health_sensitivity.store(victim->health_sensitivity.load());
  std::vector<PeerNi*> nis;
  for (auto& lpni : victim->nis)
    if (!lpni->removed) nis.push_back(lpni.get());
  for (PeerNi* lpni : nis) st_.peers.move_ni(lpni, into);
  LNET_LOG(Info, kLogCore, "peer %s is %s: merged", victim->primary.to_string().c_str(),
           into->primary.to_string().c_str());
  while (FifoLink* l = victim->dc.waiting.pop_front()) resend.push_back(msg::as_message(l));
  victim->dc.merged_into = into;
  set_state(victim, DcState::Merged);
  ++victim->dc.rounds;
  done_cv_.notify_all();
  st_.peers.retire(victim);
  st_.config_gen.fetch_add(1, std::memory_order_relaxed);
}

void Discovery::adopt_locked(Peer* into, Peer* peer, MsgQueue& resend) {
  // What was learned of `peer` goes with its NIs.
  constexpr std::uint32_t kLearned = ps::kNoDiscovery | ps::kRouterEnabled;
  into->dc.flags.store((into->dc.flags.load() & ~kLearned) | (peer->dc.flags.load() & kLearned));
  into->multi_rail = into->multi_rail || peer->multi_rail;
  into->dc.peer_seqno = peer->dc.peer_seqno;
  into->dc.ping_bytes = peer->dc.ping_bytes;
  absorb_locked(into, peer, resend);
}

void Discovery::take_features_locked(Peer* peer, const PingInfo& info) {
  bool peer_mr = (info.features & kPingFeatMultiRail) != 0;
  if ((info.features & kPingFeatDiscovery) && st_.tun.discovery.load())
    clear_flags(peer, ps::kNoDiscovery);
  else
    set_flags(peer, ps::kNoDiscovery);
  if (info.features & kPingFeatRteDisabled)
    clear_flags(peer, ps::kRouterEnabled);
  else
    set_flags(peer, ps::kRouterEnabled);
  if (!peer->configured) {
    if (peer_mr && !has(peer, ps::kNoDiscovery))
      peer->multi_rail = true;
    else if (!peer_mr && peer->multi_rail)
      peer->multi_rail = false;  // its multi-rail state vanished
  }
}

Peer* Discovery::merge_target_locked(Peer* peer, const PingInfo& info, bool& full, MsgQueue& resend) {
  Nid primary = info.nis[1].nid;
  if (!peer->configured && !has(peer, ps::kLockPrimary)) {
    // A peer that holds one of the listed NIDs as a locked primary keeps it: this one
    // joins that peer rather than the other way round.
    for (std::size_t i = 1; i < info.nis.size(); ++i) {
      PeerNi* o = st_.peers.find(info.nis[i].nid);
      if (o && o->peer != peer && o->nid == o->peer->primary && has(o->peer, ps::kLockPrimary) &&
          !o->peer->configured) {
        o->peer->multi_rail = true;
        adopt_locked(o->peer, peer, resend);
        return o->peer;
      }
    }
  }
  if (primary == peer->primary) return peer;
  PeerNi* owner = st_.peers.find(primary);
  if (owner && owner->peer != peer) {
    if (peer->configured || has(peer, ps::kLockPrimary)) {
      LNET_LOG(Warn, kLogCore, "configured peer %s says its primary NID is %s, which peer %s has: left alone",
               peer->primary.to_string().c_str(), primary.to_string().c_str(),
               owner->peer->primary.to_string().c_str());
      full = false;
      return peer;
    }
    Peer* target = owner->peer;  // the peer that has its primary NID goes on, with what we learned
    adopt_locked(target, peer, resend);
    return target;
  }
  if (!has(peer, ps::kLockPrimary)) {
    if (!owner)
      (void)st_.peers.make_ni(peer, primary, st_.peer_credits_for(primary.net()),
                              st_.peer_rtr_credits_for(primary.net()));
    LNET_LOG(Info, kLogCore, "peer %s: primary NID %s", peer->primary.to_string().c_str(), primary.to_string().c_str());
    peer->primary = primary;
  }
  return peer;
}

void Discovery::merge_nis_locked(Peer* target, const PingInfo& info, MsgQueue& resend) {
  // The node's own NIDs are a peer like any other (as LNet makes one for any
  // destination); they join no peer but that one.
  bool self = st_.is_local_nid(target->primary);
  for (std::size_t i = 1; i < info.nis.size(); ++i) {
    const NiStatus& ns = info.nis[i];
    if (ns.nid.is_any() || ns.nid.is_lo() || (!self && st_.is_local_nid(ns.nid))) continue;
    PeerNi* lpni = st_.peers.find(ns.nid);
    if (!lpni) {
      lpni =
          st_.peers.make_ni(target, ns.nid, st_.peer_credits_for(ns.nid.net()), st_.peer_rtr_credits_for(ns.nid.net()));
      st_.udsp.apply_new(lpni, st_.nets());
    } else if (lpni->peer != target) {
      Peer* other = lpni->peer;
      if (other->configured || lpni->configured || has(other, ps::kLockPrimary)) {
        LNET_LOG(Warn, kLogCore, "peer %s lists %s, configured for peer %s: left there",
                 target->primary.to_string().c_str(), ns.nid.to_string().c_str(), other->primary.to_string().c_str());
        continue;
      }
      if (ns.nid == other->primary)
        absorb_locked(target, other, resend);
      else
        st_.peers.move_ni(lpni, target);
      if (other->nets.empty() && !other->deleted) st_.peers.retire(other);
    }
    lpni->ns_status.store(ns.status, std::memory_order_relaxed);
  }
  // Each net's NIs in the order the peer lists them (as LNet shows them).
  auto rank = [&info](const PeerNi* n) {
    for (std::size_t i = 1; i < info.nis.size(); ++i)
      if (info.nis[i].nid == n->nid) return i;
    return info.nis.size();
  };
  for (auto& pn : target->nets)
    std::stable_sort(pn->nis.begin(), pn->nis.end(),
                     [&rank](const PeerNi* m, const PeerNi* n) { return rank(m) < rank(n); });
}

void Discovery::drop_unlisted_locked(Peer* target, const PingInfo& info, MsgQueue& resend) {
  // NIs it no longer lists go, unless configuration put them there.
  std::vector<PeerNi*> gone;
  for (auto& lpni : target->nis) {
    if (lpni->removed) continue;
    bool listed = false;
    for (std::size_t i = 1; i < info.nis.size() && !listed; ++i) listed = info.nis[i].nid == lpni->nid;
    if (listed) continue;
    if (lpni->configured || target->configured || lpni->nid == target->primary)
      lpni->ns_status.store(kNiStatusDown, std::memory_order_relaxed);
    else
      gone.push_back(lpni.get());
  }
  for (PeerNi* lpni : gone) {
    LNET_LOG(Info, kLogCore, "peer %s no longer lists %s", target->primary.to_string().c_str(),
             lpni->nid.to_string().c_str());
    st_.peers.remove_ni(lpni);
    // Messages waiting for its credits go again, by another NI.
    while (FifoLink* l = lpni->txq.pop_front()) {
      Message* m = msg::as_message(l);
      m->peer_tx_credit = m->tx_delayed = m->tx_committed = false;
      m->txni = nullptr;
      m->txpeer = nullptr;
      resend.push_back(m);
    }
  }
}

Peer* Discovery::merge_ping_info(Peer* peer, const PingInfo& info, bool from_ping, MsgQueue& resend) {
  ExclusiveLock x(st_.locks);
  take_features_locked(peer, info);
  bool peer_mr = (info.features & kPingFeatMultiRail) != 0;
  Nid primary = info.nis.size() > 1 ? info.nis[1].nid : Nid::any();
  if (from_ping && peer_mr && primary == peer->primary) peer->dc.peer_seqno = info.nis[0].status;

  // Status only unless discovery runs on both sides for a multi-rail peer.
  // 0@lo stays what it is: the loopback NID never joins the node's other NIDs.
  bool full = st_.tun.discovery.load() && peer_mr && !has(peer, ps::kNoDiscovery) && !primary.is_any() &&
              !primary.is_lo() && !peer->primary.is_lo();
  Peer* target = full ? merge_target_locked(peer, info, full, resend) : peer;
  if (full) {
    merge_nis_locked(target, info, resend);
    drop_unlisted_locked(target, info, resend);
  } else {
    for (std::size_t i = 1; i < info.nis.size(); ++i)
      if (PeerNi* lpni = st_.peers.find(info.nis[i].nid); lpni && lpni->peer == target)
        lpni->ns_status.store(info.nis[i].status, std::memory_order_relaxed);
  }
  set_flags(target, ps::kNidsUptodate);
  host_.gateway_said(target, info);
  st_.config_gen.fetch_add(1, std::memory_order_relaxed);
  return target;
}

}  // namespace lnet::peer
