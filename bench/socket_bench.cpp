// Socket LND against raw TCP, between two processes on loopback, in the same run:
// 8-byte ping-pong round trip and 1 MiB streaming bandwidth. Prints an OSU-style table
// (size, raw, ours, ratio) of medians over --reps repetitions. --conns N: LNet with
// conns_per_peer N against raw TCP streaming over N sockets (one sending thread each).
//   bench_socket [--iters N] [--stream N] [--reps R] [--port P] [--conns N] [--discovery]
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <lnet/lnet.hpp>

namespace {

using Clock = std::chrono::steady_clock;
using namespace lnet;

int g_iters = 20000;
int g_stream = 400;
int g_reps = 5;
int g_port = 13988;
bool g_discovery = false;
int g_conns = 0;  // --conns: conns_per_peer of both sides and raw sockets (0: the default, one of each)
constexpr std::size_t kBig = 1 << 20;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

// ---------------------------------------------------------------- raw TCP

int tcp_listen(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(fd, 128)) die("raw listen");
  return fd;
}

int tcp_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  for (int i = 0; connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0; ++i) {
    if (i > 200) die("raw connect");
    usleep(10000);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

void xfer(int fd, char* buf, std::size_t n, bool send_it) {
  while (n > 0) {
    ssize_t r = send_it ? send(fd, buf, n, MSG_NOSIGNAL) : recv(fd, buf, n, 0);
    if (r <= 0) die("raw transfer");
    buf += r;
    n -= static_cast<std::size_t>(r);
  }
}

// Messages of the stream socket `i` of `n` carries.
int share(int i, int n) { return g_stream / n + (i < g_stream % n ? 1 : 0); }

// The raw peer: echoes 8-byte pings on the first socket, then each socket's share of
// the stream is read by a thread of its own and answered with one byte.
void raw_peer(int nsock) {
  std::vector<int> fds;
  for (int i = 0; i < nsock; ++i) fds.push_back(tcp_connect(g_port + 1));
  char small[8];
  for (int i = 0; i < g_iters; ++i) {
    xfer(fds[0], small, 8, false);
    xfer(fds[0], small, 8, true);
  }
  std::vector<std::thread> readers;
  for (int k = 0; k < nsock; ++k)
    readers.emplace_back([k, nsock, fd = fds[k]] {
      std::vector<char> big(kBig);
      char one = 0;
      for (int i = 0; i < share(k, nsock); ++i) xfer(fd, big.data(), kBig, false);
      xfer(fd, &one, 1, true);
    });
  for (auto& t : readers) t.join();
}

// Returns {8-byte round trip in us, 1 MiB stream bandwidth in MB/s} over `nsock` sockets
// (the round trip on the first).
std::pair<double, double> raw_tcp_once(int nsock) {
  int lfd = tcp_listen(g_port + 1);
  pid_t child = fork();
  if (child == 0) {
    raw_peer(nsock);
    _exit(0);
  }
  std::vector<int> fds;
  for (int i = 0; i < nsock; ++i) {
    int fd = accept(lfd, nullptr, nullptr);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fds.push_back(fd);
  }
  close(lfd);
  char small[8] = {};
  auto t0 = Clock::now();
  for (int i = 0; i < g_iters; ++i) {
    xfer(fds[0], small, 8, true);
    xfer(fds[0], small, 8, false);
  }
  double rtt = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / g_iters;
  t0 = Clock::now();
  std::vector<std::thread> writers;
  for (int k = 0; k < nsock; ++k)
    writers.emplace_back([k, nsock, fd = fds[k]] {
      std::vector<char> big(kBig, 'x');
      char one;
      for (int i = 0; i < share(k, nsock); ++i) xfer(fd, big.data(), kBig, true);
      xfer(fd, &one, 1, false);
    });
  for (auto& t : writers) t.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int fd : fds) close(fd);
  waitpid(child, nullptr, 0);
  return {rtt, static_cast<double>(kBig) * g_stream / secs / 1e6};
}

// ---------------------------------------------------------------- LNet over the socket LND

constexpr unsigned kPingPortal = 30;
constexpr unsigned kBulkPortal = 31;

std::unique_ptr<Instance> start(std::initializer_list<const char*> ips) {
  auto env = SocketParams::from_env();  // LNET_SOCK_* (LNET_SOCK_NSCHEDS, say) apply
  SocketParams p = env ? *env : SocketParams{};
  p.port = g_port;
  p.accept = AcceptMode::All;
  set_socket_params(p);
  Config cfg;
  for (const char* ip : ips) {
    NetConfig nc;
    nc.net = NetId::make(kSockLnd, 0);
    nc.nid = *Nid::parse(std::string(ip) + "@tcp");
    if (g_conns > 0) nc.lnd_tunables.set("conns_per_peer", g_conns);
    cfg.nets.push_back(nc);
  }
  auto r = Instance::create(cfg, kPidLustre);
  if (!r) {
    std::fprintf(stderr, "bench_socket: %s\n", r.message().c_str());
    std::exit(1);
  }
  return std::move(*r);
}

struct Done {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  void set() {
    std::lock_guard g(m);
    done = true;
    cv.notify_all();
  }
  void wait() {
    std::unique_lock lk(m);
    cv.wait(lk, [&] { return done; });
  }
};

// An echo peer: every 8-byte PUT on the ping portal goes straight back; the bulk portal
// takes 1 MiB PUTs. Runs until the parent's pipe closes.
[[noreturn]] void lnet_peer(int ready_fd, int quit_fd) {
  auto b = start({"127.0.0.3"});
  const ProcessId a{*Nid::parse("127.0.0.2@tcp"), kPidLustre};
  static char echo[8];
  MdDesc src;
  src.start = echo;
  src.length = 8;
  MdHandle back = b->md_bind(src, Unlink::Retain).value();
  static char ping_buf[8];
  MeHandle me = b->me_attach(kPingPortal, ProcessId::any(), 0, ~0ULL, Unlink::Retain, InsPos::After).value();
  MdDesc pd;
  pd.start = ping_buf;
  pd.length = 8;
  pd.options = kMdOpPut | kMdManageRemote;
  Instance* bp = b.get();
  pd.handler = [bp, back, a](const Event& e) {
    if (e.type == EventType::Put) (void)bp->put(Nid::any(), back, AckReq::NoAck, a, kPingPortal, 0, 0, 0);
  };
  (void)b->md_attach(me, pd, Unlink::Retain).value();
  static std::vector<char> sink(kBig);
  MeHandle bme = b->me_attach(kBulkPortal, ProcessId::any(), 0, ~0ULL, Unlink::Retain, InsPos::After).value();
  MdDesc bd;
  bd.start = sink.data();
  bd.length = kBig;
  bd.options = kMdOpPut | kMdManageRemote;
  (void)b->md_attach(bme, bd, Unlink::Retain).value();
  char c = 1;
  (void)!write(ready_fd, &c, 1);
  (void)!read(quit_fd, &c, 1);  // returns when the parent is done
  b.reset();
  _exit(0);
}

// A peer process running `body(ready_fd, quit_fd)`: started, and waited for until it says
// it is ready; stop() closes its quit pipe and reaps it.
struct PeerProcess {
  pid_t pid = -1;
  int ready = -1;
  int quit = -1;
  explicit PeerProcess(void (*body)(int ready_fd, int quit_fd)) {
    int r[2], q[2];
    if (pipe(r) || pipe(q)) die("pipe");
    pid = fork();
    if (pid == 0) {
      close(r[0]);
      close(q[1]);
      body(r[1], q[0]);
      _exit(0);
    }
    close(r[1]);
    close(q[0]);
    ready = r[0];
    quit = q[1];
    char c;
    if (read(ready, &c, 1) != 1) die("peer start");
  }
  void stop() {
    close(quit);
    waitpid(pid, nullptr, 0);
    close(ready);
  }
};

// Ping-pong: each echo that comes back sends the next ping, from the event handler.
// The mean round trip in us.
double lnet_pingpong(Instance& a, const ProcessId& b) {
  static char ping[8];
  MdDesc src;
  src.start = ping;
  src.length = 8;
  MdHandle out = a.md_bind(src, Unlink::Retain).value();
  static char pong[8];
  std::atomic<int> left{g_iters};
  Done done;
  MeHandle me = a.me_attach(kPingPortal, ProcessId::any(), 0, ~0ULL, Unlink::Retain, InsPos::After).value();
  MdDesc pd;
  pd.start = pong;
  pd.length = 8;
  pd.options = kMdOpPut | kMdManageRemote;
  pd.handler = [&](const Event& e) {
    if (e.type != EventType::Put) return;
    if (--left > 0) {
      (void)a.put(Nid::any(), out, AckReq::NoAck, b, kPingPortal, 0, 0, 0);
    } else {
      done.set();
    }
  };
  MdHandle pmd = a.md_attach(me, pd, Unlink::Retain).value();
  // Warm up the connections first.
  if (!a.ping(b, std::chrono::milliseconds(5000))) die("lnet ping");
  auto t0 = Clock::now();
  (void)a.put(Nid::any(), out, AckReq::NoAck, b, kPingPortal, 0, 0, 0);
  done.wait();
  double rtt = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / g_iters;
  (void)a.md_unlink(pmd);
  (void)a.md_unlink(out);
  return rtt;
}

// Streaming: up to 8 PUTs of 1 MiB in flight; the last asks for an ACK, and as every
// 1 MiB PUT goes on the one BULK connection, its ACK means all arrived. With --conns the
// PUTs spread over several connections and may overtake each other: every one asks for
// an ACK, up to 8 per connection are in flight until acknowledged, and the stream ends
// with the last ACK. MB/s.
double lnet_stream(Instance& a, const ProcessId& b) {
  std::vector<char> big(kBig, 'y');
  std::mutex m;
  std::condition_variable cv;
  const bool every = g_conns > 0;
  const int window = every ? 8 * g_conns : 8;
  int inflight = 0;
  int acks = 0;
  bool acked = false;
  MdDesc bd;
  bd.start = big.data();
  bd.length = kBig;
  bd.handler = [&](const Event& e) {
    std::lock_guard g(m);
    if (e.type == EventType::Send && !every) --inflight;
    if (e.type == EventType::Ack) {
      if (every) --inflight;
      acked = !every || ++acks == g_stream;
    }
    cv.notify_all();
  };
  MdHandle bmd = a.md_bind(bd, Unlink::Retain).value();
  auto t0 = Clock::now();
  for (int i = 0; i < g_stream; ++i) {
    {
      std::unique_lock lk(m);
      cv.wait(lk, [&] { return inflight < window; });
      ++inflight;
    }
    bool ack = every || i == g_stream - 1;
    (void)a.put(Nid::any(), bmd, ack ? AckReq::Ack : AckReq::NoAck, b, kBulkPortal, 0, 0, 0);
  }
  {
    std::unique_lock lk(m);
    cv.wait(lk, [&] { return acked && inflight == 0; });
  }
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  (void)a.md_unlink(bmd);
  return static_cast<double>(kBig) * g_stream / secs / 1e6;
}

std::pair<double, double> lnet_once() {
  PeerProcess peer(lnet_peer);
  auto a = start({"127.0.0.2"});
  const ProcessId b{*Nid::parse("127.0.0.3@tcp"), kPidLustre};
  double rtt = lnet_pingpong(*a, b);
  double bw = lnet_stream(*a, b);
  a.reset();
  peer.stop();
  return {rtt, bw};
}

// Dynamic discovery of a peer with 4 NIs (127.0.0.3-6): the discover round from a node
// that never met it (connection set-up included, as a first send has it), against an
// 8-byte ping round trip between the two once connected, and the round again with the
// connections up (the peer deleted first). Returns (first round, warm round, ping) in us.
void four_ni_peer(int ready_fd, int quit_fd) {
  auto b = start({"127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"});
  char c = 1;
  (void)!write(ready_fd, &c, 1);
  (void)!read(quit_fd, &c, 1);  // returns when the parent is done
}

std::tuple<double, double, double> discovery_once() {
  PeerProcess peer(four_ni_peer);
  auto a = start({"127.0.0.2"});
  Nid b = *Nid::parse("127.0.0.3@tcp");
  auto t0 = Clock::now();
  auto d = a->control().discover(b, false, std::chrono::seconds(30));
  double round = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  if (!d || d->nis.size() != 4) {
    std::fprintf(stderr, "bench_socket: discovery: %s\n", d ? "not 4 NIs" : d.message().c_str());
    std::exit(1);
  }
  // Again with the connections up: the peer forgotten, discovered afresh.
  if (!a->control().del_peer(d->primary_nid, {})) die("peer del");
  t0 = Clock::now();
  d = a->control().discover(b, false, std::chrono::seconds(30));
  double warm = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  if (!d) die("second discovery");
  std::vector<double> pings;
  for (int i = 0; i < 200; ++i) {
    auto t = Clock::now();
    if (!a->ping(ProcessId{b, kPidLustre}, std::chrono::seconds(5))) die("ping");
    pings.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
  }
  a.reset();
  peer.stop();
  return {round, warm, median(pings)};
}

// The options into the globals: -1 to go on, else the exit status.
int parse_args(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto num = [&](int* out) {
      if (i + 1 >= argc || (*out = std::atoi(argv[++i])) <= 0) {
        std::fprintf(stderr, "bench_socket: %s needs a positive number\n", a.c_str());
        std::exit(2);
      }
    };
    if (a == "--iters")
      num(&g_iters);
    else if (a == "--stream")
      num(&g_stream);
    else if (a == "--reps")
      num(&g_reps);
    else if (a == "--port")
      num(&g_port);
    else if (a == "--conns")
      num(&g_conns);
    else if (a == "--discovery")
      g_discovery = true;
    else {
      std::printf(
          "usage: bench_socket [--iters N] [--stream N] [--reps R] [--port P] [--conns N] [--discovery]\n"
          "  8-byte ping-pong (N round trips) and 1 MiB streaming (N messages) between two\n"
          "  processes on loopback: raw TCP, then LNet over the socket LND (127.0.0.2/3).\n"
          "  --conns N: conns_per_peer N on both sides, against raw TCP over N sockets\n"
          "  (every 1 MiB PUT acknowledged: they may overtake each other).\n"
          "  --discovery: also the discovery round of a peer with 4 NIs against a ping.\n");
      return a == "--help" ? 0 : 2;
    }
  }
  return -1;
}

// --discovery: the discovery rounds against a ping, medians of --reps runs.
void discovery_table() {
  std::vector<double> rounds, warms, pings;
  for (int r = 0; r < g_reps; ++r) {
    auto [round, warm, ping] = discovery_once();
    rounds.push_back(round);
    warms.push_back(warm);
    pings.push_back(ping);
    std::fprintf(stderr, "rep %d: discovery %.1f us (warm %.1f us), ping %.1f us\n", r + 1, round, warm, ping);
  }
  std::printf("# discovery round of a peer with 4 NIs (ping + push) against one LNet ping round trip\n");
  std::printf("# %-28s %12s %12s %8s\n", "measure", "ping (us)", "round (us)", "ratio");
  std::printf("  %-28s %12.1f %12.1f %8.2f\n", "first contact", median(pings), median(rounds),
              median(rounds) / median(pings));
  std::printf("  %-28s %12.1f %12.1f %8.2f\n", "connections up", median(pings), median(warms),
              median(warms) / median(pings));
}

}  // namespace

int main(int argc, char** argv) {
  if (int rc = parse_args(argc, argv); rc >= 0) return rc;
  set_log_level(LogLevel::Error);
  std::vector<double> raw_rtt, raw_bw, our_rtt, our_bw;
  for (int r = 0; r < g_reps; ++r) {
    auto [rr, rb] = raw_tcp_once(std::max(g_conns, 1));
    auto [lr, lb] = lnet_once();
    raw_rtt.push_back(rr);
    raw_bw.push_back(rb);
    our_rtt.push_back(lr);
    our_bw.push_back(lb);
    std::fprintf(stderr, "rep %d: raw %.2f us %.0f MB/s, lnet %.2f us %.0f MB/s\n", r + 1, rr, rb, lr, lb);
  }
  std::printf("# socket LND vs raw TCP, loopback, two processes, medians of %d runs", g_reps);
  if (g_conns > 0) std::printf(", conns_per_peer %d vs %d raw sockets", g_conns, g_conns);
  std::printf("\n");
  std::printf("# %-28s %12s %12s %8s\n", "measure", "raw TCP", "LNet", "ratio");
  double r1 = median(our_rtt) / median(raw_rtt), r2 = median(our_bw) / median(raw_bw);
  std::printf("  %-28s %12.2f %12.2f %8.3f\n", "8 B round trip (us)", median(raw_rtt), median(our_rtt), r1);
  std::printf("  %-28s %12.0f %12.0f %8.3f\n", "1 MiB stream (MB/s)", median(raw_bw), median(our_bw), r2);
  if (g_discovery) discovery_table();
  return 0;
}
