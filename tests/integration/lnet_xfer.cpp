// Test peer for the multi-host tests: `serve` exposes a 2 MiB buffer on portal 40 (PUT
// and GET, remote-managed offsets); `check` pings a serving peer, then PUTs (with ACK)
// and GETs back payloads of several sizes, checking every byte; `stream` does such
// rounds back to back until --stop-file appears (or --seconds pass), printing every
// second what it did, the longest single operation, which local NIs carried it and the
// health and recovery of every NI and peer NI (with --route: what went to each gateway,
// and a line stamped with the wall clock whenever a route goes up or down).
// (What went to each gateway counts its PUTs and GETs: the router pings, about one a
// second, are among them.) Each runs its own liblnet with its tcp NIs
// (--nid, repeated: multi-rail), the LNET_* variables (tunables, LNET_FAULT) and routes,
// like an application node would; --peer-nid makes the peer one multi-rail peer.
//   lnet_xfer serve --nid NID... [--peer NID --peer-nid NID...] [--route NET@GW]... [--buffer BYTES]
//   lnet_xfer check --nid NID... --peer NID [--peer-nid NID]... [--route NET@GW]... [--sizes 0,1,4096,1048576]
//                   [--bits B]   (PUTs carry match bits B, GETs B+1; the server matches any)
//   lnet_xfer stream --nid NID... --peer NID [--peer-nid NID]... [--size N] [--stop-file F] [--seconds S]
//                    [--rule-file F]   (selection rules applied when F appears; see apply_rules)
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <lnet/dlc.hpp>
#include <lnet/lnet.hpp>

using namespace lnet;

namespace {

constexpr unsigned kPortal = 40;
constexpr std::size_t kBuf = 2 << 20;

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "lnet_xfer: %s\nusage: lnet_xfer serve --nid NID [--route NET@GW]...\n"
               "       lnet_xfer check --nid NID --peer NID [--route NET@GW]... [--sizes N,N,...] [--timeout S]\n"
               "                       [--bits B]\n",
               why);
  std::exit(2);
}

struct Waiter {
  std::mutex m;
  std::condition_variable cv;
  std::vector<Event> events;
  EventHandler handler() {
    return [this](const Event& e) {
      std::lock_guard g(m);
      events.push_back(e);
      cv.notify_all();
    };
  }
  std::optional<Event> wait(EventType t, int seconds) {
    std::unique_lock lk(m);
    std::optional<Event> found;
    cv.wait_for(lk, std::chrono::seconds(seconds), [&] {
      for (const Event& e : events)
        // UNLINK: LNet gave up waiting for the response (transaction_timeout).
        if (e.type == t || (e.type == EventType::Send && e.status != 0) || e.type == EventType::Unlink) {
          found = e;
          return true;
        }
      return false;
    });
    return found;
  }
  // Until the MD's last event (SEND and ACK/REPLY come in either order): the handler
  // refers to this Waiter, which must outlive it.
  bool wait_unlinked(int seconds) {
    std::unique_lock lk(m);
    return cv.wait_for(lk, std::chrono::seconds(seconds), [&] {
      for (const Event& e : events)
        if (e.unlinked) return true;
      return false;
    });
  }
};

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return std::string(buf, n < 0 ? 0 : std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf - 1));
}

struct Args {
  std::string mode;
  std::vector<Nid> nids, peer_nids;
  std::optional<Nid> peer;
  std::vector<std::pair<NetId, Nid>> routes;
  std::vector<std::uint32_t> sizes = {0, 1, 4096, 1 << 20};
  int timeout = 10;
  std::uint64_t bits = 0;
  std::size_t buffer = kBuf;
  std::uint32_t size = 4096;
  std::string stop_file;
  std::string rule_file;
  int seconds = 300;
};

unsigned long long number(const std::string& option, const std::string& v, unsigned long long max) {
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v.c_str(), &end, 0);
  if (v.empty() || *end || errno || n > max) usage(("bad value '" + v + "' for " + option).c_str());
  return n;
}

Args parse_args(int argc, char** argv) {
  if (argc < 2) usage("give a mode");
  Args args;
  args.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value for " + a).c_str());
    std::string v = argv[++i];
    if (a == "--nid" || a == "--peer" || a == "--peer-nid") {
      auto n = Nid::parse(v);
      if (!n) usage(n.message().c_str());
      if (a == "--nid")
        args.nids.push_back(*n);
      else if (a == "--peer")
        args.peer = *n;
      else
        args.peer_nids.push_back(*n);
    } else if (a == "--route") {
      std::size_t at = v.find('@');
      auto net = NetId::parse(v.substr(0, at));
      auto gw = Nid::parse(at == std::string::npos ? "" : v.substr(at + 1));
      if (!net || !gw) usage(("bad --route " + v + " (NET@GATEWAY_NID)").c_str());
      args.routes.emplace_back(*net, *gw);
    } else if (a == "--sizes") {
      args.sizes.clear();
      std::size_t p = 0;
      while (p <= v.size()) {
        std::size_t c = v.find(',', p);
        args.sizes.push_back(static_cast<std::uint32_t>(number(a, v.substr(p, c - p), kBuf)));
        if (c == std::string::npos) break;
        p = c + 1;
      }
    } else if (a == "--timeout") {
      args.timeout = static_cast<int>(number(a, v, 3600));
    } else if (a == "--buffer") {
      args.buffer = number(a, v, 1ULL << 32);
    } else if (a == "--bits") {
      args.bits = number(a, v, ~0ULL);
    } else if (a == "--size") {
      args.size = static_cast<std::uint32_t>(number(a, v, kBuf));
    } else if (a == "--stop-file") {
      args.stop_file = v;
    } else if (a == "--rule-file") {
      args.rule_file = v;
    } else if (a == "--seconds") {
      args.seconds = static_cast<int>(number(a, v, 86400));
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  if (args.nids.empty()) usage("--nid is required");
  if (args.mode != "serve" && args.mode != "check" && args.mode != "stream") usage("mode is serve, check or stream");
  if (args.mode != "serve" && !args.peer) usage(("'" + args.mode + "' needs --peer").c_str());
  if (!args.peer_nids.empty() && !args.peer) usage("--peer-nid needs --peer");
  return args;
}

// Posts the buffer and waits for SIGTERM or SIGINT.
int serve(Instance& lnet, const Args& args) {
  // Outlives the instance (torn down when main returns): nothing lands in freed memory.
  static std::vector<char> buf(args.buffer);
  auto me = lnet.me_attach(kPortal, ProcessId::any(), 0, ~0ULL, Unlink::Retain, InsPos::After);
  MdDesc d;
  d.start = buf.data();
  d.length = buf.size();
  d.options = kMdOpPut | kMdOpGet | kMdManageRemote | kMdTruncate;
  if (!me || !lnet.md_attach(*me, d, Unlink::Retain)) {
    std::fprintf(stderr, "lnet_xfer: cannot post the buffer\n");
    return 1;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  std::printf("serving %s on portal %u\n", args.nids[0].to_string().c_str(), kPortal);
  std::fflush(stdout);
  int sig;
  sigwait(&set, &sig);
  return 0;
}

// One size: a PUT with an ACK, a GET back, the data checked. Returns the failures (0–2).
int check_size(Instance& lnet, ProcessId target, const Args& args, std::uint32_t size, std::vector<char>& src,
               std::vector<char>& sink) {
  for (std::uint32_t i = 0; i < size; ++i) src[i] = static_cast<char>((i * 131 + size) & 0xFF);
  Waiter w;
  MdDesc s;
  s.start = src.data();
  s.length = size;
  s.threshold = 2;
  s.handler = w.handler();
  auto md = lnet.md_bind(s, Unlink::Unlink);
  lnet.put(Nid::any(), *md, AckReq::Ack, target, kPortal, args.bits, 0, 0);
  auto ack = w.wait(EventType::Ack, args.timeout);
  bool put_ok = ack && ack->type == EventType::Ack && ack->status == 0 && ack->mlength == size;
  Waiter g;
  std::memset(sink.data(), 0x5a, size);
  MdDesc k = s;
  k.start = sink.data();
  k.handler = g.handler();
  auto gmd = lnet.md_bind(k, Unlink::Unlink);
  lnet.get(Nid::any(), *gmd, target, kPortal, args.bits + 1, 0);
  auto reply = g.wait(EventType::Reply, args.timeout);
  bool get_ok = reply && reply->type == EventType::Reply && reply->status == 0 && reply->mlength == size &&
                std::memcmp(sink.data(), src.data(), size) == 0;
  auto failed = [](const std::optional<Event>& ev) {
    if (!ev) return std::string("FAILED (no event)");
    if (ev->type == EventType::Unlink) return std::string("FAILED (no response: timed out)");
    return "FAILED (" + std::string(event_type_name(ev->type)) + " status " + std::to_string(ev->status) + ")";
  };
  std::printf("%7u bytes: PUT %s, GET %s\n", size, put_ok ? "ok" : failed(ack).c_str(),
              get_ok ? "ok (data checked)" : failed(reply).c_str());
  if (!ack) (void)lnet.md_unlink(*md);
  if (!reply) (void)lnet.md_unlink(*gmd);
  if (!w.wait_unlinked(args.timeout) || !g.wait_unlinked(args.timeout)) {
    std::fprintf(stderr, "lnet_xfer: an MD of the %u-byte round never completed\n", size);
    std::fflush(nullptr);
    std::_Exit(1);  // its handler may still run: do not destroy what it refers to
  }
  return !put_ok + !get_ok;
}

int check(Instance& lnet, const Args& args) {
  ProcessId target{*args.peer, kPidLustre};
  auto p = lnet.ping(target, std::chrono::seconds(args.timeout));
  if (!p) {
    std::fprintf(stderr, "lnet_xfer: ping %s: %s\n", args.peer->to_string().c_str(), p.message().c_str());
    return 1;
  }
  std::printf("ping %s: ok\n", args.peer->to_string().c_str());
  int failures = 0;
  std::vector<char> src(kBuf), sink(kBuf);
  for (std::uint32_t size : args.sizes) failures += check_size(lnet, target, args, size, src, sink);
  std::fflush(stdout);
  return failures ? 1 : 0;
}

// One round for `stream`: a PUT with an ACK and a GET back, the data checked. Returns 0 or
// the failed step's status (the event's, or -EIO for wrong data); never waits past the
// deadline LNet itself enforces (transaction_timeout) plus a margin.
int stream_round(Instance& lnet, ProcessId target, const Args& args, std::uint32_t salt, std::vector<char>& src,
                 std::vector<char>& sink, std::string& what) {
  for (std::uint32_t i = 0; i < args.size; ++i) src[i] = static_cast<char>((i * 131 + salt) & 0xFF);
  int patience = lnet.control().globals().transaction_timeout + 30;
  auto step = [&](bool put, std::vector<char>& buf) {
    Waiter w;
    MdDesc d;
    d.start = buf.data();
    d.length = args.size;
    d.threshold = 2;
    d.handler = w.handler();
    auto md = lnet.md_bind(d, Unlink::Unlink);
    if (!md) return -ENOMEM;
    int rc = put ? lnet.put(Nid::any(), *md, AckReq::Ack, target, kPortal, args.bits, 0, 0)
                 : lnet.get(Nid::any(), *md, target, kPortal, args.bits + 1, 0);
    if (rc) return rc;
    auto ev = w.wait(put ? EventType::Ack : EventType::Reply, patience);
    if (!ev) {
      std::fprintf(stderr, "lnet_xfer: no event within %d s: LNet's deadline did not hold\n", patience);
      std::fflush(nullptr);
      std::_Exit(3);
    }
    int status = ev->type == EventType::Unlink ? -ETIMEDOUT : ev->status;
    if (status != 0) {
      std::lock_guard g(w.m);
      for (const Event& e : w.events)
        if (e.type == EventType::Send)
          what += std::string(put ? "PUT" : "GET") + " sent from " + e.sender.to_string() + " with status " +
                  std::to_string(e.status) + "; ";
    }
    if (!w.wait_unlinked(patience)) {
      if (status == 0) status = -EIO;  // a failed SEND: the MD waits for nothing
      (void)lnet.md_unlink(*md);
      if (!w.wait_unlinked(patience)) std::_Exit(3);
    }
    return status;
  };
  if (int rc = step(true, src)) {
    what = "PUT (" + what + ")";
    return rc;
  }
  std::memset(sink.data(), 0x5a, args.size);
  if (int rc = step(false, sink)) {
    what = "GET (" + what + ")";
    return rc;
  }
  if (std::memcmp(sink.data(), src.data(), args.size) != 0) {
    what = "GET data";
    return -EIO;
  }
  return 0;
}

// The selection rules of FILE (one per line: `src=EXPR dst=EXPR rte=EXPR priority=N`,
// any of them; or `del`: every rule removed), applied between two rounds; the file is
// removed once read, so it must appear whole (written elsewhere and renamed into place).
void apply_rules(Instance& lnet, const std::string& file) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string w;
    UdspRule rule;
    bool del = false, any = false;
    while (words >> w) {
      std::size_t eq = w.find('=');
      std::string key = w.substr(0, eq), value = eq == std::string::npos ? "" : w.substr(eq + 1);
      any = true;
      if (key == "del") {
        del = true;
      } else if (key == "src") {
        rule.src = value;
      } else if (key == "dst") {
        rule.dst = value;
      } else if (key == "rte") {
        rule.rte = value;
      } else if (key == "priority") {
        rule.priority = static_cast<unsigned>(number("priority", value, 1u << 30));
      } else {
        usage(("bad rule word '" + w + "' in " + file).c_str());
      }
    }
    if (!any) continue;
    Status s = del ? lnet.control().del_udsp(-1) : lnet.control().add_udsp(rule, -1);
    std::printf("rule '%s': %s\n", line.c_str(), s ? "applied" : s.message().c_str());
  }
  std::fflush(stdout);
  std::filesystem::remove(file);
}

int stream(Instance& lnet, const Args& args) {
  using Clock = std::chrono::steady_clock;
  ProcessId target{*args.peer, kPidLustre};
  std::vector<char> src(args.size), sink(args.size);
  auto start = Clock::now(), last = start;
  std::map<Nid, std::uint64_t> sent_before;
  for (const NiInfo& i : lnet.control().ni_info()) sent_before[i.nid] = i.sent.put + i.sent.get;
  long ops = 0, failed = 0, window_ops = 0;
  double max_ms = 0;
  std::map<Nid, std::uint64_t> via_before;
  // With routes, a thread prints every change of a route's state the moment it sees it,
  // stamped with the wall clock (the test compares it with when it cut a link).
  std::atomic<bool> watching{!args.routes.empty()};
  std::thread watcher;
  if (watching) {
    watcher = std::thread([&] {
      std::map<std::pair<NetId, Nid>, bool> seen;
      while (watching) {
        for (const RouteInfo& r : lnet.control().route_info()) {
          auto key = std::make_pair(r.net, r.gateway);
          auto it = seen.find(key);
          if (it != seen.end() && it->second == r.up) continue;
          seen[key] = r.up;
          double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
          std::string line = format("route %s via %s: %s at %.3f\n", r.net.to_string().c_str(),
                                    r.gateway.to_string().c_str(), r.up ? "up" : "down", now);
          std::fputs(line.c_str(), stdout);
          std::fflush(stdout);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  for (std::uint32_t n = 1;; ++n) {
    if (!args.stop_file.empty() && std::filesystem::exists(args.stop_file)) break;
    if (!args.rule_file.empty() && std::filesystem::exists(args.rule_file)) apply_rules(lnet, args.rule_file);
    if (Clock::now() - start > std::chrono::seconds(args.seconds)) break;
    auto t0 = Clock::now();
    std::string what;
    int rc = stream_round(lnet, target, args, n, src, sink, what);
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    max_ms = std::max(max_ms, ms);
    ++ops;
    ++window_ops;
    if (rc) {
      ++failed;
      std::printf("op %u: %s failed: %d (%s) after %.0f ms\n", n, what.c_str(), rc, std::strerror(-rc), ms);
    }
    if (Clock::now() - last >= std::chrono::seconds(1) || rc) {
      last = Clock::now();
      // What each local NI (and each gateway) carried since the last line, then health
      // and recovery; one write, as the route watcher prints too.
      std::string line = format("t=%.1f ops=%ld failed=%ld max_ms=%.0f window_ops=%ld sent:",
                                std::chrono::duration<double>(last - start).count(), ops, failed, max_ms, window_ops);
      window_ops = 0;
      auto nis = lnet.control().ni_info();
      for (const NiInfo& i : nis) {
        if (i.nid.is_lo()) continue;
        std::uint64_t sent = i.sent.put + i.sent.get;  // the requests it carried
        line +=
            format(" %s=+%llu", i.nid.to_string().c_str(), static_cast<unsigned long long>(sent - sent_before[i.nid]));
        sent_before[i.nid] = sent;
      }
      auto peers = lnet.control().peer_info();
      if (!args.routes.empty()) {
        line += " via:";
        for (const auto& [net, gw] : args.routes) {
          std::uint64_t sent = 0;  // requests to any NI of the gateway's peer
          for (const PeerInfo& p : peers) {
            bool is_gw = false;
            for (const PeerNiInfo& i : p.nis) is_gw = is_gw || i.nid == gw;
            if (is_gw)
              for (const PeerNiInfo& i : p.nis) sent += i.sent.put + i.sent.get;
          }
          line += format(" %s=+%llu", gw.to_string().c_str(), static_cast<unsigned long long>(sent - via_before[gw]));
          via_before[gw] = sent;
        }
      }
      line += " health:";
      for (const NiInfo& i : nis)
        if (!i.nid.is_lo()) line += format(" %s=%d", i.nid.to_string().c_str(), i.health);
      for (const PeerInfo& p : peers)
        for (const PeerNiInfo& i : p.nis) line += format(" %s=%d", i.nid.to_string().c_str(), i.health);
      line += format(" recovery: local=%zu peer=%zu\n", lnet.control().recovery_queue(true).size(),
                     lnet.control().recovery_queue(false).size());
      std::fputs(line.c_str(), stdout);
      std::fflush(stdout);
    }
  }
  watching = false;
  if (watcher.joinable()) watcher.join();
  Counters c = lnet.control().counters();
  std::printf(
      "summary: ops=%ld failed=%ld max_ms=%.0f resend_count=%llu successful_resends=%llu "
      "response_timeout_count=%llu network_timeout_count=%llu remote_dropped_count=%llu\n",
      ops, failed, max_ms, static_cast<unsigned long long>(c.resend_count),
      static_cast<unsigned long long>(c.successful_resends), static_cast<unsigned long long>(c.response_timeout_count),
      static_cast<unsigned long long>(c.network_timeout_count),
      static_cast<unsigned long long>(c.remote_dropped_count));
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  auto env = Config::from_env();  // tunables and fault rules of LNET_*
  if (!env) {
    std::fprintf(stderr, "lnet_xfer: %s\n", env.message().c_str());
    return 1;
  }
  Config cfg = *env;
  cfg.nets.clear();
  for (Nid nid : args.nids) {
    NetConfig nc;
    nc.net = nid.net();
    nc.nid = nid;
    cfg.nets.push_back(nc);
  }
  auto created = Instance::create(cfg, kPidLustre);
  if (!created) {
    std::fprintf(stderr, "lnet_xfer: %s\n", created.message().c_str());
    return 1;
  }
  Instance& lnet = **created;
  for (auto& [net, gw] : args.routes) {
    auto r = lnet.control().add_route(RouteConfig{net, gw, -1, 0});
    if (!r) {
      std::fprintf(stderr, "lnet_xfer: route %s via %s: %s\n", net.to_string().c_str(), gw.to_string().c_str(),
                   r.message().c_str());
      return 1;
    }
  }
  if (args.peer && !args.peer_nids.empty()) {
    if (Status s = lnet.control().add_peer(PeerConfig{*args.peer, true, args.peer_nids}, true); !s) {
      std::fprintf(stderr, "lnet_xfer: peer %s: %s\n", args.peer->to_string().c_str(), s.message().c_str());
      return 1;
    }
  }
  if (args.mode == "stream") return stream(lnet, args);
  return args.mode == "serve" ? serve(lnet, args) : check(lnet, args);
}
