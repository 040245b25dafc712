// Socket LND connections: events, the send queue, closing and housekeeping. The
// handshake is in conn_handshake.cpp, the receive state machine in conn_rx.cpp.
#include "conn.hpp"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <lnet/lnd/fragments.hpp>
#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

namespace lnet::sock {

namespace {
constexpr std::size_t kRxBufSize = 64 * 1024;
}  // namespace

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

// The receive buffer is made when the handshake is done (finish_handshake): a
// connection that never says who it is costs only its handshake bytes.
Conn::Conn(SocketLnd& lnd, SockNi& sni, int fd, IoThread& io) : lnd_(lnd), sni_(&sni), fd_(fd), io_(io) {
  last_rx_ = last_tx_progress_ = last_keepalive_ = Clock::now();
}

Conn::~Conn() {
  if (hs_counted_.exchange(false)) lnd_.handshake_end(peer_ip_);
  if (fd_ >= 0) ::close(fd_);
}

void Conn::make_rx_buffer() { rxbuf_.resize(kRxBufSize); }

// ---------------------------------------------------------------- events

bool Conn::on_events(std::uint32_t ev) {
  handle_events(ev);
  if (closed() || state_ != State::Established) return false;
  return rx_midway() || want_write_.load(std::memory_order_relaxed);
}

bool Conn::rx_midway() const {
  Rx rx = rx_.load(std::memory_order_relaxed);
  return rx == Rx::LnetHdr || rx == Rx::Payload || (rx == Rx::Hdr && rx_end_ > rx_beg_);
}

void Conn::handle_events(std::uint32_t ev) {
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
        if (!closed() && hs_sent_ >= hs_out_.size()) watch(EPOLLIN | EPOLLRDHUP);
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
      MutexLock lk(tx_mutex_);
      if (!closed_.load()) write_some(done);
    }
    while (Tx* t = done.pop_front()) {
      if (t->msg) sni_->ni->host->finalize(t->msg, 0);
      tx_free(t);
    }
  }
}

void Conn::set_events() {
  if (closed()) return;
  std::uint32_t ev = EPOLLRDHUP;
  if (rx_ != Rx::ParseWait) ev |= EPOLLIN;
  if (want_write_) ev |= EPOLLOUT;
  watch(ev);
}

void Conn::watch(std::uint32_t events, bool add) {
  int rc = add ? io_.add(fd_, this, events) : io_.modify(fd_, this, events);
  if (rc == 0) return;
  // Closed on the next turn of the I/O thread: the caller may hold tx_mutex_ (want_write),
  // which closing takes.
  auto self = shared_from_this();
  io_.post(
      [self, rc] { self->close_now(rc, HealthStatus::LocalError, std::string("epoll_ctl: ") + std::strerror(-rc)); });
}

void Conn::want_write(bool on) {
  // The I/O thread owns the epoll interest set.
  if (want_write_ == on) return;
  want_write_ = on;
  if (io_.on_this_thread()) {
    set_events();
  } else {
    auto self = shared_from_this();
    io_.post([self] { self->set_events(); });
  }
}

// ---------------------------------------------------------------- sending

void Conn::enqueue(Tx* tx) {
  if (version_ == kProtoV2 && lnd_.params().enable_csum && tx->msg) {
    // V2 checksum over ksock header (csum 0) + LNet header + payload.
    std::uint32_t c = crc32_le(~0U, tx->hdr, tx->hdr_len);
    std::vector<std::uint8_t> tmp(tx->msg->len);
    copy_from_fragments(tmp.data(), tx->msg->iov, tx->msg->niov, tx->msg->offset, tx->msg->len);
    c = crc32_le(c, tmp.data(), tmp.size());
    set_msg_hdr_csum(std::span<std::uint8_t, kMsgHdrSize>(tx->hdr, kMsgHdrSize), c);
  }
  TxList done;
  {
    MutexLock lk(tx_mutex_);
    if (closed_.load()) {
      lk.unlock();
      if (tx->msg) {
        tx->msg->health = HealthStatus::LocalAborted;
        sni_->ni->host->finalize(tx->msg, -ECONNABORTED);
      }
      tx_free(tx);
      return;
    }
    if (txq_.empty()) last_tx_progress_ = Clock::now();
    txq_.push_back(tx);
    queued_.fetch_add(tx->total - tx->sent, std::memory_order_relaxed);
    if (!writing_) write_some(done);
  }
  while (Tx* t = done.pop_front()) {
    if (t->msg) sni_->ni->host->finalize(t->msg, 0);
    tx_free(t);
  }
}

void Conn::write_some(TxList& done) {
  writing_ = true;
  while (!txq_.empty()) {
    // Gather the head messages into one sendmsg.
    iovec v[kMaxSegments];
    int nv = 0;
    for (Tx* t = txq_.front(); t && nv < kMaxSegments - 1; t = t->next) {
      std::uint64_t pos = t->sent;
      if (pos < t->hdr_len) {
        v[nv++] = iovec{t->hdr + pos, t->hdr_len - pos};
        pos = t->hdr_len;
      }
      if (t->msg && pos < t->total) {
        nv += slice(t->msg->iov, t->msg->niov, t->msg->offset + (pos - t->hdr_len), t->total - pos, v + nv,
                    kMaxSegments - nv);
      }
      if (nv >= kMaxSegments - 1) break;
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
    queued_.fetch_sub(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    auto left = static_cast<std::uint64_t>(n);
    while (left > 0 && !txq_.empty()) {
      Tx* t = txq_.front();
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

void Conn::log_close(int rc, const std::string& why, bool was_established) {
  bool quiet = rc == 0 || rc == -EALREADY || rc == -ESHUTDOWN || rc == -ECONNRESET;
  // A stranger's ended handshakes (a flood of them, say): one line per interval, with
  // the count of those held back.
  std::uint64_t held = 0;
  if (!was_established && !active_ && !identified_ && !lnd_.stranger_log().allow(&held)) return;
  std::string more = held ? " (and " + std::to_string(held) + " like lines held back)" : "";
  if (quiet) {
    LNET_LOG(Info, kLogLnd, "%s%s", why.c_str(), more.c_str());
    return;
  }
  LNET_LOG(Warn, kLogLnd, "closing %s connection %s <-> %s: %s%s", conn_type_name(type_),
           sni_->ni->nid.to_string().c_str(), peer_ ? peer_->nid.to_string().c_str() : peer_ip_.to_string().c_str(),
           why.c_str(), more.c_str());
}

void Conn::close_now(int rc, HealthStatus h, const std::string& why) {
  if (state_ == State::Closed) return;
  bool was_established = state_ == State::Established;
  state_ = State::Closed;
  if (hs_counted_.exchange(false)) lnd_.handshake_end(peer_ip_);
  TxList failed;
  std::uint64_t unsent = 0;
  {
    MutexLock g(tx_mutex_);
    closed_.store(true, std::memory_order_release);
    unsent = queued_.load(std::memory_order_relaxed);
    failed = txq_;
    txq_ = {};
    queued_.store(0, std::memory_order_relaxed);
  }
  io_.remove(fd_);
  ::close(fd_);
  fd_ = -1;
  std::string lost;
  if (!failed.empty()) lost = " (" + std::to_string(unsent) + " bytes queued were not sent)";
  log_close(rc, why + lost, was_established);
  int err = rc ? rc : -ECONNABORTED;
  while (Tx* t = failed.pop_front()) {
    if (t->msg) {
      t->msg->health = h == HealthStatus::Ok ? HealthStatus::LocalError : h;
      sni_->ni->host->finalize(t->msg, err);
    }
    tx_free(t);
  }
  LndMessage* rx = nullptr;
  bool parked;
  {
    MutexLock g(rx_mutex_);
    rx_dead_ = true;
    // The core holds it and its recv() will fail it; once recv() came, the message is ours.
    parked = rx_ == Rx::ParseWait && !rx_recv_called_;
    if (!parked) {
      rx = rx_msg_;
      rx_msg_ = nullptr;
    }
  }
  if (rx) {
    rx->health = HealthStatus::RemoteDropped;
    sni_->ni->host->finalize(rx, err);
  }
  if (!parked) {
    MutexLock g(rx_mutex_);
    rx_hold_.reset();
  }
  auto self = shared_from_this();
  lnd_.conn_closed(*sni_, peer_, this, was_established, active_, rc);
  io_.retire(self);
}

// A message begun and not finished: a peer (or a path) that went silent half-way through
// one holds the message and its MD until the connection is closed, as ksocklnd closes
// one whose receive makes no progress within its timeout. A message the core holds
// (ParseWait) waits for us, not for the peer; bytes the kernel has for us are progress
// not read yet.
// Where a receive stands, for the log line that gives it up.
std::string Conn::rx_where() const {
  std::string buffered = std::to_string(rx_end_ - rx_beg_) + " bytes read and not yet taken";
  switch (rx_.load(std::memory_order_relaxed)) {
    case Rx::Hdr: return "in a ksock header, " + buffered;
    case Rx::LnetHdr: return "in the LNet header of a message, " + buffered;
    case Rx::ParseWait: return "held by LNet";
    case Rx::Payload:
      return std::string("in the payload of a ") + msg_type_name(rx_hdr_.type) + ", " + std::to_string(rx_done_) +
             " of " + std::to_string(rx_rlen_) + " bytes, " + buffered;
  }
  return buffered;
}

bool Conn::rx_stalled(Clock::time_point now) const {
  if (!rx_midway() || now - last_rx_ <= std::chrono::seconds(sni_->timeout.load(std::memory_order_relaxed)))
    return false;
  int unread = 0;
  return ioctl(fd_, FIONREAD, &unread) != 0 || unread == 0;
}

void Conn::tick(Clock::time_point now) {
  if (state_ == State::Closed) return;
  if (state_ != State::Established) {
    if (now > deadline_) {
      close_now(-ETIMEDOUT, HealthStatus::RemoteTimeout,
                "handshake with " + (peer_ ? peer_->nid.to_string() : peer_ip_.to_string()) + " timed out");
    }
    return;
  }
  bool stuck;
  {
    MutexLock g(tx_mutex_);
    stuck =
        !txq_.empty() && now - last_tx_progress_ > std::chrono::seconds(sni_->timeout.load(std::memory_order_relaxed));
  }
  if (stuck) {
    close_now(-ETIMEDOUT, HealthStatus::NetworkTimeout,
              "no send progress to " + peer_->nid.to_string() + " for " +
                  std::to_string(sni_->timeout.load(std::memory_order_relaxed)) + " s");
    return;
  }
  if (rx_stalled(now)) {
    close_now(-ETIMEDOUT, HealthStatus::RemoteTimeout,
              "timeout receiving from " + peer_->nid.to_string() + ": nothing more of a message for " +
                  std::to_string(sni_->timeout.load(std::memory_order_relaxed)) + " s (" + rx_where() + ")");
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
    ka->ni = sni_->ni;
    enqueue(ka);
  }
}

}  // namespace lnet::sock
