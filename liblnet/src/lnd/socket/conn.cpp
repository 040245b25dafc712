// Socket LND connections: handshake, receive state machine, send queue.
#include "lnd/socket/conn.hpp"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <lnet/log.hpp>

#include <lnet/byteorder.hpp>

namespace lnet::sock {

namespace {

constexpr std::size_t kRxBufSize = 64 * 1024;
constexpr int kMaxIov = 64;
constexpr int kMaxMsgsPerWake = 64;

std::string ip_string(std::uint32_t ip) {
  in_addr a{htonl(ip)};
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

// Fills `out` with the fragments covering [off, off + len) of (iov, niov).
int slice(const iovec* iov, unsigned niov, std::uint64_t off, std::uint64_t len, iovec* out, int max) {
  int n = 0;
  unsigned i = 0;
  while (i < niov && off >= iov[i].iov_len) off -= iov[i++].iov_len;
  while (i < niov && len > 0 && n < max) {
    std::size_t take = std::min<std::uint64_t>(iov[i].iov_len - off, len);
    out[n++] = iovec{static_cast<char*>(iov[i].iov_base) + off, take};
    len -= take;
    off = 0;
    ++i;
  }
  return n;
}

void set_socket_options(int fd, const SocketParams& p, int timeout_s, int tos) {
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
  if (tos >= 0) setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
}

}  // namespace

Conn::Conn(SocketLnd& lnd, SockNi& sni, int fd, IoThread& io) : lnd_(lnd), sni_(sni), fd_(fd), io_(io) {
  rxbuf_.resize(kRxBufSize);
  last_rx_ = last_tx_progress_ = last_keepalive_ = Clock::now();
}

Conn::~Conn() {
  if (fd_ >= 0) ::close(fd_);
}

// ---------------------------------------------------------------- establishing

void Conn::connect(SockNi& sni, std::shared_ptr<SockPeer> peer, ConnType type, std::uint32_t version) {
  SocketLnd& lnd = *sni.lnd;
  IoThread& io = lnd.io_for(peer->nid.value());
  io.post([&sni, &lnd, &io, peer, type, version] {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
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
    c->deadline_ = Clock::now() + std::chrono::seconds(sni.timeout);
    {
      std::lock_guard g(sni.conns_mutex);
      sni.conns.push_back(c);
    }
    c->start_connect(peer->ip, lnd.params().port);
  });
}

void Conn::start_connect(std::uint32_t ip, int port) {
  const SocketParams& p = lnd_.params();
  set_socket_options(fd_, p, sni_.timeout, sni_.ni->config.lnd_tunables.tos);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(sni_.ip);
  bool bound = false;
  if (p.privileged_ports && geteuid() == 0) {
    // A privileged source port tells the peer we are a kernel-like LNet (accept=secure).
    for (int sport = 1023; sport >= 512 && !bound; --sport) {
      local.sin_port = htons(static_cast<std::uint16_t>(sport));
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0) {
        bound = true;
      } else if (errno != EADDRINUSE && errno != EADDRNOTAVAIL) {
        break;
      }
    }
  }
  if (!bound) {
    local.sin_port = 0;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
      close_now(-errno, HealthStatus::LocalError, "bind to " + ip_string(sni_.ip) + ": " + std::strerror(errno));
      return;
    }
  }
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_addr.s_addr = htonl(ip);
  remote.sin_port = htons(static_cast<std::uint16_t>(port));
  int rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&remote), sizeof remote);
  if (rc != 0 && errno != EINPROGRESS) {
    int err = errno;
    close_now(-err, health_of_errno(err),
              "connect to " + ip_string(ip) + ":" + std::to_string(port) + ": " + std::strerror(err));
    return;
  }
  io_.add(fd_, this, EPOLLOUT | EPOLLIN | EPOLLRDHUP);
}

void Conn::connected() {
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    close_now(-err, health_of_errno(err), "connect to " + peer_->nid.to_string() + ": " + std::strerror(err));
    return;
  }
  // Acceptor request then our HELLO, in one go.
  std::vector<std::uint8_t> out(kConnReqSize);
  encode_connreq(peer_->nid, std::span<std::uint8_t, kConnReqSize>(out.data(), kConnReqSize));
  Hello h;
  h.version = version_;
  h.src_nid = sni_.ni->nid;
  h.dst_nid = peer_->nid;
  h.src_pid = sni_.ni->pid;
  h.dst_pid = peer_->pid;
  h.src_incarnation = sni_.incarnation;
  h.ctype = type_;
  std::vector<std::uint8_t> hello = encode_hello(h);
  out.insert(out.end(), hello.begin(), hello.end());
  state_ = State::AwaitHello;
  hs_stage_ = 0;
  hs_have_ = 0;
  send_raw(out);
  if (!closed())
    io_.modify(fd_, this, EPOLLIN | EPOLLRDHUP | (hs_sent_ < hs_out_.size() ? std::uint32_t{EPOLLOUT} : 0U));
}

void Conn::accept(SocketLnd& lnd, SockNi& sni, int fd, const sockaddr_in& from) {
  IoThread& io = lnd.io_for(static_cast<std::uint64_t>(fd));
  auto c = std::make_shared<Conn>(lnd, sni, fd, io);
  c->state_ = State::AcceptReq;
  c->peer_ip_ = ntohl(from.sin_addr.s_addr);
  c->peer_port_ = ntohs(from.sin_port);
  c->deadline_ = Clock::now() + std::chrono::seconds(lnd.params().accept_timeout);
  set_socket_options(fd, lnd.params(), sni.timeout, sni.ni->config.lnd_tunables.tos);
  {
    std::lock_guard g(sni.conns_mutex);
    sni.conns.push_back(c);
  }
  io.add(fd, c.get(), EPOLLIN | EPOLLRDHUP);
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
    close_now(-err, health_of_errno(err),
              std::string("handshake with ") + ip_string(peer_ip_ ? peer_ip_ : (peer_ ? peer_->ip : 0)) + ": " +
                  (n == 0 ? "closed by peer" : std::strerror(err)));
    return false;
  }
  return true;
}

void Conn::handshake_read() {
  if (state_ == State::AcceptReq) {
    if (hs_stage_ == 0) {
      if (!read_exact(4)) return;
      bool flip = false;
      switch (classify_first_word(std::span<const std::uint8_t, 4>(hs_in_.data(), 4), &flip)) {
        case FirstWord::Acceptor:
          flip_ = flip;
          hs_stage_ = 1;
          break;
        case FirstWord::Proto: {
          // A version probe: answer with our acceptor version and hang up.
          std::vector<std::uint8_t> reply(8);
          wire::put_le32(reply.data(), kAcceptorMagic);
          wire::put_le32(reply.data() + 4, kAcceptorVersion);
          send_raw(reply);
          close_now(0, HealthStatus::Ok, "answered a version probe from " + ip_string(peer_ip_));
          return;
        }
        case FirstWord::TcpV1:
          close_now(-EPROTO, HealthStatus::Ok,
                    "refused " + ip_string(peer_ip_) + ": socket protocol V1 without an acceptor request");
          return;
        case FirstWord::Unknown:
          close_now(-EPROTO, HealthStatus::Ok, "refused " + ip_string(peer_ip_) + ": not an LNet acceptor request");
          return;
      }
    }
    if (!read_exact(kConnReqSize)) return;
    auto req = decode_connreq(std::span<const std::uint8_t, kConnReqSize>(hs_in_.data(), kConnReqSize), flip_);
    if (!req) {
      if (req.code() == -EPROTONOSUPPORT) {
        std::vector<std::uint8_t> reply(8);
        wire::put_le32(reply.data(), kAcceptorMagic);
        wire::put_le32(reply.data() + 4, kAcceptorVersion);
        send_raw(reply);
      }
      close_now(-EPROTO, HealthStatus::Ok, "refused " + ip_string(peer_ip_) + ": " + req.message());
      return;
    }
    if (req->target != sni_.ni->nid) {
      close_now(-EPERM, HealthStatus::Ok,
                "refused " + ip_string(peer_ip_) + ": it asked for " + req->target.to_string() + ", this is " +
                    sni_.ni->nid.to_string());
      return;
    }
    state_ = State::AcceptHello;
    hs_stage_ = 0;
    hs_have_ = 0;
  }
  // AcceptHello / AwaitHello: prefix, body, IPs.
  if (hs_stage_ == 0) {
    if (!read_exact(kHelloPrefixSize)) return;
    auto p = decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize>(hs_in_.data(), kHelloPrefixSize));
    if (!p) {
      close_now(-EPROTO, HealthStatus::RemoteError, "bad HELLO from " + ip_string(peer_ip_) + ": " + p.message());
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
      close_now(-EPROTO, HealthStatus::RemoteError, "bad HELLO from " + ip_string(peer_ip_) + ": " + h.message());
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
  const Hello& h = hello_;
  if (state_ == State::AwaitHello) {
    if (h.version != version_) {
      // The peer speaks another version: next time we offer that one.
      if (h.version == kProtoV2 || h.version == kProtoV3) peer_->version = h.version;
      close_now(-EPROTO, HealthStatus::Ok,
                peer_->nid.to_string() + " answers with protocol V" + std::to_string(h.version) + ", retrying");
      return;
    }
    if (h.ctype == ConnType::None) {
      close_now(-EALREADY, HealthStatus::Ok,
                peer_->nid.to_string() + " refused a " + conn_type_name(type_) + " connection (race or duplicate)");
      return;
    }
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
    return;
  }

  // Passive side.
  if (h.version == kProtoV1) {
    close_now(-EPROTO, HealthStatus::Ok, "refused " + ip_string(peer_ip_) + ": socket protocol V1 is not supported");
    return;
  }
  Hello reply;
  reply.src_nid = sni_.ni->nid;
  reply.src_pid = sni_.ni->pid;
  reply.src_incarnation = sni_.incarnation;
  if (h.version == kProtoV4) {
    // Large-NID protocol: answer in ours with "no connection" so the peer falls back.
    reply.version = kProtoV3;
    reply.ctype = ConnType::None;
    send_raw(encode_hello(reply));
    close_now(-EPROTO, HealthStatus::Ok, "refused " + ip_string(peer_ip_) + ": protocol V4 offered, we speak V3");
    return;
  }
  version_ = h.version;
  flip_ = hello_prefix_.flip;
  Nid nid = h.src_nid;
  Pid pid = h.src_pid;
  bool userspace = peer_port_ > 1023;
  if (userspace) {
    // Not a privileged port: the identity is ours to give (address and port), as the
    // kernel does for userspace peers.
    nid = Nid::make(sni_.ni->nid.net(), peer_ip_);
    pid = peer_port_ | kPidUserFlag;
  } else if (nid.net() != sni_.ni->nid.net()) {
    close_now(-EPROTO, HealthStatus::Ok,
              "refused " + ip_string(peer_ip_) + ": HELLO from " + nid.to_string() + " is not on " +
                  sni_.ni->nid.net().to_string());
    return;
  }
  if (h.ctype == ConnType::None) {
    close_now(-EPROTO, HealthStatus::Ok, "refused " + nid.to_string() + ": HELLO without a connection type");
    return;
  }
  type_ = inverse(h.ctype);
  auto peer = lnd_.find_or_add_peer(sni_, nid, userspace ? pid : kPidLustre, peer_ip_);
  reply.version = version_;
  reply.dst_nid = nid;
  reply.dst_pid = pid;
  if (lnd_.refuse_incoming(sni_, *peer, type_, h.src_incarnation)) {
    reply.ctype = ConnType::None;
    send_raw(encode_hello(reply));
    peer_.reset();
    close_now(-EALREADY, HealthStatus::Ok,
              "refused a " + std::string(conn_type_name(h.ctype)) + " connection from " + nid.to_string() +
                  " (we are connecting, or have one)");
    return;
  }
  reply.ctype = type_;
  send_raw(encode_hello(reply));
  if (closed()) return;
  peer_incarnation_ = h.src_incarnation;
  finish_handshake(peer);
}

void Conn::finish_handshake(std::shared_ptr<SockPeer> peer) {
  peer_ = std::move(peer);
  state_ = State::Established;
  last_rx_ = last_tx_progress_ = Clock::now();
  LNET_LOG(Info, kLogLnd, "connected %s %s <-> %s (protocol V%u)", conn_type_name(type_),
           sni_.ni->nid.to_string().c_str(), peer_->nid.to_string().c_str(), version_);
  set_events();
  lnd_.conn_established(sni_, peer_, shared_from_this());
  // Bytes that followed the HELLO in the same read are not lost: the handshake reads
  // exactly what it needs, so the receive buffer starts empty.
  process_rx();
}

// ---------------------------------------------------------------- events

void Conn::on_events(std::uint32_t ev) {
  if (closed()) return;
  switch (state_) {
    case State::Connecting:
      if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)) connected();
      return;
    case State::AwaitHello:
    case State::AcceptReq:
    case State::AcceptHello:
      if ((ev & EPOLLOUT) && hs_sent_ < hs_out_.size()) {
        send_raw({});
        if (!closed() && hs_sent_ >= hs_out_.size()) io_.modify(fd_, this, EPOLLIN | EPOLLRDHUP);
      }
      if (!closed() && (ev & (EPOLLIN | EPOLLHUP | EPOLLRDHUP | EPOLLERR))) handshake_read();
      return;
    case State::Established: break;
    case State::Closed: return;
  }
  if (ev & EPOLLERR) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == 0) err = EIO;
    close_now(-err, health_of_errno(err), std::string("socket error: ") + std::strerror(err));
    return;
  }
  if (ev & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) process_rx();
  if (!closed() && (ev & EPOLLOUT)) {
    TxList done;
    {
      std::unique_lock lk(tx_mutex_);
      if (!closed_.load()) write_some(lk, done);
    }
    while (Tx* t = done.pop_front()) {
      if (t->msg) sni_.ni->host->finalize(t->msg, 0);
      tx_free(t);
    }
  }
}

void Conn::set_events() {
  if (closed()) return;
  std::uint32_t ev = EPOLLRDHUP;
  if (rx_ != Rx::ParseWait) ev |= EPOLLIN;
  if (want_write_) ev |= EPOLLOUT;
  io_.modify(fd_, this, ev);
}

void Conn::want_write(bool on) {
  // Called with tx_mutex_ held. The I/O thread owns the epoll interest set.
  if (want_write_ == on) return;
  want_write_ = on;
  if (io_.on_this_thread()) {
    set_events();
  } else {
    auto self = shared_from_this();
    io_.post([self] { self->set_events(); });
  }
}

// ---------------------------------------------------------------- receiving

bool Conn::fill(std::size_t need) {
  while (rx_end_ - rx_beg_ < need) {
    if (rx_beg_ > 0 && rxbuf_.size() - rx_end_ < need) {
      std::memmove(rxbuf_.data(), rxbuf_.data() + rx_beg_, rx_end_ - rx_beg_);
      rx_end_ -= rx_beg_;
      rx_beg_ = 0;
    }
    ssize_t n = ::recv(fd_, rxbuf_.data() + rx_end_, rxbuf_.size() - rx_end_, MSG_DONTWAIT);
    if (n > 0) {
      rx_end_ += static_cast<std::size_t>(n);
      last_rx_ = Clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return false;
    int err = n == 0 ? ECONNRESET : errno;
    close_now(-err, health_of_errno(err), n == 0 ? "closed by peer" : std::string("recv: ") + std::strerror(err));
    return false;
  }
  return true;
}

void Conn::process_rx() {
  for (int handled = 0; handled < kMaxMsgsPerWake && !closed(); ++handled) {
    if (rx_ == Rx::Hdr) {
      if (!fill(kMsgHdrSize)) return;
      if (decode_msg_hdr(std::span<const std::uint8_t, kMsgHdrSize>(rxbuf_.data() + rx_beg_, kMsgHdrSize), flip_,
                         rx_msghdr_) != 0) {
        close_now(-EPROTO, HealthStatus::RemoteError,
                  "bad message type 0x" + std::to_string(rx_msghdr_.type) + " from " + peer_->nid.to_string());
        return;
      }
      if (rx_msghdr_.csum != 0 && version_ == kProtoV2) {
        std::uint8_t copy[kMsgHdrSize];
        std::memcpy(copy, rxbuf_.data() + rx_beg_, kMsgHdrSize);
        std::memset(copy + 4, 0, 4);
        rx_crc_ = crc32_le(~0U, copy, kMsgHdrSize);
      }
      rx_beg_ += kMsgHdrSize;
      bool keepalive = rx_msghdr_.zc_req == 0 && rx_msghdr_.zc_ack == kKeepalivePing;
      if (rx_msghdr_.zc_ack != 0 && !keepalive) {
        // We never ask for zero-copy ACKs, so an ACK of a cookie is one we don't know.
        close_now(-EPROTO, HealthStatus::RemoteError,
                  "unknown zero-copy cookie " + std::to_string(rx_msghdr_.zc_ack) + " from " + peer_->nid.to_string());
        return;
      }
      if (rx_msghdr_.type == kMsgNoop) continue;
      rx_ = Rx::LnetHdr;
    }
    if (rx_ == Rx::LnetHdr) {
      if (!fill(kHeaderSize)) return;
      if (decode_header(std::span(rxbuf_.data() + rx_beg_, kHeaderSize), rx_hdr_) != 0) {
        close_now(-EPROTO, HealthStatus::RemoteError, "bad LNet header from " + peer_->nid.to_string());
        return;
      }
      if (rx_msghdr_.csum != 0 && version_ == kProtoV2)
        rx_crc_ = crc32_le(rx_crc_, rxbuf_.data() + rx_beg_, kHeaderSize);
      rx_beg_ += kHeaderSize;
      {
        std::lock_guard g(rx_mutex_);
        rx_recv_called_ = false;
        rx_msg_ = nullptr;
      }
      {
        std::lock_guard g(rx_mutex_);
        rx_hold_ = shared_from_this();
      }
      int rc = sni_.ni->host->parse(*sni_.ni, rx_hdr_, peer_->nid, this, false);
      if (rc < 0) {
        {
          std::lock_guard g(rx_mutex_);
          rx_hold_.reset();
        }
        close_now(rc, HealthStatus::RemoteError,
                  "dropping the connection to " + peer_->nid.to_string() + " after a bad " +
                      msg_type_name(rx_hdr_.type) + ": " + errno_string(rc));
        return;
      }
      {
        std::lock_guard g(rx_mutex_);
        if (!rx_recv_called_) {
          rx_ = Rx::ParseWait;  // the core keeps it (a lazy portal) until it can take the payload
        } else {
          rx_ = Rx::Payload;
        }
      }
      if (rx_ == Rx::ParseWait) {
        set_events();
        return;
      }
    }
    if (rx_ == Rx::ParseWait) return;
    if (rx_ == Rx::Payload) {
      if (!rx_payload()) return;
      rx_done();
    }
  }
}

bool Conn::rx_payload() {
  bool csum = rx_msghdr_.csum != 0 && version_ == kProtoV2;
  while (rx_done_ < rx_rlen_) {
    std::size_t avail = rx_end_ - rx_beg_;
    std::uint32_t left = rx_rlen_ - rx_done_;
    if (avail > 0) {
      std::uint32_t n = static_cast<std::uint32_t>(std::min<std::size_t>(avail, left));
      const std::uint8_t* src = rxbuf_.data() + rx_beg_;
      if (rx_done_ < rx_mlen_) {
        std::uint32_t keep = std::min(n, rx_mlen_ - rx_done_);
        copy_to_fragments(rx_iov_, rx_niov_, rx_offset_ + rx_done_, src, keep);
      }
      if (csum) rx_crc_ = crc32_le(rx_crc_, src, n);
      rx_beg_ += n;
      rx_done_ += n;
      continue;
    }
    rx_beg_ = rx_end_ = 0;
    if (rx_done_ < rx_mlen_ && !csum && rx_mlen_ - rx_done_ >= 16384) {
      // Large payload: straight from the socket into the MD.
      iovec v[kMaxIov];
      int nv = slice(rx_iov_, rx_niov_, rx_offset_ + rx_done_, rx_mlen_ - rx_done_, v, kMaxIov);
      msghdr mh{};
      mh.msg_iov = v;
      mh.msg_iovlen = static_cast<std::size_t>(nv);
      ssize_t n = ::recvmsg(fd_, &mh, MSG_DONTWAIT);
      if (n > 0) {
        rx_done_ += static_cast<std::uint32_t>(n);
        last_rx_ = Clock::now();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return false;
      int err = n == 0 ? ECONNRESET : errno;
      close_now(-err, health_of_errno(err), n == 0 ? "closed by peer" : std::string("recv: ") + std::strerror(err));
      return false;
    }
    if (!fill(1)) return false;
  }
  return true;
}

void Conn::rx_done() {
  if (rx_msghdr_.csum != 0 && version_ == kProtoV2 && rx_crc_ != rx_msghdr_.csum) {
    close_now(-EIO, HealthStatus::RemoteError, "checksum mismatch on a message from " + peer_->nid.to_string());
    return;
  }
  if (rx_msghdr_.zc_req != 0) {
    // The sender keeps its buffer until we say we have it.
    Tx* ack = tx_alloc();
    MsgHdr h;
    h.type = kMsgNoop;
    h.zc_ack = rx_msghdr_.zc_req;
    encode_msg_hdr(h, std::span<std::uint8_t, kMsgHdrSize>(ack->hdr, kMsgHdrSize));
    ack->hdr_len = kMsgHdrSize;
    ack->total = kMsgHdrSize;
    ack->ni = sni_.ni;
    ack->deadline = Clock::now() + std::chrono::seconds(sni_.timeout);
    enqueue(ack);
  }
  LndMessage* m;
  std::shared_ptr<Conn> hold;
  {
    std::lock_guard g(rx_mutex_);
    m = rx_msg_;
    rx_msg_ = nullptr;
    rx_ = Rx::Hdr;
    hold = std::move(rx_hold_);
  }
  if (m) sni_.ni->host->finalize(m, 0);
}

int Conn::recv(LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t mlen,
               std::uint32_t rlen) {
  bool parked = false;
  bool dead;
  std::shared_ptr<Conn> hold;
  {
    std::lock_guard g(rx_mutex_);
    dead = rx_dead_;
    if (dead) {
      hold = std::move(rx_hold_);
    } else {
      rx_msg_ = msg;
      rx_iov_ = iov;
      rx_niov_ = niov;
      rx_offset_ = offset;
      rx_mlen_ = msg ? mlen : 0;
      rx_rlen_ = rlen;
      rx_done_ = 0;
      rx_recv_called_ = true;
      parked = rx_ == Rx::ParseWait;
      if (parked) rx_ = Rx::Payload;
    }
  }
  if (dead) {
    // The connection died while the core held the message: its payload is gone.
    if (msg) {
      msg->health = HealthStatus::RemoteDropped;
      sni_.ni->host->finalize(msg, -ECONNABORTED);
    }
    io_.post([hold] {});  // the last reference goes on the I/O thread
    return 0;
  }
  if (parked) {
    auto self = shared_from_this();
    io_.post([self] {
      self->set_events();
      self->process_rx();
    });
  }
  return 0;
}

// ---------------------------------------------------------------- sending

void Conn::enqueue(Tx* tx) {
  if (version_ == kProtoV2 && lnd_.params().enable_csum && tx->msg) {
    // V2 checksum over ksock header (csum 0) + LNet header + payload.
    std::uint32_t c = crc32_le(~0U, tx->hdr, tx->hdr_len);
    std::vector<std::uint8_t> tmp(tx->msg->len);
    copy_from_fragments(tmp.data(), tx->msg->iov, tx->msg->niov, tx->msg->offset, tx->msg->len);
    c = crc32_le(c, tmp.data(), tmp.size());
    wire::put_le32(tx->hdr + 4, c);
  }
  TxList done;
  {
    std::unique_lock lk(tx_mutex_);
    if (closed_.load()) {
      lk.unlock();
      if (tx->msg) {
        tx->msg->health = HealthStatus::LocalAborted;
        sni_.ni->host->finalize(tx->msg, -ECONNABORTED);
      }
      tx_free(tx);
      return;
    }
    if (txq_.empty()) last_tx_progress_ = Clock::now();
    txq_.push_back(tx);
    if (!writing_) write_some(lk, done);
  }
  while (Tx* t = done.pop_front()) {
    if (t->msg) sni_.ni->host->finalize(t->msg, 0);
    tx_free(t);
  }
}

void Conn::write_some(std::unique_lock<std::mutex>& lk, TxList& done) {
  (void)lk;
  writing_ = true;
  while (!txq_.empty()) {
    // Gather the head messages into one sendmsg.
    iovec v[kMaxIov];
    int nv = 0;
    for (Tx* t = txq_.head; t && nv < kMaxIov - 1; t = t->next) {
      std::uint64_t pos = t->sent;
      if (pos < t->hdr_len) {
        v[nv++] = iovec{t->hdr + pos, t->hdr_len - pos};
        pos = t->hdr_len;
      }
      if (t->msg && pos < t->total) {
        nv +=
            slice(t->msg->iov, t->msg->niov, t->msg->offset + (pos - t->hdr_len), t->total - pos, v + nv, kMaxIov - nv);
      }
      if (nv >= kMaxIov - 1) break;
    }
    msghdr mh{};
    mh.msg_iov = v;
    mh.msg_iovlen = static_cast<std::size_t>(nv);
    ssize_t n = ::sendmsg(fd_, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        want_write(true);
        writing_ = false;
        return;
      }
      int err = errno;
      writing_ = false;
      auto self = shared_from_this();
      io_.post(
          [self, err] { self->close_now(-err, health_of_errno(err), std::string("send: ") + std::strerror(err)); });
      return;
    }
    last_tx_progress_ = Clock::now();
    auto left = static_cast<std::uint64_t>(n);
    while (left > 0 && !txq_.empty()) {
      Tx* t = txq_.head;
      std::uint64_t take = std::min(left, t->total - t->sent);
      t->sent += take;
      left -= take;
      if (t->sent == t->total) done.push_back(txq_.pop_front());
    }
  }
  want_write(false);
  writing_ = false;
}

// ---------------------------------------------------------------- closing

void Conn::close(int rc, HealthStatus h, const std::string& why) {
  if (io_.on_this_thread()) {
    close_now(rc, h, why);
    return;
  }
  auto self = shared_from_this();
  io_.post([self, rc, h, why] { self->close_now(rc, h, why); });
}

void Conn::close_now(int rc, HealthStatus h, const std::string& why) {
  if (state_ == State::Closed) return;
  bool was_established = state_ == State::Established;
  state_ = State::Closed;
  TxList failed;
  {
    std::lock_guard g(tx_mutex_);
    closed_.store(true, std::memory_order_release);
    failed = txq_;
    txq_ = {};
  }
  io_.remove(fd_);
  ::close(fd_);
  fd_ = -1;
  if (rc == 0 || rc == -EALREADY || rc == -ESHUTDOWN || rc == -ECONNRESET) {
    LNET_LOG(Info, kLogLnd, "%s", why.c_str());
  } else {
    LNET_LOG(Warn, kLogLnd, "closing %s connection %s <-> %s: %s", conn_type_name(type_),
             sni_.ni->nid.to_string().c_str(), peer_ ? peer_->nid.to_string().c_str() : ip_string(peer_ip_).c_str(),
             why.c_str());
  }
  int err = rc ? rc : -ECONNABORTED;
  while (Tx* t = failed.pop_front()) {
    if (t->msg) {
      t->msg->health = h == HealthStatus::Ok ? HealthStatus::LocalError : h;
      sni_.ni->host->finalize(t->msg, err);
    }
    tx_free(t);
  }
  LndMessage* rx = nullptr;
  bool parked;
  {
    std::lock_guard g(rx_mutex_);
    rx_dead_ = true;
    parked = rx_ == Rx::ParseWait;  // the core holds it; its recv() will fail it
    if (!parked) {
      rx = rx_msg_;
      rx_msg_ = nullptr;
    }
  }
  if (rx) {
    rx->health = HealthStatus::RemoteDropped;
    sni_.ni->host->finalize(rx, err);
  }
  if (!parked) {
    std::lock_guard g(rx_mutex_);
    rx_hold_.reset();
  }
  auto self = shared_from_this();
  lnd_.conn_closed(sni_, peer_, this, was_established, active_, rc);
  io_.retire(self);
}

void Conn::tick(Clock::time_point now) {
  if (state_ == State::Closed) return;
  if (state_ != State::Established) {
    if (now > deadline_) {
      close_now(-ETIMEDOUT, HealthStatus::RemoteTimeout,
                "handshake with " + (peer_ ? peer_->nid.to_string() : ip_string(peer_ip_)) + " timed out");
    }
    return;
  }
  bool stuck;
  {
    std::lock_guard g(tx_mutex_);
    stuck = !txq_.empty() && now - last_tx_progress_ > std::chrono::seconds(sni_.timeout);
  }
  if (stuck) {
    close_now(-ETIMEDOUT, HealthStatus::NetworkTimeout,
              "no send progress to " + peer_->nid.to_string() + " for " + std::to_string(sni_.timeout) + " s");
    return;
  }
  const SocketParams& p = lnd_.params();
  if (version_ >= kProtoV3 && p.keepalive > 0 && (type_ == ConnType::Control || type_ == ConnType::Any) &&
      now - last_rx_ > std::chrono::seconds(p.keepalive) && now - last_keepalive_ > std::chrono::seconds(10)) {
    last_keepalive_ = now;
    Tx* ka = tx_alloc();
    MsgHdr h;
    h.type = kMsgNoop;
    h.zc_ack = kKeepalivePing;
    encode_msg_hdr(h, std::span<std::uint8_t, kMsgHdrSize>(ka->hdr, kMsgHdrSize));
    ka->hdr_len = kMsgHdrSize;
    ka->total = kMsgHdrSize;
    ka->ni = sni_.ni;
    enqueue(ka);
  }
}

}  // namespace lnet::sock
