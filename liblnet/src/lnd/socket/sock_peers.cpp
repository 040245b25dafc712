// The socket LND's peers and their connections: which connections to open
// (CONTROL and conns_per_peer of each bulk type), which incoming ones to take, which
// connection a message goes on, and what happens when connections come and go.
#include <algorithm>
#include <span>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

#include "conn.hpp"
#include "conn_select.hpp"
#include "sock_lnd.hpp"

namespace lnet::sock {

std::shared_ptr<SockPeer> SocketLnd::find_or_add_peer(SockNi& sni, Nid nid, Pid pid, const IpAddr& ip) {
  auto key = std::make_pair(nid.value(), pid);
  {
    ReadLock g(sni.mutex);
    auto it = sni.peers.find(key);
    if (it != sni.peers.end()) return it->second;
  }
  WriteLock g(sni.mutex);
  auto& slot = sni.peers[key];
  if (!slot) {
    auto peer = std::make_shared<SockPeer>();
    peer->nid = nid;
    peer->pid = pid;
    peer->userspace = (pid & kPidUserFlag) != 0;
    peer->ip = ip;
    MutexLock pg(peer->mutex);  // not shared yet, but version is guarded
    peer->version = sni.proto(params_.typed_conns);
    slot = peer;
  }
  return slot;
}

namespace {

// ANY, CONTROL, BULK_IN, BULK_OUT: 0..3 (NONE is never counted).
std::size_t type_index(ConnType t) { return static_cast<std::size_t>(t) & 3U; }

// The connection a message goes on (conn_select.hpp): CONTROL for small ones, BULK_OUT
// for large, the least loaded of a type; nullptr when none is up.
std::shared_ptr<Conn> pick_conn(SockPeer& peer, bool bulk) LNET_REQUIRES(peer.mutex) {
  ConnType want = bulk ? ConnType::BulkOut : ConnType::Control;
  auto& v = peer.conns;
  const std::shared_ptr<Conn>* conns =
      v.data();  // read under the lock held here (the analysis does not follow a lambda)
  std::size_t i = choose_conn(v.size(), want, false, [conns](std::size_t k) {
    const Conn& c = *conns[k];
    return ConnLoad{c.type(), !c.closed(), c.queued(), c.last_post()};
  });
  if (i == v.size()) return nullptr;
  v[i]->set_last_post(++peer.post_seq);
  return v[i];
}

}  // namespace

void SocketLnd::launch_connect(SockNi& sni, const std::shared_ptr<SockPeer>& peer) {
  if (sni.stopping) return;
  bool none_up = std::all_of(peer->conns.begin(), peer->conns.end(), [](const auto& c) { return c->closed(); });
  if (none_up || peer->max_conns == 0) peer->max_conns = sni.conns_per_peer.load(std::memory_order_relaxed);
  // CONTROL and max_conns of each bulk type (typed_conns), or one ANY.
  struct Want {
    ConnType type;
    int count;
  };
  Want wants[] = {{ConnType::Control, 1}, {ConnType::BulkIn, peer->max_conns}, {ConnType::BulkOut, peer->max_conns}};
  std::span<Want> types(wants);
  Want any{ConnType::Any, 1};
  if (!params_.typed_conns) types = std::span<Want>(&any, 1);
  std::uint32_t version = peer->version;
  if (!params_.typed_conns && version > kProtoV2) version = kProtoV2;  // V3 never sends on ANY
  for (const Want& w : types) {
    int have = static_cast<int>(std::count_if(peer->conns.begin(), peer->conns.end(),
                                              [&w](const auto& c) { return !c->closed() && c->type() == w.type; }));
    for (int i = have; i < w.count; ++i) {
      ++peer->connecting;
      Conn::connect(sni, peer, w.type, version);
    }
  }
}

void SocketLnd::queue_tx(SockNi& sni, std::shared_ptr<SockPeer> peer, Tx* tx, bool bulk) {
  std::shared_ptr<Conn> conn;
  int refuse = 0;
  for (;;) {
    MutexLock g(peer->mutex);
    if (peer->gone) {  // reaped since it was looked up: the table's entry is another
      Nid nid = peer->nid;
      Pid pid = peer->pid;
      IpAddr ip = peer->ip;
      g.unlock();
      peer = find_or_add_peer(sni, nid, pid, ip);
      continue;
    }
    peer->idle_since = {};
    conn = pick_conn(*peer, bulk);
    if (!conn) {
      if (peer->userspace) {
        refuse = -EHOSTUNREACH;  // a userspace peer dials us; we never dial it
      } else {
        peer->pending.push_back(tx);
        if (peer->connecting == 0 && Clock::now() >= peer->next_connect) launch_connect(sni, peer);
      }
    }
    break;
  }
  if (conn) {
    conn->enqueue(tx);
  } else if (refuse) {
    TxList one;
    one.push_back(tx);
    fail_txs(one, refuse, HealthStatus::RemoteError);
  }
}

void SocketLnd::fail_txs(TxList& txs, int rc, HealthStatus h) {
  while (Tx* t = txs.pop_front()) {
    if (t->msg) {
      t->msg->health = h;
      t->ni->host->finalize(t->msg, rc);
    }
    tx_free(t);
  }
}

Refusal SocketLnd::refuse_incoming(SockNi& sni, SockPeer& peer, ConnType type, std::uint64_t incarnation) {
  Refusal r = Refusal::None;
  {
    MutexLock g(peer.mutex);
    if (peer.gone) return Refusal::Gone;
    if (peer.incarnation != 0 && incarnation != peer.incarnation) {  // rebooted: the old ones go
      ++peer.accepting[type_index(type)];
      return Refusal::None;
    }
    // As ksocklnd: of every type up to the count we dial with while we have dialled
    // connections (up or on their way), else the NI's; the peer is told NONE for one
    // more and uses those it has.
    auto have = std::count_if(peer.conns.begin(), peer.conns.end(),
                              [type](const auto& c) { return !c->closed() && c->type() == type; }) +
                peer.accepting[type_index(type)];
    bool dialled = peer.connecting > 0 ||
                   std::any_of(peer.conns.begin(), peer.conns.end(), [](const auto& c) { return c->active(); });
    int limit = dialled && peer.max_conns > 0 ? peer.max_conns : sni.conns_per_peer.load(std::memory_order_relaxed);
    if (have >= limit)
      r = Refusal::Excess;
    else if (peer.connecting > 0 && Nid::wire_compare(sni.ni->nid, peer.nid) > 0)
      r = Refusal::Race;  // both sides dialling at once: the greater NID keeps its own connections
    else
      ++peer.accepting[type_index(type)];
  }
  if (r == Refusal::Excess) conns_refused_excess_.fetch_add(1, std::memory_order_relaxed);
  if (r == Refusal::Race) conns_refused_race_.fetch_add(1, std::memory_order_relaxed);
  return r;
}

void SocketLnd::release_incoming(SockPeer& peer, ConnType type) {
  MutexLock g(peer.mutex);
  if (peer.accepting[type_index(type)] > 0) --peer.accepting[type_index(type)];
}

void SocketLnd::conn_established(SockNi& sni, const std::shared_ptr<SockPeer>& peer,
                                 const std::shared_ptr<Conn>& conn) {
  std::vector<std::shared_ptr<Conn>> stale;
  std::vector<std::pair<std::shared_ptr<Conn>, Tx*>> go;
  {
    MutexLock g(peer->mutex);
    if (peer->incarnation != 0 && conn->incarnation() != peer->incarnation) {
      LNET_LOG(Warn, kLogLnd, "%s restarted (new incarnation): closing its old connections",
               peer->nid.to_string().c_str());
      stale.swap(peer->conns);
    }
    peer->incarnation = conn->incarnation();
    if (conn->active() && peer->connecting > 0) --peer->connecting;
    peer->conns.push_back(conn);
    if (!conn->active() && peer->accepting[type_index(conn->type())] > 0) --peer->accepting[type_index(conn->type())];
    conns_established_.fetch_add(1, std::memory_order_relaxed);
    peer->backoff_ms = 0;
    peer->next_connect = {};
    TxList still;
    while (Tx* t = peer->pending.pop_front()) {
      auto c = pick_conn(*peer, t->total >= static_cast<std::uint64_t>(params_.min_bulk));
      if (c)
        go.emplace_back(std::move(c), t);
      else
        still.push_back(t);
    }
    peer->pending = still;
  }
  for (auto& c : stale) c->close(-ECONNRESET, HealthStatus::RemoteDropped, "peer restarted");
  for (auto& [c, t] : go) c->enqueue(t);
  if (!sni.stopping) sni.ni->host->notify_peer(*sni.ni, peer->nid, true);
}

void SocketLnd::conn_closed(SockNi& sni, const std::shared_ptr<SockPeer>& peer, Conn* conn, bool was_established,
                            bool active, int rc) {
  if (conn) {
    MutexLock g(sni.conns_mutex);
    auto& v = sni.conns;
    v.erase(std::remove_if(v.begin(), v.end(), [conn](const std::shared_ptr<Conn>& c) { return c.get() == conn; }),
            v.end());
  }
  if (!peer) return;
  TxList failed;
  bool down = false;
  {
    MutexLock g(peer->mutex);
    if (was_established) {
      auto& v = peer->conns;
      v.erase(std::remove_if(v.begin(), v.end(), [conn](const std::shared_ptr<Conn>& c) { return c.get() == conn; }),
              v.end());
    } else if (active && peer->connecting > 0) {
      --peer->connecting;
    }
    bool none = peer->connecting == 0;
    for (auto& c : peer->conns) none = none && c->closed();
    if (none) {
      bool retry_now = rc == -EALREADY || (rc == -EPROTO && !was_established);  // a race, or another version
      if (!was_established && active && !retry_now) {
        // Connecting failed for real: back off, and fail what waits.
        peer->backoff_ms =
            peer->backoff_ms ? std::min(peer->backoff_ms * 2, params_.max_reconnectms) : params_.min_reconnectms;
        peer->next_connect = Clock::now() + std::chrono::milliseconds(peer->backoff_ms);
        failed = peer->pending;
        peer->pending = {};
        down = true;
      } else {
        peer->next_connect =
            retry_now ? Clock::now() + std::chrono::milliseconds(params_.min_reconnectms / 4) : Clock::now();
        down = was_established;
      }
    }
  }
  fail_txs(failed, rc ? rc : -ECONNABORTED, health_of_errno(rc));
  if (down && !sni.stopping) sni.ni->host->notify_peer(*sni.ni, peer->nid, false);
}

void SocketLnd::reap_peers(SockNi& sni, Clock::time_point now) {
  const auto keep = std::chrono::seconds(params_.peer_idle);
  std::vector<std::pair<std::uint64_t, Pid>> stale;
  {
    ReadLock g(sni.mutex);
    for (auto& [key, p] : sni.peers) {
      MutexLock pg(p->mutex);
      bool idle = p->pending.empty() && p->connecting == 0 &&
                  std::all_of(std::begin(p->accepting), std::end(p->accepting), [](int n) { return n == 0; }) &&
                  std::all_of(p->conns.begin(), p->conns.end(), [](const auto& c) { return c->closed(); });
      if (!idle) {
        p->idle_since = {};
      } else if (p->idle_since == Clock::time_point{}) {
        p->idle_since = now;
      } else if (now - p->idle_since >= keep) {
        stale.push_back(key);
      }
    }
  }
  if (stale.empty()) return;
  WriteLock g(sni.mutex);
  for (const auto& key : stale) {
    auto it = sni.peers.find(key);
    if (it == sni.peers.end()) continue;
    MutexLock pg(it->second->mutex);
    if (it->second->idle_since == Clock::time_point{}) continue;  // busy again meanwhile
    it->second->gone = true;
    pg.unlock();
    sni.peers.erase(it);
    peers_reaped_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace lnet::sock
