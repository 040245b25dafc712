// The socket LND: NIs, peers, the acceptor, connection management and the send path.
#include "sock_lnd.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <future>

#include <lnet/lnd/numa.hpp>
#include <lnet/lnd/pool.hpp>
#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

#include "conn.hpp"

namespace lnet::sock {

namespace {
constexpr int kDefaultPeerCredits = 8;  // ksocklnd's peer_credits
}  // namespace

Tx* tx_alloc() {
  Tx* t = Pool<Tx>::take();
  *t = Tx{};
  return t;
}

void tx_free(Tx* t) { Pool<Tx>::give(t); }

HealthStatus health_of_errno(int err) {
  if (err < 0) err = -err;
  switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ENETUNREACH:
    case EHOSTUNREACH:
    case EPIPE: return HealthStatus::RemoteDropped;
    case ETIMEDOUT: return HealthStatus::RemoteTimeout;
    case EHOSTDOWN:
    case ENONET: return HealthStatus::RemoteError;
    default: return HealthStatus::LocalError;
  }
}

// ---------------------------------------------------------------- acceptor

// One acceptor per address, as LNet has one per node: every NI on the address shares it
// (tcp and tcp2 on eth0), and the acceptor request's target NID tells them apart.
struct SocketLnd::Listener final : IoHandler {
  SocketLnd& lnd;
  IpAddr ip;
  int fd;
  IoThread& io;
  std::vector<SockNi*> nis;  // the NIs on `ip`, under the driver's nis_mutex_
  // Resting after accept() ran out of descriptors (its I/O thread's): until when, and
  // for how long this time (doubling while it lasts, from 1 s to 32 s).
  bool paused = false;
  Clock::time_point resume{};
  std::chrono::seconds pause{0};
  Listener(SocketLnd& l, const IpAddr& a, int f, IoThread& i) : lnd(l), ip(a), fd(f), io(i) {}
  ~Listener() { ::close(fd); }
  bool on_events(std::uint32_t) override {
    lnd.accept_ready(*this);
    return false;
  }
};

SockNi* SocketLnd::ni_for_accept(const IpAddr& ip, Nid target) {
  MutexLock g(nis_mutex_);
  for (const auto& l : listeners_)
    if (l->ip == ip)
      for (SockNi* sni : l->nis)
        if (sni->ni->nid == target && !sni->stopping.load()) return sni;
  return nullptr;
}

void SocketLnd::accept_ready(Listener& l) {
  int lfd = l.fd;
  for (;;) {
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    int fd = accept4(lfd, reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      if (e == EINTR || e == ECONNABORTED) continue;
      if (e == EAGAIN) return;
      if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) pause_listener(l);
      std::uint64_t held = 0;
      if (stranger_log_.allow(&held))
        LNET_LOG(Warn, kLogLnd, "accept on %s: %s%s%s", l.ip.to_string().c_str(), std::strerror(e),
                 l.paused ? (" (not accepting for " + std::to_string(l.pause.count()) + " s)").c_str() : "",
                 held ? (" (" + std::to_string(held) + " like lines held back)").c_str() : "");
      return;
    }
    l.pause = std::chrono::seconds(0);
    std::uint16_t port = 0;
    IpAddr peer = IpAddr::of_sockaddr(from, &port);
    if (params_.accept == AcceptMode::Secure && port > 1023) {
      conns_refused_port_.fetch_add(1, std::memory_order_relaxed);
      std::uint64_t held = 0;
      if (stranger_log_.allow(&held))
        LNET_LOG(Warn, kLogLnd, "refused a connection from %s port %d: not a privileged port (accept=secure)%s",
                 peer.to_string().c_str(), port,
                 held ? (" (and " + std::to_string(held) + " refused since the last line)").c_str() : "");
      ::close(fd);
      continue;
    }
    // The connection starts on the address's first NI; its acceptor request names the
    // one it is for (Conn::read_accept_request).
    SockNi* first = nullptr;
    {
      MutexLock g(nis_mutex_);
      if (!l.nis.empty()) first = l.nis.front();
    }
    if (!first) {
      ::close(fd);
      continue;
    }
    if (!Conn::accept(*this, *first, fd, peer, port)) {
      std::uint64_t held = 0;
      if (stranger_log_.allow(&held))
        LNET_LOG(Warn, kLogLnd,
                 "refused a connection from %s: %d connections from that address are in their handshake already "
                 "(LNET_SOCK_MAX_HANDSHAKES_PER_IP)%s",
                 peer.to_string().c_str(), params_.max_handshakes_per_ip,
                 held ? (" (and " + std::to_string(held) + " refused since the last line)").c_str() : "");
    }
  }
}

bool SocketLnd::handshake_begin(const std::shared_ptr<Conn>& c) {
  const auto key = c->peer_ip().bytes();
  MutexLock g(handshakes_mutex_);
  if (auto it = handshaking_from_.find(key);
      it != handshaking_from_.end() && it->second >= params_.max_handshakes_per_ip) {
    conns_refused_busy_.fetch_add(1, std::memory_order_relaxed);  // that address floods: its newest waits
    return false;
  }
  // The oldest handshakes first: those done (established, closed) leave the queue.
  while (!pending_.empty()) {
    auto f = pending_.front().lock();
    if (f && f->handshake_counted()) break;
    pending_.pop_front();
  }
  // All places taken: the oldest handshake makes room. A peer's own takes a round trip,
  // a flood's lasts until it is evicted, so a peer gets through a flood from many hosts.
  while (handshaking_ >= params_.max_handshakes && !pending_.empty()) {
    auto victim = pending_.front().lock();
    pending_.pop_front();
    if (!victim || !victim->uncount_handshake()) continue;
    --handshaking_;
    if (auto it = handshaking_from_.find(victim->peer_ip().bytes()); it != handshaking_from_.end() && --it->second <= 0)
      handshaking_from_.erase(it);
    handshakes_evicted_.fetch_add(1, std::memory_order_relaxed);
    victim->close(
        -ETIMEDOUT, HealthStatus::Ok,
        "evicted: the oldest of " + std::to_string(params_.max_handshakes) + " connections in their handshake");
  }
  if (handshaking_ >= params_.max_handshakes) {
    conns_refused_busy_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  ++handshaking_from_[key];
  ++handshaking_;
  c->count_handshake();
  pending_.push_back(c);
  return true;
}

void SocketLnd::handshake_end(const IpAddr& from) {
  MutexLock g(handshakes_mutex_);
  --handshaking_;
  auto it = handshaking_from_.find(from.bytes());
  if (it != handshaking_from_.end() && --it->second <= 0) handshaking_from_.erase(it);
}

void SocketLnd::pause_listener(Listener& l) {
  l.pause = std::clamp(l.pause * 2, std::chrono::seconds(1), std::chrono::seconds(32));
  l.resume = Clock::now() + l.pause;
  l.paused = l.io.modify(l.fd, &l, 0) == 0;
}

void SocketLnd::resume_listeners(Clock::time_point now) {
  MutexLock g(nis_mutex_);
  for (auto& l : listeners_) {
    if (!l->io.on_this_thread()) continue;  // a listener's pause is its I/O thread's
    if (l->paused && now >= l->resume) l->paused = l->io.modify(l->fd, l.get(), EPOLLIN) != 0;
  }
}

// ---------------------------------------------------------------- start and stop

SocketLnd::SocketLnd() : params_(socket_params()) {}

SocketLnd::~SocketLnd() {
  for (auto& io : io_) io->stop();
}

namespace {

// A NID on a named interface: the interface must exist (it may be down: the NI then
// starts down and follows it), as ksocklnd refuses an interface it cannot find.
int check_interface_exists(NetInterface& ni) {
  if (ni.config.interfaces.empty() || ::if_nametoindex(ni.config.interfaces.front().c_str()) != 0) return 0;
  return fail_startup(ni, -ENODEV, "no interface '" + ni.config.interfaces.front() + "' for " + ni.nid.to_string());
}

}  // namespace

int SocketLnd::startup(NetInterface& ni) {
  auto sni = std::make_unique<SockNi>();
  sni->ni = &ni;
  sni->lnd = this;
  if (!ni.nid.is_any()) {
    sni->ip = IpAddr::of_nid(ni.nid);
    if (sni->ip.any()) return fail_startup(ni, -EINVAL, ni.nid.to_string() + ": its address is neither IPv4 nor IPv6");
    if (int rc = check_interface_exists(ni)) return rc;
  } else {
    bool large = ni.host && ni.host->large_nids();
    auto ip = interface_address(ni.config.interfaces.empty() ? std::string() : ni.config.interfaces.front(), large);
    if (!ip) return fail_startup(ni, ip.code(), ip.message());
    sni->ip = *ip;
    ni.nid = sni->ip.nid(ni.config.net);
  }
  if (sni->ip.v6() && !params_.typed_conns)
    return fail_startup(ni, -EOPNOTSUPP,
                        "not supported yet: typed_conns=0 on IPv6 (protocol V4 sends on typed connections only)");
  sni->ifname = ni.config.interfaces.empty() ? interface_of(sni->ip) : ni.config.interfaces.front();
  ni.numa_node = interface_numa_node(sni->ifname);
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  sni->incarnation = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
  // The NI's own timeout, else LNET_SOCK_TIMEOUT; 0 there (sock_timeout=0) takes LNet's
  // derived lnd_timeout, as ksocklnd does.
  int timeout = static_cast<int>(ni.config.lnd_tunables.get_or("timeout", 0));
  if (timeout <= 0) timeout = params_.timeout;
  if (timeout == 0) timeout = ni.host && ni.host->lnd_timeout() > 0 ? ni.host->lnd_timeout() : 50;
  sni->timeout.store(timeout, std::memory_order_relaxed);
  long cpp = ni.config.lnd_tunables.get_or("conns_per_peer", 0);
  sni->conns_per_peer.store(cpp > 0 ? static_cast<int>(cpp) : auto_conns_per_peer(*sni), std::memory_order_relaxed);
  // The NI's peer_credits when the configuration left them: ksocklnd's default.
  if (ni.config.tunables.peer_credits <= 0) ni.config.tunables.peer_credits = kDefaultPeerCredits;

  if (io_.empty()) {
    for (int i = 0; i < params_.nscheds; ++i) {
      io_.push_back(std::make_unique<IoThread>([this](Clock::time_point now) { tick(now); }));
    }
  }
  if (params_.accept != AcceptMode::None) {
    MutexLock g(nis_mutex_);
    if (int rc = listen_locked(ni, sni.get()); rc != 0) return rc;
  }
  LNET_LOG(Info, kLogLnd, "%s up: port %d, accept=%s, timeout %d s, conns_per_peer %d", ni.nid.to_string().c_str(),
           params_.port, accept_mode_name(params_.accept), timeout, sni->conns_per_peer.load());
  watch_link(*sni);
  MutexLock g(nis_mutex_);
  nis_.push_back(sni.get());
  ni.lnd_data = sni.release();
  return 0;
}

void SocketLnd::watch_link(SockNi& sni) {
  if (!links_) {
    links_ = std::make_unique<LinkWatch>([this] { check_links(); });
    (void)links_->start();  // without a watch (logged), the NI still starts down if its link is
  }
  sni.link_ip = interface_holds(sni.ifname, sni.ip) ? sni.ip : IpAddr();
  sni.link_up = link_is_up(sni.ifname, sni.link_ip);
  if (!sni.link_up) {
    LNET_LOG(Warn, kLogLnd, "%s: interface %s is down", sni.ni->nid.to_string().c_str(), sni.ifname.c_str());
    sni.ni->host->link_state(*sni.ni, false);  // the host takes no lock of its own for this
  }
}

void SocketLnd::check_links() {
  MutexLock g(nis_mutex_);  // an NI's shutdown() waits for the host calls about it
  for (SockNi* sni : nis_) {
    bool up = link_is_up(sni->ifname, sni->link_ip);
    if (up == sni->link_up) continue;
    sni->link_up = up;
    LNET_LOG(Warn, kLogLnd, "%s: interface %s %s", sni->ni->nid.to_string().c_str(), sni->ifname.c_str(),
             up ? "is up again" : "went down (or lost its carrier or address)");
    sni->ni->host->link_state(*sni->ni, up);
  }
}

// The NI joins the acceptor of its address, opened by the first NI there.
int SocketLnd::listen_locked(NetInterface& ni, SockNi* sni) {
  for (auto& l : listeners_)
    if (l->ip == sni->ip) {
      l->nis.push_back(sni);  // another net on the address: its acceptor serves it too
      return 0;
    }
  int fd = socket(sni->ip.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int err = errno;
    return fail_startup(ni, -err, std::string("cannot make a listening socket: ") + std::strerror(err));
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (sni->ip.v6()) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  sockaddr_storage a;
  socklen_t alen = sni->ip.to_sockaddr(a, static_cast<std::uint16_t>(params_.port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), alen) != 0 || ::listen(fd, params_.accept_backlog) != 0) {
    int err = errno;
    ::close(fd);
    return fail_startup(ni, -err,
                        "cannot listen on " + sni->ip.to_string() + " port " + std::to_string(params_.port) + ": " +
                            std::strerror(err));
  }
  IoThread& io = *io_.front();
  auto l = std::make_unique<Listener>(*this, sni->ip, fd, io);
  l->nis.push_back(sni);
  if (int rc = io.add(fd, l.get(), EPOLLIN); rc != 0) {
    return fail_startup(ni, rc,
                        std::string("cannot watch the listening socket: epoll_ctl: ") +
                            std::strerror(-rc));  // ~Listener closes the socket
  }
  listeners_.push_back(std::move(l));
  return 0;
}

void SocketLnd::shutdown(NetInterface& ni) {
  auto* sni = static_cast<SockNi*>(ni.lnd_data);
  if (!sni) return;
  sni->stopping = true;
  {
    MutexLock g(nis_mutex_);
    for (auto it = listeners_.begin(); it != listeners_.end(); ++it) {
      auto& nis = (*it)->nis;
      if (std::find(nis.begin(), nis.end(), sni) == nis.end()) continue;
      nis.erase(std::remove(nis.begin(), nis.end(), sni), nis.end());
      if (nis.empty()) {  // the address's last NI: its acceptor goes, freed between I/O events
        IoThread& io = (*it)->io;
        io.remove((*it)->fd);
        io.retire(std::shared_ptr<Listener>(std::move(*it)));
        listeners_.erase(it);
      }
      break;
    }
    nis_.erase(std::remove(nis_.begin(), nis_.end(), sni), nis_.end());
  }
  // Close every connection on its I/O thread and wait, so all their messages are
  // finalized before the core goes on.
  std::vector<std::shared_ptr<Conn>> conns;
  {
    MutexLock g(sni->conns_mutex);
    conns = sni->conns;
  }
  for (auto& c : conns) c->close(-ESHUTDOWN, HealthStatus::LocalAborted, "shutting down");
  for (auto& io : io_) {
    std::promise<void> done;
    io->post([&done] { done.set_value(); });
    done.get_future().wait();
  }
  TxList pending;
  {
    WriteLock g(sni->mutex);
    for (auto& [nid, peer] : sni->peers) {
      MutexLock pg(peer->mutex);
      while (Tx* t = peer->pending.pop_front()) pending.push_back(t);
    }
    sni->peers.clear();
  }
  fail_txs(pending, -ESHUTDOWN, HealthStatus::LocalAborted);
  for (auto& io : io_) {  // one more turn: retired connections are gone
    std::promise<void> done;
    io->post([&done] { done.set_value(); });
    done.get_future().wait();
  }
  delete sni;
  ni.lnd_data = nullptr;
  stop_if_idle();
}

void SocketLnd::stop_if_idle() {
  {
    MutexLock g(nis_mutex_);
    if (!nis_.empty()) return;
  }
  // The last NI went: the threads go too (the link watch's takes nis_mutex_).
  for (auto& io : io_) io->stop();
  io_.clear();
  links_.reset();
}

void SocketLnd::tick(Clock::time_point now) {
  resume_listeners(now);
  std::vector<SockNi*> nis;
  {
    MutexLock g(nis_mutex_);
    nis = nis_;
  }
  for (SockNi* sni : nis) {
    std::vector<std::shared_ptr<Conn>> conns;
    {
      MutexLock g(sni->conns_mutex);
      conns = sni->conns;
    }
    for (auto& c : conns) c->tick_if_mine(now);    // each I/O thread looks after its own
    if (!io_.front()->on_this_thread()) continue;  // peers are looked after once
    std::vector<std::shared_ptr<SockPeer>> peers;
    {
      ReadLock g(sni->mutex);
      for (auto& [nid, p] : sni->peers) peers.push_back(p);
    }
    for (auto& peer : peers) {
      TxList expired;
      {
        MutexLock g(peer->mutex);
        TxList keep;
        while (Tx* t = peer->pending.pop_front()) (now >= t->deadline ? expired : keep).push_back(t);
        peer->pending = keep;
        bool idle = peer->connecting == 0;
        for (auto& c : peer->conns) idle = idle && c->closed();
        if (!peer->pending.empty() && idle && !peer->userspace && now >= peer->next_connect) launch_connect(*sni, peer);
      }
      if (!expired.empty()) {
        LNET_LOG(Warn, kLogLnd, "no connection to %s within %d s: %zu message(s) fail", peer->nid.to_string().c_str(),
                 sni->timeout.load(std::memory_order_relaxed), expired.size());
        fail_txs(expired, -ETIMEDOUT, HealthStatus::RemoteTimeout);
      }
    }
    reap_peers(*sni, now);
  }
}

int SocketLnd::send(NetInterface& ni, LndMessage& msg) {
  auto* sni = static_cast<SockNi*>(ni.lnd_data);
  if (sni->stopping) return -ESHUTDOWN;
  Nid nid = msg.next_hop;
  if (nid.net() != ni.nid.net()) return -EHOSTUNREACH;
  IpAddr to = IpAddr::of_nid(nid);
  if (to.family() != sni->ip.family()) {
    LNET_LOG(Warn, kLogLnd, "%s cannot reach %s: not an address of its family", ni.nid.to_string().c_str(),
             nid.to_string().c_str());
    return -EHOSTUNREACH;
  }
  bool large_hdr = sni->ip.v6();  // protocol V4 on IPv6: the 96-byte header
  if (!large_hdr && (msg.hdr.src_nid.is_large() || msg.hdr.dest_nid.is_large())) {
    // A classic connection (V3) has no room for a 16-byte address (a message routed
    // between an IPv6 and an IPv4 net, say).
    LNET_LOG(Warn, kLogLnd, "a message from %s to %s cannot go on %s: IPv4 connections carry classic NIDs only",
             msg.hdr.src_nid.to_string().c_str(), msg.hdr.dest_nid.to_string().c_str(), ni.nid.to_string().c_str());
    return -EOPNOTSUPP;
  }
  Tx* tx = tx_alloc();
  tx->ni = &ni;
  tx->msg = &msg;
  MsgHdr mh;
  encode_msg_hdr(mh, std::span<std::uint8_t, kMsgHdrSize>(tx->hdr, kMsgHdrSize));
  if (large_hdr)
    encode_header_large(msg.hdr, std::span<std::uint8_t, kHeaderLargeSize>(tx->hdr + kMsgHdrSize, kHeaderLargeSize));
  else
    encode_header(msg.hdr, std::span<std::uint8_t, kHeaderSize>(tx->hdr + kMsgHdrSize, kHeaderSize));
  tx->hdr_len = kMsgHdrSize + (large_hdr ? kHeaderLargeSize : kHeaderSize);
  tx->total = tx->hdr_len + msg.len;
  tx->deadline = Clock::now() + std::chrono::seconds(sni->timeout.load(std::memory_order_relaxed));
  // The next hop's pid: the target's when it is the target (a userspace client), else
  // the kernel LNet pid.
  Pid pid = nid == msg.target.nid && (msg.target.pid & kPidUserFlag) ? msg.target.pid : kPidLustre;
  auto peer = find_or_add_peer(*sni, nid, pid, to);
  queue_tx(*sni, peer, tx, tx->total >= static_cast<std::uint64_t>(params_.min_bulk));
  return 0;
}

int SocketLnd::recv(NetInterface&, void* lnd_private, LndMessage* msg, bool, const iovec* iov, unsigned niov,
                    std::uint32_t offset, std::uint32_t mlen, std::uint32_t rlen) {
  return static_cast<Conn*>(lnd_private)->recv(msg, iov, niov, offset, mlen, rlen);
}

Status SocketLnd::check_config(const NetConfig& config) const {
  if (Status s = Lnd::check_config(config); !s) return s;  // the keys and ranges of kTunables
  const LndTunables& t = config.lnd_tunables;
  std::string net = config.net.to_string();
  if (long to = t.get_or("timeout", 0); to < 0)
    return Failure{-EINVAL, "LND timeout " + std::to_string(to) + " on " + net};
  return {};
}

long SocketLnd::tunable_in_effect(const NetInterface& ni, std::string_view name, long configured) const {
  const auto* sni = static_cast<const SockNi*>(ni.lnd_data);
  // 0 (automatic) shows the count it came to, as ksocklnd stores it in the NI's tunables.
  if (name == "conns_per_peer") return sni ? sni->conns_per_peer.load(std::memory_order_relaxed) : configured;
  return Lnd::tunable_in_effect(ni, name, configured);
}

int SocketLnd::auto_conns_per_peer(const SockNi& sni) const {
  long mbps = link_speed_mbps(sni.ifname, params_.sysfs_root);
  int cpp = conns_per_peer_for_speed(mbps);
  LNET_LOG(Debug, kLogLnd, "conns_per_peer 0 on %s: link speed %ld Mb/s, %d connection(s) of each bulk type",
           sni.ifname.empty() ? "?" : sni.ifname.c_str(), mbps, cpp);
  return cpp;
}

int SocketLnd::set_tunable(NetInterface& ni, std::string_view name, long value) {
  auto* sni = static_cast<SockNi*>(ni.lnd_data);
  if (!sni) return -EINVAL;
  if (name != "conns_per_peer") return -EOPNOTSUPP;
  if (value < 0 || value > kMaxConnsPerPeer) return -ERANGE;
  // Connections made from now on follow it; those up stay (ksocklnd's rule).
  sni->conns_per_peer.store(value > 0 ? static_cast<int>(value) : auto_conns_per_peer(*sni), std::memory_order_relaxed);
  return 0;
}

std::vector<std::pair<std::string, std::uint64_t>> SocketLnd::counters() const {
  return {{"conns_established", conns_established_.load(std::memory_order_relaxed)},
          {"conns_refused_race", conns_refused_race_.load(std::memory_order_relaxed)},
          {"conns_refused_excess", conns_refused_excess_.load(std::memory_order_relaxed)},
          {"conns_refused_protocol", conns_refused_protocol_.load(std::memory_order_relaxed)},
          {"conns_refused_port", conns_refused_port_.load(std::memory_order_relaxed)},
          {"conns_refused_busy", conns_refused_busy_.load(std::memory_order_relaxed)},
          {"handshakes_evicted", handshakes_evicted_.load(std::memory_order_relaxed)},
          {"peers_reaped", peers_reaped_.load(std::memory_order_relaxed)}};
}

int SocketLnd::timeout(const NetInterface& ni) const {
  const auto* sni = static_cast<const SockNi*>(ni.lnd_data);
  return sni ? sni->timeout.load(std::memory_order_relaxed) : params_.timeout;
}

int SocketLnd::set_timeout(NetInterface& ni, int seconds) {
  auto* sni = static_cast<SockNi*>(ni.lnd_data);
  if (!sni || seconds < 0) return -EINVAL;
  // 0: LNet's derived lnd_timeout, as ksocklnd's sock_timeout=0 takes it.
  if (seconds == 0) seconds = ni.host && ni.host->lnd_timeout() > 0 ? ni.host->lnd_timeout() : 50;
  sni->timeout.store(seconds, std::memory_order_relaxed);
  return 0;
}

namespace {
const struct Registrar {
  Registrar() {
    register_lnd(kSockLnd, [] { return std::unique_ptr<Lnd>(new SocketLnd); });
    register_lnd_tunables(kSockLnd,
                          {{"conns_per_peer", 0, kMaxConnsPerPeer, 0, false,
                            "connections of each bulk type per peer (0: from the link speed)"},
                           {"timeout", 0, 3600, 0, true, "seconds before a stuck connection is closed (lnd_timeout)"},
                           {"tos", -1, 255, -1, false, "IP type of service of its sockets (-1: left alone)"}});
  }
} registrar;
}  // namespace

}  // namespace lnet::sock
