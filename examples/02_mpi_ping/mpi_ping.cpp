// Example 02, the white paper's first test program: initialise MPI and LNet over it,
// barrier, then every rank pings its neighbour (rank + 1), PUTs a buffer to it with an
// ACK and GETs it back, checking the data; rank 0 prints a summary of every rank.
//   mpirun -n 4 mpi_ping [--size BYTES] [--count N] [--env]
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <lnet/lnet.hpp>
#include <lnet/mpi.hpp>

namespace {

constexpr unsigned kPortal = 12;

struct Waiter {
  std::mutex m;
  std::condition_variable cv;
  int acks = 0, replies = 0, errors = 0;
  lnet::EventHandler handler() {
    return [this](const lnet::Event& e) {
      std::lock_guard g(m);
      if (e.status) {
        ++errors;
        std::fprintf(stderr, "mpi_ping: %s event from %s failed: %d\n", lnet::event_type_name(e.type),
                     e.target.nid.to_string().c_str(), e.status);
      } else if (e.type == lnet::EventType::Unlink) {  // LNet gave up waiting for the ACK or REPLY
        ++errors;
        std::fprintf(stderr, "mpi_ping: no ACK or REPLY from %s in time (transaction_timeout)\n",
                     e.target.nid.to_string().c_str());
      }
      if (e.type == lnet::EventType::Ack) ++acks;
      if (e.type == lnet::EventType::Reply) ++replies;
      cv.notify_all();
    };
  }
};

void usage() {
  std::printf(
      "usage: mpirun -n N mpi_ping [--size BYTES] [--count N] [--env]\n"
      "  Every rank brings LNet up over MPI (<rank>@mpi), pings rank+1, then does N rounds\n"
      "  of PUT (with ACK) and GET of a BYTES-long buffer (default 65536) to it, checking\n"
      "  the data. Rank 0 prints what each rank measured. --env lists the variables.\n");
}

struct Options {
  std::size_t size = 65536;
  long count = 100;
};

// Returns -1 to go on, or the exit code.
int parse_args(int argc, char** argv, Options& o) {
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
    if ((a == "--size" || a == "--count") && i + 1 < argc) {
      char* end = nullptr;
      long v = std::strtol(argv[++i], &end, 10);
      if (*end || v < 0 || (a == "--size" && v > static_cast<long>(lnet::kMaxPayload)) || (a == "--count" && v < 1)) {
        std::fprintf(stderr, "mpi_ping: bad value '%s' for %s\n", argv[i], a.c_str());
        return 2;
      }
      if (a == "--size")
        o.size = static_cast<std::size_t>(v);
      else
        o.count = v;
      continue;
    }
    std::fprintf(stderr, "mpi_ping: unknown argument '%s' (--help)\n", a.c_str());
    return 2;
  }
  return -1;
}

// A buffer the previous rank PUTs into and GETs from.
bool post_target(lnet::Instance& lnet, std::vector<char>& target) {
  auto me = lnet.me_attach(kPortal, lnet::ProcessId::any(), 0x5eed, 0, lnet::Unlink::Retain, lnet::InsPos::After);
  lnet::MdDesc td;
  td.start = target.data();
  td.length = target.size();
  td.options = lnet::kMdOpPut | lnet::kMdOpGet | lnet::kMdManageRemote;
  return me && lnet.md_attach(*me, td, lnet::Unlink::Retain);
}

// One round: PUT `out` with an ACK, then GET it back into `back` and compare.
// Returns what went wrong, or nullptr.
const char* round_trip(lnet::Instance& lnet, lnet::ProcessId peer, Waiter& w, long r, std::vector<char>& out,
                       std::vector<char>& back) {
  const auto timeout = std::chrono::seconds(30);
  lnet::MdDesc d;
  d.start = out.data();
  d.length = out.size();
  d.threshold = 2;
  d.handler = w.handler();
  auto md = lnet.md_bind(d, lnet::Unlink::Unlink);
  lnet.put(lnet::Nid::any(), *md, lnet::AckReq::Ack, peer, kPortal, 0x5eed, 0, 0);
  std::unique_lock lk(w.m);
  lnet::wait_with_progress(lk, w.cv, std::chrono::steady_clock::now() + timeout,
                           [&] { return w.acks > r || w.errors; });
  lk.unlock();
  lnet::MdDesc g = d;
  g.start = back.data();
  auto gmd = lnet.md_bind(g, lnet::Unlink::Unlink);
  lnet.get(lnet::Nid::any(), *gmd, peer, kPortal, 0x5eed, 0);
  lk.lock();
  lnet::wait_with_progress(lk, w.cv, std::chrono::steady_clock::now() + timeout,
                           [&] { return w.replies > r || w.errors; });
  if (w.errors) return "an operation failed";
  if (w.replies <= r) return "no REPLY within 30 s";
  if (std::memcmp(out.data(), back.data(), out.size()) != 0) return "the data read back differs from the data written";
  return nullptr;
}

struct Measured {
  double ping_us = -1, round_us = 0;
  int bad = 0;
};

Measured exchange(lnet::Instance& lnet, lnet::ProcessId peer, int rank, const Options& o) {
  Measured m;
  auto t0 = std::chrono::steady_clock::now();
  auto p = lnet.ping(peer, std::chrono::seconds(10));
  if (p) m.ping_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  m.bad = p ? 0 : 1;
  std::vector<char> out(o.size), back(o.size);
  Waiter w;
  t0 = std::chrono::steady_clock::now();
  for (long r = 0; r < o.count && !m.bad; ++r) {
    for (std::size_t i = 0; i < o.size; ++i) out[i] = static_cast<char>(i * 7 + r + rank);
    if (const char* what = round_trip(lnet, peer, w, r, out, back)) {
      m.bad = 1;
      std::fprintf(stderr, "mpi_ping: rank %d, round %ld: %s\n", rank, r, what);
    }
  }
  m.round_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
               static_cast<double>(o.count);
  return m;
}

// One line per rank, gathered on rank 0.
void print_summary(const Measured& m, int rank, int n, lnet::Pid pid, bool thread, const Options& o,
                   const std::vector<std::string>& nids) {
  double mine[3] = {m.ping_us, m.round_us, static_cast<double>(m.bad)};
  std::vector<double> all(rank == 0 ? 3 * static_cast<std::size_t>(n) : 0);
  MPI_Gather(mine, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank != 0) return;
  std::printf("LNet over MPI: %d ranks, pid %u, %s progress, %zu-byte PUT+ACK and GET, %ld rounds\n", n, pid,
              thread ? "thread" : "application", o.size, o.count);
  int failed = 0;
  for (int r = 0; r < n; ++r) {
    double* v = &all[3 * static_cast<std::size_t>(r)];
    std::printf("  %s -> %s: ping %8.1f us, PUT+GET round %8.1f us  %s\n", nids[static_cast<std::size_t>(r)].c_str(),
                nids[static_cast<std::size_t>((r + 1) % n)].c_str(), v[0], v[1], v[2] == 0 ? "ok" : "FAILED");
    failed += v[2] != 0;
  }
  std::printf("%s\n", failed ? "some ranks FAILED" : "all ranks ok");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (int rc = parse_args(argc, argv, o); rc >= 0) return rc;

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  auto started = lnet::mpi::Session::start(MPI_COMM_WORLD);
  if (!started) {
    std::fprintf(stderr, "mpi_ping: %s\n", started.message().c_str());
    MPI_Finalize();
    return 1;
  }
  auto session = std::move(*started);
  lnet::Instance& lnet = session->lnet();
  int rank = session->rank(), n = session->size();

  std::vector<char> target(o.size);
  if (!post_target(lnet, target)) {
    std::fprintf(stderr, "mpi_ping: cannot post the target buffer\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  Measured m = exchange(lnet, session->id((rank + 1) % n), rank, o);

  // End LNet first (collective: it keeps serving the others until every rank is done;
  // a blocking MPI collective here would stall ranks that drive progress themselves).
  bool thread = session->progress_thread();
  lnet::Pid pid = session->pid();
  std::vector<std::string> nids;
  for (int r = 0; r < n; ++r) nids.push_back(session->nid(r).to_string());
  session.reset();

  print_summary(m, rank, n, pid, thread, o, nids);
  int any_bad = 0;
  MPI_Allreduce(&m.bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_bad ? 1 : 0;
}
