// The socket LND between two instances in this process, on two 127.x.y.z addresses:
// ping, PUT and GET of several sizes with data checks, both directions.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>

#include <lnet/lnd/header.hpp>
#include <lnet/lnet.hpp>

#include "lnd/socket/sock_wire.hpp"
#include "socket_fixture.hpp"
#include "support/event_log.hpp"
#include "support/put_get.hpp"

namespace lnet {
namespace {

class Socket : public ::testing::Test {
 protected:
  void SetUp() override {
    ip_a = test_ip(2);
    ip_b = test_ip(3);
    a = make(ip_a.c_str(), tweak);
    b = make(ip_b.c_str(), tweak);
    ASSERT_TRUE(a && b);
  }
  std::function<void(SocketParams&)> tweak;
  std::string ip_a, ip_b;
  void TearDown() override {
    a.reset();
    b.reset();
  }
  std::unique_ptr<Instance> a, b;
};

TEST_F(Socket, PingBothWays) {
  auto r = a->ping(ProcessId{tcp(ip_b.c_str()), kPidLustre}, std::chrono::milliseconds(5000));
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->info.nis.size(), 2u);
  EXPECT_EQ(r->info.nis[1].nid, tcp(ip_b.c_str()));
  auto back = b->ping(ProcessId{tcp(ip_a.c_str()), kPidLustre}, std::chrono::milliseconds(5000));
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(back->info.nis[1].nid, tcp(ip_a.c_str()));
}

void put_get(Instance& from, Instance& to, Nid to_nid, std::size_t size) {
  test::put_get(from, to, to_nid, size, kPortal);
}

TEST_F(Socket, PutAndGetOfEverySize) {
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{1} << 20}) {
    SCOPED_TRACE(size);
    put_get(*a, *b, tcp(ip_b.c_str()), size);
    put_get(*b, *a, tcp(ip_a.c_str()), size);
  }
  EXPECT_EQ(test::settled_msgs_alloc(*a), 0u);
  EXPECT_EQ(test::settled_msgs_alloc(*b), 0u);
}

TEST_F(Socket, UnreachablePeerFailsInsteadOfHanging) {
  test::EventLog log;
  char byte = 1;
  MdDesc d;
  d.start = &byte;
  d.length = 1;
  d.threshold = 1;
  d.handler = log.handler();
  auto md = a->md_bind(d, Unlink::Unlink);
  // Nobody listens on 127.0.0.9: the connection is refused.
  ASSERT_EQ(a->put(Nid::any(), *md, AckReq::NoAck, ProcessId{tcp(test_ip(9).c_str()), kPidLustre}, kPortal, 0, 0, 0),
            0);
  auto ev = log.find(EventType::Send);
  ASSERT_TRUE(ev);
  EXPECT_NE(ev->status, 0);
  EXPECT_TRUE(log.wait_unlinked(*md));
  EXPECT_GE(a->counters().remote_dropped_count, 1u);
}

// Protocol V2 with one untyped connection per peer and CRC32 checksums on every message.
class SocketV2Checksummed : public Socket {
 protected:
  void SetUp() override {
    tweak = [](SocketParams& p) {
      p.typed_conns = false;
      p.enable_csum = true;
    };
    Socket::SetUp();
  }
};

TEST_F(SocketV2Checksummed, PutAndGetOfEverySize) {
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{1} << 20}) {
    SCOPED_TRACE(size);
    put_get(*a, *b, tcp(ip_b.c_str()), size);
    put_get(*b, *a, tcp(ip_a.c_str()), size);
  }
}

// Every tunable of the socket LND has its LNET_SOCK_* variable; bad values are refused
// naming the variable.
TEST(SocketParams, TimeoutZeroTakesLnetsDerivedLndTimeout) {
  // sock_timeout 0: the NI takes LNet's lnd_timeout, (31 - 1) / (2 + 1) = 10 s here.
  SocketParams p;
  p.port = kPort;
  p.accept = AcceptMode::All;
  p.timeout = 0;
  set_socket_params(p);
  Config cfg;
  NetConfig nc;
  nc.net = NetId::make(kSockLnd, 0);
  nc.nid = tcp("127.0.0.77");
  cfg.nets.push_back(nc);
  cfg.globals.transaction_timeout = 31;
  auto lnet = Instance::create(cfg, kPidLustre);
  ASSERT_TRUE(lnet) << lnet.message();
  auto nis = (*lnet)->control().ni_info();
  ASSERT_EQ(nis.size(), 2u);
  EXPECT_EQ(nis[1].lnd_timeout, 10);
  lnet->reset();
  // An NI's own timeout, or LNET_SOCK_TIMEOUT, wins.
  cfg.nets[0].lnd_tunables.set("timeout", 7);
  lnet = Instance::create(cfg, kPidLustre);
  ASSERT_TRUE(lnet) << lnet.message();
  EXPECT_EQ((*lnet)->control().ni_info()[1].lnd_timeout, 7);
  lnet->reset();
  set_socket_params(SocketParams{});
}

// A raw acceptor at `ip`: answers every connection made to it with `answer` (given the
// connection's socket, once the acceptor request and HELLO came), until destroyed.
class RawAcceptor {
 public:
  RawAcceptor(const std::string& ip, std::function<void(int)> answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(kPort);
    inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
    EXPECT_EQ(::listen(fd_, 16), 0);
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        std::uint8_t in[sock::kConnReqSize + 56];  // the request and a V3 HELLO without IPs
        std::size_t have = 0;
        for (int i = 0; i < 50 && have < sizeof in; ++i) {
          pollfd q{c, POLLIN, 0};
          if (::poll(&q, 1, 100) <= 0) continue;
          ssize_t n = ::recv(c, in + have, sizeof in - have, 0);
          if (n <= 0) break;
          have += static_cast<std::size_t>(n);
        }
        answer_(c);
        ::close(c);
      }
    });
  }
  ~RawAcceptor() {
    stop_.store(true);
    thread_.join();
    ::close(fd_);
  }

 private:
  int fd_ = -1;
  std::function<void(int)> answer_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// What the LND logged while `f` ran.
std::string logged_during(const std::function<void()>& f) {
  auto lines = std::make_shared<std::string>();
  auto mutex = std::make_shared<std::mutex>();
  set_log_sink([lines, mutex](LogLevel, std::string_view l) {
    std::lock_guard g(*mutex);
    *lines += std::string(l) + "\n";
  });
  f();
  set_log_sink(nullptr);
  std::lock_guard g(*mutex);
  return *lines;
}

// The peer we dial closes the connection without answering our HELLO (a kernel with
// accept=secure does so to an unprivileged source port, and to a NID that is not one of
// its NIs): the failure names both causes, the port ours.
TEST(SocketHandshake, APeerThatClosesBeforeItsHelloIsNamed) {
  std::string ip_a = test_ip(2), ip_c = test_ip(5);
  RawAcceptor peer(ip_c, [](int) {});
  auto a = make(ip_a.c_str(), [](SocketParams& p) { p.privileged_ports = false; });
  ASSERT_TRUE(a);
  std::string log = logged_during([&] {
    auto r = a->ping(ProcessId{tcp(ip_c.c_str()), kPidLustre}, std::chrono::milliseconds(3000));
    EXPECT_FALSE(r);
  });
  EXPECT_NE(log.find(ip_c + "@tcp closed the connection without answering our HELLO: it refuses our source port "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("accept=secure, the kernel's default"), std::string::npos) << log;
  set_socket_params(SocketParams{});
}

// The peer we dial answers as another NID: refused, naming both.
TEST(SocketHandshake, APeerThatAnswersAsAnotherNidIsRefused) {
  std::string ip_a = test_ip(2), ip_c = test_ip(5);
  Nid other = tcp(test_ip(6).c_str());
  RawAcceptor peer(ip_c, [&](int c) {
    sock::Hello h;
    h.src_nid = other;
    h.dst_nid = tcp(ip_a.c_str());
    h.src_pid = h.dst_pid = kPidLustre;
    h.src_incarnation = 7;
    h.ctype = sock::ConnType::Control;
    auto bytes = sock::encode_hello(h);
    (void)::send(c, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    ::usleep(100000);
  });
  auto a = make(ip_a.c_str());
  ASSERT_TRUE(a);
  std::string log = logged_during([&] {
    auto r = a->ping(ProcessId{tcp(ip_c.c_str()), kPidLustre}, std::chrono::milliseconds(3000));
    EXPECT_FALSE(r);
  });
  EXPECT_NE(log.find("connected to " + ip_c + "@tcp but it claimed to be " + other.to_string()), std::string::npos)
      << log;
  set_socket_params(SocketParams{});
}

// A peer that stops half-way through a message (its path cut, say, while the rest is in
// flight): the connection is closed once nothing more came for the LND's timeout, as
// ksocklnd times out a receive that makes no progress, not left to TCP keepalive (whose
// probes the peer's kernel still answers); the NI goes on serving.
TEST(SocketRx, AMessageStalledHalfWayIsClosedAfterTheTimeout) {
  std::string ip_a = test_ip(2), ip_c = test_ip(4);
  auto a = make(ip_a.c_str(), [](SocketParams& p) { p.timeout = 1; });
  ASSERT_TRUE(a);
  std::vector<std::uint8_t> out;
  int fd = raw_peer(ip_a, ip_c, out);
  ASSERT_GE(fd, 0);
  add_put(out, tcp(ip_c.c_str()), tcp(ip_a.c_str()), 4096);  // announced; 100 bytes of it come
  out.resize(out.size() + 100, 0x5a);
  ASSERT_EQ(::send(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));

  // The HELLO reply comes, then the end of the connection: within a generous deadline
  // (its timeout is 1 s), where without the receive timeout it would never come.
  bool closed = false;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !closed && std::chrono::steady_clock::now() < until;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 500) <= 0) continue;
    char buf[512];
    closed = ::recv(fd, buf, sizeof buf, 0) <= 0;
  }
  ::close(fd);
  EXPECT_TRUE(closed) << "a connection stalled half-way through a message is still open after 30 s";
  auto b = make(test_ip(3).c_str());
  ASSERT_TRUE(b);
  auto r = b->ping(ProcessId{tcp(ip_a.c_str()), kPidLustre}, std::chrono::milliseconds(5000));
  EXPECT_TRUE(r) << "the NI serves on: " << r.message();
  set_socket_params(SocketParams{});
}

// Many small messages in one read (a burst that queued while the I/O thread was busy):
// every one is delivered, also past the number handled per wake-up, with nothing more
// coming from the peer to wake the connection again.
TEST(SocketRx, ABurstOfMessagesInOneReadIsAllDelivered) {
  std::string ip_a = test_ip(2), ip_c = test_ip(4);
  auto a = make(ip_a.c_str());
  ASSERT_TRUE(a);
  test::EventLog log;
  std::vector<char> buf(8);
  sink_all(*a, log, buf);
  constexpr std::size_t kBurst = 300;  // well past the messages taken per wake-up
  std::vector<std::uint8_t> out;
  int fd = raw_peer(ip_a, ip_c, out);
  ASSERT_GE(fd, 0);
  for (std::size_t i = 0; i < kBurst; ++i) add_put(out, tcp(ip_c.c_str()), tcp(ip_a.c_str()), 0);
  ASSERT_EQ(::send(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
  EXPECT_EQ(log.wait(EventType::Put, kBurst, std::chrono::seconds(30)), kBurst)
      << "messages read from the socket were left in the connection's buffer";
  ::close(fd);
  set_socket_params(SocketParams{});
}

// A peer on an unprivileged port (a user's process, with accept=all) is who its
// connection says: address@net and its port with the user flag. What its LNet header
// claims (LNet's pid 12345, another node's NID) is overwritten, as ksocklnd does.
TEST(SocketRx, AnUnprivilegedPeerIsWhoItsConnectionSays) {
  std::string ip_a = test_ip(2), ip_c = test_ip(4);
  auto a = make(ip_a.c_str());
  ASSERT_TRUE(a);
  test::EventLog log;
  std::vector<char> buf(8);
  sink_all(*a, log, buf);
  std::vector<std::uint8_t> out;
  int fd = raw_peer(ip_a, ip_c, out);
  ASSERT_GE(fd, 0);
  sockaddr_in mine{};
  socklen_t len = sizeof mine;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &len), 0);
  ASSERT_GT(ntohs(mine.sin_port), 1023);
  add_put(out, tcp(test_ip(6).c_str()), tcp(ip_a.c_str()), 0);  // claims another NID, and pid 12345
  ASSERT_EQ(::send(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
  ASSERT_EQ(log.wait(EventType::Put, 1, std::chrono::seconds(30)), 1u);
  auto put = log.find(EventType::Put);
  ASSERT_TRUE(put);
  EXPECT_EQ(put->initiator, (ProcessId{tcp(ip_c.c_str()), Pid{ntohs(mine.sin_port)} | kPidUserFlag}));
  ::close(fd);
  set_socket_params(SocketParams{});
}

// An NI whose interface does not exist is refused, as ksocklnd refuses it, with the reason
// in the error the caller gets.
TEST(SocketStartup, AMissingInterfaceIsNamedInTheError) {
  set_socket_params(SocketParams{});
  Config cfg;
  NetConfig nc;
  nc.net = NetId::make(kSockLnd, 0);
  nc.nid = tcp(test_ip(2).c_str());
  nc.interfaces = {"nosuch0"};
  cfg.nets.push_back(nc);
  auto r = Instance::create(cfg, kPidLustre);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), -ENODEV);
  EXPECT_NE(r.message().find("cannot start network tcp: no interface 'nosuch0' for " + nc.nid->to_string()),
            std::string::npos)
      << r.message();
}

TEST(SocketParams, ReadFromTheEnvironment) {
  struct Var {
    const char* name;
    const char* value;
  } vars[] = {{"LNET_ACCEPT", "all"},
              {"LNET_ACCEPT_PORT", "7988"},
              {"LNET_SOCK_TIMEOUT", "9"},
              {"LNET_SOCK_KEEPALIVE", "0"},
              {"LNET_SOCK_KEEPALIVE_IDLE", "11"},
              {"LNET_SOCK_KEEPALIVE_COUNT", "3"},
              {"LNET_SOCK_KEEPALIVE_INTVL", "2"},
              {"LNET_SOCK_TYPED_CONNS", "0"},
              {"LNET_SOCK_MIN_BULK", "4096"},
              {"LNET_SOCK_TX_BUFFER_SIZE", "65536"},
              {"LNET_SOCK_RX_BUFFER_SIZE", "131072"},
              {"LNET_SOCK_NAGLE", "1"},
              {"LNET_SOCK_ENABLE_CSUM", "1"},
              {"LNET_SOCK_MIN_RECONNECTMS", "10"},
              {"LNET_SOCK_MAX_RECONNECTMS", "20"},
              {"LNET_SOCK_NSCHEDS", "2"}};
  for (auto& v : vars) setenv(v.name, v.value, 1);
  auto p = SocketParams::from_env();
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(p->accept, AcceptMode::All);
  EXPECT_EQ(p->port, 7988);
  EXPECT_EQ(p->timeout, 9);
  EXPECT_EQ(p->keepalive, 0);
  EXPECT_EQ(p->keepalive_idle, 11);
  EXPECT_EQ(p->keepalive_count, 3);
  EXPECT_EQ(p->keepalive_intvl, 2);
  EXPECT_FALSE(p->typed_conns);
  EXPECT_EQ(p->min_bulk, 4096);
  EXPECT_EQ(p->tx_buffer_size, 65536);
  EXPECT_EQ(p->rx_buffer_size, 131072);
  EXPECT_TRUE(p->nagle);
  EXPECT_TRUE(p->enable_csum);
  EXPECT_EQ(p->min_reconnectms, 10);
  EXPECT_EQ(p->max_reconnectms, 20);
  EXPECT_EQ(p->nscheds, 2);

  setenv("LNET_SOCK_NAGLE", "2", 1);
  auto bad = SocketParams::from_env();
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("LNET_SOCK_NAGLE='2'"), std::string::npos) << bad.message();
  setenv("LNET_SOCK_NAGLE", "0", 1);
  setenv("LNET_SOCK_MIN_RECONNECTMS", "30", 1);
  auto order = SocketParams::from_env();
  ASSERT_FALSE(order);
  EXPECT_NE(order.message().find("LNET_SOCK_MAX_RECONNECTMS"), std::string::npos) << order.message();
  setenv("LNET_ACCEPT", "some", 1);
  EXPECT_FALSE(SocketParams::from_env());
  for (auto& v : vars) unsetenv(v.name);
  EXPECT_TRUE(SocketParams::from_env());
}

}  // namespace
}  // namespace lnet
