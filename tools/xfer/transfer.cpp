// lnet-xfer put and get: --count operations of each size, --depth of them in flight, each
// in-flight slot on its own range of the server's buffer (offset + slot x size); the rate
// and the latencies of what succeeded, and with --check every byte compared.
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>

#include "xfer.hpp"

namespace lnet::xfer {

namespace {

struct Slot {
  std::vector<char> buf;
  std::shared_ptr<Op> op;
  Clock::time_point t0;
  std::uint64_t seed = 0;  // the pattern its buffer holds (or, for a GET, should get)
  bool used = false;
};

// Completions, handed from LNet's threads to the loop.
struct Done {
  std::mutex m;
  std::condition_variable cv;
  std::deque<unsigned> slots;
};

struct Tally {
  unsigned ok = 0, failed = 0;
  std::vector<double> ms;  // latencies of what succeeded
};

class Run {
 public:
  Run(Instance& lnet, const Args& a, bool put, std::uint32_t size, std::uint64_t nonce)
      : lnet_(lnet), a_(a), put_(put), size_(size), nonce_(nonce), target_{*a.peer, a.pid} {
    slots_.resize(a.depth);
    for (Slot& s : slots_) s.buf.assign(std::max<std::uint32_t>(size, 1), 0);
    for (unsigned i = 0; i < a.depth; ++i) free_.push_back(i);
  }
  // The data a GET is checked against: written by (untimed) PUTs first.
  bool prepare() {
    if (put_ || !a_.check) return true;
    for (unsigned i = 0; i < a_.depth; ++i) {
      Slot& s = slots_[i];
      s.seed = nonce_ + i;
      fill(s.buf.data(), size_, s.seed);
      Outcome o = run_op(lnet_, true, s.buf.data(), size_, target_, a_, offset(i), a_.bits);
      if (o.status != 0 || o.mlength != size_) {
        std::printf("get %u B: cannot write the data to check against at offset %u: %s\n", size_, offset(i),
                    o.status ? describe(o.status).c_str() : "truncated (is the server's buffer big enough?)");
        return false;
      }
    }
    return true;
  }
  void run();
  // put --check: each slot's range read back with a GET and compared with its last PUT.
  unsigned verify_puts();
  void report(double seconds) const;
  const Tally& tally() const { return t_; }

 private:
  std::uint32_t offset(unsigned slot) const { return a_.offset + slot * size_; }
  void issue(unsigned slot, unsigned n);
  void finish(unsigned slot, unsigned n);
  void progress(unsigned completed);

  Instance& lnet_;
  const Args& a_;
  bool put_;
  std::uint32_t size_;
  std::uint64_t nonce_;
  ProcessId target_;
  std::vector<Slot> slots_;
  std::vector<unsigned> free_;
  std::shared_ptr<Done> done_ = std::make_shared<Done>();
  Tally t_;
  Clock::time_point start_ = Clock::now(), last_progress_ = Clock::now();
};

void Run::issue(unsigned slot, unsigned n) {
  Slot& s = slots_[slot];
  if (a_.check && put_) {
    s.seed = nonce_ + n;
    fill(s.buf.data(), size_, s.seed);
  } else if (a_.check) {
    std::memset(s.buf.data(), 0x5a, size_);
  }
  s.used = true;
  s.t0 = Clock::now();
  auto done = done_;
  int rc = Op::start(lnet_, s.op, put_, s.buf.data(), size_, target_, a_, offset(slot), a_.bits, [done, slot] {
    std::lock_guard g(done->m);
    done->slots.push_back(slot);
    done->cv.notify_one();
  });
  if (rc) {  // no message: it failed at once
    s.op.reset();
    std::lock_guard g(done_->m);
    done_->slots.push_back(slot);
    std::printf("%s %u B: op %u failed to start: %s\n", put_ ? "put" : "get", size_, n, describe(rc).c_str());
  }
}

void Run::finish(unsigned slot, unsigned n) {
  Slot& s = slots_[slot];
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - s.t0).count();
  if (!s.op) {
    ++t_.failed;
    return;
  }
  Outcome o = s.op->outcome();
  s.op.reset();
  std::string why;
  if (o.status != 0)
    why = o.status == -ETIMEDOUT ? std::string("no ") + (put_ ? "ACK" : "REPLY") + " in time" : describe(o.status);
  else if (o.mlength != size_)
    why = "truncated to " + std::to_string(o.mlength) + " bytes (the server's buffer ends before offset " +
          std::to_string(offset(slot) + size_) + ")";
  else if (a_.check && !put_)
    if (long at = differs(s.buf.data(), size_, s.seed); at >= 0) why = "data differs at byte " + std::to_string(at);
  if (why.empty()) {
    ++t_.ok;
    t_.ms.push_back(ms);
    return;
  }
  ++t_.failed;
  std::printf("%s %u B: op %u failed after %.1f ms: %s\n", put_ ? "put" : "get", size_, n, ms, why.c_str());
  std::fflush(stdout);
}

void Run::progress(unsigned completed) {
  if (Clock::now() - last_progress_ < std::chrono::seconds(1)) return;
  last_progress_ = Clock::now();
  double s = std::chrono::duration<double>(last_progress_ - start_).count();
  std::fprintf(stderr, "%s %u B: %u/%u done after %.1f s\n", put_ ? "put" : "get", size_, completed, a_.count, s);
}

void Run::run() {
  unsigned issued = 0, completed = 0;
  std::vector<unsigned> number(a_.depth);  // the op each slot carries
  start_ = last_progress_ = Clock::now();
  t_.ms.reserve(a_.count);
  while (completed < a_.count) {
    while (issued < a_.count && !free_.empty()) {
      unsigned slot = free_.back();
      free_.pop_back();
      number[slot] = issued;
      issue(slot, issued++);
    }
    // An operation in flight longer than --timeout (or than LNet's own deadline and a
    // margin) is given up: its MD unlinked, it fails.
    auto limit = op_deadline(lnet_, a_) - Clock::now();
    auto deadline = Clock::now() + limit;
    for (const Slot& s : slots_)
      if (s.op) deadline = std::min(deadline, s.t0 + limit);
    std::unique_lock lk(done_->m);
    if (!wait_with_progress(lk, done_->cv, deadline, [&] { return !done_->slots.empty(); })) {
      lk.unlock();
      for (Slot& s : slots_)
        if (s.op && Clock::now() >= s.t0 + limit && !s.op->wait(lnet_, Clock::now())) {
          std::fprintf(stderr, "lnet-xfer: an operation never ended: LNet's deadline did not hold\n");
          std::fflush(nullptr);
          std::_Exit(3);
        }
      continue;
    }
    unsigned slot = done_->slots.front();
    done_->slots.pop_front();
    lk.unlock();
    finish(slot, number[slot]);
    free_.push_back(slot);
    progress(++completed);
  }
}

unsigned Run::verify_puts() {
  unsigned bad = 0;
  std::vector<char> sink(std::max<std::uint32_t>(size_, 1));
  for (unsigned i = 0; i < a_.depth; ++i) {
    const Slot& s = slots_[i];
    if (!s.used) continue;
    std::memset(sink.data(), 0x5a, size_);
    Outcome o = run_op(lnet_, false, sink.data(), size_, target_, a_, offset(i), a_.bits);
    long at = o.status == 0 && o.mlength == size_ ? differs(sink.data(), size_, s.seed) : 0;
    if (at < 0) continue;
    ++bad;
    std::printf("put %u B: reading back offset %u: %s\n", size_, offset(i),
                o.status ? describe(o.status).c_str() : ("data differs at byte " + std::to_string(at)).c_str());
  }
  return bad;
}

void Run::report(double seconds) const {
  std::vector<double> ms = t_.ms;
  std::sort(ms.begin(), ms.end());
  double bytes = static_cast<double>(t_.ok) * size_;
  std::printf("%s %u B x %u (depth %u) to %s: %u ok, %u failed, %.3f s", put_ ? "put" : "get", size_, a_.count,
              a_.depth, target_.to_string().c_str(), t_.ok, t_.failed, seconds);
  if (seconds > 0) std::printf(", %.2f MiB/s, %.1f ops/s", bytes / seconds / (1 << 20), t_.ok / seconds);
  if (!ms.empty()) std::printf(", latency median %.3f ms, max %.3f ms", ms[ms.size() / 2], ms.back());
  std::printf("%s\n", a_.check ? ", data checked" : "");
  std::fflush(stdout);
}

}  // namespace

int transfer(Instance& lnet, const Args& a) {
  bool put = a.mode == "put";
  // A ping first (not timed): connections, discovery and routes are up before the clock
  // starts, and a server that is not there is said so at once.
  if (auto p = lnet.ping(ProcessId{*a.peer, a.pid}, std::chrono::seconds(a.timeout > 0 ? a.timeout : 10)); !p) {
    std::fprintf(stderr, "lnet-xfer: ping %s: %s\n", a.peer->to_string().c_str(), p.message().c_str());
    return 1;
  }
  std::uint64_t nonce = std::random_device{}();
  unsigned failures = 0;
  for (std::uint32_t size : a.sizes) {
    Run run(lnet, a, put, size, nonce += 1000003);
    if (!run.prepare()) {
      ++failures;
      continue;
    }
    auto t0 = Clock::now();
    run.run();
    double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    unsigned bad = put && a.check ? run.verify_puts() : 0;
    run.report(seconds);
    failures += run.tally().failed + bad;
  }
  return failures ? 1 : 0;
}

}  // namespace lnet::xfer
