// Portal 0: the ping target (answers GETs with this node's ping info), the push target
// (accepts pushed ping info), and ping() itself.
#include <algorithm>
#include <condition_variable>

#include <lnet/mutex.hpp>
#include <lnet/progress.hpp>

#include "core/core.hpp"

namespace lnet::core {

PingInfo Core::ping_info() const {
  PingInfo info;
  info.features = kPingFeatNiStatus | kPingFeatMultiRail | kPingFeatRteDisabled;
  if (st_.tun.discovery.load()) info.features |= kPingFeatDiscovery;
  info.pid = pid_;
  info.nis.push_back(NiStatus{Nid::lo(), st_.ping_seq, 0});  // entry 0's status: the buffer's sequence number
  if (st_.routing.load()) info.features &= ~kPingFeatRteDisabled;
  for (Ni* ni : st_.nets().nis) {
    if (ni == st_.lo_ni) continue;
    info.nis.push_back(NiStatus{ni->nid, ni->up.load() && !ni->silent.load() ? kNiStatusUp : kNiStatusDown, 0});
  }
  return info;
}

int Core::setup_ping_target() {
  if (int rc = portals_.set_lazy(kReservedPortal)) return rc;
  auto me = portals_.me_attach(kReservedPortal, ProcessId::any(), kPingMatchBits, 0, Unlink::Retain, InsPos::After);
  if (!me) return me.code();
  ping_me_ = *me;
  refresh_ping_target();
  if (!ping_md_.is_valid()) return -ENOMEM;
  push_target_bytes_.store(kPingInfoMinSize);
  push_buf_.resize(kPingInfoMinSize);
  post_push_target();
  return 0;
}

void Core::refresh_ping_target(bool force_push) {
  // A new buffer (with the next sequence number) on the same ME; GETs still reading the
  // old one keep it alive until they finish. Discovered multi-rail peers are pushed it.
  bool changed = ping_md_.is_valid();
  if (changed) {
    (void)md_unlink(ping_md_);
    ++st_.ping_seq;
  }
  auto buf = std::make_shared<std::vector<std::uint8_t>>(encode_ping_info(ping_info()));
  MdDesc d;
  d.start = buf->data();
  d.length = buf->size();
  d.threshold = kMdThreshInf;
  d.options = kMdOpGet | kMdTruncate | kMdManageRemote;
  d.handler = [buf](const Event&) {};  // owns the buffer for as long as the MD lives
  auto md = md_attach(ping_me_, d, Unlink::Retain);
  ping_md_ = md ? *md : MdHandle{};
  if (changed) discovery_.push_update(force_push);
}

// One push at a time lands in push_buf_ (its MD takes one PUT; the handler re-posts it,
// and pushes arriving in between wait on the lazy portal). It starts at the smallest ping
// info and grows when a push was truncated (discovery asks for the size it needed).
void Core::post_push_target() {
  if (st_.stopping.load()) return;
  std::size_t want = push_target_bytes_.load();
  if (push_buf_.size() < want) push_buf_.resize(want);
  auto me = portals_.me_attach(kReservedPortal, ProcessId::any(), kPingMatchBits, 0, Unlink::Unlink, InsPos::After);
  if (!me) return;
  MdDesc d;
  d.start = push_buf_.data();
  d.length = push_buf_.size();
  d.threshold = 1;
  d.options = kMdOpPut | kMdTruncate;
  d.handler = [this](const Event& ev) { on_push(ev); };
  if (!md_attach(*me, d, Unlink::Unlink)) (void)portals_.me_unlink(*me, *this);
}

void Core::on_push(const Event& ev) {
  if (ev.type == EventType::Put && ev.status == 0) {
    pushes_received_.fetch_add(1);
    if (ev.rlength > ev.mlength) {
      // More than the buffer holds: the next one (re-posted below) is big enough for it.
      std::size_t most = kPingInfoHeaderSize + kNiStatusSize * std::size_t{st_.tun.max_interfaces.load()};
      push_target_bytes_.store(std::max(push_target_bytes_.load(), std::min<std::size_t>(ev.rlength, most)));
    }
    peer::Discovery::DcEvent e{peer::Discovery::DcEvent::PushReceived, nullptr, ev.source.nid, 0, ev.rlength, {}};
    e.data.assign(push_buf_.begin(), push_buf_.begin() + ev.mlength);
    discovery_.post(std::move(e));  // the discovery thread merges it
  }
  if (ev.unlinked) post_push_target();  // threshold 1: re-post for the next push
}

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

}  // namespace

Result<std::vector<std::uint8_t>> Core::ping_once(ProcessId target, Nid source, std::size_t size,
                                                  std::chrono::milliseconds timeout) {
  auto w = std::make_shared<PingWait>();
  w->buf.resize(size);
  MdDesc d;
  d.start = w->buf.data();
  d.length = size;
  d.threshold = 2;  // SEND + REPLY
  d.options = kMdTruncate;
  d.handler = [w](const Event& ev) {
    MutexLock g(w->m);
    if (ev.type == EventType::Reply) {
      w->replied = ev.status == 0;
      w->status = ev.status;
      w->mlength = ev.mlength;
    } else if (ev.status != 0) {
      w->failed = true;
      w->status = ev.status;
    }
    if (ev.unlinked) w->done = true;
    w->cv.notify_all();
  };
  auto md = md_bind(d, Unlink::Unlink);
  if (!md) return md.failure();
  if (int rc = get(source, *md, target, kReservedPortal, kPingMatchBits, 0)) {
    (void)md_unlink(*md);
    return Failure{rc, "cannot ping " + target.to_string() + ": " + errno_string(rc)};
  }
  MutexLock lk(w->m);
  bool answered = wait_with_progress(lk.native(), w->cv, std::chrono::steady_clock::now() + timeout,
                                     [&]() LNET_REQUIRES(w->m) { return w->done || w->failed; });
  if (!w->done) {
    // No answer (or a failed send): stop waiting for one. A REPLY racing with this is
    // either in already (done) or refused from now on.
    lk.unlock();
    (void)md_unlink(*md);
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

Result<PingResult> Core::ping(ProcessId target, std::chrono::milliseconds timeout, unsigned max_nids, Nid source) {
  if (target.nid.is_any()) return Failure{-EINVAL, "ping needs a target NID"};
  if (!source.is_any() && !find_ni(source))
    return Failure{-EINVAL, "cannot ping from " + source.to_string() + ": not one of our NIDs"};
  if (target.pid == kPidAny) target.pid = kPidLustre;
  max_nids = std::clamp(max_nids, 1U, st_.tun.max_interfaces.load());
  std::size_t size = std::max(kPingInfoMinSize, kPingInfoHeaderSize + kNiStatusSize * (max_nids + 1));
  for (int attempt = 0;; ++attempt) {
    auto reply = ping_once(target, source, size, timeout);
    if (!reply) return reply.failure();
    std::size_t needed = 0;
    auto info = decode_ping_info(*reply, st_.tun.max_interfaces.load(), &needed);
    if (!info && info.code() == -E2BIG && attempt == 0 && needed > size) {
      size = needed;  // more NIs than we made room for: ask again with a big enough buffer
      continue;
    }
    if (!info) return Failure{info.code(), "bad ping reply from " + target.to_string() + ": " + info.message()};
    if (info->nis.size() > max_nids + 1) info->nis.resize(max_nids + 1);
    return PingResult{ProcessId{target.nid, info->pid}, std::move(*info)};
  }
}

}  // namespace lnet::core
