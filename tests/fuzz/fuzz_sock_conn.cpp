// Fuzz target: the socket LND's connection state machine, not only its decoders. One
// live instance listens on 127.0.0.1 (accept=all); each input is written as the byte
// stream of one connection (acceptor request, HELLO, framed messages: whatever the input
// holds), the write side is closed, and the connection is read until the LND closes it.
// Whatever the bytes, the instance must not crash, hang (a connection the LND never
// closes aborts after 10 s: every handshake and message has its deadline), leak a
// message, or stop serving: after each input it must still answer a ping.
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <lnet/lnet.hpp>

namespace {

constexpr int kPort = 22988;
const char* const kAddr = "127.0.0.1";   // the instance under test
const char* const kProbe = "127.0.0.2";  // another, whose pings say it still serves

std::unique_ptr<lnet::Instance> make(const char* ip) {
  lnet::Config cfg;
  lnet::NetConfig nc;
  nc.net = lnet::NetId::make(lnet::kSockLnd, 0);
  nc.nid = *lnet::Nid::parse(std::string(ip) + "@tcp");
  cfg.nets.push_back(nc);
  auto r = lnet::Instance::create(cfg, lnet::kPidLustre);
  if (!r) {
    std::fprintf(stderr, "fuzz_sock_conn: %s\n", r.message().c_str());
    std::abort();
  }
  return std::move(*r);
}

struct Pair {
  std::unique_ptr<lnet::Instance> target, probe;
};

Pair& pair() {
  static Pair p = [] {
    lnet::SocketParams sp;
    sp.port = kPort;
    sp.accept = lnet::AcceptMode::All;
    sp.accept_timeout = 1;
    sp.timeout = 1;
    lnet::set_socket_params(sp);
    lnet::set_log_level(lnet::LogLevel::Error);
    return Pair{make(kAddr), make(kProbe)};
  }();
  return p;
}

int dial() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(kPort);
  inet_pton(AF_INET, kAddr, &to.sin_addr);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) std::abort();
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Pair& p = pair();
  int fd = dial();
  std::size_t sent = 0;
  while (sent < size) {
    ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the LND closed it already
    sent += static_cast<std::size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  // The LND must end the connection: a bad byte closes it at once, a good handshake with
  // nothing after it ends at the receive timeout (1 s).
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  char buf[4096];
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    if (std::chrono::steady_clock::now() > until) {
      std::fprintf(stderr, "fuzz_sock_conn: the LND kept a connection open for 10 s\n");
      std::abort();
    }
    if (::poll(&pfd, 1, 100) <= 0) continue;
    if (::recv(fd, buf, sizeof buf, 0) <= 0) break;
  }
  ::close(fd);
  // Still serving, and every message the input made is gone.
  if (!p.probe->ping(lnet::ProcessId{*lnet::Nid::parse(std::string(kAddr) + "@tcp"), lnet::kPidLustre},
                     std::chrono::milliseconds(5000))) {
    std::fprintf(stderr, "fuzz_sock_conn: the instance stopped answering pings\n");
    std::abort();
  }
  for (int i = 0; i < 500 && p.target->counters().msgs_alloc != 0; ++i) usleep(10000);
  if (p.target->counters().msgs_alloc != 0) {
    std::fprintf(stderr, "fuzz_sock_conn: %u messages left after the connection closed\n",
                 static_cast<unsigned>(p.target->counters().msgs_alloc));
    std::abort();
  }
  return 0;
}
