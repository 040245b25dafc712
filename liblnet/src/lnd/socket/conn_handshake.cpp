// Socket LND connections: establishing them. Active: connect, send the acceptor
// request and our HELLO, await the peer's. Passive: read the request and the HELLO,
// answer. Everything here runs on the connection's I/O thread.
#include "conn.hpp"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <lnet/lnd/fragments.hpp>
#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

namespace lnet::sock {

namespace {

void set_socket_options(int fd, const SocketParams& p, int timeout_s, int tos, bool v6) {
  int one = 1;
  if (!p.nagle) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &p.keepalive_idle, sizeof p.keepalive_idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &p.keepalive_intvl, sizeof p.keepalive_intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &p.keepalive_count, sizeof p.keepalive_count);
  // Unacknowledged data older than the LND timeout fails the connection (a cut link is
  // noticed without waiting for TCP's own retransmission limit).
  unsigned user_timeout = static_cast<unsigned>(timeout_s) * 1000U;
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
  if (p.tx_buffer_size > 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &p.tx_buffer_size, sizeof p.tx_buffer_size);
  if (p.rx_buffer_size > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &p.rx_buffer_size, sizeof p.rx_buffer_size);
  if (tos >= 0) {
    if (v6)
      setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos);
    else
      setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
  }
}
}  // namespace

void Conn::connect(SockNi& sni, std::shared_ptr<SockPeer> peer, ConnType type, std::uint32_t version) {
  SocketLnd& lnd = *sni.lnd;
  IoThread& io = lnd.io_for(peer->nid.value());
  io.post([&sni, &lnd, &io, peer, type, version] {
    int fd = socket(sni.ip.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      int err = errno;
      LNET_LOG(Error, kLogLnd, "socket() for %s: %s", peer->nid.to_string().c_str(), std::strerror(err));
      lnd.conn_closed(sni, peer, nullptr, false, true, -err);
      return;
    }
    auto c = std::make_shared<Conn>(lnd, sni, fd, io);
    c->peer_ = peer;
    c->type_ = type;
    c->version_ = version;
    c->state_ = State::Connecting;
    c->active_ = true;
    c->deadline_ = Clock::now() + std::chrono::seconds(sni.timeout.load(std::memory_order_relaxed));
    {
      MutexLock g(sni.conns_mutex);
      sni.conns.push_back(c);
    }
    c->start_connect(peer->ip, lnd.params().port);
  });
}

void Conn::start_connect(const IpAddr& ip, int port) {
  const SocketParams& p = lnd_.params();
  int timeout_s = sni_->timeout.load(std::memory_order_relaxed);
  int tos = static_cast<int>(sni_->ni->config.lnd_tunables.get_or("tos", -1));
  bool v6 = sni_->ip.v6();
  set_socket_options(fd_, p, timeout_s, tos, v6);
  sockaddr_storage local, remote;
  socklen_t len = sni_->ip.to_sockaddr(local, 0);
  ip.to_sockaddr(remote, static_cast<std::uint16_t>(port));
  auto fail_connect = [&](int err) {
    close_now(-err, health_of_errno(err),
              "connect to " + ip.to_string() + " port " + std::to_string(port) + ": " + std::strerror(err));
  };
  bool started = false;
  if (p.privileged_ports && geteuid() == 0) {
    // A privileged source port tells the peer we are a kernel-like LNet (accept=secure).
    // As ksocklnd, with SO_REUSEADDR: a port is shared by connections to different peers
    // (only the four-tuple must be new), so the 512 ports do not bound the peers (a
    // console of 171 nodes ran out of them with one port per connection).
    int one = 1;
    for (int sport = 1023; sport >= 512 && !started; --sport) {
      setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sni_->ip.to_sockaddr(local, static_cast<std::uint16_t>(sport));
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), len) != 0) {
        if (errno == EADDRINUSE || errno == EADDRNOTAVAIL) continue;
        break;  // not a port matter: an unprivileged port, below
      }
      if (::connect(fd_, reinterpret_cast<sockaddr*>(&remote), len) == 0 || errno == EINPROGRESS) {
        started = true;
        break;
      }
      if (errno != EADDRNOTAVAIL && errno != EADDRINUSE) return fail_connect(errno);
      // This port already has a connection to this peer: a fresh socket, the next port.
      int fd = socket(sni_->ip.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) return fail_connect(errno);
      ::close(fd_);
      fd_ = fd;
      set_socket_options(fd_, p, timeout_s, tos, v6);
    }
  }
  if (!started) {
    sni_->ip.to_sockaddr(local, 0);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), len) != 0) {
      close_now(-errno, HealthStatus::LocalError, "bind to " + sni_->ip.to_string() + ": " + std::strerror(errno));
      return;
    }
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&remote), len) != 0 && errno != EINPROGRESS)
      return fail_connect(errno);
  }
  watch(EPOLLOUT | EPOLLIN | EPOLLRDHUP, true);
}

void Conn::connected() {
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    close_now(-err, health_of_errno(err), "connect to " + peer_->nid.to_string() + ": " + std::strerror(err));
    return;
  }
  // Acceptor request (version 2 for a large NID) then our HELLO, in one go.
  std::vector<std::uint8_t> out(peer_->nid.is_large() ? kConnReqV2Size : kConnReqSize);
  if (peer_->nid.is_large())
    encode_connreq_v2(peer_->nid, std::span<std::uint8_t, kConnReqV2Size>(out.data(), kConnReqV2Size));
  else
    encode_connreq(peer_->nid, std::span<std::uint8_t, kConnReqSize>(out.data(), kConnReqSize));
  Hello h;
  h.version = version_;
  h.src_nid = sni_->ni->nid;
  h.dst_nid = peer_->nid;
  h.src_pid = sni_->ni->pid;
  h.dst_pid = peer_->pid;
  h.src_incarnation = sni_->incarnation;
  h.ctype = type_;
  std::vector<std::uint8_t> hello = encode_hello(h);
  out.insert(out.end(), hello.begin(), hello.end());
  state_ = State::AwaitHello;
  hs_stage_ = 0;
  hs_have_ = 0;
  send_raw(out);
  if (!closed()) watch(EPOLLIN | EPOLLRDHUP | (hs_sent_ < hs_out_.size() ? std::uint32_t{EPOLLOUT} : 0U));
}

bool Conn::accept(SocketLnd& lnd, SockNi& sni, int fd, const IpAddr& from, std::uint16_t port) {
  IoThread& io = lnd.io_for(static_cast<std::uint64_t>(fd));
  auto c = std::make_shared<Conn>(lnd, sni, fd, io);
  c->state_ = State::AcceptReq;
  c->peer_ip_ = from;
  c->peer_port_ = port;
  if (!lnd.handshake_begin(c)) return false;  // c goes, and its socket with it
  c->deadline_ = Clock::now() + std::chrono::seconds(lnd.params().accept_timeout);
  set_socket_options(fd, lnd.params(), sni.timeout.load(std::memory_order_relaxed),
                     static_cast<int>(sni.ni->config.lnd_tunables.get_or("tos", -1)), sni.ip.v6());
  {
    MutexLock g(sni.conns_mutex);
    sni.conns.push_back(c);
  }
  c->watch(EPOLLIN | EPOLLRDHUP, true);
  return true;
}

void Conn::rehome(SockNi& to) {
  auto self = shared_from_this();
  {
    MutexLock g(sni_->conns_mutex);
    auto& v = sni_->conns;
    v.erase(std::remove(v.begin(), v.end(), self), v.end());
  }
  {
    MutexLock g(to.conns_mutex);
    to.conns.push_back(self);
  }
  sni_ = &to;
  set_socket_options(fd_, lnd_.params(), to.timeout.load(std::memory_order_relaxed),
                     static_cast<int>(to.ni->config.lnd_tunables.get_or("tos", -1)), to.ip.v6());
}

void Conn::send_raw(const std::vector<std::uint8_t>& bytes) {
  if (hs_sent_ >= hs_out_.size()) {
    hs_out_ = bytes;
    hs_sent_ = 0;
  } else {
    hs_out_.insert(hs_out_.end(), bytes.begin(), bytes.end());
  }
  while (hs_sent_ < hs_out_.size()) {
    ssize_t n = ::send(fd_, hs_out_.data() + hs_sent_, hs_out_.size() - hs_sent_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;  // the rest goes on EPOLLOUT
      close_now(-errno, health_of_errno(errno), std::string("handshake send: ") + std::strerror(errno));
      return;
    }
    hs_sent_ += static_cast<std::size_t>(n);
  }
}

bool Conn::read_exact(std::size_t need) {
  if (hs_in_.size() < need) hs_in_.resize(need);
  while (hs_have_ < need) {
    ssize_t n = ::recv(fd_, hs_in_.data() + hs_have_, need - hs_have_, MSG_DONTWAIT);
    if (n > 0) {
      hs_have_ += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return false;
    int err = n == 0 ? ECONNRESET : errno;
    if (active_ && (err == ECONNRESET || err == EPIPE)) {
      refused_in_handshake();
      return false;
    }
    close_now(-err, health_of_errno(err),
              std::string("handshake with ") + (peer_ip_.any() && peer_ ? peer_->ip : peer_ip_).to_string() + ": " +
                  (n == 0 ? "closed by peer" : std::strerror(err)));
    return false;
  }
  return true;
}

// The peer we dialled closed the connection before answering our HELLO: an LNet
// acceptor does so for a source port it does not take (accept=secure, the kernel's
// default, takes only privileged ones) or a NID that is none of its NIs. Named, since a
// kernel peer says nothing to us.
void Conn::refused_in_handshake() {
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  int port = 0;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &len) == 0)
    port = ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&local)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&local)->sin_port);
  std::string nid = peer_ ? peer_->nid.to_string() : peer_ip_.to_string();
  std::string why = nid + " closed the connection without answering our HELLO: ";
  if (port > 1023)
    why += "it refuses our source port " + std::to_string(port) +
           " if it accepts only privileged ports (accept=secure, the kernel's default: run as root or with "
           "CAP_NET_BIND_SERVICE), or it has no NI " +
           nid;
  else
    why += "it has no NI " + nid + " (its NI on that address is on another net?)";
  close_now(-ECONNREFUSED, HealthStatus::RemoteError, why);
}

// Our acceptor magic and version: the answer to a probe or to a request of another version.
void Conn::send_acceptor_version() {
  std::vector<std::uint8_t> reply(kAcceptorVersionSize);
  encode_acceptor_version(std::span<std::uint8_t, kAcceptorVersionSize>(reply.data(), kAcceptorVersionSize));
  send_raw(reply);
}

// The acceptor request that opens a passive connection: its first word (a probe, a
// request, or garbage), then the request naming the NID the peer wants. True when read
// and accepted; false while more bytes are needed or after the connection was closed.
bool Conn::read_accept_request() {
  if (hs_stage_ == 0) {
    if (!read_exact(4)) return false;
    bool flip = false;
    switch (classify_first_word(std::span<const std::uint8_t, 4>(hs_in_.data(), 4), &flip)) {
      case FirstWord::Acceptor:
        flip_ = flip;
        hs_stage_ = 1;
        break;
      case FirstWord::Proto: {
        // A version probe: answer with our acceptor version and hang up.
        send_acceptor_version();
        close_now(0, HealthStatus::Ok, "answered a version probe from " + peer_ip_.to_string());
        return false;
      }
      case FirstWord::TcpV1:
        close_now(-EPROTO, HealthStatus::Ok,
                  "refused " + peer_ip_.to_string() + ": socket protocol V1 without an acceptor request");
        return false;
      case FirstWord::Unknown:
        close_now(-EPROTO, HealthStatus::Ok, "refused " + peer_ip_.to_string() + ": not an LNet acceptor request");
        return false;
    }
  }
  // Magic and version, then the rest of the version's request: 16 bytes for version 1, 28
  // for version 2 (a large NID); another version is answered with ours and refused.
  if (!read_exact(8)) return false;
  std::size_t size = connreq_size(std::span<const std::uint8_t, 8>(hs_in_.data(), 8), flip_);
  if (size == 0) size = kConnReqSize;  // decode_connreq names the version
  if (!read_exact(size)) return false;
  auto req = size == kConnReqV2Size
                 ? decode_connreq_v2(std::span<const std::uint8_t, kConnReqV2Size>(hs_in_.data(), size), flip_)
                 : decode_connreq(std::span<const std::uint8_t, kConnReqSize>(hs_in_.data(), kConnReqSize), flip_);
  if (!req) {
    if (req.code() == -EPROTONOSUPPORT) {
      send_acceptor_version();
    }
    lnd_.refused_protocol();
    close_now(-EPROTO, HealthStatus::Ok, "refused " + peer_ip_.to_string() + ": " + req.message());
    return false;
  }
  if (!accept_target(req->target)) return false;
  state_ = State::AcceptHello;
  hs_stage_ = 0;
  hs_have_ = 0;
  return true;
}

bool Conn::accept_target(Nid target) {
  if (target == sni_->ni->nid) return true;
  // Another net on the same address (one acceptor serves them all): the connection
  // moves to that NI. No NI has the NID: refused, as LNet's acceptor refuses it.
  SockNi* other = lnd_.ni_for_accept(sni_->ip, target);
  if (!other) {
    close_now(-EPERM, HealthStatus::Ok,
              "refused " + peer_ip_.to_string() + ", which asked for " + target.to_string() + ": no NI of ours is " +
                  target.to_string() + " (this address is " + sni_->ni->nid.to_string() +
                  ": is the peer configured for another net?)");
    return false;
  }
  rehome(*other);
  return true;
}

void Conn::handshake_read() {
  if (state_ == State::AcceptReq && !read_accept_request()) return;
  // AcceptHello / AwaitHello: prefix, body, IPs.
  if (hs_stage_ == 0) {
    if (!read_exact(kHelloPrefixSize)) return;
    auto p = decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize>(hs_in_.data(), kHelloPrefixSize));
    if (!p) {
      lnd_.refused_protocol();
      close_now(-EPROTO, HealthStatus::RemoteError, "bad HELLO from " + peer_ip_.to_string() + ": " + p.message());
      return;
    }
    hello_prefix_ = *p;
    hs_stage_ = 1;
  }
  if (hs_stage_ == 1) {
    std::size_t body = hello_body_size(hello_prefix_);
    if (!read_exact(kHelloPrefixSize + body)) return;
    auto h = decode_hello_body(hello_prefix_, std::span(hs_in_.data() + kHelloPrefixSize, body), &hello_nips_);
    if (!h) {
      lnd_.refused_protocol();
      close_now(-EPROTO, HealthStatus::RemoteError, "bad HELLO from " + peer_ip_.to_string() + ": " + h.message());
      return;
    }
    hello_ = std::move(*h);
    hs_stage_ = 2;
  }
  std::size_t full = kHelloPrefixSize + hello_body_size(hello_prefix_) + 4 * hello_nips_;
  if (!read_exact(full)) return;
  decode_hello_ips(hello_prefix_, std::span(hs_in_.data() + full - 4 * hello_nips_, 4 * hello_nips_), hello_);
  on_hello();
}

void Conn::on_hello() {
  if (state_ == State::AwaitHello)
    on_hello_reply(hello_);
  else
    on_hello_request(hello_);
}

// Active side: the peer's answer to our HELLO.
void Conn::on_hello_reply(const Hello& h) {
  if (h.version != version_) {
    // The peer speaks another version: next time we offer that one (one of our
    // address family's: V4 on IPv6, V2 or V3 on IPv4).
    if (sni_->ip.v6() ? h.version == kProtoV4 : h.version == kProtoV2 || h.version == kProtoV3) {
      MutexLock g(peer_->mutex);  // launch_connect reads it under the lock
      peer_->version = h.version;
    }
    close_now(-EPROTO, HealthStatus::Ok,
              peer_->nid.to_string() + " answers with protocol V" + std::to_string(h.version) + ", retrying");
    return;
  }
  if (h.ctype == ConnType::None) {
    close_now(-EALREADY, HealthStatus::Ok,
              peer_->nid.to_string() + " refused a " + conn_type_name(type_) +
                  " connection (a race, or it has as many of that type as its conns_per_peer)");
    return;
  }
  if (!hello_fits(h)) return;
  if (h.src_nid != peer_->nid) {
    close_now(-EPROTO, HealthStatus::RemoteError,
              "connected to " + peer_->nid.to_string() + " but it claimed to be " + h.src_nid.to_string());
    return;
  }
  if (h.ctype != inverse(type_)) {
    close_now(
        -EPROTO, HealthStatus::RemoteError,
        peer_->nid.to_string() + " answered a " + conn_type_name(type_) + " request with " + conn_type_name(h.ctype));
    return;
  }
  peer_incarnation_ = h.src_incarnation;
  finish_handshake(peer_);
}

// Passive side: a connecting peer's HELLO, answered with ours.
void Conn::on_hello_request(const Hello& h) {
  if (h.version == kProtoV1) {
    close_now(-EPROTO, HealthStatus::Ok, "refused " + peer_ip_.to_string() + ": socket protocol V1 is not supported");
    return;
  }
  Hello reply;
  reply.src_nid = sni_->ni->nid;
  reply.src_pid = sni_->ni->pid;
  reply.src_incarnation = sni_->incarnation;
  std::uint32_t ours = sni_->proto(true);
  if ((h.version == kProtoV4) != (ours == kProtoV4)) {
    // V4 (large NIDs) belongs to IPv6 connections, V2/V3 to IPv4: the peer is answered
    // in ours with "no connection", and falls back to it, as ksocklnd does.
    reply.version = ours;
    reply.ctype = ConnType::None;
    lnd_.refused_protocol();
    send_raw(encode_hello(reply));
    close_now(-EPROTO, HealthStatus::Ok,
              "refused " + peer_ip_.to_string() + ": protocol V" + std::to_string(h.version) + " offered, we speak V" +
                  std::to_string(ours) + " on " + (sni_->ip.v6() ? "IPv6" : "IPv4"));
    return;
  }
  if (!hello_fits(h)) return;
  version_ = h.version;
  flip_ = hello_prefix_.flip;
  Nid nid = h.src_nid;
  Pid pid = h.src_pid;
  bool userspace = peer_port_ > 1023;
  if (userspace) {
    // Not a privileged port: the identity is ours to give (address and port), as the
    // kernel does for userspace peers.
    nid = peer_ip_.nid(sni_->ni->nid.net());
    pid = peer_port_ | kPidUserFlag;
  } else if (nid.net() != sni_->ni->nid.net()) {
    close_now(-EPROTO, HealthStatus::Ok,
              "refused " + peer_ip_.to_string() + ": HELLO from " + nid.to_string() + " is not on " +
                  sni_->ni->nid.net().to_string());
    return;
  }
  if (h.ctype == ConnType::None) {
    close_now(-EPROTO, HealthStatus::Ok, "refused " + nid.to_string() + ": HELLO without a connection type");
    return;
  }
  type_ = inverse(h.ctype);
  identified_ = true;
  auto peer = lnd_.find_or_add_peer(*sni_, nid, userspace ? pid : kPidLustre, peer_ip_);
  reply.version = version_;
  reply.dst_nid = nid;
  reply.dst_pid = pid;
  answer_hello(h, reply, std::move(peer));
}

// A V4 HELLO names IPv6 NIDs (16-byte addresses), a V2/V3 one classic NIDs: a source of
// another size than the connection's family is refused (counted with the bad HELLOs).
bool Conn::hello_fits(const Hello& h) {
  bool large = h.src_nid.is_large();
  if (large == sni_->ip.v6()) return true;
  lnd_.refused_protocol();
  close_now(-EPROTO, HealthStatus::RemoteError,
            "bad HELLO from " + peer_ip_.to_string() + ": V" + std::to_string(h.version) + " HELLO from " +
                h.src_nid.to_string() + " on an " + (sni_->ip.v6() ? "IPv6" : "IPv4") + " connection");
  return false;
}

// Passive side: our answer to a HELLO that passed its checks, taking the connection or
// refusing it with type NONE.
void Conn::answer_hello(const Hello& h, Hello& reply, std::shared_ptr<SockPeer> peer) {
  const Nid nid = reply.dst_nid;
  Refusal why;
  while ((why = lnd_.refuse_incoming(*sni_, *peer, type_, h.src_incarnation)) == Refusal::Gone)
    peer = lnd_.find_or_add_peer(*sni_, peer->nid, peer->pid, peer_ip_);
  if (why != Refusal::None) {
    // As ksocklnd: a HELLO of type NONE tells the peer to use the connections it has.
    reply.ctype = ConnType::None;
    send_raw(encode_hello(reply));
    peer_.reset();
    close_now(-EALREADY, HealthStatus::Ok,
              "refused a " + std::string(conn_type_name(h.ctype)) + " connection from " + nid.to_string() +
                  (why == Refusal::Race ? " (connection race: we are connecting to it)"
                                        : " (excess: it has as many of that type as conns_per_peer allows)"));
    return;
  }
  reply.ctype = type_;
  send_raw(encode_hello(reply));
  if (closed()) {
    lnd_.release_incoming(*peer, type_);  // the place refuse_incoming kept for it
    return;
  }
  peer_incarnation_ = h.src_incarnation;
  finish_handshake(std::move(peer));
}

void Conn::finish_handshake(std::shared_ptr<SockPeer> peer) {
  peer_ = std::move(peer);
  make_rx_buffer();
  state_ = State::Established;
  if (hs_counted_.exchange(false)) lnd_.handshake_end(peer_ip_);
  last_rx_ = last_tx_progress_ = Clock::now();
  LNET_LOG(Info, kLogLnd, "connected %s %s <-> %s (protocol V%u)", conn_type_name(type_),
           sni_->ni->nid.to_string().c_str(), peer_->nid.to_string().c_str(), version_);
  set_events();
  lnd_.conn_established(*sni_, peer_, shared_from_this());
  // Bytes that followed the HELLO in the same read are not lost: the handshake reads
  // exactly what it needs, so the receive buffer starts empty.
  process_rx();
}

}  // namespace lnet::sock
