// Example 03: an MPI job reaching a tcp server through the parallel proxy. Started with
// LNET_PROXY naming a running lnet-proxy, every rank pings the proxies' lnetds and the
// server, then PUTs (with an ACK) and GETs back a buffer at its own offset of the
// server's portal 40 (as `lnet-xfer serve` exposes it), checking every byte; rank 0
// prints who talked to whom through which gateway, with the rates.
//   LNET_PROXY=/run/lnet/lnet-proxy.port mpirun --ompi-server file:URI -n 4
//       proxy_demo --server 127.0.0.1@tcp [--size BYTES] [--count N]
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <lnet/lnet.hpp>
#include <lnet/mpi.hpp>

namespace {

constexpr unsigned kPortal = 40;
constexpr int kMaxProxies = 8;
using Clock = std::chrono::steady_clock;

struct Options {
  lnet::Nid server;
  std::size_t size = 1 << 20;
  long count = 10;
  std::size_t offset = 0;  // where rank 0's part of the server's buffer starts
  int timeout = 60;        // seconds each ACK or REPLY is awaited
  int thread_level = MPI_THREAD_MULTIPLE;
  int idle = 0;  // seconds each rank waits in LNet between its pings and its transfers
};

void usage() {
  std::printf(
      "usage: LNET_PROXY=<port file> mpirun -n N proxy_demo --server NID [--size BYTES] [--count N]\n"
      "                                                   [--offset BYTES] [--timeout S]\n"
      "                                                   [--thread-level single|funneled|serialized|multiple]\n"
      "                                                   [--idle S]\n"
      "  Every rank reaches the server (a userspace LNet node serving portal 40, e.g.\n"
      "  `lnet-xfer serve`, with a buffer of at least N x BYTES) through the proxy: pings\n"
      "  the proxies' lnetds and the server, then N rounds of PUT (with ACK) and GET of\n"
      "  BYTES (default 1 MiB) at offset OFFSET + rank x BYTES, checking the data. Rank 0\n"
      "  prints a report. Each ACK or REPLY is awaited S seconds (default 60). MPI is\n"
      "  started with MPI_Init_thread at the level asked (default multiple; single uses\n"
      "  MPI_Init). --idle S: each rank waits S seconds in LNet (polling it) between its\n"
      "  pings and its transfers. --env lists the variables (LNET_PROXY, LNET_MPI_*).\n");
}

// --thread-level's word as MPI's level; false (and why printed) for another word.
bool set_thread_level(const std::string& v, Options& o) {
  const std::pair<const char*, int> levels[] = {{"single", MPI_THREAD_SINGLE},
                                                {"funneled", MPI_THREAD_FUNNELED},
                                                {"serialized", MPI_THREAD_SERIALIZED},
                                                {"multiple", MPI_THREAD_MULTIPLE}};
  bool found = false;
  for (auto [name, level] : levels)
    if (v == name) o.thread_level = level, found = true;
  if (!found)
    std::fprintf(stderr, "proxy_demo: bad --thread-level '%s': single, funneled, serialized or multiple\n", v.c_str());
  return found;
}

// A numeric option (--size, --count, --timeout, --idle, --offset) in its range; false
// (and why printed) otherwise.
bool set_number(const std::string& a, const std::string& v, Options& o) {
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (a == "--size" && !*end && n >= 1 && n <= static_cast<long>(lnet::kMaxPayload)) {
    o.size = static_cast<std::size_t>(n);
  } else if (a == "--count" && !*end && n >= 1) {
    o.count = n;
  } else if (a == "--timeout" && !*end && n >= 1 && n <= 3600) {
    o.timeout = static_cast<int>(n);
  } else if (a == "--idle" && !*end && n >= 0 && n <= 3600) {
    o.idle = static_cast<int>(n);
  } else if (a == "--offset" && !*end && n >= 0 && n < (1L << 31)) {
    o.offset = static_cast<std::size_t>(n);
  } else {
    std::fprintf(stderr, "proxy_demo: bad argument '%s %s' (--help)\n", a.c_str(), v.c_str());
    return false;
  }
  return true;
}

// -1 to go on, else the exit status (help printed, or why the arguments are refused).
int parse_args(int argc, char** argv, Options& o) {
  bool have_server = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    }
    if (a == "--env") {
      std::printf("%s", lnet::env_help().c_str());
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "proxy_demo: '%s' needs a value (--help)\n", a.c_str());
      return 2;
    }
    std::string v = argv[++i];
    if (a == "--thread-level") {
      if (!set_thread_level(v, o)) return 2;
    } else if (a == "--server") {
      auto n = lnet::Nid::parse(v);
      if (!n) {
        std::fprintf(stderr, "proxy_demo: bad --server '%s': %s\n", v.c_str(), n.message().c_str());
        return 2;
      }
      o.server = *n;
      have_server = true;
    } else if (!set_number(a, v, o)) {
      return 2;
    }
  }
  if (!have_server) {
    std::fprintf(stderr, "proxy_demo: --server NID is required (--help)\n");
    return 2;
  }
  return -1;
}

// Events and buffers of one rank's MDs. The handlers share it: an event that comes
// after a failed wait (a late ACK or REPLY, an unlink) still finds it and its buffers.
struct Waiter : std::enable_shared_from_this<Waiter> {
  std::vector<char> out, back;
  std::mutex m;
  std::condition_variable cv;
  int acks = 0, replies = 0, errors = 0;
  lnet::EventHandler handler() {
    return [this, self = shared_from_this()](const lnet::Event& e) {
      std::lock_guard g(m);
      if (e.status) {
        ++errors;
        std::fprintf(stderr, "proxy_demo: %s event from %s failed: %d\n", lnet::event_type_name(e.type),
                     e.target.nid.to_string().c_str(), e.status);
      } else if (e.type == lnet::EventType::Unlink) {  // LNet gave up waiting for the ACK or REPLY
        ++errors;
        std::fprintf(stderr, "proxy_demo: no ACK or REPLY from %s in time (transaction_timeout)\n",
                     e.target.nid.to_string().c_str());
      }
      if (e.type == lnet::EventType::Ack) ++acks;
      if (e.type == lnet::EventType::Reply) ++replies;
      cv.notify_all();
    };
  }
  bool wait(int* counter, int want, int seconds) {
    std::unique_lock lk(m);
    return lnet::wait_with_progress(lk, cv, Clock::now() + std::chrono::seconds(seconds),
                                    [&] { return *counter >= want || errors; }) &&
           !errors;
  }
};

// What one rank measured, gathered on rank 0 as doubles.
struct Measured {
  double proxy_ping_us[kMaxProxies] = {};
  double server_ping_us = -1;
  double put_mbs = 0, get_mbs = 0;
  double via[kMaxProxies] = {};  // messages sent to each gateway
  double bad = 0;
};

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

double ping_us(lnet::Instance& lnet, lnet::ProcessId id) {
  auto t0 = Clock::now();
  auto p = lnet.ping(id, std::chrono::seconds(10));
  if (!p) std::fprintf(stderr, "proxy_demo: ping %s: %s\n", id.nid.to_string().c_str(), p.message().c_str());
  return p ? us_since(t0) : -1;
}

std::map<lnet::Nid, std::uint64_t> sent_to(lnet::Instance& lnet) {
  std::map<lnet::Nid, std::uint64_t> out;
  for (const auto& p : lnet.peers())
    for (const auto& ni : p.nis) out[ni.nid] = ni.sent.total();
  return out;
}

// `count` PUTs with ACK of `out` at `offset`, then as many GETs into `back`, data checked.
bool transfer(lnet::Instance& lnet, lnet::ProcessId server, const Options& o, int rank, Measured& m) {
  auto offset = static_cast<std::uint32_t>(o.offset + static_cast<std::size_t>(rank) * o.size);
  auto waiter = std::make_shared<Waiter>();
  Waiter& w = *waiter;
  std::vector<char>& out = w.out;
  std::vector<char>& back = w.back;
  out.resize(o.size);
  back.resize(o.size);
  for (std::size_t i = 0; i < o.size; ++i) out[i] = static_cast<char>(i * 13 + static_cast<std::size_t>(rank) * 7 + 1);
  lnet::MdDesc d;
  d.start = out.data();
  d.length = out.size();
  d.threshold = 2;
  d.handler = w.handler();
  auto t0 = Clock::now();
  for (long r = 0; r < o.count; ++r) {
    auto md = lnet.md_bind(d, lnet::Unlink::Unlink);
    if (!md || lnet.put(lnet::Nid::any(), *md, lnet::AckReq::Ack, server, kPortal, 0, offset, 0) != 0 ||
        !w.wait(&w.acks, static_cast<int>(r) + 1, o.timeout))
      return false;
  }
  m.put_mbs = static_cast<double>(o.size) * static_cast<double>(o.count) / us_since(t0);
  lnet::MdDesc g = d;
  g.start = back.data();
  t0 = Clock::now();
  for (long r = 0; r < o.count; ++r) {
    std::memset(back.data(), 0, back.size());
    auto md = lnet.md_bind(g, lnet::Unlink::Unlink);
    if (!md || lnet.get(lnet::Nid::any(), *md, server, kPortal, 0, offset) != 0 ||
        !w.wait(&w.replies, static_cast<int>(r) + 1, o.timeout))
      return false;
    if (std::memcmp(out.data(), back.data(), o.size) != 0) {
      std::fprintf(stderr, "proxy_demo: rank %d: the data read back differs from the data written\n", rank);
      return false;
    }
  }
  m.get_mbs = static_cast<double>(o.size) * static_cast<double>(o.count) / us_since(t0);
  return true;
}

Measured run(lnet::mpi::Session& s, const Options& o) {
  lnet::Instance& lnet = s.lnet();
  Measured m;
  std::vector<lnet::Nid> proxies = s.proxies();
  for (std::size_t p = 0; p < proxies.size() && p < kMaxProxies; ++p)
    m.proxy_ping_us[p] = ping_us(lnet, lnet::ProcessId{proxies[p], lnet::kPidLustre});
  lnet::ProcessId server{o.server, lnet::kPidLustre};
  if (o.idle > 0) {  // waiting in LNet: below MPI_THREAD_MULTIPLE this sends the heartbeats
    std::mutex mu;
    std::condition_variable cv;
    std::unique_lock lk(mu);
    (void)lnet::wait_with_progress(lk, cv, Clock::now() + std::chrono::seconds(o.idle), [] { return false; });
  }
  auto before = sent_to(lnet);
  m.server_ping_us = ping_us(lnet, server);
  bool ok = m.server_ping_us >= 0 && transfer(lnet, server, o, s.rank(), m);
  auto after = sent_to(lnet);
  for (std::size_t p = 0; p < proxies.size() && p < kMaxProxies; ++p)
    m.via[p] = static_cast<double>(after[proxies[p]] - before[proxies[p]]);
  for (double v : m.proxy_ping_us) ok = ok && v >= 0;
  m.bad = ok ? 0 : 1;
  return m;
}

int report(const lnet::mpi::Session& s, const Options& o, const Measured& m) {
  constexpr int kN = sizeof(Measured) / sizeof(double);
  std::vector<double> all(s.rank() == 0 ? kN * static_cast<std::size_t>(s.size()) : 0);
  MPI_Gather(&m, kN, MPI_DOUBLE, all.data(), kN, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  // Each rank's node (MPI's processor name: its host name).
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  std::vector<char> hosts(s.rank() == 0 ? MPI_MAX_PROCESSOR_NAME * static_cast<std::size_t>(s.size()) : 0);
  MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (s.rank() != 0) return 0;
  std::vector<lnet::Nid> proxies = s.proxies();
  std::size_t np = std::min<std::size_t>(proxies.size(), kMaxProxies);
  int level = 0;
  MPI_Query_thread(&level);
  const char* names[] = {"single", "funneled", "serialized", "multiple"};
  std::printf("LNet through the parallel proxy: %d ranks (pid %u), %zu proxy rank(s), server %s, MPI thread level %s\n",
              s.size(), s.pid(), np, o.server.to_string().c_str(),
              level >= MPI_THREAD_SINGLE && level <= MPI_THREAD_MULTIPLE ? names[level - MPI_THREAD_SINGLE] : "?");
  std::printf("%ld x %zu-byte PUT (with ACK) and GET per rank, data checked\n\n", o.count, o.size);
  std::printf("%-8s %-10s", "rank", "node");
  for (std::size_t p = 0; p < np; ++p) std::printf(" %-22s", ("ping " + proxies[p].to_string()).c_str());
  std::printf(" %-12s %10s %10s", "ping server", "PUT MB/s", "GET MB/s");
  for (std::size_t p = 0; p < np; ++p) std::printf(" %-22s", ("msgs via " + proxies[p].to_string()).c_str());
  std::printf(" result\n");
  int failed = 0;
  for (int r = 0; r < s.size(); ++r) {
    const auto* x = reinterpret_cast<const Measured*>(&all[kN * static_cast<std::size_t>(r)]);
    std::string node(&hosts[MPI_MAX_PROCESSOR_NAME * static_cast<std::size_t>(r)]);
    std::printf("%-8s %-10s", s.nid(r).to_string().c_str(), node.substr(0, node.find('.')).c_str());
    for (std::size_t p = 0; p < np; ++p) std::printf(" %19.1f us", x->proxy_ping_us[p]);
    std::printf(" %9.1f us %10.1f %10.1f", x->server_ping_us, x->put_mbs, x->get_mbs);
    for (std::size_t p = 0; p < np; ++p) std::printf(" %22.0f", x->via[p]);
    std::printf(" %s\n", x->bad == 0 ? "ok" : "FAILED");
    failed += x->bad != 0;
  }
  std::printf("\n%s\n", failed ? "some ranks FAILED" : "all ranks ok");
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (int rc = parse_args(argc, argv, o); rc >= 0) return rc;
  int provided = MPI_THREAD_SINGLE;
  if (o.thread_level == MPI_THREAD_SINGLE)
    MPI_Init(&argc, &argv);
  else
    MPI_Init_thread(&argc, &argv, o.thread_level, &provided);
  auto started = lnet::mpi::Session::start(MPI_COMM_WORLD);
  if (!started) {
    std::fprintf(stderr, "proxy_demo: %s\n", started.message().c_str());
    MPI_Finalize();
    return 1;
  }
  auto session = std::move(*started);
  if (session->proxies().empty()) {
    std::fprintf(stderr, "proxy_demo: LNET_PROXY is not set: this demo goes through a proxy (--help)\n");
    session.reset();
    MPI_Finalize();
    return 2;
  }
  Measured m = run(*session, o);
  int rc = report(*session, o, m);
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  session.reset();
  MPI_Finalize();
  return rc;
}
