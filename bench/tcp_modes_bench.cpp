// Ways of moving 1 MiB messages over TCP on loopback, against the plain one, in the same
// run: what a zero-copy send from a shared region (the UP LND's memfd) and a polling
// receiver would buy the router's hop of the proxy path, before anyone builds them.
// Sender and receiver are two threads of this process; each mode streams --stream
// messages of 1 MiB from a memfd of 16 MiB, --reps times. Prints medians of bandwidth and
// of CPU time (user + system, both threads) per MiB, and both as ratios to the baseline:
//   write    write() from the region; the receiver blocks in recv()   (the baseline)
//   sendfile sendfile() from the memfd: the socket references its pages, no copy
//   splice   splice() memfd -> pipe of 1 MiB -> socket: the same by hand
//   poll     write() as the baseline; the receiver polls recv(MSG_DONTWAIT), never sleeps
//   bench_tcp_modes [--stream N] [--reps R] [--port P]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kBig = 1 << 20;
constexpr std::size_t kSlots = 16;
int g_stream = 2000;
int g_reps = 5;
int g_port = 13990;

enum class Mode { Write, Sendfile, Splice, Poll };
constexpr const char* kNames[] = {"write", "sendfile", "splice", "poll"};

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Region {
  int fd;
  char* base;
};

Region make_region() {
  int fd = memfd_create("bench_tcp_modes", 0);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(kBig * kSlots)) != 0) die("memfd");
  void* p = mmap(nullptr, kBig * kSlots, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) die("mmap");
  std::memset(p, 'x', kBig * kSlots);
  return {fd, static_cast<char*>(p)};
}

void send_one(Mode mode, int sock, const Region& r, std::size_t slot, const int pipe_fds[2]) {
  off_t off = static_cast<off_t>(slot * kBig);
  std::size_t left = kBig;
  while (left > 0) {
    ssize_t n = 0;
    if (mode == Mode::Sendfile) {
      n = sendfile(sock, r.fd, &off, left);
    } else if (mode == Mode::Splice) {
      loff_t lo = off;
      n = splice(r.fd, &lo, pipe_fds[1], nullptr, left, SPLICE_F_MOVE);
      for (ssize_t in = n; in > 0;) {
        ssize_t w =
            splice(pipe_fds[0], nullptr, sock, nullptr, static_cast<std::size_t>(in), SPLICE_F_MOVE | SPLICE_F_MORE);
        if (w <= 0) die("splice to the socket");
        in -= w;
      }
      off += n;
    } else {
      n = send(sock, r.base + slot * kBig + (kBig - left), left, MSG_NOSIGNAL);
    }
    if (n <= 0) die(kNames[static_cast<int>(mode)]);
    left -= static_cast<std::size_t>(n);
  }
}

// Returns {MB/s, CPU us per MiB}.
std::pair<double, double> run_once(Mode mode, const Region& region) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(g_port));
  if (bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(lfd, 1) != 0) die("listen");
  std::size_t want = kBig * static_cast<std::size_t>(g_stream);
  std::thread receiver([&] {
    int s = accept(lfd, nullptr, nullptr);
    if (s < 0) die("accept");
    std::vector<char> buf(kBig);
    int flags = mode == Mode::Poll ? MSG_DONTWAIT : 0;
    for (std::size_t got = 0; got < want;) {
      ssize_t n = recv(s, buf.data(), kBig, flags);
      if (n < 0 && errno == EAGAIN) continue;
      if (n <= 0) die("recv");
      got += static_cast<std::size_t>(n);
    }
    if (send(s, "k", 1, MSG_NOSIGNAL) != 1) die("send");
    close(s);
  });
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int pipe_fds[2] = {-1, -1};
  if (mode == Mode::Splice) {
    if (pipe(pipe_fds) != 0) die("pipe");
    if (fcntl(pipe_fds[1], F_SETPIPE_SZ, static_cast<int>(kBig)) < 0) die("F_SETPIPE_SZ");
  }
  double cpu0 = cpu_seconds();
  auto t0 = Clock::now();
  for (int i = 0; i < g_stream; ++i) send_one(mode, s, region, static_cast<std::size_t>(i) % kSlots, pipe_fds);
  char c;
  if (recv(s, &c, 1, 0) != 1) die("the receiver's answer");
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  receiver.join();
  double cpu = cpu_seconds() - cpu0;
  close(s);
  close(lfd);
  for (int fd : pipe_fds)
    if (fd >= 0) close(fd);
  return {static_cast<double>(want) / secs / 1e6, cpu * 1e6 / g_stream};
}

int number(const std::string& opt, const char* v, long max = 1000000) {
  char* end = nullptr;
  long n = v ? std::strtol(v, &end, 10) : 0;
  if (!v || *end || n <= 0 || n > max) {
    std::fprintf(stderr, "bench_tcp_modes: bad value '%s' for %s\n", v ? v : "", opt.c_str());
    std::exit(2);
  }
  return static_cast<int>(n);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--stream")
      g_stream = number(a, v), ++i;
    else if (a == "--reps")
      g_reps = number(a, v), ++i;
    else if (a == "--port")
      g_port = number(a, v, 65535), ++i;
    else {
      std::fprintf(a == "--help" ? stdout : stderr,
                   "usage: bench_tcp_modes [--stream N] [--reps R] [--port P]\n"
                   "  1 MiB messages over TCP on loopback (two threads): write() with a blocking\n"
                   "  receiver (the baseline), sendfile() and splice() from a memfd (no copy on\n"
                   "  send), and write() with a polling receiver. Medians of R runs of N messages.\n");
      return a == "--help" ? 0 : 2;
    }
  }
  Region region = make_region();
  std::vector<double> bw[4], cpu[4];
  for (int r = 0; r < g_reps; ++r) {
    for (int m = 0; m < 4; ++m) {  // interleaved, so that a noisy moment hits every mode
      auto [b, c] = run_once(static_cast<Mode>(m), region);
      bw[m].push_back(b);
      cpu[m].push_back(c);
      std::fprintf(stderr, "rep %d %-8s %8.0f MB/s %6.0f us CPU/MiB\n", r + 1, kNames[m], b, c);
    }
  }
  std::printf("# 1 MiB over TCP on loopback, two threads, medians of %d runs of %d messages\n", g_reps, g_stream);
  std::printf("# %-9s %10s %8s %14s %8s\n", "mode", "MB/s", "ratio", "CPU us/MiB", "ratio");
  double b0 = median(bw[0]), c0 = median(cpu[0]);
  for (int m = 0; m < 4; ++m)
    std::printf("  %-9s %10.0f %8.2f %14.0f %8.2f\n", kNames[m], median(bw[m]), median(bw[m]) / b0, median(cpu[m]),
                median(cpu[m]) / c0);
  return 0;
}
