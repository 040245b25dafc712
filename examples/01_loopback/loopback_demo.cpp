// Example 01 (the main demo until the MPI parts exist): an lnet::Instance on 0@lo pings
// itself, PUTs a buffer with an ACK, GETs it back, and prints every event and the
// counters. Options: --size N (payload bytes), --count N (round trips), --help.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <lnet/lnet.hpp>

namespace {

void usage(const char* argv0) {
  std::printf(
      "usage: %s [--size BYTES] [--count N] [--env]\n"
      "  Brings up LNet on 0@lo (plus LNET_NETWORKS), pings itself, then does N rounds of\n"
      "  PUT (with ACK) and GET of a BYTES-long buffer (default 4096, at most 1048576),\n"
      "  checking the data, and prints the events of the first round and the counters.\n"
      "  --env lists the environment variables liblnet reads.\n",
      argv0);
}

void print_event(const char* side, const lnet::Event& e) {
  std::printf("  %-9s %-6s initiator %s target %s portal %u bits 0x%llx rlength %u mlength %u offset %u%s%s\n", side,
              lnet::event_type_name(e.type), e.initiator.to_string().c_str(), e.target.to_string().c_str(), e.pt_index,
              static_cast<unsigned long long>(e.match_bits), e.rlength, e.mlength, e.offset,
              e.unlinked ? " unlinked" : "", e.status ? (" status " + std::to_string(e.status)).c_str() : "");
}

struct Options {
  std::size_t size = 4096;
  long count = 1000;
};

// Returns -1 to go on, or the exit code.
int parse_args(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(argv[0]);
      return 0;
    } else if (a == "--env") {
      std::printf("%s", lnet::env_help().c_str());
      return 0;
    } else if ((a == "--size" || a == "--count") && i + 1 < argc) {
      char* end = nullptr;
      long v = std::strtol(argv[++i], &end, 10);
      if (*end || v < 1 || (a == "--size" && v > static_cast<long>(lnet::kMaxPayload))) {
        std::fprintf(stderr, "lnet-demo: bad value '%s' for %s\n", argv[i], a.c_str());
        return 2;
      }
      if (a == "--size")
        o.size = static_cast<std::size_t>(v);
      else
        o.count = v;
    } else {
      std::fprintf(stderr, "lnet-demo: unknown argument '%s' (try --help)\n", a.c_str());
      return 2;
    }
  }
  return -1;
}

bool ping_self(lnet::Instance& lnet, lnet::ProcessId self) {
  auto ping = lnet.ping(self, std::chrono::milliseconds(1000));
  if (!ping) {
    std::fprintf(stderr, "lnet-demo: ping failed: %s\n", ping.message().c_str());
    return false;
  }
  std::printf("ping %s: pid %u, features 0x%x, %zu NID(s):", self.to_string().c_str(), ping->info.pid,
              ping->info.features, ping->info.nis.size());
  for (const auto& ns : ping->info.nis) std::printf(" %s", ns.nid.to_string().c_str());
  std::printf("\n");
  return true;
}

void print_counters(const lnet::Counters& c) {
  std::printf(
      "statistics: send_count %llu recv_count %llu drop_count %llu send_length %llu recv_length %llu "
      "msgs_alloc %llu msgs_max %llu\n",
      static_cast<unsigned long long>(c.send_count), static_cast<unsigned long long>(c.recv_count),
      static_cast<unsigned long long>(c.drop_count), static_cast<unsigned long long>(c.send_length),
      static_cast<unsigned long long>(c.recv_length), static_cast<unsigned long long>(c.msgs_alloc),
      static_cast<unsigned long long>(c.msgs_max));
}

// The target: portal 10, match bits 0x42, a buffer that takes PUT and GET. The source
// PUTs into it and GETs it back into the sink; events are printed while `record` is set.
class Rounds {
 public:
  static constexpr unsigned kPortal = 10;
  static constexpr std::uint64_t kBits = 0x42;

  Rounds(lnet::Instance& lnet, std::size_t size) : lnet_(lnet), target_(size), source_(size), sink_(size) {
    for (std::size_t i = 0; i < size; ++i) source_[i] = static_cast<char>('a' + i % 26);
  }

  bool post_target() {
    auto me = lnet::Me::attach(lnet_, kPortal, lnet::ProcessId::any(), kBits, 0);
    if (!me) return false;
    me_ = std::move(*me);
    lnet::MdDesc td;
    td.start = target_.data();
    td.length = target_.size();
    td.options = lnet::kMdOpPut | lnet::kMdOpGet | lnet::kMdManageRemote;
    td.handler = [this](const lnet::Event& e) {
      if (record_) print_event("target:", e);
    };
    auto md = lnet::Md::attach(lnet_, *me_, td);
    if (!md) return false;
    md_ = std::move(*md);
    return true;
  }

  // One PUT with an ACK, one GET back, the data checked; lo completes both in the call.
  bool round(lnet::ProcessId self, long round) {
    lnet::MdDesc sd;
    sd.start = source_.data();
    sd.length = source_.size();
    sd.threshold = 2;  // SEND + ACK
    sd.handler = [this](const lnet::Event& e) {
      if (record_) print_event("initiator:", e);
    };
    auto put_md = lnet_.md_bind(sd, lnet::Unlink::Unlink);
    if (!put_md || lnet_.put(lnet::Nid::any(), *put_md, lnet::AckReq::Ack, self, kPortal, kBits, 0, round) != 0) {
      std::fprintf(stderr, "lnet-demo: PUT failed\n");
      return false;
    }
    sd.start = sink_.data();  // SEND + REPLY
    auto get_md = lnet_.md_bind(sd, lnet::Unlink::Unlink);
    if (!get_md || lnet_.get(lnet::Nid::any(), *get_md, self, kPortal, kBits, 0) != 0) {
      std::fprintf(stderr, "lnet-demo: GET failed\n");
      return false;
    }
    if (round == 0) {
      std::printf("round 1: PUT %zu bytes with ACK, then GET them back\n", source_.size());
      record_ = false;
    }
    if (sink_ != source_ || target_ != source_) {
      std::fprintf(stderr, "lnet-demo: data mismatch in round %ld\n", round + 1);
      return false;
    }
    return true;
  }

 private:
  lnet::Instance& lnet_;
  std::vector<char> target_, source_, sink_;
  bool record_ = true;
  std::optional<lnet::Me> me_;  // detached after md_
  std::optional<lnet::Md> md_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (int rc = parse_args(argc, argv, o); rc >= 0) return rc;

  auto cfg = lnet::Config::from_env();
  if (!cfg) {
    std::fprintf(stderr, "lnet-demo: %s\n", cfg.message().c_str());
    return 1;
  }
  auto created = lnet::Instance::create(*cfg);
  if (!created) {
    std::fprintf(stderr, "lnet-demo: cannot start LNet: %s\n", created.message().c_str());
    return 1;
  }
  lnet::Instance& lnet = **created;
  lnet::ProcessId self{lnet::Nid::lo(), lnet.pid()};
  std::printf("LNet up: pid %s, NIDs:", self.to_string().c_str());
  for (lnet::Nid n : lnet.nids()) std::printf(" %s", n.to_string().c_str());
  std::printf("\n");
  if (!ping_self(lnet, self)) return 1;

  Rounds rounds(lnet, o.size);
  if (!rounds.post_target()) {
    std::fprintf(stderr, "lnet-demo: cannot post the target buffer\n");
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  for (long r = 0; r < o.count; ++r)
    if (!rounds.round(self, r)) return 1;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%ld rounds of PUT+ACK and GET+REPLY of %zu bytes: data checked, %.2f us per round\n", o.count, o.size,
              secs * 1e6 / static_cast<double>(o.count));
  print_counters(lnet.counters());
  std::printf("loopback demo: OK\n");
  return 0;
}
