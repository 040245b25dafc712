// ping(): a GET of a node's ping info on portal 0, through the core's API.
#include <algorithm>
#include <condition_variable>

#include <lnet/mutex.hpp>
#include <lnet/progress.hpp>

#include "core/core.hpp"

namespace lnet::core {

namespace {

// One ping's wait, shared with the MD's handler: after a timeout the MD may outlive the
// call (its GET still in a driver), so the buffer lives here too.
struct PingWait {
  std::vector<std::uint8_t> buf;
  Mutex m;
  std::condition_variable cv;
  bool replied LNET_GUARDED_BY(m) = false;
  bool failed LNET_GUARDED_BY(m) = false;
  bool done LNET_GUARDED_BY(m) = false;  // the MD is unlinked: no more events
  int status LNET_GUARDED_BY(m) = 0;
  std::uint32_t mlength LNET_GUARDED_BY(m) = 0;
};

// One ping (a GET of `target`'s ping info into `size` bytes): the reply's bytes.
Result<std::vector<std::uint8_t>> ping_once(Core& core, ProcessId target, Nid source, std::size_t size,
                                            std::chrono::milliseconds timeout) {
  auto w = std::make_shared<PingWait>();
  w->buf.resize(size);
  MdDesc d = portals::ping_md(w->buf.data(), size, [w](const Event& ev) {
    MutexLock g(w->m);
    if (ev.type == EventType::Reply) {
      w->replied = ev.status == 0;
      w->status = ev.status;
      w->mlength = ev.mlength;
    } else if (ev.status != 0 || ev.type == EventType::Unlink) {  // UNLINK: no REPLY in time
      w->failed = true;
      w->status = ev.status ? ev.status : -ETIMEDOUT;
    }
    if (ev.unlinked) w->done = true;
    w->cv.notify_all();
  });
  auto md = core.md_bind(d, Unlink::Unlink);
  if (!md) return md.failure();
  if (int rc = core.get(source, *md, target, kReservedPortal, kPingMatchBits, 0)) {
    (void)core.md_unlink(*md);
    return Failure{rc, "cannot ping " + target.to_string() + ": " + errno_string(rc)};
  }
  MutexLock lk(w->m);
  bool answered = wait_with_progress(lk.native(), w->cv, std::chrono::steady_clock::now() + timeout,
                                     [&]() LNET_REQUIRES(w->m) { return w->done || w->failed; });
  if (!w->done) {
    // No answer (or a failed send): stop waiting for one. A REPLY racing with this is
    // either in already (done) or refused from now on.
    lk.unlock();
    (void)core.md_unlink(*md);
    lk.lock();
  }
  if (!w->replied) {
    if (!answered)
      return Failure{-ETIMEDOUT,
                     "no answer from " + target.to_string() + " within " + std::to_string(timeout.count()) + " ms"};
    int rc = w->status ? w->status : -EIO;
    return Failure{rc, "ping of " + target.to_string() + " failed: " + errno_string(rc)};
  }
  return std::vector<std::uint8_t>(w->buf.begin(), w->buf.begin() + w->mlength);
}

}  // namespace

Result<PingResult> ping(Core& core, ProcessId target, std::chrono::milliseconds timeout, unsigned max_nids,
                        Nid source) {
  const net::State& st = core.state();
  if (target.nid.is_any()) return Failure{-EINVAL, "ping needs a target NID"};
  if (!source.is_any() && !st.find_ni(source))
    return Failure{-EINVAL, "cannot ping from " + source.to_string() + ": not one of our NIDs"};
  if (target.pid == kPidAny) target.pid = kPidLustre;
  max_nids = std::clamp(max_nids, 1U, static_cast<unsigned>(st.tun.max_interfaces.load()));
  std::size_t size = std::max(kPingInfoMinSize, kPingInfoHeaderSize + kNiStatusSize * (max_nids + 1));
  for (int attempt = 0;; ++attempt) {
    auto reply = ping_once(core, target, source, size, timeout);
    if (!reply) return reply.failure();
    std::size_t needed = 0;
    auto info = decode_ping_info(*reply, st.tun.max_interfaces.load(), &needed);
    if (!info && info.code() == -E2BIG && attempt == 0 && needed > size) {
      size = needed;  // more NIs than we made room for: ask again with a big enough buffer
      continue;
    }
    if (!info) return Failure{info.code(), "bad ping reply from " + target.to_string() + ": " + info.message()};
    merge_large(*info);
    if (info->nis.size() > max_nids + 1) info->nis.resize(max_nids + 1);
    return PingResult{ProcessId{target.nid, info->pid}, std::move(*info)};
  }
}

}  // namespace lnet::core
