// Socket LND connections: the receive state machine (ksock header, LNet header, the
// host's parse, the payload into the MD), on the connection's I/O thread; recv() from
// the host may come from any thread.
#include "conn.hpp"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <lnet/lnd/byteorder.hpp>
#include <lnet/lnd/fragments.hpp>
#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

namespace lnet::sock {

namespace {
constexpr int kMaxMsgsPerWake = 64;
}  // namespace

bool Conn::fill(std::size_t need) {
  while (rx_end_ - rx_beg_ < need) {
    if (rx_beg_ > 0 && rxbuf_.size() - rx_end_ < need) {
      std::memmove(rxbuf_.data(), rxbuf_.data() + rx_beg_, rx_end_ - rx_beg_);
      rx_end_ -= rx_beg_;
      rx_beg_ = 0;
    }
    ssize_t n = ::recv(fd_, rxbuf_.data() + rx_end_, rxbuf_.size() - rx_end_, MSG_DONTWAIT);
    if (!received(n)) return false;
    rx_end_ += static_cast<std::size_t>(n);
  }
  return true;
}

// What a recv() returned: true when the caller goes on (`n` bytes came, or 0 after
// EINTR); false when the socket has nothing more for now or the connection is closed
// (by this call, when the peer closed it or recv() failed).
bool Conn::received(ssize_t& n) {
  if (n > 0) {
    last_rx_ = Clock::now();
    return true;
  }
  int err = n == 0 ? ECONNRESET : errno;
  if (err == EINTR) {
    n = 0;
    return true;
  }
  if (err == EAGAIN) return false;
  close_now(-err, health_of_errno(err), n == 0 ? "closed by peer" : std::string("recv: ") + std::strerror(err));
  return false;
}

// Takes what the socket has, at most kMaxMsgsPerWake messages in one go so that the
// thread's other connections get their turn. What a read brought beyond that may be all
// there is (the kernel holds nothing more, so epoll wakes us no more): the rest is taken
// on the thread's next turn (once: bytes still in the kernel wake us anyway).
void Conn::process_rx() {
  for (int handled = 0; handled < kMaxMsgsPerWake; ++handled) {
    if (closed()) return;
    if (rx_ == Rx::Hdr) {
      if (!rx_msg_hdr()) return;
      if (rx_ == Rx::Hdr) continue;  // a NOOP
    }
    if (rx_ == Rx::LnetHdr && !rx_lnet_hdr()) return;
    if (rx_ == Rx::ParseWait) return;
    if (rx_ == Rx::Payload) {
      if (!rx_payload()) return;
      rx_done();
    }
  }
  if (closed() || rx_end_ == rx_beg_ || rx_more_posted_) return;
  rx_more_posted_ = true;
  auto self = shared_from_this();
  io_.post([self] {
    self->rx_more_posted_ = false;
    self->process_rx();
  });
}

// The payload of a message the core held, after its recv(): on the I/O thread, so that
// the receive state changes only there, and the stall timer starts again now (the wait
// was the core's, not the peer's).
void Conn::resume_rx() {
  if (closed()) return;
  last_rx_ = Clock::now();
  rx_ = Rx::Payload;
  set_events();
  process_rx();
}

bool Conn::rx_msg_hdr() {
  if (!fill(kMsgHdrSize)) return false;
  if (decode_msg_hdr(std::span<const std::uint8_t, kMsgHdrSize>(rxbuf_.data() + rx_beg_, kMsgHdrSize), flip_,
                     rx_msghdr_) != 0) {
    close_now(-EPROTO, HealthStatus::RemoteError,
              "bad message type 0x" + std::to_string(rx_msghdr_.type) + " from " + peer_->nid.to_string());
    return false;
  }
  if (rx_msghdr_.csum != 0 && version_ == kProtoV2) {
    std::uint8_t copy[kMsgHdrSize];
    std::memcpy(copy, rxbuf_.data() + rx_beg_, kMsgHdrSize);
    set_msg_hdr_csum(copy, 0);
    rx_crc_ = crc32_le(~0U, copy, kMsgHdrSize);
  }
  rx_beg_ += kMsgHdrSize;
  bool keepalive = rx_msghdr_.zc_req == 0 && rx_msghdr_.zc_ack == kKeepalivePing;
  if (rx_msghdr_.zc_ack != 0 && !keepalive) {
    // We never ask for zero-copy ACKs, so an ACK of a cookie is one we don't know.
    close_now(-EPROTO, HealthStatus::RemoteError,
              "unknown zero-copy cookie " + std::to_string(rx_msghdr_.zc_ack) + " from " + peer_->nid.to_string());
    return false;
  }
  if (rx_msghdr_.type != kMsgNoop) rx_ = Rx::LnetHdr;
  return true;
}

bool Conn::rx_lnet_hdr() {
  // Protocol V4 (IPv6) carries the 96-byte large-NID header, the others the 72-byte one.
  bool large = version_ == kProtoV4;
  std::size_t size = large ? kHeaderLargeSize : kHeaderSize;
  if (!fill(size)) return false;
  auto in = std::span<const std::uint8_t>(rxbuf_.data() + rx_beg_, size);
  if ((large ? decode_header_large(in, rx_hdr_) : decode_header(in, rx_hdr_)) != 0) {
    close_now(-EPROTO, HealthStatus::RemoteError, "bad LNet header from " + peer_->nid.to_string());
    return false;
  }
  if (rx_msghdr_.csum != 0 && version_ == kProtoV2) rx_crc_ = crc32_le(rx_crc_, rxbuf_.data() + rx_beg_, kHeaderSize);
  rx_beg_ += size;
  if (peer_->userspace) {
    // A peer on an unprivileged port is who its connection says (address and port), not
    // what its header claims: as ksocklnd does, its messages carry the identity we gave it.
    rx_hdr_.src_nid = peer_->nid;
    rx_hdr_.src_pid = peer_->pid;
  }
  {
    MutexLock g(rx_mutex_);
    rx_recv_called_ = false;
    rx_msg_ = nullptr;
  }
  {
    MutexLock g(rx_mutex_);
    rx_hold_ = shared_from_this();
  }
  int rc = sni_->ni->host->parse(*sni_->ni, rx_hdr_, peer_->nid, this, false);
  if (rc < 0) {
    {
      MutexLock g(rx_mutex_);
      rx_hold_.reset();
    }
    close_now(rc, HealthStatus::RemoteError,
              "dropping the connection to " + peer_->nid.to_string() + " after a bad " + msg_type_name(rx_hdr_.type) +
                  ": " + errno_string(rc));
    return false;
  }
  {
    MutexLock g(rx_mutex_);
    if (!rx_recv_called_) {
      rx_ = Rx::ParseWait;  // the core keeps it (a lazy portal) until it can take the payload
    } else {
      rx_ = Rx::Payload;
    }
  }
  if (rx_ == Rx::ParseWait) {
    set_events();
    return false;
  }
  return true;
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
      iovec v[kMaxSegments];
      int nv = slice(rx_iov_, rx_niov_, rx_offset_ + rx_done_, rx_mlen_ - rx_done_, v, kMaxSegments);
      msghdr mh{};
      mh.msg_iov = v;
      mh.msg_iovlen = static_cast<std::size_t>(nv);
      ssize_t n = ::recvmsg(fd_, &mh, MSG_DONTWAIT);
      if (!received(n)) return false;
      rx_done_ += static_cast<std::uint32_t>(n);
      continue;
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
    ack->ni = sni_->ni;
    ack->deadline = Clock::now() + std::chrono::seconds(sni_->timeout.load(std::memory_order_relaxed));
    enqueue(ack);
  }
  LndMessage* m;
  std::shared_ptr<Conn> hold;
  {
    MutexLock g(rx_mutex_);
    m = rx_msg_;
    rx_msg_ = nullptr;
    rx_ = Rx::Hdr;
    hold = std::move(rx_hold_);
  }
  if (m) sni_->ni->host->finalize(m, 0);
}

int Conn::recv(LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t mlen,
               std::uint32_t rlen) {
  bool parked = false;
  bool dead;
  std::shared_ptr<Conn> hold;
  {
    MutexLock g(rx_mutex_);
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
      parked = rx_ == Rx::ParseWait;  // resume_rx() takes it up on the I/O thread
    }
  }
  if (dead) {
    // The connection died while the core held the message: its payload is gone.
    if (msg) {
      msg->health = HealthStatus::RemoteDropped;
      sni_->ni->host->finalize(msg, -ECONNABORTED);
    }
    io_.post([hold] {});  // the last reference goes on the I/O thread
    return 0;
  }
  if (parked) {
    auto self = shared_from_this();
    io_.post([self] { self->resume_rx(); });
  }
  return 0;
}

}  // namespace lnet::sock
