// lnet-xfer's serve, ping and check modes.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

#include "xfer.hpp"

namespace lnet::xfer {

namespace {

struct Served {
  std::atomic<std::uint64_t> puts{0}, gets{0}, put_bytes{0}, get_bytes{0}, failed{0};
};

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

// The server's contract (lnet(3), SERVING): pid a.pid, portal a.portal, any initiator,
// any match bits; one buffer of a.buffer bytes taking PUTs and GETs at the offset the
// initiator names (remote-managed), a transfer past its end truncated. Until SIGTERM or
// SIGINT; then what it served.
int serve(Instance& lnet, const Args& a) {
  // Outlive the instance (torn down when main returns): nothing lands in freed memory.
  static std::vector<char> buf;
  static Served served;
  buf.assign(a.buffer, 0);
  auto me = lnet.me_attach(a.portal, ProcessId::any(), 0, ~0ULL, Unlink::Retain, InsPos::After);
  MdDesc d;
  d.start = buf.data();
  d.length = buf.size();
  d.options = kMdOpPut | kMdOpGet | kMdManageRemote | kMdTruncate;
  d.handler = [](const Event& e) {
    if (e.status != 0) {
      served.failed.fetch_add(1, std::memory_order_relaxed);
    } else if (e.type == EventType::Put) {
      served.puts.fetch_add(1, std::memory_order_relaxed);
      served.put_bytes.fetch_add(e.mlength, std::memory_order_relaxed);
    } else if (e.type == EventType::Get) {
      served.gets.fetch_add(1, std::memory_order_relaxed);
      served.get_bytes.fetch_add(e.mlength, std::memory_order_relaxed);
    }
  };
  if (!me) {
    std::fprintf(stderr, "lnet-xfer: portal %u: %s\n", a.portal, me.message().c_str());
    return 1;
  }
  if (auto md = lnet.md_attach(*me, d, Unlink::Retain); !md) {
    std::fprintf(stderr, "lnet-xfer: cannot post the buffer: %s\n", md.message().c_str());
    return 1;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::string nids;
  for (Nid n : lnet.nids())
    if (!n.is_lo()) nids += (nids.empty() ? "" : " ") + n.to_string();
  std::printf(
      "serving %s on portal %u, pid %u: %zu bytes for PUT and GET (any match bits, offsets given by the "
      "initiator)\n",
      nids.c_str(), a.portal, lnet.pid(), buf.size());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  std::printf(
      "served %llu PUTs (%llu bytes), %llu GETs (%llu bytes), %llu failed; stopped by %s\n",
      static_cast<unsigned long long>(served.puts.load()), static_cast<unsigned long long>(served.put_bytes.load()),
      static_cast<unsigned long long>(served.gets.load()), static_cast<unsigned long long>(served.get_bytes.load()),
      static_cast<unsigned long long>(served.failed.load()), sig == SIGINT ? "SIGINT" : "SIGTERM");
  std::fflush(stdout);
  return 0;
}

// --count pings, each answered or not within --timeout (default 10 s); the round trips.
int ping(Instance& lnet, const Args& a) {
  ProcessId target{*a.peer, a.pid};
  auto timeout = std::chrono::seconds(a.timeout > 0 ? a.timeout : 10);
  std::vector<double> rtts;
  for (unsigned i = 0; i < a.count; ++i) {
    auto t0 = Clock::now();
    auto p = lnet.ping(target, timeout);
    double ms = ms_since(t0);
    if (!p) {
      std::printf("ping %s: %s\n", target.to_string().c_str(), p.message().c_str());
      std::fflush(stdout);
      continue;
    }
    rtts.push_back(ms);
    std::string nids;
    for (const NiStatus& n : p->info.nis)
      if (!n.nid.is_lo()) nids += " " + n.nid.to_string() + (n.status == kNiStatusUp ? "" : "(down)");
    for (const NiStatus& n : p->info.large_nis) nids += " " + n.nid.to_string();
    std::printf("reply from %s in %.3f ms: pid %u, NIDs%s\n", target.to_string().c_str(), ms, p->info.pid,
                nids.c_str());
    std::fflush(stdout);
  }
  std::sort(rtts.begin(), rtts.end());
  std::printf("%u pings, %zu answered", a.count, rtts.size());
  if (!rtts.empty())
    std::printf(", round trip min/median/max %.3f/%.3f/%.3f ms", rtts.front(), rtts[rtts.size() / 2], rtts.back());
  std::printf("\n");
  return rtts.size() == a.count ? 0 : 1;
}

// One size: a PUT with an ACK, a GET back, the data checked. Returns the failures (0–2).
static int check_size(Instance& lnet, ProcessId target, const Args& a, std::uint32_t size, std::vector<char>& src,
                      std::vector<char>& sink) {
  fill(src.data(), size, size);
  Outcome put = run_op(lnet, true, src.data(), size, target, a, a.offset, a.bits);
  std::memset(sink.data(), 0x5a, size);
  Outcome get = run_op(lnet, false, sink.data(), size, target, a, a.offset, a.bits + 1);
  bool put_ok = put.status == 0 && put.mlength == size;
  bool get_ok = get.status == 0 && get.mlength == size && std::memcmp(sink.data(), src.data(), size) == 0;
  auto failed = [size](const Outcome& o, const char* response) {
    if (o.status == -ETIMEDOUT) return "FAILED (no " + std::string(response) + ": timed out)";
    if (o.status != 0) return "FAILED (status " + describe(o.status) + ")";
    if (o.mlength != size) return "FAILED (" + std::to_string(o.mlength) + " bytes moved)";
    return std::string("FAILED (data differs)");
  };
  std::printf("%7u bytes: PUT %s, GET %s\n", size, put_ok ? "ok" : failed(put, "ACK").c_str(),
              get_ok ? "ok (data checked)" : failed(get, "REPLY").c_str());
  std::fflush(stdout);
  return !put_ok + !get_ok;
}

// A ping, then for each size a PUT (with ACK, match bits --bits) and a GET back (bits
// --bits + 1), every byte checked.
int check(Instance& lnet, const Args& a) {
  ProcessId target{*a.peer, a.pid};
  auto p = lnet.ping(target, std::chrono::seconds(a.timeout > 0 ? a.timeout : 10));
  if (!p) {
    std::fprintf(stderr, "lnet-xfer: ping %s: %s\n", a.peer->to_string().c_str(), p.message().c_str());
    return 1;
  }
  std::printf("ping %s: ok\n", a.peer->to_string().c_str());
  int failures = 0;
  std::uint32_t most = *std::max_element(a.sizes.begin(), a.sizes.end());
  std::vector<char> src(std::max<std::uint32_t>(most, 1)), sink(src.size());
  for (std::uint32_t size : a.sizes) failures += check_size(lnet, target, a, size, src, sink);
  std::fflush(stdout);
  return failures ? 1 : 0;
}

}  // namespace lnet::xfer
