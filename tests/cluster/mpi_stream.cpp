// The application of the cluster's failure tests: an MPI job that reaches a server
// through the parallel proxy (LNET_PROXY) and streams rounds of a PUT (with ACK) and a
// GET back, every byte checked, on every rank at once, until --stop-file appears or
// --seconds pass. It prints what a test needs to judge a failure from the outside:
//   r<R> op N: PUT|GET ... failed: RC (text) after MS ms at EPOCH    a failed round (5 a second
//                                                                     at most; the others are counted;
//                                                                     MS and EPOCH: until and when its
//                                                                     failure came)
//   r<R> t=EPOCH ops=N failed=N window_ops=N via: NID=+n ... gw: NID=HEALTH,up|down,pPINGS ...
//                                                                     every second
//   r<R> route NET via GW: up|down at EPOCH                           each change the rank sees
//   summary r<R>: ops=N failed=N max_ms=MS first_failure=EPOCH|- last_failure=EPOCH|- last_ok=EPOCH|-
// A round never waits past LNet's own deadline (transaction_timeout) plus 30 s: beyond it
// the rank prints "r<R> HANG" and exits 3. SIGUSR1 makes a rank call MPI_Abort (the
// failure tests' "application aborts").
//   LNET_PROXY=... mpirun -x LNET_PROXY lnet_mpi_stream --server NID [--size BYTES]
//       [--offset BYTES] [--seconds S] [--stop-file FILE]
#include <mpi.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <lnet/lnet.hpp>
#include <lnet/mpi.hpp>

namespace {

using namespace lnet;
using Clock = std::chrono::steady_clock;
constexpr unsigned kPortal = 40;
constexpr int kFailureLines = 5;  // failed rounds printed each second, at most

std::atomic<bool> g_abort{false};
extern "C" void on_usr1(int) { g_abort.store(true); }

struct Options {
  Nid server;
  std::uint32_t size = 1 << 20;
  std::size_t offset = 0;
  int seconds = 600;
  std::string stop_file;
};

double epoch() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// One line, written whole (ranks and the route watcher print concurrently).
void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fputs(buf, stdout);
  std::fflush(stdout);
}

int usage(const char* why) {
  std::fprintf(stderr,
               "lnet_mpi_stream: %s\nusage: LNET_PROXY=... mpirun lnet_mpi_stream --server NID [--size BYTES] "
               "[--offset BYTES] [--seconds S] [--stop-file FILE]\n",
               why);
  return 2;
}

int parse(int argc, char** argv, Options& o) {
  bool server = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help") return usage("streams PUT+GET rounds through the parallel proxy"), 0;
    if (i + 1 >= argc) return usage(("'" + a + "' needs a value").c_str());
    std::string v = argv[++i];
    char* end = nullptr;
    long n = std::strtol(v.c_str(), &end, 10);
    bool num = end && !*end;
    if (a == "--server") {
      auto nid = Nid::parse(v);
      if (!nid) return usage(("bad --server: " + nid.message()).c_str());
      o.server = *nid;
      server = true;
    } else if (a == "--size" && num && n >= 1 && n <= static_cast<long>(kMaxPayload)) {
      o.size = static_cast<std::uint32_t>(n);
    } else if (a == "--offset" && num && n >= 0 && n < (1L << 31)) {
      o.offset = static_cast<std::size_t>(n);
    } else if (a == "--seconds" && num && n >= 1) {
      o.seconds = static_cast<int>(n);
    } else if (a == "--stop-file") {
      o.stop_file = v;
    } else {
      return usage(("bad argument '" + a + " " + v + "'").c_str());
    }
  }
  return server ? -1 : usage("--server NID is required");
}

// The events of one MD; shared with its handler, so that a late event still finds it.
struct Waiter {
  std::mutex m;
  std::condition_variable cv;
  int done = 0, status = 0;
  bool unlinked = false;
  EventType want;
  explicit Waiter(EventType w) : want(w) {}
};

// One step (a PUT with ACK, or a GET): 0 or the failed event's status. -ETIME when
// nothing came within LNet's deadline plus 30 s (a hang). `answered`: when the response
// or the failure came (the MD's memory may come back later: a driver keeps it while its
// network may still write into it).
int step(Instance& lnet, bool put, std::vector<char>& buf, ProcessId server, std::uint32_t offset, int patience,
         Clock::time_point& answered) {
  auto w = std::make_shared<Waiter>(put ? EventType::Ack : EventType::Reply);
  MdDesc d;
  d.start = buf.data();
  d.length = buf.size();
  d.threshold = 2;
  d.handler = [w](const Event& e) {
    std::lock_guard g(w->m);
    // UNLINK: the response did not come in time (LNet unlinked the MD).
    int status = e.type == EventType::Unlink ? -ETIMEDOUT : e.status;
    if (status && !w->status) w->status = status;
    if (e.type == w->want || status) ++w->done;
    if (e.unlinked) w->unlinked = true;
    w->cv.notify_all();
  };
  auto md = lnet.md_bind(d, Unlink::Unlink);
  if (!md) return -ENOMEM;
  int rc = put ? lnet.put(Nid::any(), *md, AckReq::Ack, server, kPortal, 0, offset, 0)
               : lnet.get(Nid::any(), *md, server, kPortal, 0, offset);
  if (rc) return rc;
  std::unique_lock lk(w->m);
  if (!wait_with_progress(lk, w->cv, Clock::now() + std::chrono::seconds(patience), [&] { return w->done > 0; }))
    return -ETIME;
  answered = Clock::now();
  // The MD ends with its last event; wait for it, so that its buffer is free again (a
  // failed SEND leaves it waiting for nothing: unlinked here).
  if (w->status && !w->unlinked) {
    lk.unlock();
    (void)lnet.md_unlink(*md);
    lk.lock();
  }
  if (!wait_with_progress(lk, w->cv, Clock::now() + std::chrono::seconds(patience), [&] { return w->unlinked; }))
    return -ETIME;
  return w->status;
}

// Each gateway's peer NI as this rank sees it: health, up or down, recovery pings.
std::string gateway_state(Instance& lnet, const std::vector<Nid>& proxies) {
  std::string out;
  for (const PeerInfo& p : lnet.control().peer_info())
    for (const PeerNiInfo& i : p.nis)
      if (std::find(proxies.begin(), proxies.end(), i.nid) != proxies.end()) {
        char b[128];
        std::snprintf(b, sizeof b, " %s=%d,%s,p%u", i.nid.to_string().c_str(), i.health, i.up ? "up" : "down",
                      i.ping_count);
        out += b;
      }
  std::vector<Nid> q = lnet.control().recovery_queue(false);
  for (Nid p : proxies)
    if (std::find(q.begin(), q.end(), p) != q.end()) out += " recovering:" + p.to_string();
  return out;
}

std::map<Nid, std::uint64_t> sent_to(Instance& lnet) {
  std::map<Nid, std::uint64_t> out;
  for (const PeerInfo& p : lnet.control().peer_info())
    for (const PeerNiInfo& i : p.nis) out[i.nid] = i.sent.put + i.sent.get;
  return out;
}

int stream(mpi::Session& s, const Options& o) {
  Instance& lnet = s.lnet();
  int rank = s.rank();
  ProcessId server{o.server, kPidLustre};
  auto offset = static_cast<std::uint32_t>(o.offset + static_cast<std::size_t>(rank) * o.size);
  int patience = lnet.control().globals().transaction_timeout + 30;
  std::vector<Nid> proxies = s.proxies();
  if (rank == 0) {
    std::string list;
    for (Nid p : proxies) list += " " + p.to_string();
    say("start: %d ranks, pid %u, %u-byte rounds, proxies:%s\n", s.size(), s.pid(), o.size, list.c_str());
  }
  // Every rank prints each change of a route's state as it sees it.
  std::atomic<bool> watching{true};
  std::thread watcher;
  if (watching)
    watcher = std::thread([&] {
      std::map<std::pair<NetId, Nid>, bool> seen;
      while (watching) {
        for (const RouteInfo& r : lnet.control().route_info()) {
          auto key = std::make_pair(r.net, r.gateway);
          auto it = seen.find(key);
          if (it != seen.end() && it->second == r.up) continue;
          seen[key] = r.up;
          say("r%d route %s via %s: %s at %.3f\n", rank, r.net.to_string().c_str(), r.gateway.to_string().c_str(),
              r.up ? "up" : "down", epoch());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  std::vector<char> src(o.size), sink(o.size);
  long ops = 0, failed = 0, window = 0;
  double max_ms = 0, first_failure = 0, last_failure = 0, last_ok = 0;
  auto start = Clock::now(), last_line = start;
  auto before = sent_to(lnet);
  int hang = 0;
  int said_this_second = 0;
  for (std::uint32_t n = 1;; ++n) {
    if (g_abort.load()) {
      say("r%d MPI_Abort at %.3f\n", rank, epoch());
      MPI_Abort(MPI_COMM_WORLD, 7);
    }
    if (!o.stop_file.empty() && std::filesystem::exists(o.stop_file)) break;
    if (Clock::now() - start > std::chrono::seconds(o.seconds)) break;
    for (std::uint32_t i = 0; i < o.size; ++i)
      src[i] = static_cast<char>((i * 131 + n * 7 + static_cast<std::uint32_t>(rank)) & 0xFF);
    auto t0 = Clock::now();
    const char* what = "PUT";
    Clock::time_point answered{};
    int rc = step(lnet, true, src, server, offset, patience, answered);
    if (!rc) {
      what = "GET";
      std::memset(sink.data(), 0x5a, sink.size());
      rc = step(lnet, false, sink, server, offset, patience, answered);
      if (!rc && std::memcmp(sink.data(), src.data(), o.size) != 0) {
        what = "GET data";
        rc = -EIO;
      }
    }
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    max_ms = std::max(max_ms, ms);
    ++ops;
    ++window;
    double now = epoch();
    if (rc == -ETIME) {
      say("r%d HANG: op %u: %s had no event within %d s (LNet's deadline did not hold) at %.3f\n", rank, n, what,
          patience, now);
      hang = 1;
      break;
    }
    if (rc) {
      ++failed;
      // When the failure came, not when the MD's memory came back: a driver may keep that
      // while its network can still write into it (the MPI LND, for a receive MPI matched
      // from a peer that then died: four more of its timeouts), and the rank waits for it.
      double at =
          answered == Clock::time_point{} ? now : now - std::chrono::duration<double>(Clock::now() - answered).count();
      if (!first_failure) first_failure = at;
      last_failure = at;
      // A few lines a second; the per-second line counts the rest. (Thousands of lines
      // from rounds that fail at once would stall the job's output, and with it the job.)
      if (said_this_second++ < kFailureLines)
        say("r%d op %u: %s failed: %d (%s) after %.0f ms at %.3f\n", rank, n, what, rc, std::strerror(-rc),
            answered == Clock::time_point{} ? ms : std::chrono::duration<double, std::milli>(answered - t0).count(),
            at);
      // As an application would, it waits a little before trying again.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } else {
      last_ok = now;
    }
    if (Clock::now() - last_line >= std::chrono::seconds(1)) {
      last_line = Clock::now();
      auto after = sent_to(lnet);
      std::string via;
      for (Nid p : proxies) {
        char b[96];
        std::snprintf(b, sizeof b, " %s=+%llu", p.to_string().c_str(),
                      static_cast<unsigned long long>(after[p] - before[p]));
        via += b;
      }
      before = after;
      say("r%d t=%.3f ops=%ld failed=%ld window_ops=%ld via:%s gw:%s\n", rank, now, ops, failed, window, via.c_str(),
          gateway_state(lnet, proxies).c_str());
      window = 0;
      said_this_second = 0;
    }
  }
  watching = false;
  if (watcher.joinable()) watcher.join();
  auto stamp = [](double t) { return t ? std::to_string(t) : std::string("-"); };
  say("summary r%d: ops=%ld failed=%ld max_ms=%.0f first_failure=%s last_failure=%s last_ok=%s\n", rank, ops, failed,
      max_ms, stamp(first_failure).c_str(), stamp(last_failure).c_str(), stamp(last_ok).c_str());
  return hang ? 3 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (int rc = parse(argc, argv, o); rc >= 0) return rc;
  struct sigaction sa {};
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, nullptr);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  auto started = mpi::Session::start(MPI_COMM_WORLD);
  if (!started) {
    say("lnet_mpi_stream: cannot start: %s\n", started.message().c_str());
    MPI_Finalize();
    return 1;
  }
  auto session = std::move(*started);
  int rc = stream(*session, o);
  if (rc == 3) std::_Exit(3);  // a hang: the job is in no state for a collective end
  session.reset();
  MPI_Finalize();
  return rc;
}
