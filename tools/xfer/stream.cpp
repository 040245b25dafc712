// lnet-xfer stream: rounds of a PUT (with ACK) and a GET back, data checked, back to back
// until --stop-file appears or --seconds pass, printing every second what it did, the
// longest single round, which local NIs carried it and the health and recovery of every
// NI and peer NI (with --route: what went to each gateway, counting the router pings
// among them, and a line stamped with the wall clock whenever a route goes up or down);
// --rule-file applies selection rules between rounds. The failover tests read it.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "xfer.hpp"

namespace lnet::xfer {

namespace {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return std::string(buf, n < 0 ? 0 : std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf - 1));
}

// One round: 0 or the failed step's status (-EIO for wrong data); `what` says which step
// and from which NI it was sent.
int stream_round(Instance& lnet, ProcessId target, const Args& a, std::uint32_t salt, std::vector<char>& src,
                 std::vector<char>& sink, std::string& what) {
  std::uint32_t size = a.sizes[0];
  fill(src.data(), size, salt);
  Outcome put = run_op(lnet, true, src.data(), size, target, a, a.offset, a.bits);
  if (put.status != 0) {
    what = "PUT (sent from " + put.sender.to_string() + ")";
    return put.status;
  }
  std::memset(sink.data(), 0x5a, size);
  Outcome get = run_op(lnet, false, sink.data(), size, target, a, a.offset, a.bits + 1);
  if (get.status != 0) {
    what = "GET (sent from " + get.sender.to_string() + ")";
    return get.status;
  }
  if (std::memcmp(sink.data(), src.data(), size) != 0) {
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
        rule.priority = static_cast<unsigned>(std::strtoul(value.c_str(), nullptr, 0));
      } else {
        std::fprintf(stderr, "lnet-xfer: bad rule word '%s' in %s\n", w.c_str(), file.c_str());
        any = false;
        break;
      }
    }
    if (!any) continue;
    Status s = del ? lnet.control().del_udsp(-1) : lnet.control().add_udsp(rule, -1);
    std::printf("rule '%s': %s\n", line.c_str(), s ? "applied" : s.message().c_str());
  }
  std::fflush(stdout);
  std::filesystem::remove(file);
}

// Prints every change of a route's state the moment it sees it, stamped with the wall
// clock (the failover tests compare it with when they cut a link).
class RouteWatcher {
 public:
  explicit RouteWatcher(Instance& lnet) : lnet_(lnet), thread_([this] { loop(); }) {}
  ~RouteWatcher() {
    stop_ = true;
    thread_.join();
  }

 private:
  void loop() {
    std::map<std::pair<NetId, Nid>, bool> seen;
    while (!stop_) {
      for (const RouteInfo& r : lnet_.control().route_info()) {
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
  }
  Instance& lnet_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The per-second line: what each local NI (and each gateway) carried since the last
// line, then health and recovery; one write, as the route watcher prints too.
class Reporter {
 public:
  Reporter(Instance& lnet, const Args& a) : lnet_(lnet), a_(a) {
    for (const NiInfo& i : lnet.control().ni_info()) sent_before_[i.nid] = i.sent.put + i.sent.get;
  }
  void line(double t, long ops, long failed, double max_ms, long window_ops) {
    std::string line =
        format("t=%.1f ops=%ld failed=%ld max_ms=%.0f window_ops=%ld sent:", t, ops, failed, max_ms, window_ops);
    auto nis = lnet_.control().ni_info();
    for (const NiInfo& i : nis) {
      if (i.nid.is_lo()) continue;
      std::uint64_t sent = i.sent.put + i.sent.get;  // the requests it carried
      line +=
          format(" %s=+%llu", i.nid.to_string().c_str(), static_cast<unsigned long long>(sent - sent_before_[i.nid]));
      sent_before_[i.nid] = sent;
    }
    auto peers = lnet_.control().peer_info();
    if (!a_.routes.empty()) line += " via:" + via(peers);
    line += " health:";
    for (const NiInfo& i : nis)
      if (!i.nid.is_lo()) line += format(" %s=%d", i.nid.to_string().c_str(), i.health);
    for (const PeerInfo& p : peers)
      for (const PeerNiInfo& i : p.nis) line += format(" %s=%d", i.nid.to_string().c_str(), i.health);
    line += format(" recovery: local=%zu peer=%zu\n", lnet_.control().recovery_queue(true).size(),
                   lnet_.control().recovery_queue(false).size());
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  }

 private:
  // Requests to any NI of each gateway's peer since the last line.
  std::string via(const std::vector<PeerInfo>& peers) {
    std::string out;
    for (const auto& [net, gw] : a_.routes) {
      std::uint64_t sent = 0;
      for (const PeerInfo& p : peers) {
        bool is_gw = false;
        for (const PeerNiInfo& i : p.nis) is_gw = is_gw || i.nid == gw;
        if (is_gw)
          for (const PeerNiInfo& i : p.nis) sent += i.sent.put + i.sent.get;
      }
      out += format(" %s=+%llu", gw.to_string().c_str(), static_cast<unsigned long long>(sent - via_before_[gw]));
      via_before_[gw] = sent;
    }
    return out;
  }
  Instance& lnet_;
  const Args& a_;
  std::map<Nid, std::uint64_t> sent_before_, via_before_;
};

void summary(Instance& lnet, long ops, long failed, double max_ms) {
  Counters c = lnet.control().counters();
  std::printf(
      "summary: ops=%ld failed=%ld max_ms=%.0f resend_count=%llu successful_resends=%llu "
      "response_timeout_count=%llu network_timeout_count=%llu remote_dropped_count=%llu\n",
      ops, failed, max_ms, static_cast<unsigned long long>(c.resend_count),
      static_cast<unsigned long long>(c.successful_resends), static_cast<unsigned long long>(c.response_timeout_count),
      static_cast<unsigned long long>(c.network_timeout_count),
      static_cast<unsigned long long>(c.remote_dropped_count));
  std::fflush(stdout);
}

}  // namespace

int stream(Instance& lnet, const Args& a) {
  ProcessId target{*a.peer, a.pid};
  std::vector<char> src(std::max<std::uint32_t>(a.sizes[0], 1)), sink(src.size());
  auto start = Clock::now(), last = start;
  long ops = 0, failed = 0, window_ops = 0;
  double max_ms = 0;
  Reporter reporter(lnet, a);
  std::optional<RouteWatcher> watcher;
  if (!a.routes.empty()) watcher.emplace(lnet);
  for (std::uint32_t n = 1;; ++n) {
    if (!a.stop_file.empty() && std::filesystem::exists(a.stop_file)) break;
    if (!a.rule_file.empty() && std::filesystem::exists(a.rule_file)) apply_rules(lnet, a.rule_file);
    if (Clock::now() - start > std::chrono::seconds(a.seconds)) break;
    auto t0 = Clock::now();
    std::string what;
    int rc = stream_round(lnet, target, a, n, src, sink, what);
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
      reporter.line(std::chrono::duration<double>(last - start).count(), ops, failed, max_ms, window_ops);
      window_ops = 0;
    }
  }
  watcher.reset();
  summary(lnet, ops, failed, max_ms);
  return 0;
}

}  // namespace lnet::xfer
