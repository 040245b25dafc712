// One PUT or GET on an MD of its own, read as LNet's events say (lnet(3), EVENTS): it
// succeeded if its ACK or REPLY came with status 0; it ended with its MD's last event.
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "xfer.hpp"

namespace lnet::xfer {

struct Op::State {
  std::mutex m;
  std::condition_variable cv;
  bool responded = false, ended = false;
  Outcome out;
  std::function<void()> notify;

  void on(const Event& e) {
    std::function<void()> then;
    {
      std::lock_guard g(m);
      if (e.type == EventType::Ack || e.type == EventType::Reply) {
        responded = true;
        out.status = e.status;
        out.mlength = e.mlength;
      } else if (e.type == EventType::Send) {
        out.sender = e.sender;
        if (e.status != 0 && out.status == 0) out.status = e.status;
      } else if (e.type == EventType::Unlink && !responded && out.status == 0) {
        out.status = -ETIMEDOUT;  // unlinked before its response came
      }
      if (!e.unlinked) return;
      if (!responded && out.status == 0) out.status = -ETIMEDOUT;
      ended = true;
      then = notify;
      cv.notify_all();
    }
    if (then) then();
  }
};

int Op::start(Instance& lnet, std::shared_ptr<Op>& out, bool put, void* buf, std::uint32_t len, ProcessId target,
              const Args& a, std::uint32_t offset, std::uint64_t bits, std::function<void()> notify) {
  auto op = std::make_shared<Op>();
  op->st_ = std::make_shared<State>();
  op->st_->notify = std::move(notify);
  MdDesc d;
  d.start = buf;
  d.length = len;
  d.threshold = 2;  // SEND and ACK/REPLY
  d.handler = [st = op->st_](const Event& e) { st->on(e); };
  auto md = lnet.md_bind(d, Unlink::Unlink);
  if (!md) return md.code();
  op->md_ = *md;
  int rc = put ? lnet.put(Nid::any(), *md, AckReq::Ack, target, a.portal, bits, offset, 0)
               : lnet.get(Nid::any(), *md, target, a.portal, bits, offset);
  if (rc) {
    (void)lnet.md_unlink(*md);
    return rc;
  }
  out = std::move(op);
  return 0;
}

bool Op::wait(Instance& lnet, Clock::time_point deadline) {
  std::unique_lock lk(st_->m);
  if (wait_with_progress(lk, st_->cv, deadline, [&] { return st_->ended; })) return true;
  lk.unlock();
  (void)lnet.md_unlink(md_);  // given up on: its last event says so
  lk.lock();
  return wait_with_progress(lk, st_->cv, Clock::now() + std::chrono::seconds(30), [&] { return st_->ended; });
}

bool Op::done() const {
  std::lock_guard g(st_->m);
  return st_->ended;
}

Outcome Op::outcome() const {
  std::lock_guard g(st_->m);
  return st_->out;
}

Clock::time_point op_deadline(Instance& lnet, const Args& a) {
  int seconds = a.timeout > 0 ? a.timeout : lnet.control().globals().transaction_timeout + 30;
  return Clock::now() + std::chrono::seconds(seconds);
}

Outcome run_op(Instance& lnet, bool put, void* buf, std::uint32_t len, ProcessId target, const Args& a,
               std::uint32_t offset, std::uint64_t bits) {
  std::shared_ptr<Op> op;
  if (int rc = Op::start(lnet, op, put, buf, len, target, a, offset, bits)) return Outcome{rc, 0, {}};
  if (!op->wait(lnet, op_deadline(lnet, a))) {
    std::fprintf(stderr, "lnet-xfer: a %s never ended: LNet's deadline did not hold\n", put ? "PUT" : "GET");
    std::fflush(nullptr);
    std::_Exit(3);  // LNet may still write into the buffer: do not free it
  }
  return op->outcome();
}

void fill(char* buf, std::uint32_t len, std::uint64_t seed) {
  for (std::uint32_t i = 0; i < len; ++i) buf[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 8)) & 0xFF);
}

long differs(const char* buf, std::uint32_t len, std::uint64_t seed) {
  for (std::uint32_t i = 0; i < len; ++i)
    if (buf[i] != static_cast<char>((i * 131 + seed * 7 + (i >> 8)) & 0xFF)) return static_cast<long>(i);
  return -1;
}

std::string describe(int status) {
  return std::to_string(status) + " (" + std::strerror(status < 0 ? -status : status) + ")";
}

}  // namespace lnet::xfer
