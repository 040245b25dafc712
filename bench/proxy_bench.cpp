// The parallel proxy against the raw hops on its path, one measurement per invocation
// (bench/proxy_bench.sh runs them in turn, in the same run, and prints the medians and
// ratios). Each prints one line "RESULT <what> <8-byte latency us> <1 MiB MB/s>".
//   lnet      (mpirun -n 1, LNET_PROXY set) an MPI application reaching a tcp server
//             through lnet-proxy and a router lnetd: latency is half the round trip of an
//             8-byte PUT and its ACK; bandwidth streams 1 MiB PUTs, --window of them in
//             flight, timed until the last ACK.
//   mpi-accept / mpi-connect --port-file F   two separately launched MPI jobs (Open MPI:
//             with ompi-server), connected as the proxy's are: half the round trip of an
//             8-byte ping-pong, and 1 MiB messages streamed with the same window.
//   relay-accept / relay-connect --port-file F   the raw path of the chain: the same two
//             jobs, the accepting one passing each message on to a TCP echo and its
//             answer back (MPI, then TCP, without LNet, on the same cores).
//   unix, tcp a raw Unix-domain socket (SOCK_SEQPACKET, as the bridge) and a raw TCP
//             connection on loopback (TCP_NODELAY) between this process and a forked
//             echo: the same ping-pong and stream.
//   tcp-echo --listen IP:PORT / tcp --peer IP:PORT   the TCP measurement between two
//             nodes (bench/proxy_bench.sh --cluster): the echo serves one connection.
// Options: --iters N (ping-pongs, default 2000), --stream N (1 MiB messages, 256),
// --window W (8), --server NID (lnet), --timeout S (30).
#include <arpa/inet.h>
#include <mpi.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <lnet/lnet.hpp>
#include <lnet/mpi.hpp>

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kBig = 1 << 20;
constexpr unsigned kPortal = 40;  // lnet-xfer serve's portal

struct Params {
  std::string mode, server, port_file, listen, peer;
  int iters = 2000, stream = 256, window = 8, timeout = 30;
};
Params g;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "bench_proxy: %s\n", why.c_str());
  std::exit(1);
}

double secs_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void result(const char* what, double half_rtt_s, double bytes, double secs) {
  std::printf("RESULT %s %.2f %.1f\n", what, half_rtt_s * 1e6, bytes / secs / 1e6);
}

// ---------------------------------------------------------------- LNet through the proxy

struct Waiter : std::enable_shared_from_this<Waiter> {
  std::mutex m;
  std::condition_variable cv;
  long acks = 0, errors = 0;
  lnet::EventHandler handler() {
    return [self = shared_from_this()](const lnet::Event& e) {
      std::lock_guard lk(self->m);
      bool failed = e.status || e.type == lnet::EventType::Unlink;  // UNLINK: no ACK in time
      if (failed) ++self->errors;
      if (e.type == lnet::EventType::Ack) ++self->acks;
      // Only what a waiter waits for wakes it (not the SEND events).
      if (failed || e.type == lnet::EventType::Ack) self->cv.notify_all();
    };
  }
  void wait_acks(long want) {
    std::unique_lock lk(m);
    if (!lnet::wait_with_progress(lk, cv, Clock::now() + std::chrono::seconds(g.timeout),
                                  [&] { return acks >= want || errors; }) ||
        errors)
      die("a PUT to the server failed or timed out (is the proxy chain up?)");
  }
};

int run_lnet() {
  auto nid = lnet::Nid::parse(g.server);
  if (!nid) die("bad --server '" + g.server + "': " + nid.message());
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  auto s = lnet::mpi::Session::start(MPI_COMM_WORLD);
  if (!s) die(s.message());
  lnet::Instance& lnet = (*s)->lnet();
  lnet::ProcessId server{*nid, lnet::kPidLustre};
  std::vector<char> out(kBig, 'p');
  auto w = std::make_shared<Waiter>();
  lnet::MdDesc d;
  d.start = out.data();
  d.threshold = 2;  // SEND and ACK
  d.handler = w->handler();
  auto put = [&](std::size_t len) {
    d.length = len;
    auto md = lnet.md_bind(d, lnet::Unlink::Unlink);
    if (!md || lnet.put(lnet::Nid::any(), *md, lnet::AckReq::Ack, server, kPortal, 0, 0, 0) != 0)
      die("PUT to " + g.server + " refused");
  };
  long sent = 0;
  int warm = std::max(g.iters / 10, 10);
  Clock::time_point t0;
  for (int i = 0; i < warm + g.iters; ++i) {
    if (i == warm) t0 = Clock::now();
    put(8);
    w->wait_acks(++sent);
  }
  double lat = secs_since(t0) / g.iters / 2;
  for (int i = 0; i < g.window; ++i) put(kBig);  // warm-up
  w->wait_acks(sent += g.window);
  t0 = Clock::now();
  long base = sent;
  for (int i = 0; i < g.stream; ++i) {
    if (sent - base >= g.window) w->wait_acks(sent - g.window + 1);
    put(kBig);
    ++sent;
  }
  w->wait_acks(base + g.stream);
  result("lnet", lat, static_cast<double>(kBig) * g.stream, secs_since(t0));
  std::fflush(stdout);
  s->reset();
  MPI_Finalize();
  return 0;
}

// ---------------------------------------------------------------- raw inter-job MPI

int tcp_to_echo(pid_t* child);
void full_write(int fd, const char* p, std::size_t n);
void full_read(int fd, char* p, std::size_t n);

// Ping-pong and stream over `inter` (this side `first`: sends first and measures).
void mpi_pair(MPI_Comm inter, bool first) {
  std::vector<char> buf(kBig, 'm');
  char b8[8] = {};
  int warm = std::max(g.iters / 10, 10);
  Clock::time_point t0;
  for (int i = 0; i < warm + g.iters; ++i) {
    if (i == warm) t0 = Clock::now();
    if (first) {
      MPI_Send(b8, 8, MPI_BYTE, 0, 1, inter);
      MPI_Recv(b8, 8, MPI_BYTE, 0, 1, inter, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(b8, 8, MPI_BYTE, 0, 1, inter, MPI_STATUS_IGNORE);
      MPI_Send(b8, 8, MPI_BYTE, 0, 1, inter);
    }
  }
  double lat = secs_since(t0) / g.iters / 2;
  std::vector<std::vector<char>> rbufs(static_cast<std::size_t>(g.window), std::vector<char>(kBig));
  std::vector<MPI_Request> reqs(static_cast<std::size_t>(g.window));
  auto stream = [&](int n) {
    for (int done = 0; done < n;) {
      int k = std::min(g.window, n - done);
      for (int i = 0; i < k; ++i) {
        if (first)
          MPI_Isend(buf.data(), kBig, MPI_BYTE, 0, 2, inter, &reqs[i]);
        else
          MPI_Irecv(rbufs[i].data(), kBig, MPI_BYTE, 0, 2, inter, &reqs[i]);
      }
      MPI_Waitall(k, reqs.data(), MPI_STATUSES_IGNORE);
      done += k;
    }
    // Delivered: the receiver says so (as the ACK does for LNet).
    if (first)
      MPI_Recv(b8, 1, MPI_BYTE, 0, 3, inter, MPI_STATUS_IGNORE);
    else
      MPI_Send(b8, 1, MPI_BYTE, 0, 3, inter);
  };
  stream(g.window);  // warm-up
  t0 = Clock::now();
  stream(g.stream);
  if (first)
    result(g.mode == "relay-connect" ? "relay" : "mpi", lat, static_cast<double>(kBig) * g.stream, secs_since(t0));
}

// The raw relay: what mpi_pair's second side does, with each message passed on to a TCP
// echo (the tcp measurement's) and its answer passed back: the path of the proxy chain
// (MPI, then TCP) without LNet, on the same cores.
void mpi_relay(MPI_Comm inter) {
  pid_t child;
  int fd = tcp_to_echo(&child);
  char b8[8];
  int warm = std::max(g.iters / 10, 10);
  for (int i = 0; i < warm + g.iters; ++i) {
    MPI_Recv(b8, 8, MPI_BYTE, 0, 1, inter, MPI_STATUS_IGNORE);
    full_write(fd, b8, 8);
    full_read(fd, b8, 8);
    MPI_Send(b8, 8, MPI_BYTE, 0, 1, inter);
  }
  b8[0] = 'S';
  full_write(fd, b8, 8);
  // Up to `window` receives posted; each message written on as it comes, in order.
  auto w = static_cast<std::size_t>(g.window);
  std::vector<std::vector<char>> bufs(w, std::vector<char>(kBig));
  std::vector<MPI_Request> reqs(w, MPI_REQUEST_NULL);
  auto relay = [&](int n) {
    int posted = 0;
    for (int i = 0; i < n; ++i) {
      while (posted < n && posted - i < g.window) {
        std::size_t k = static_cast<std::size_t>(posted) % w;
        MPI_Irecv(bufs[k].data(), kBig, MPI_BYTE, 0, 2, inter, &reqs[k]);
        ++posted;
      }
      std::size_t k = static_cast<std::size_t>(i) % w;
      MPI_Wait(&reqs[k], MPI_STATUS_IGNORE);
      full_write(fd, bufs[k].data(), kBig);
    }
    full_read(fd, b8, 1);  // the echo has them all
    MPI_Send(b8, 1, MPI_BYTE, 0, 3, inter);
  };
  relay(g.window);
  relay(g.stream);
  ::close(fd);
  ::waitpid(child, nullptr, 0);
}

int run_mpi(bool accept, bool relay = false) {
  if (g.port_file.empty()) die("--port-file is required");
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm inter;
  if (accept) {
    char port[MPI_MAX_PORT_NAME];
    MPI_Open_port(MPI_INFO_NULL, port);
    {
      std::ofstream f(g.port_file + ".tmp");
      f << port << "\n";
    }
    std::rename((g.port_file + ".tmp").c_str(), g.port_file.c_str());
    MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
    MPI_Close_port(port);
  } else {
    std::string port;
    for (int i = 0; i < g.timeout * 10 && port.empty(); ++i) {
      std::ifstream f(g.port_file);
      std::getline(f, port);
      if (port.empty()) usleep(100000);
    }
    if (port.empty()) die("no port in " + g.port_file);
    MPI_Comm_connect(port.c_str(), MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
  }
  if (relay)
    mpi_relay(inter);
  else
    mpi_pair(inter, !accept);
  std::fflush(stdout);
  MPI_Comm_disconnect(&inter);
  MPI_Finalize();
  return 0;
}

// ---------------------------------------------------------------- raw sockets

void full(ssize_t (*io)(int, void*, std::size_t), int fd, char* p, std::size_t n) {
  while (n) {
    ssize_t k = io(fd, p, n);
    if (k <= 0) die(std::string("socket: ") + (k ? std::strerror(errno) : "closed"));
    p += k;
    n -= static_cast<std::size_t>(k);
  }
}
ssize_t rd(int fd, void* p, std::size_t n) { return ::read(fd, p, n); }
ssize_t wr(int fd, void* p, std::size_t n) { return ::send(fd, p, n, MSG_NOSIGNAL); }

// The echo side: answers each 8-byte ping, then swallows the stream and says "done".
[[noreturn]] void echo(int fd, bool packets) {
  char b8[8];
  std::vector<char> sink(kBig);
  for (;;) {
    full(rd, fd, b8, 8);
    if (b8[0] == 'S') break;  // the stream begins
    full(wr, fd, b8, 8);
  }
  long total = g.stream + g.window;
  for (long i = 0; i < total; ++i) {
    if (packets) {  // SOCK_SEQPACKET: 1 MiB does not fit one packet; 64 KiB ones
      for (std::size_t off = 0; off < kBig; off += 65536)
        if (::read(fd, sink.data(), 65536) != 65536) _exit(1);
    } else {
      full(rd, fd, sink.data(), kBig);
    }
    if (i == g.window - 1 || i == total - 1) full(wr, fd, b8, 1);
  }
  _exit(0);
}

void socket_pair_run(const char* what, int fd, bool packets) {
  char b8[8] = {'p'};
  int warm = std::max(g.iters / 10, 10);
  Clock::time_point t0;
  for (int i = 0; i < warm + g.iters; ++i) {
    if (i == warm) t0 = Clock::now();
    full(wr, fd, b8, 8);
    full(rd, fd, b8, 8);
  }
  double lat = secs_since(t0) / g.iters / 2;
  b8[0] = 'S';
  full(wr, fd, b8, 8);
  std::vector<char> buf(kBig, 's');
  auto send_n = [&](long n) {
    for (long i = 0; i < n; ++i) {
      if (packets) {
        for (std::size_t off = 0; off < kBig; off += 65536)
          if (::send(fd, buf.data() + off, 65536, MSG_NOSIGNAL) != 65536) die("send");
      } else {
        full(wr, fd, buf.data(), kBig);
      }
    }
    full(rd, fd, b8, 1);
  };
  send_n(g.window);  // warm-up
  t0 = Clock::now();
  send_n(g.stream);
  result(what, lat, static_cast<double>(kBig) * g.stream, secs_since(t0));
}

int run_unix() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) die("socketpair");
  int bufsize = 4 << 20;
  for (int fd : sv) {
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof bufsize);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof bufsize);
  }
  pid_t child = ::fork();
  if (child == 0) {
    ::close(sv[0]);
    echo(sv[1], true);
  }
  ::close(sv[1]);
  socket_pair_run("unix", sv[0], true);
  ::close(sv[0]);
  ::waitpid(child, nullptr, 0);
  return 0;
}

void full_write(int fd, const char* p, std::size_t n) { full(wr, fd, const_cast<char*>(p), n); }
void full_read(int fd, char* p, std::size_t n) { full(rd, fd, p, n); }

// A TCP connection on loopback to a forked echo(); the child's pid in *child.
int tcp_to_echo(pid_t* child) {
  int l = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 1) != 0 ||
      ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    die(std::string("tcp listen: ") + std::strerror(errno));
  *child = ::fork();
  if (*child == 0) {
    int c = ::accept(l, nullptr, nullptr);
    int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    echo(c, false);
  }
  ::close(l);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("tcp connect");
  return fd;
}

// "IP:PORT" into an address, or die naming the option.
sockaddr_in address_of(const std::string& opt, const std::string& v) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  auto colon = v.rfind(':');
  char* end = nullptr;
  long port = colon == std::string::npos ? 0 : std::strtol(v.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || !end || *end || port < 1 || port > 65535 ||
      ::inet_pton(AF_INET, v.substr(0, colon).c_str(), &a.sin_addr) != 1)
    die("bad " + opt + " '" + v + "' (IPv4:PORT)");
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  return a;
}

int run_tcp() {
  if (!g.peer.empty()) {  // to an echo on another node
    sockaddr_in a = address_of("--peer", g.peer);
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (int i = 0; ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0; ++i) {
      if (i == 100) die("tcp connect to " + g.peer + ": " + std::strerror(errno));
      ::usleep(100000);  // the echo is being started
      ::close(fd);
      fd = ::socket(AF_INET, SOCK_STREAM, 0);
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    socket_pair_run("tcp", fd, false);
    ::close(fd);
    return 0;
  }
  pid_t child;
  int fd = tcp_to_echo(&child);
  socket_pair_run("tcp", fd, false);
  ::close(fd);
  ::waitpid(child, nullptr, 0);
  return 0;
}

int run_tcp_echo() {
  sockaddr_in a = address_of("--listen", g.listen);
  int l = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 1) != 0)
    die("tcp listen on " + g.listen + ": " + std::strerror(errno));
  int c = ::accept(l, nullptr, nullptr);
  if (c < 0) die(std::string("accept: ") + std::strerror(errno));
  ::close(l);
  ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  echo(c, false);  // exits
}

int number(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || n < 1 || n > 100000000) die("bad " + opt + " '" + v + "' (a positive number)");
  return static_cast<int>(n);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.empty() || a[0] == "--help" || a[0] == "-h") {
    std::printf(
        "usage: bench_proxy lnet --server NID | mpi-accept|mpi-connect|relay-accept|relay-connect --port-file F |\n"
        "       unix | tcp [--peer IP:PORT] | tcp-echo --listen IP:PORT\n"
        "       [--iters N] [--stream N] [--window W] [--timeout S]\n"
        "One measurement per run; bench/proxy_bench.sh runs them all and compares.\n");
    return a.empty() ? 2 : 0;
  }
  g.mode = a[0];
  for (std::size_t i = 1; i < a.size(); i += 2) {
    if (i + 1 >= a.size()) die("'" + a[i] + "' needs a value (--help)");
    const std::string& v = a[i + 1];
    if (a[i] == "--server")
      g.server = v;
    else if (a[i] == "--port-file")
      g.port_file = v;
    else if (a[i] == "--listen")
      g.listen = v;
    else if (a[i] == "--peer")
      g.peer = v;
    else if (a[i] == "--iters")
      g.iters = number(a[i], v);
    else if (a[i] == "--stream")
      g.stream = number(a[i], v);
    else if (a[i] == "--window")
      g.window = number(a[i], v);
    else if (a[i] == "--timeout")
      g.timeout = number(a[i], v);
    else
      die("unknown option '" + a[i] + "' (--help)");
  }
  if (g.mode == "lnet") return run_lnet();
  if (g.mode == "mpi-accept") return run_mpi(true);
  if (g.mode == "mpi-connect" || g.mode == "relay-connect") return run_mpi(false);
  if (g.mode == "relay-accept") return run_mpi(true, true);
  if (g.mode == "unix") return run_unix();
  if (g.mode == "tcp") return run_tcp();
  if (g.mode == "tcp-echo") return run_tcp_echo();
  die("unknown measurement '" + g.mode + "' (--help)");
}
