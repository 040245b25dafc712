// The socket LND against strangers (issue 52): accept=secure (the default) refuses an
// unprivileged source port and takes a privileged one; connections that never finish
// their handshake are bounded; a peer that is gone is forgotten. Each test fails
// without the behaviour it checks.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <span>
#include <thread>

#include "socket_fixture.hpp"
#include "support/event_log.hpp"
#include "support/lnd_counter.hpp"

namespace lnet {
namespace {

using namespace std::chrono_literals;
using test::eventually;
using test::lnd_counter;

// A TCP connection from `ip_c` (port `port`, 0: any) to the socket NI at `ip_a`.
int dial(const std::string& ip_a, const std::string& ip_c, std::uint16_t port = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in me{}, to{};
  me.sin_family = to.sin_family = AF_INET;
  inet_pton(AF_INET, ip_c.c_str(), &me.sin_addr);
  me.sin_port = htons(port);
  inet_pton(AF_INET, ip_a.c_str(), &to.sin_addr);
  to.sin_port = htons(kPort);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// What the other end did within 10 s: 1 sent bytes, 0 closed, -1 nothing.
int answer(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 10000) <= 0) return -1;
  char b[256];
  return ::recv(fd, b, sizeof b, 0) > 0 ? 1 : 0;
}

// accept=secure: a connection from an unprivileged port is closed before a word and
// counted; one from a privileged port (root's) gets its HELLO answered.
TEST(SocketAccept, SecureRefusesAnUnprivilegedPortAndTakesAPrivilegedOne) {
  std::string ip_a = test_ip(2), ip_c = test_ip(4);
  auto a = make(ip_a.c_str(), [](SocketParams& p) { p.accept = AcceptMode::Secure; });
  ASSERT_TRUE(a);
  std::vector<std::uint8_t> hello;
  int fd = raw_peer(ip_a, ip_c, hello);
  ASSERT_GE(fd, 0);
  (void)::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
  EXPECT_EQ(answer(fd), 0) << "an unprivileged port got an answer under accept=secure";
  ::close(fd);
  EXPECT_EQ(lnd_counter(*a, "conns_refused_port"), 1u);
  if (geteuid() != 0) GTEST_SKIP() << "a privileged source port needs root";
  int priv = -1;
  for (std::uint16_t port = 1023; port > 900 && priv < 0; --port) priv = dial(ip_a, ip_c, port);
  ASSERT_GE(priv, 0) << "no free privileged port";
  (void)::send(priv, hello.data() + 0, hello.size(), MSG_NOSIGNAL);  // the request and HELLO
  EXPECT_EQ(answer(priv), 1) << "a privileged port got no HELLO back";
  ::close(priv);
  EXPECT_EQ(lnd_counter(*a, "conns_refused_port"), 1u);
  set_socket_params(SocketParams{});
}

// Connections that never finish their handshake are bounded: beyond max_handshakes the
// oldest is closed to make room (a peer's own handshake takes a round trip, a flood's
// lasts until evicted), and one address may hold only max_handshakes_per_ip of them:
// beyond, its newest is closed at once.
TEST(SocketAccept, HandshakesBeyondTheLimitsMakeRoomOrAreClosed) {
  std::string ip_a = test_ip(2), ip_c = test_ip(4), ip_d = test_ip(5);
  auto a = make(ip_a.c_str(), [](SocketParams& p) {
    p.max_handshakes = 2;
    p.max_handshakes_per_ip = 2;
    p.accept_timeout = 2;
  });
  ASSERT_TRUE(a);
  int one = dial(ip_a, ip_c), two = dial(ip_a, ip_c);
  ASSERT_GE(one, 0);
  ASSERT_GE(two, 0);
  int three = dial(ip_a, ip_c);  // a third from one address: refused
  ASSERT_GE(three, 0);
  EXPECT_EQ(answer(three), 0) << "a third handshake from one address was let in";
  EXPECT_EQ(lnd_counter(*a, "conns_refused_busy"), 1u);
  int four = dial(ip_a, ip_d);  // another address: the oldest makes room
  ASSERT_GE(four, 0);
  EXPECT_EQ(answer(one), 0) << "the oldest handshake was not closed to make room";
  EXPECT_TRUE(eventually([&] { return lnd_counter(*a, "handshakes_evicted") == 1; }));
  // The others are closed at their deadline; then a peer is served again.
  EXPECT_EQ(answer(two), 0);
  EXPECT_EQ(answer(four), 0);
  for (int fd : {one, two, three, four}) ::close(fd);
  auto b = make(test_ip(3).c_str());
  ASSERT_TRUE(b);
  auto r = b->ping(ProcessId{tcp(ip_a.c_str()), kPidLustre}, 5000ms);
  EXPECT_TRUE(r) << r.message();
  set_socket_params(SocketParams{});
}

// A userspace peer (its source port is its pid) that went away is forgotten after
// peer_idle seconds: an outsider cannot fill the table with one entry per port it used.
TEST(SocketPeers, APeerWithNothingLeftIsForgotten) {
  std::string ip_a = test_ip(2), ip_c = test_ip(4);
  auto a = make(ip_a.c_str(), [](SocketParams& p) { p.peer_idle = 1; });
  ASSERT_TRUE(a);
  test::EventLog log;
  auto me = a->me_attach(kPortal, ProcessId::any(), 0, 0, Unlink::Retain, InsPos::After);
  ASSERT_TRUE(me);
  std::vector<char> buf(8);
  MdDesc d;
  d.start = buf.data();
  d.length = buf.size();
  d.options = kMdOpPut;
  d.handler = log.handler();
  ASSERT_TRUE(a->md_attach(*me, d, Unlink::Retain));
  for (int i = 0; i < 3; ++i) {
    std::vector<std::uint8_t> out;
    int fd = raw_peer(ip_a, ip_c, out);
    ASSERT_GE(fd, 0);
    add_put(out, tcp(ip_c.c_str()), tcp(ip_a.c_str()), 0);
    ASSERT_EQ(::send(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
    ASSERT_EQ(log.wait(EventType::Put, static_cast<std::size_t>(i + 1), 30s), static_cast<std::size_t>(i + 1));
    ::close(fd);
  }
  EXPECT_TRUE(eventually([&] { return lnd_counter(*a, "peers_reaped") == 3; }))
      << lnd_counter(*a, "peers_reaped") << " of the 3 userspace peers forgotten";
  set_socket_params(SocketParams{});
}

// Protocol V2 with checksums (ksocklnd's CRC32 over the ksock header, the LNet header and
// the payload): a message whose checksum is right is taken; one whose checksum is wrong
// fails with -EIO and its connection is closed.
TEST(SocketRx, AV2MessageWithABadChecksumFails) {
  std::string ip_a = test_ip(2), ip_c = test_ip(4);
  auto a = make(ip_a.c_str());
  ASSERT_TRUE(a);
  test::EventLog log;
  std::vector<char> buf(64);
  sink_all(*a, log, buf);
  for (bool good : {true, false}) {
    std::vector<std::uint8_t> out;
    int fd = raw_peer(ip_a, ip_c, out);
    ASSERT_GE(fd, 0);
    out.resize(sock::kConnReqSize);  // a V2 HELLO instead of raw_peer's V3 one
    sock::Hello h;
    h.version = sock::kProtoV2;
    h.src_nid = tcp(ip_c.c_str());
    h.dst_nid = tcp(ip_a.c_str());
    h.src_pid = h.dst_pid = kPidLustre;
    h.src_incarnation = 1;
    auto hello = sock::encode_hello(h);
    out.insert(out.end(), hello.begin(), hello.end());
    std::size_t at = out.size();
    add_put(out, tcp(ip_c.c_str()), tcp(ip_a.c_str()), 16);
    out.insert(out.end(), 16, static_cast<std::uint8_t>(good ? 'g' : 'b'));
    auto msg = std::span<std::uint8_t>(out).subspan(at);
    std::uint32_t crc = sock::crc32_le(~0U, msg.data(), sock::kMsgHdrSize);  // its csum field is 0 here
    crc = sock::crc32_le(crc, msg.data() + sock::kMsgHdrSize, msg.size() - sock::kMsgHdrSize);
    sock::set_msg_hdr_csum(std::span<std::uint8_t, sock::kMsgHdrSize>(msg.data(), sock::kMsgHdrSize),
                           good ? crc : crc ^ 1);
    ASSERT_EQ(::send(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
    ASSERT_EQ(log.wait(EventType::Put, good ? 1u : 2u, 30s), good ? 1u : 2u);
    auto puts = log.all(EventType::Put);
    if (good) {
      EXPECT_EQ(puts.back().status, 0);
      EXPECT_EQ(buf[15], 'g');
    } else {
      EXPECT_EQ(puts.back().status, -EIO);
      char b[256];
      pollfd p{fd, POLLIN, 0};
      bool closed = false;
      for (int i = 0; i < 100 && !closed; ++i)
        closed = ::poll(&p, 1, 100) > 0 && ::recv(fd, b, sizeof b, MSG_DONTWAIT) == 0;
      EXPECT_TRUE(closed) << "the connection of a bad checksum stays open";
    }
    ::close(fd);
  }
  set_socket_params(SocketParams{});
}

// Protocol V3 keepalives: a quiet connection gets NOOPs carrying the keepalive cookie
// from us, and ours (the peer's) keep it open: a PUT after one is delivered.
TEST(SocketKeepalive, AQuietConnectionGetsNoopsAndTheirNoopsAreTaken) {
  std::string ip_a = test_ip(2), ip_c = test_ip(4);
  auto a = make(ip_a.c_str(), [](SocketParams& p) { p.keepalive = 1; });
  ASSERT_TRUE(a);
  test::EventLog log;
  std::vector<char> buf(64);
  sink_all(*a, log, buf);
  std::vector<std::uint8_t> out;
  int fd = raw_peer(ip_a, ip_c, out);
  ASSERT_GE(fd, 0);
  sock::MsgHdr noop;
  noop.type = sock::kMsgNoop;
  noop.zc_ack = sock::kKeepalivePing;
  std::uint8_t ping[sock::kMsgHdrSize];
  sock::encode_msg_hdr(noop, std::span<std::uint8_t, sock::kMsgHdrSize>(ping, sock::kMsgHdrSize));
  out.insert(out.end(), ping, ping + sizeof ping);
  ASSERT_EQ(::send(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
  // What comes back: the HELLO, then (within ksocklnd's 10 s between keepalives) a NOOP.
  std::vector<std::uint8_t> in;
  auto until = std::chrono::steady_clock::now() + 30s;
  auto has_noop = [&] { return std::search(in.begin(), in.end(), ping, ping + sizeof ping) != in.end(); };
  while (!has_noop() && std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    std::uint8_t b[256];
    ssize_t n = ::recv(fd, b, sizeof b, 0);
    ASSERT_GT(n, 0) << "the connection was closed";
    in.insert(in.end(), b, b + n);
  }
  EXPECT_TRUE(has_noop()) << "no keepalive NOOP within 30 s on a quiet connection";
  std::vector<std::uint8_t> put;
  add_put(put, tcp(ip_c.c_str()), tcp(ip_a.c_str()), 0);
  ASSERT_EQ(::send(fd, put.data(), put.size(), 0), static_cast<ssize_t>(put.size()));
  EXPECT_EQ(log.wait(EventType::Put, 1, 30s), 1u) << "the connection our NOOP came on no longer delivers";
  ::close(fd);
  set_socket_params(SocketParams{});
}

}  // namespace
}  // namespace lnet
