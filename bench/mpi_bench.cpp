// The MPI LND against raw MPI, in the same job and the same run (OSU-style output):
//   - PUT ping-pong half round trip at 8 B, 4 KiB, 64 KiB and 1 MiB (osu_latency);
//   - 1 MiB streaming bandwidth with a window of W messages (osu_bw);
//   - 8-byte message rate with the same window (osu_mbw_mr, one pair);
//   - the CPU an idle rank uses with the LND's progress thread.
// LNet runs first with the application driving progress (LNET_MPI_PROGRESS=poll, the
// lowest latency), then with the progress thread. Each figure is the median of --reps
// repetitions; every repetition measures raw MPI and then LNet.
//   mpirun -n 2 bench_mpi [--reps R] [--iters N] [--window W] [--stream N] [--rate N] [--idle S]
//                           [--progress poll|thread|both] [--max-size BYTES]
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <lnet/lnet.hpp>
#include <lnet/mpi.hpp>

namespace {

using Clock = std::chrono::steady_clock;
using namespace lnet;

struct Params {
  int reps = 5;
  int iters = 10000;       // ping-pong round trips for sizes up to 8 KiB (a tenth above)
  int window = 64;         // messages in flight for bandwidth and rate
  int stream = 256;        // 1 MiB messages per bandwidth measurement
  int rate = 1000000;      // 8-byte messages per rate measurement (fewer are too noisy)
  int idle = 5;            // seconds of idleness measured
  int max_size = 1 << 20;  // largest ping-pong size
  int modes = 3;           // bit 0: application-driven progress, bit 1: progress thread
};

Params g;
int g_rank = 0;
constexpr std::size_t kBig = 1 << 20;
std::vector<char> g_out(kBig, 'o'), g_in(kBig);  // raw MPI's buffers
constexpr int kSizes[] = {8, 4096, 65536, 1 << 20};
constexpr unsigned kPortal = 40;
constexpr std::uint64_t kPing = 1, kData = 2, kAck = 3;

double secs_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int iters_for(int size) { return size > 8192 ? std::max(g.iters / 10, 50) : g.iters; }

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "bench_mpi: rank %d: %s\n", g_rank, what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

template <class T>
T must(Result<T> r, const char* what) {
  if (!r) fail(std::string(what) + ": " + r.message());
  return std::move(*r);
}

// ---------------------------------------------------------------- raw MPI

// Half round trip in microseconds (osu_latency: blocking send and receive).
double raw_latency(MPI_Comm c, int size) {
  int peer = 1 - g_rank, n = iters_for(size), warm = std::max(n / 10, 10);
  Clock::time_point t0;
  for (int i = 0; i < warm + n; ++i) {
    if (i == warm) t0 = Clock::now();
    if (g_rank == 0) {
      MPI_Send(g_out.data(), size, MPI_BYTE, peer, 1, c);
      MPI_Recv(g_in.data(), size, MPI_BYTE, peer, 1, c, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(g_in.data(), size, MPI_BYTE, peer, 1, c, MPI_STATUS_IGNORE);
      MPI_Send(g_out.data(), size, MPI_BYTE, peer, 1, c);
    }
  }
  return secs_since(t0) * 1e6 / (2.0 * n);
}

// Messages per second from rank 0 to rank 1 in windows (osu_bw / osu_mbw_mr), ending
// with a one-byte acknowledgement from the receiver.
double raw_stream(MPI_Comm c, int size, int count) {
  int peer = 1 - g_rank, windows = std::max(count / g.window, 1);
  std::vector<MPI_Request> reqs(static_cast<std::size_t>(g.window));
  char ack = 0;
  MPI_Barrier(c);
  auto t0 = Clock::now();
  for (int w = 0; w < windows; ++w) {
    for (int i = 0; i < g.window; ++i) {
      if (g_rank == 0)
        MPI_Isend(g_out.data(), size, MPI_BYTE, peer, 2, c, &reqs[static_cast<std::size_t>(i)]);
      else
        MPI_Irecv(g_in.data(), size, MPI_BYTE, peer, 2, c, &reqs[static_cast<std::size_t>(i)]);
    }
    MPI_Waitall(g.window, reqs.data(), MPI_STATUSES_IGNORE);
  }
  if (g_rank == 0)
    MPI_Recv(&ack, 1, MPI_BYTE, peer, 3, c, MPI_STATUS_IGNORE);
  else
    MPI_Send(&ack, 1, MPI_BYTE, peer, 3, c);
  return static_cast<double>(windows) * g.window / secs_since(t0);
}

// ---------------------------------------------------------------- LNet

// Runs until flag is set: drives progress when the application must, else sleeps until
// the progress thread's handler sets it.
void wait_for(Instance& lnet, bool polled, std::atomic<bool>& flag) {
  if (!polled) {
    flag.wait(false, std::memory_order_acquire);
    return;
  }
  while (!flag.load(std::memory_order_acquire)) lnet.progress();
}

struct Lnet {
  mpi::Session& s;
  Instance& lnet;
  bool polled;
  ProcessId peer;
  std::vector<char> out, in;

  explicit Lnet(mpi::Session& session)
      : s(session),
        lnet(session.lnet()),
        polled(!session.progress_thread()),
        peer(session.id(1 - g_rank)),
        out(kBig, 'o'),
        in(kBig) {}

  MeHandle attach(std::uint64_t bits, MdDesc d) {
    MeHandle me = must(lnet.me_attach(kPortal, ProcessId::any(), bits, 0, Unlink::Retain, InsPos::After), "ME attach");
    d.options |= kMdOpPut | kMdManageRemote;
    must(lnet.md_attach(me, d, Unlink::Retain), "MD attach");
    return me;
  }

  // PUT ping-pong of `size` bytes: the answer goes out from the event handler.
  double latency(int size) {
    int n = iters_for(size), warm = std::max(n / 10, 10), total = warm + n;
    MdDesc od;
    od.start = out.data();
    od.length = static_cast<std::uint32_t>(size);
    MdHandle omd = must(lnet.md_bind(od, Unlink::Retain), "MD bind");
    std::atomic<int> got{0};
    std::atomic<bool> done{false};
    Clock::time_point t0;
    MdDesc id;
    id.start = in.data();
    id.length = static_cast<std::uint32_t>(size);
    id.handler = [&](const Event& e) {
      if (e.type != EventType::Put) return;
      if (e.status) fail("ping-pong PUT failed: " + std::to_string(e.status));
      int k = got.fetch_add(1, std::memory_order_relaxed) + 1;
      if (g_rank == 0 && k == warm) t0 = Clock::now();
      if (g_rank == 1 || k < total)
        if (int rc = lnet.put(Nid::any(), omd, AckReq::NoAck, peer, kPortal, kPing, 0, 0); rc)
          fail("PUT: " + std::to_string(rc));
      if (k == total) {
        done.store(true, std::memory_order_release);
        done.notify_one();
      }
    };
    MeHandle me = attach(kPing, id);
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
      // The first ping is not timed: the warm-up starts the clock.
      if (int rc = lnet.put(Nid::any(), omd, AckReq::NoAck, peer, kPortal, kPing, 0, 0); rc)
        fail("PUT: " + std::to_string(rc));
    }
    wait_for(lnet, polled, done);
    double us = g_rank == 0 ? secs_since(t0) * 1e6 / (2.0 * (n)) : 0;
    settle();
    (void)lnet.me_unlink(me);
    (void)lnet.md_unlink(omd);
    return us;
  }

  // Rank 0 PUTs `count` messages of `size` bytes with at most window in flight (a Send
  // event ends one); rank 1 counts them and PUTs one byte back when all arrived.
  double stream(int size, int count) {
    std::atomic<int> inflight{0}, got{0};
    std::atomic<bool> done{false};
    MdDesc od;
    od.start = out.data();
    od.length = static_cast<std::uint32_t>(size);
    od.handler = [&](const Event& e) {
      if (e.type != EventType::Send) return;
      if (e.status) fail("streamed PUT failed: " + std::to_string(e.status));
      // The sender sleeps while the window is full: wake it when half has drained, not
      // for every message (a futex wake each would cost more than the message).
      if (inflight.fetch_sub(1, std::memory_order_release) - 1 <= g.window / 2) inflight.notify_one();
    };
    MdHandle omd = must(lnet.md_bind(od, Unlink::Retain), "MD bind");
    MdDesc ad;
    ad.start = out.data();
    ad.length = 1;
    MdHandle amd = must(lnet.md_bind(ad, Unlink::Retain), "MD bind");
    MdDesc id;
    id.start = in.data();
    id.length = static_cast<std::uint32_t>(size);
    id.handler = [&](const Event& e) {
      if (e.type != EventType::Put) return;
      if (e.status) fail("streamed PUT arrived with " + std::to_string(e.status));
      if (e.match_bits == kAck || got.fetch_add(1, std::memory_order_relaxed) + 1 == count) {
        if (g_rank == 1 && lnet.put(Nid::any(), amd, AckReq::NoAck, peer, kPortal, kAck, 0, 0))
          fail("acknowledgement PUT failed");
        done.store(true, std::memory_order_release);
        done.notify_one();
      }
    };
    MeHandle me = attach(g_rank == 0 ? kAck : kData, id);
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = Clock::now();
    if (g_rank == 0) {
      for (int i = 0; i < count; ++i) {
        wait_below(inflight, g.window);
        inflight.fetch_add(1, std::memory_order_relaxed);
        if (int rc = lnet.put(Nid::any(), omd, AckReq::NoAck, peer, kPortal, kData, 0, 0); rc)
          fail("PUT: " + std::to_string(rc));
      }
    }
    wait_for(lnet, polled, done);
    double rate = count / secs_since(t0);
    wait_below(inflight, 1);
    settle();
    (void)lnet.me_unlink(me);
    (void)lnet.md_unlink(omd);
    (void)lnet.md_unlink(amd);
    return rate;
  }

  // Until fewer than `limit` PUTs are in flight (progressing LNet when it is polled).
  void wait_below(std::atomic<int>& inflight, int limit) {
    for (int v; (v = inflight.load(std::memory_order_acquire)) >= limit;) {
      if (polled)
        lnet.progress();
      else
        inflight.wait(v, std::memory_order_acquire);
    }
  }

  // Both ranks are done with a measurement: credits still owed go back before the next.
  void settle() {
    auto until = Clock::now() + std::chrono::milliseconds(2);
    while (Clock::now() < until)
      if (polled) lnet.progress();
    MPI_Barrier(MPI_COMM_WORLD);
  }
};

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Percent of a core this process used while sleeping `g.idle` seconds (the largest over
// the ranks).
double idle_cpu_percent() {
  MPI_Barrier(MPI_COMM_WORLD);
  double c0 = cpu_seconds();
  auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(g.idle));
  double span = secs_since(t0);
  double pct = span > 0.01 ? (cpu_seconds() - c0) / span * 100 : 0, worst = 0;
  MPI_Reduce(&pct, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  return worst;
}

std::unique_ptr<mpi::Session> start(mpi::ProgressMode mode) {
  auto opts = must(mpi::Options::from_env(), "LNET_MPI_* variables");
  opts.progress = mode;
  auto cfg = must(Config::from_env(), "LNET_* variables");
  return must(mpi::Session::start(MPI_COMM_WORLD, cfg, opts), "LNet start");
}

void usage() {
  std::printf(
      "usage: mpirun -n 2 bench_mpi [--reps R] [--iters N] [--window W] [--stream N] [--rate N] [--idle S]\n"
      "                           [--progress poll|thread|both]\n"
      "                           [--max-size BYTES]\n"
      "  The MPI LND against raw MPI between two ranks, in the same run:\n"
      "    PUT ping-pong half round trip at 8 B, 4 KiB, 64 KiB, 1 MiB (N round trips, N/10 above 8 KiB)\n"
      "    1 MiB streaming bandwidth (N messages, W in flight)\n"
      "    8-byte message rate (N messages, W in flight)\n"
      "    CPU of an idle rank with the progress thread (S seconds)\n"
      "  LNet with application-driven progress, then with the progress thread (which needs\n"
      "  MPI_THREAD_MULTIPLE). Medians of R repetitions (default %d).\n",
      Params{}.reps);
}

bool parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    int* slot = a == "--reps"       ? &g.reps
                : a == "--iters"    ? &g.iters
                : a == "--window"   ? &g.window
                : a == "--stream"   ? &g.stream
                : a == "--rate"     ? &g.rate
                : a == "--idle"     ? &g.idle
                : a == "--max-size" ? &g.max_size
                                    : nullptr;
    if (a == "--help" || a == "-h") {
      if (g_rank == 0) usage();
      return false;
    }
    if (a == "--progress") {
      std::string v = i + 1 < argc ? argv[++i] : "";
      g.modes = v == "poll" ? 1 : v == "thread" ? 2 : v == "both" ? 3 : 0;
      if (!g.modes) {
        if (g_rank == 0)
          std::fprintf(stderr, "bench_mpi: --progress takes poll, thread or both, not '%s'\n", v.c_str());
        std::exit(2);
      }
      continue;
    }
    if (!slot) {
      if (g_rank == 0) std::fprintf(stderr, "bench_mpi: unknown argument '%s' (--help)\n", a.c_str());
      std::exit(2);
    }
    char* end = nullptr;
    long v = i + 1 < argc ? std::strtol(argv[++i], &end, 10) : 0;
    if (!end || *end || v < (a == "--idle" ? 0 : 1) || v > 100000000) {
      if (g_rank == 0) std::fprintf(stderr, "bench_mpi: %s needs a positive number, not '%s'\n", a.c_str(), argv[i]);
      std::exit(2);
    }
    *slot = static_cast<int>(v);
  }
  return true;
}

struct Row {
  std::vector<double> raw, ours;
};

void print_rows(const char* title, const char* unit, const int* sizes, std::size_t n, std::vector<Row>& rows,
                bool lower_is_better) {
  std::printf("# %s (%s)\n", title, unit);
  std::printf("# %-10s %14s %14s %8s%s\n", "size", "raw MPI", "LNet", "ratio", lower_is_better ? "   LNet-raw" : "");
  for (std::size_t i = 0; i < n && !rows[i].raw.empty(); ++i) {
    double r = median(rows[i].raw), o = median(rows[i].ours);
    std::printf("  %-10d %14.2f %14.2f %8.3f", sizes[i], r, o, o / r);
    if (lower_is_better) std::printf(" %+10.2f", o - r);
    std::printf("\n");
  }
}

constexpr std::size_t kNsizes = std::size(kSizes);
const char* const kModeName[2] = {"poll", "thread"};

// What one progress model measured.
struct Figures {
  std::vector<Row> lat{kNsizes}, bw{1}, rate{1};
  std::string driver;  // the driver's counters, both ranks together
  double idle = 0;     // % of a core an idle rank uses, LNet up (thread mode only)
};

template <class... A>
void say(const char* fmt, A... args) {
  if (g_rank == 0) {
    std::fprintf(stderr, fmt, args...);
    std::fflush(stderr);
  }
}

// Every repetition of every measurement, raw MPI and LNet alternating, in one mode
// (0: application-driven progress, 1: the progress thread).
Figures run_mode(int m, MPI_Comm raw) {
  Figures f;
  auto s = start(m == 0 ? mpi::ProgressMode::Poll : mpi::ProgressMode::Thread);
  Lnet l(*s);
  for (int r = 0; r < g.reps; ++r) {
    say("rep %d/%d (%s):", r + 1, g.reps, kModeName[m]);
    for (std::size_t i = 0; i < kNsizes && kSizes[i] <= g.max_size; ++i) {
      f.lat[i].raw.push_back(raw_latency(raw, kSizes[i]));
      f.lat[i].ours.push_back(l.latency(kSizes[i]));
      say(" %d B %.2f/%.2f us;", kSizes[i], f.lat[i].raw.back(), f.lat[i].ours.back());
    }
    f.bw[0].raw.push_back(raw_stream(raw, static_cast<int>(kBig), g.stream) * kBig / 1e6);
    f.bw[0].ours.push_back(l.stream(static_cast<int>(kBig), g.stream) * kBig / 1e6);
    f.rate[0].raw.push_back(raw_stream(raw, 8, g.rate));
    f.rate[0].ours.push_back(l.stream(8, g.rate));
    say(" bw %.0f/%.0f MB/s; rate %.0f/%.0f msg/s\n", f.bw[0].raw.back(), f.bw[0].ours.back(), f.rate[0].raw.back(),
        f.rate[0].ours.back());
  }
  // What the driver did: how often a send waited for a credit, how many went packed,
  // how many credit returns needed a NOOP.
  mpi::Stats st = s->stats();
  unsigned long long mine[4] = {st.immediate, st.packed, st.noops, st.credit_waits}, sum[4] = {};
  MPI_Reduce(mine, sum, 4, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  char line[200];
  std::snprintf(line, sizeof line, "# driver, %s: %llu inline messages, %llu PACKED, %llu NOOPs, %llu credit waits\n",
                kModeName[m], sum[0], sum[1], sum[2], sum[3]);
  f.driver = line;
  if (m == 1) {
    say("idle rank with the progress thread: %d s\n", g.idle);
    f.idle = idle_cpu_percent();
  }
  return f;
}

void report(const Figures fig[2], int provided, double idle_raw) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string first_line(version, std::strcspn(version, ",\n"));
  std::printf("# MPI LND vs raw MPI, 2 ranks, %s, thread level %s, medians of %d runs\n", first_line.c_str(),
              provided == MPI_THREAD_MULTIPLE   ? "MULTIPLE"
              : provided == MPI_THREAD_FUNNELED ? "FUNNELED"
                                                : "other",
              g.reps);
  const int big[] = {static_cast<int>(kBig)}, small[] = {8};
  const char* how[2] = {"application-driven progress", "progress thread"};
  for (int m = 0; m < 2; ++m) {
    if (!(g.modes & (1 << m))) continue;
    Figures f = fig[m];  // print_rows sorts
    std::string t = std::string("PUT ping-pong half round trip, ") + how[m];
    print_rows(t.c_str(), "us", kSizes, kNsizes, f.lat, true);
    t = std::string("streaming bandwidth, window ") + std::to_string(g.window) + ", " + how[m];
    print_rows(t.c_str(), "MB/s", big, 1, f.bw, false);
    t = std::string("message rate, window ") + std::to_string(g.window) + ", " + how[m];
    print_rows(t.c_str(), "messages/s", small, 1, f.rate, false);
    std::fputs(f.driver.c_str(), stdout);
  }
  if ((g.modes & 2) && g.idle > 0) {
    std::printf("# idle rank CPU over %d s (%% of a core, the busier rank)\n", g.idle);
    std::printf("# %-10s %14s %14s\n", "", "raw MPI", "LNet thread");
    std::printf("  %-10s %14.2f %14.2f\n", "idle", idle_raw, fig[1].idle);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The progress thread needs MPI_THREAD_MULTIPLE; application-driven progress alone
  // runs (and raw MPI with it) at MPI_THREAD_FUNNELED, as such an application would.
  bool want_thread = true;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--progress" && std::string(argv[i + 1]) == "poll") want_thread = false;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, want_thread ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (!parse(argc, argv)) {
    MPI_Finalize();
    return 0;
  }
  if (size != 2) {
    if (g_rank == 0) std::fprintf(stderr, "bench_mpi: run with exactly 2 ranks (mpirun -n 2), not %d\n", size);
    MPI_Finalize();
    return 2;
  }
  set_log_level(LogLevel::Error);
  MPI_Comm raw;
  MPI_Comm_dup(MPI_COMM_WORLD, &raw);
  Figures fig[2];
  double idle_raw = 0;
  for (int m = 0; m < 2; ++m) {
    if (!(g.modes & (1 << m))) continue;
    if (m == 1) {
      say("idle rank without LNet: %d s\n", g.idle);
      idle_raw = idle_cpu_percent();
    }
    fig[m] = run_mode(m, raw);
  }
  if (g_rank == 0) report(fig, provided, idle_raw);
  MPI_Comm_free(&raw);
  MPI_Finalize();
  return 0;
}
