// Fuzz target: the UP LND's handling of a proxy's messages as a sequence (UpNi::handle
// and what follows from it: pids, PARSEs into a live core, RECV_DONEs, NOTIFYs, errors),
// not only the codec. One live instance with an UP NI serves a bridge socket; each input
// is a sequence of frames (a 2-byte little-endian length, then that many bytes) that one
// connection sends in order before it closes. Whatever they are, lnetd must
// not crash, must close or keep the connection as the protocol says, release everything
// the connection held once it is gone, and serve the next proxy.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include <lnet/lnet.hpp>
#include <lnet/up/client.hpp>
#include <lnet/up/uplnd.hpp>

namespace {

struct Lnetd {
  std::string bridge;
  std::shared_ptr<lnet::up::UpLnd> up;
  std::unique_ptr<lnet::Instance> lnet;
};

Lnetd& lnetd() {
  static Lnetd d = [] {
    lnet::set_log_level(lnet::LogLevel::Error);
    Lnetd l;
    l.bridge = "/tmp/lnet-fuzz-bridge." + std::to_string(getpid());
    lnet::up::UpOptions o;
    o.bridge = l.bridge;
    o.region_size = 64u << 20;
    o.proxy_credits = 64;  // small limits, so that inputs reach them
    o.proxy_pids = 8;
    l.up = std::make_shared<lnet::up::UpLnd>(o);
    lnet::Config c;
    lnet::NetConfig n;
    n.net = lnet::NetId::make(lnet::kMpiLnd, 0);
    n.nid = lnet::Nid::make(n.net, 0x7f000002);
    c.nets.push_back(n);
    auto r = lnet::Instance::create(c, lnet::kPidLustre, {l.up});
    if (!r) {
      std::fprintf(stderr, "fuzz_bridge_ni: %s\n", r.message().c_str());
      std::abort();
    }
    l.lnet = std::move(*r);
    std::atexit([] { ::unlink(lnetd().bridge.c_str()); });
    return l;
  }();
  return d;
}

int dial(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) std::abort();
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Lnetd& d = lnetd();
  const std::uint64_t before = d.up->stats().connections;
  int fd = dial(d.bridge);
  // lnetd reads the packets in order and then the end of the connection (what it
  // answers is left unread: a proxy that does not read is one of the cases).
  for (std::size_t at = 0; at + 2 <= size;) {
    std::size_t len = data[at] | (std::size_t{data[at + 1]} << 8);
    at += 2;
    len = std::min(len, size - at);
    if (::send(fd, data + at, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) break;
    at += len;
  }
  ::close(fd);
  // Taken, then gone: its pids and messages with it.
  auto settled = [&] {
    lnet::up::UpStats s = d.up->stats();
    return s.connections > before && s.proxies == 0 && s.pids == 0;
  };
  for (int i = 0; i < 25000 && !settled(); ++i) std::this_thread::sleep_for(std::chrono::microseconds(200));
  if (!settled()) {
    std::fprintf(stderr, "fuzz_bridge_ni: a closed proxy still holds %llu pids\n",
                 static_cast<unsigned long long>(d.up->stats().pids));
    std::abort();
  }
  for (int i = 0; i < 500 && d.lnet->counters().msgs_alloc != 0; ++i)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  if (d.lnet->counters().msgs_alloc != 0) {
    std::fprintf(stderr, "fuzz_bridge_ni: %llu messages left behind\n",
                 static_cast<unsigned long long>(d.lnet->counters().msgs_alloc));
    std::abort();
  }
  // The next proxy is served.
  auto next = lnet::up::BridgeClient::connect(d.bridge, 0, std::chrono::seconds(5));
  if (!next) {
    std::fprintf(stderr, "fuzz_bridge_ni: a proxy cannot connect after the input: %s\n", next.message().c_str());
    std::abort();
  }
  return 0;
}
