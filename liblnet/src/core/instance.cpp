// lnet::Instance: the public face of a Core, and the RAII Me/Md helpers.
#include <unistd.h>

#include <lnet/api.hpp>
#include <lnet/progress.hpp>

#include "core/core.hpp"

namespace lnet {

Instance::Instance(std::unique_ptr<core::Core> c) : core_(std::move(c)) {}
Instance::~Instance() = default;

Result<std::unique_ptr<Instance>> Instance::create(const Config& config, Pid pid,
                                                   std::vector<std::shared_ptr<Lnd>> drivers) {
  if (pid == kPidAny) pid = static_cast<Pid>(getpid()) | kPidUserFlag;
  auto c = std::make_unique<core::Core>(config, pid, std::move(drivers));
  if (auto r = c->startup(); !r) return r.failure();
  return std::unique_ptr<Instance>(new Instance(std::move(c)));
}

Pid Instance::pid() const { return core_->pid(); }
std::vector<Nid> Instance::nids() const { return core_->state().nids(); }
int Instance::dist(Nid nid, Nid* src, std::uint32_t* order) const { return core_->state().dist(nid, src, order); }

Result<MeHandle> Instance::me_attach(unsigned portal, ProcessId match_id, std::uint64_t match_bits,
                                     std::uint64_t ignore_bits, Unlink unlink, InsPos pos) {
  return core_->portals().me_attach(portal, match_id, match_bits, ignore_bits, unlink, pos);
}
Result<MeHandle> Instance::me_insert(MeHandle current, ProcessId match_id, std::uint64_t match_bits,
                                     std::uint64_t ignore_bits, Unlink unlink, InsPos pos) {
  return core_->portals().me_insert(current, match_id, match_bits, ignore_bits, unlink, pos);
}
int Instance::me_unlink(MeHandle me) { return core_->me_unlink(me); }
Result<MdHandle> Instance::md_attach(MeHandle me, const MdDesc& md, Unlink unlink) {
  return core_->md_attach(me, md, unlink);
}
Result<MdHandle> Instance::md_bind(const MdDesc& md, Unlink unlink) { return core_->md_bind(md, unlink); }
int Instance::md_unlink(MdHandle md) { return core_->md_unlink(md); }

int Instance::put(Nid self, MdHandle md, AckReq ack, ProcessId target, unsigned portal, std::uint64_t match_bits,
                  std::uint32_t offset, std::uint64_t hdr_data) {
  return core_->put(self, md, ack, target, portal, match_bits, offset, hdr_data);
}
int Instance::get(Nid self, MdHandle md, ProcessId target, unsigned portal, std::uint64_t match_bits,
                  std::uint32_t offset) {
  return core_->get(self, md, target, portal, match_bits, offset, false);
}
int Instance::get(Nid self, MdHandle md, ProcessId target, unsigned portal, std::uint64_t match_bits,
                  std::uint32_t offset, bool recovery) {
  return core_->get(self, md, target, portal, match_bits, offset, recovery);
}

int Instance::set_lazy_portal(unsigned portal) { return core_->portals().set_lazy(portal); }
int Instance::clear_lazy_portal(unsigned portal) { return core_->clear_lazy_portal(portal); }

Result<PingResult> Instance::ping(ProcessId target, std::chrono::milliseconds timeout, unsigned max_nids, Nid source) {
  return core::ping(*core_, target, timeout, max_nids, source);
}
PingInfo Instance::ping_info() const { return core_->ping_info(); }

bool Instance::progress() { return drive_progress(); }

std::shared_ptr<EventQueue> Instance::make_event_queue(std::size_t capacity, EventQueue::Callback callback) {
  return std::make_shared<EventQueue>(capacity, std::move(callback));
}

Counters Instance::counters() const { return core_->control().counters(); }
void Instance::reset_counters() { core_->control().reset_counters(); }
std::vector<NiInfo> Instance::nets() const { return core_->control().ni_info(); }
std::vector<PeerInfo> Instance::peers() const { return core_->control().peer_info(); }
Control& Instance::control() { return core_->control(); }
const Control& Instance::control() const { return core_->control(); }

Result<Me> Me::attach(Instance& lnet, unsigned portal, ProcessId match_id, std::uint64_t match_bits,
                      std::uint64_t ignore_bits, Unlink unlink, InsPos pos) {
  auto h = lnet.me_attach(portal, match_id, match_bits, ignore_bits, unlink, pos);
  if (!h) return h.failure();
  return Me(lnet, *h, unlink);
}

Result<Md> Md::bind(Instance& lnet, const MdDesc& desc, Unlink unlink) {
  auto h = lnet.md_bind(desc, unlink);
  if (!h) return h.failure();
  return Md(lnet, *h);
}

Result<Md> Md::attach(Instance& lnet, Me& me, const MdDesc& desc, Unlink unlink) {
  auto h = lnet.md_attach(me.handle(), desc, unlink);
  if (!h) return h.failure();
  if (me.unlink_mode() == Unlink::Unlink) me.release();
  return Md(lnet, *h);
}

}  // namespace lnet
