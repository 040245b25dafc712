// One TCP connection of the socket LND: the handshake (active: connect, acceptor request,
// HELLO, await HELLO; passive: read the request and HELLO, answer), then framed
// messages both ways. Receiving runs on the connection's I/O thread; sending runs on
// whichever thread finds the connection idle, else on the I/O thread.
#pragma once

#include <netinet/in.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sock_lnd.hpp"

#include <lnet/mutex.hpp>

namespace lnet::sock {

// Fragments gathered into one sendmsg/recvmsg at most.
inline constexpr int kMaxSegments = 64;
// Fills `out` (at most `max`) with the fragments covering [off, off + len) of (iov, niov).
int slice(const iovec* iov, unsigned niov, std::uint64_t off, std::uint64_t len, iovec* out, int max);

class Conn final : public IoHandler, public std::enable_shared_from_this<Conn> {
 public:
  enum class State { Connecting, AwaitHello, AcceptReq, AcceptHello, Established, Closed };

  // An outgoing connection of `type` to `peer` (started on the I/O thread).
  static void connect(SockNi& sni, std::shared_ptr<SockPeer> peer, ConnType type, std::uint32_t version);
  // An accepted socket: reads the acceptor request and HELLO. False when the driver
  // has no room for another handshake (the socket is closed).
  static bool accept(SocketLnd& lnd, SockNi& sni, int fd, const IpAddr& from, std::uint16_t port);
  // Counted among the handshakes under way (SocketLnd::handshake_begin) until it is
  // established or closed; uncount: false when it was not (any more).
  const IpAddr& peer_ip() const { return peer_ip_; }
  bool handshake_counted() const { return hs_counted_.load(); }
  void count_handshake() { hs_counted_.store(true); }
  bool uncount_handshake() { return hs_counted_.exchange(false); }

  Conn(SocketLnd& lnd, SockNi& sni, int fd, IoThread& io);
  ~Conn();

  ConnType type() const { return type_; }
  std::uint32_t version() const { return version_; }
  bool established() const { return state_ == State::Established; }
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  std::uint64_t incarnation() const { return peer_incarnation_; }
  bool active() const { return active_; }  // we dialled it
  // Bytes queued and not yet written, and when the placement rule last chose it (a
  // sequence number of the peer's): what choose_conn weighs, read under the peer's mutex.
  std::uint64_t queued() const { return queued_.load(std::memory_order_relaxed); }
  std::uint64_t last_post() const { return last_post_.load(std::memory_order_relaxed); }
  void set_last_post(std::uint64_t seq) { last_post_.store(seq, std::memory_order_relaxed); }

  // Queues a message (or NOOP) and writes it now if the connection is idle.
  void enqueue(Tx* tx);
  // The core's recv() for a message this connection parsed.
  int recv(LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t mlen,
           std::uint32_t rlen);
  // Closes from any thread; queued messages fail with rc and health h.
  void close(int rc, HealthStatus h, const std::string& why);
  // Housekeeping, once a second, by the connection's own I/O thread.
  void tick_if_mine(Clock::time_point now) {
    if (io_.on_this_thread()) tick(now);
  }

  bool on_events(std::uint32_t events) override;  // true: a message is half-way (IoHandler)

 private:
  enum class Rx { Hdr, LnetHdr, ParseWait, Payload };

  void handle_events(std::uint32_t events);
  void start_connect(const IpAddr& ip, int port);
  void connected();
  bool read_exact(std::size_t need);  // handshake bytes into hs_in_
  void refused_in_handshake();        // the peer we dialled closed before its HELLO
  void send_acceptor_version();
  bool read_accept_request();
  bool accept_target(Nid target);  // the acceptor request's NID: ours, or another NI's on the address
  // A HELLO's checks against the protocol of this NI's address family; false: refused.
  bool hello_fits(const Hello& h);
  void handshake_read();
  void on_hello();
  void on_hello_reply(const Hello& h);
  void on_hello_request(const Hello& h);
  void answer_hello(const Hello& h, Hello& reply, std::shared_ptr<SockPeer> peer);
  void finish_handshake(std::shared_ptr<SockPeer> peer);
  void send_raw(const std::vector<std::uint8_t>& bytes);
  void process_rx();
  void make_rx_buffer();
  bool fill(std::size_t need);  // rx buffer holds at least `need` bytes (false: would block)
  bool received(ssize_t& n);    // after a recv(): go on?
  // The two headers of a message: false to stop for now (more bytes needed, the
  // connection closed, or the core holds the message).
  bool rx_msg_hdr();
  bool rx_lnet_hdr();
  bool rx_payload();  // true: the payload is complete
  void rx_done();
  void resume_rx();  // after the recv() of a message the core held
  void write_some(TxList& done) LNET_REQUIRES(tx_mutex_);
  void want_write(bool on) LNET_REQUIRES(tx_mutex_);
  void set_events();
  void close_now(int rc, HealthStatus h, const std::string& why);
  void log_close(int rc, const std::string& why, bool was_established);
  // A passive connection for another NI on the same address moves to it (before its HELLO).
  void rehome(SockNi& to);
  // Tells the I/O thread which events to wake this connection for (add: the first
  // time); a failure closes the connection (soon, on the I/O thread).
  void watch(std::uint32_t events, bool add = false);
  void tick(Clock::time_point now);
  bool rx_midway() const;  // a message (or its ksock header) partly received
  bool rx_stalled(Clock::time_point now) const;
  std::string rx_where() const;

  SocketLnd& lnd_;
  SockNi* sni_;  // the NI a passive connection turns out to be for may change once (shared acceptor)
  int fd_;
  IoThread& io_;
  State state_ = State::Connecting;
  bool active_ = false;
  std::atomic<bool> closed_{false};
  std::shared_ptr<SockPeer> peer_;
  ConnType type_ = ConnType::None;  // as we record it
  std::uint32_t version_ = kProtoV3;
  bool flip_ = false;
  std::uint64_t peer_incarnation_ = 0;
  IpAddr peer_ip_;
  std::uint16_t peer_port_ = 0;
  Clock::time_point deadline_;  // of the handshake
  // An accepted connection counted among the handshakes under way (SocketLnd::
  // handshake_begin) until it is established or closed.
  std::atomic<bool> hs_counted_{false};
  bool identified_ = false;  // a HELLO we took said who it is (a stranger's failures are rate-limited)

  // Handshake buffers.
  std::vector<std::uint8_t> hs_in_;
  std::size_t hs_have_ = 0;
  std::vector<std::uint8_t> hs_out_;
  std::size_t hs_sent_ = 0;
  HelloPrefix hello_prefix_;
  std::uint32_t hello_nips_ = 0;
  int hs_stage_ = 0;
  Hello hello_;

  // Receive side: the I/O thread's, but for what recv() (a host thread) hands over under
  // rx_mutex_: the guarded members, and the rx_msg_..rx_done_ destination, written by
  // recv() under the lock and read by the I/O thread only after it saw rx_recv_called_.
  Mutex rx_mutex_;
  std::atomic<Rx> rx_{Rx::Hdr};
  bool rx_dead_ LNET_GUARDED_BY(rx_mutex_) = false;  // closed: a late recv() fails its message
  std::vector<std::uint8_t> rxbuf_;
  std::size_t rx_beg_ = 0;
  std::size_t rx_end_ = 0;
  MsgHdr rx_msghdr_;
  Header rx_hdr_;
  bool rx_recv_called_ LNET_GUARDED_BY(rx_mutex_) = false;
  LndMessage* rx_msg_ = nullptr;
  const iovec* rx_iov_ = nullptr;
  unsigned rx_niov_ = 0;
  std::uint32_t rx_offset_ = 0;
  std::uint32_t rx_mlen_ = 0;
  std::uint32_t rx_rlen_ = 0;
  std::uint32_t rx_done_ = 0;  // payload bytes consumed
  std::uint32_t rx_crc_ = 0;
  std::shared_ptr<Conn> rx_hold_ LNET_GUARDED_BY(rx_mutex_);  // keeps us alive while the core holds our message
  Clock::time_point last_rx_;
  bool rx_more_posted_ = false;  // a turn to take what was read past the per-wake cap is coming

  // Send side.
  Mutex tx_mutex_;
  TxList txq_ LNET_GUARDED_BY(tx_mutex_);
  bool writing_ LNET_GUARDED_BY(tx_mutex_) = false;
  std::atomic<bool> want_write_{false};
  std::atomic<std::uint64_t> queued_{0};
  std::atomic<std::uint64_t> last_post_{0};
  Clock::time_point last_tx_progress_;
  Clock::time_point last_keepalive_;
};

}  // namespace lnet::sock
