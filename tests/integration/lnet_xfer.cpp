// Test peer for the multi-host tests: `serve` exposes a 2 MiB buffer on portal 40 (PUT
// and GET, remote-managed offsets); `check` pings a serving peer, then PUTs (with ACK)
// and GETs back payloads of several sizes, checking every byte. Each runs its own liblnet
// with one tcp NI (and routes), like an application node would.
//   lnet_xfer serve --nid NID [--route NET@GW]... [--buffer BYTES]
//   lnet_xfer check --nid NID --peer NID [--route NET@GW]... [--sizes 0,1,4096,1048576]
//                   [--bits B]   (PUTs carry match bits B, GETs B+1; the server matches any)
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

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
        if (e.type == t || (e.type == EventType::Send && e.status != 0)) {
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

struct Args {
  std::string mode;
  std::optional<Nid> nid, peer;
  std::vector<std::pair<NetId, Nid>> routes;
  std::vector<std::uint32_t> sizes = {0, 1, 4096, 1 << 20};
  int timeout = 10;
  std::uint64_t bits = 0;
  std::size_t buffer = kBuf;
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
    if (a == "--nid" || a == "--peer") {
      auto n = Nid::parse(v);
      if (!n) usage(n.message().c_str());
      (a == "--nid" ? args.nid : args.peer) = *n;
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
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  if (!args.nid) usage("--nid is required");
  if (args.mode != "serve" && args.mode != "check") usage("mode is serve or check");
  if (args.mode == "check" && !args.peer) usage("check needs --peer");
  return args;
}

// Posts the buffer and waits for SIGTERM or SIGINT.
int serve(Instance& lnet, const Args& args) {
  std::vector<char> buf(args.buffer);
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
  std::printf("serving %s on portal %u\n", args.nid->to_string().c_str(), kPortal);
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
  bool put_ok = ack && ack->type == EventType::Ack && ack->mlength == size;
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
  std::printf("%7u bytes: PUT %s, GET %s\n", size, put_ok ? "ok" : "FAILED", get_ok ? "ok (data checked)" : "FAILED");
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

}  // namespace

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  Config cfg;
  NetConfig nc;
  nc.net = args.nid->net();
  nc.nid = *args.nid;
  cfg.nets.push_back(nc);
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
  return args.mode == "serve" ? serve(lnet, args) : check(lnet, args);
}
