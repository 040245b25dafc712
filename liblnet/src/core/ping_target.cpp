// Portal 0's ping target (answers GETs with this node's ping info) and push target
// (accepts pushed ping info for discovery).
#include "core/ping_target.hpp"

#include <algorithm>

namespace lnet::core {

PingInfo PingTarget::info() const {
  PingInfo info;
  info.features = kPingFeatNiStatus | kPingFeatMultiRail | kPingFeatRteDisabled;
  if (st_.tun.discovery.load()) info.features |= kPingFeatDiscovery;
  info.pid = pid_;
  info.nis.push_back(NiStatus{Nid::lo(), st_.ping_seq, 0});  // entry 0's status: the buffer's sequence number
  if (st_.routing.load() && !st_.routing_draining.load()) info.features &= ~kPingFeatRteDisabled;
  for (net::Ni* ni : st_.nets().nis) {
    if (ni == st_.lo_ni) continue;
    bool up = st_.ni_status_up(*ni);
    ni->told_up.store(up);
    info.nis.push_back(NiStatus{ni->nid, up ? kNiStatusUp : kNiStatusDown, 0});
  }
  split_large(info);  // IPv6 NIDs in the LARGE_ADDR entries
  return info;
}

int PingTarget::setup() {
  if (int rc = portals_.set_lazy(kReservedPortal)) return rc;
  auto me = portals_.me_attach(kReservedPortal, ProcessId::any(), kPingMatchBits, 0, Unlink::Retain, InsPos::After);
  if (!me) return me.code();
  ping_me_ = *me;
  refresh();
  if (!ping_md_.is_valid()) return -ENOMEM;
  push_target_bytes_.store(kPingInfoMinSize);
  push_buf_.resize(kPingInfoMinSize);
  post_push_target();
  return 0;
}

void PingTarget::refresh(bool force_push) {
  // A new buffer (with the next sequence number) on the same ME; GETs still reading the
  // old one keep it alive until they finish. Discovered multi-rail peers are pushed it.
  bool changed = ping_md_.is_valid();
  if (changed) {
    (void)host_.md_unlink(ping_md_);
    ++st_.ping_seq;
  }
  auto buf = std::make_shared<std::vector<std::uint8_t>>(encode_ping_info(info()));
  MdDesc d;
  d.start = buf->data();
  d.length = buf->size();
  d.threshold = kMdThreshInf;
  d.options = kMdOpGet | kMdTruncate | kMdManageRemote;
  d.handler = [buf](const Event&) {};  // owns the buffer for as long as the MD lives
  auto md = host_.md_attach(ping_me_, d, Unlink::Retain);
  ping_md_ = md ? *md : MdHandle{};
  if (changed) discovery_.push_update(force_push);
}

// One push at a time lands in push_buf_ (its MD takes one PUT; the handler re-posts it,
// and pushes arriving in between wait on the lazy portal). It starts at the smallest ping
// info and grows when a push was truncated (discovery asks for the size it needed).
void PingTarget::post_push_target() {
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
  if (!host_.md_attach(*me, d, Unlink::Unlink)) (void)host_.me_unlink(*me);
}

void PingTarget::on_push(const Event& ev) {
  if (ev.type == EventType::Put && ev.status == 0) {
    if (ev.rlength > ev.mlength) {
      // More than the buffer holds: the next one (re-posted below) is big enough for it.
      std::size_t most = kPingInfoHeaderSize + kNiStatusSize * static_cast<std::size_t>(st_.tun.max_interfaces.load());
      push_target_bytes_.store(std::max(push_target_bytes_.load(), std::min<std::size_t>(ev.rlength, most)));
    }
    peer::Discovery::DcEvent e{peer::Discovery::DcEvent::PushReceived, nullptr, ev.source.nid, 0, ev.rlength, {}};
    e.data.assign(push_buf_.begin(), push_buf_.begin() + ev.mlength);
    discovery_.post(std::move(e));  // the discovery thread merges it
  }
  if (ev.unlinked) post_push_target();  // threshold 1: re-post for the next push
}

}  // namespace lnet::core
