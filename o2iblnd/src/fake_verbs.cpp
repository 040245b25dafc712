// The fake RDMA fabric (fake_verbs.hpp). One mutex for the whole fabric: it is a test
// device, and one lock keeps its behaviour easy to reason about. Work is done in the
// poster's thread (or at deliver_all() while held), completions and events queued to the
// providers, whose eventfds wake their progress threads.
#include "fake_verbs.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <vector>

namespace lnet::o2ib {

namespace {

enum class EpState { Connecting, Requested, Established, Broken, Gone };

struct Recv {
  Sge sge;
  std::uint64_t wr_id = 0;
};

struct Ep {
  EpState state = EpState::Connecting;
  std::uintptr_t context = 0;
  std::uint32_t peer_ip = 0;  // the other end's provider and endpoint
  EndpointId peer = 0;
  std::deque<Recv> recvs;
};

struct Mr {
  std::uintptr_t addr = 0;
  std::size_t len = 0;
  std::uint32_t lkey = 0, rkey = 0;
};

}  // namespace

class FakeProvider;

struct FakeFabric::Impl {
  std::mutex m;
  std::map<std::uint32_t, FakeProvider*> providers;
  std::set<std::pair<std::uint32_t, std::uint16_t>> listeners;
  std::set<std::pair<std::uint32_t, std::uint32_t>> down;
  std::map<std::uint32_t, WcStatus> fail;
  std::map<std::uint32_t, unsigned> fail_regs;  // registrations of that device still to refuse
  EndpointId next_ep = 1;
  std::uint32_t next_key = 0x100;
  bool holding = false;
  struct Work {
    bool write = false;
    std::uint32_t ip = 0;  // the poster
    EndpointId ep = 0;
    std::vector<Sge> local;
    std::uint64_t remote_addr = 0;
    std::uint32_t rkey = 0;
    std::uint64_t wr_id = 0;
  };
  std::deque<Work> held;
  Stats stats;

  bool link_up(std::uint32_t a, std::uint32_t b) const { return !down.count({std::min(a, b), std::max(a, b)}); }
  FakeProvider* provider(std::uint32_t ip) {
    auto it = providers.find(ip);
    return it == providers.end() ? nullptr : it->second;
  }
  void run(const Work& w);                           // m held
  void break_conn(std::uint32_t ip, EndpointId ep);  // m held: both ends
};

class FakeProvider final : public Provider {
 public:
  FakeProvider(std::shared_ptr<FakeFabric::Impl> f, std::uint32_t ip)
      : f_(std::move(f)), ip_(ip), fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~FakeProvider() override;

  int event_fd() const override { return fd_; }
  void arm() override {
    std::uint64_t n;
    (void)!::read(fd_, &n, sizeof n);
  }
  Status listen(std::uint16_t port) override {
    std::lock_guard g(f_->m);
    if (!f_->listeners.insert({ip_, port}).second) return Failure{-EADDRINUSE, "already listening"};
    return {};
  }
  Result<EndpointId> connect(std::uint32_t dst_ip, std::uint16_t port, bool privileged, const QpAttrs& attrs,
                             std::span<const std::uint8_t> private_data, std::uintptr_t context) override;
  Status accept(EndpointId ep, const QpAttrs& attrs, std::span<const std::uint8_t> private_data,
                std::uintptr_t context) override;
  Status reject(EndpointId ep, std::span<const std::uint8_t> private_data) override;
  void disconnect(EndpointId ep) override {
    std::lock_guard g(f_->m);
    f_->break_conn(ip_, ep);
  }
  void destroy(EndpointId ep) override {
    std::lock_guard g(f_->m);
    eps_.erase(ep);
  }
  bool next_event(CmEvent& out) override {
    std::lock_guard g(f_->m);
    if (events_.empty()) return false;
    out = events_.front();
    events_.pop_front();
    return true;
  }
  Result<MemoryRegion> reg(void* addr, std::size_t len, bool remote_write) override {
    std::lock_guard g(f_->m);
    if (auto it = f_->fail_regs.find(ip_); it != f_->fail_regs.end() && it->second > 0) {
      --it->second;
      return Failure{-ENOMEM, "cannot pin " + std::to_string(len) + " bytes (locked memory limit)"};
    }
    Mr mr{reinterpret_cast<std::uintptr_t>(addr), len, f_->next_key++, 0};
    if (remote_write) mr.rkey = f_->next_key++;
    std::uint64_t id = next_mr_++;
    mrs_[id] = mr;
    ++f_->stats.regs;
    ++f_->stats.live_mrs;
    return MemoryRegion{id, mr.lkey, mr.rkey};
  }
  void dereg(const MemoryRegion& mr) override {
    std::lock_guard g(f_->m);
    f_->stats.live_mrs -= mrs_.erase(mr.id);
  }
  Status post_recv(EndpointId ep, const Sge& sge, std::uint64_t wr_id) override;
  Status post_send(EndpointId ep, const Sge& sge, std::uint64_t wr_id) override {
    return post(FakeFabric::Impl::Work{false, ip_, ep, {sge}, 0, 0, wr_id});
  }
  Status post_write(EndpointId ep, std::span<const Sge> local, std::uint64_t remote_addr, std::uint32_t rkey,
                    std::uint64_t wr_id) override {
    return post(FakeFabric::Impl::Work{true, ip_, ep, {local.begin(), local.end()}, remote_addr, rkey, wr_id});
  }
  std::size_t poll(std::span<Completion> out) override {
    std::lock_guard g(f_->m);
    std::size_t n = 0;
    for (; n < out.size() && !cq_.empty(); ++n) {
      out[n] = cq_.front();
      cq_.pop_front();
    }
    return n;
  }

  // ---- for the fabric (m held)
  Ep* ep(EndpointId id) {
    auto it = eps_.find(id);
    return it == eps_.end() ? nullptr : &it->second;
  }
  void event(CmEvent e) {
    if (withhold_) {
      withheld_.push_back(e);
      return;
    }
    events_.push_back(e);
    wake();
  }
  void withhold_events(bool on) {
    withhold_ = on;
    if (on) return;
    for (const CmEvent& e : withheld_) events_.push_back(e);
    withheld_.clear();
    wake();
  }
  void complete(const Completion& c) {
    cq_.push_back(c);
    wake();
  }
  // The registration holding [addr, addr + len) with that key (rkey: and remote rights).
  const Mr* find(std::uintptr_t addr, std::size_t len, std::uint32_t key, bool remote) const {
    for (const auto& [id, mr] : mrs_)
      if ((remote ? mr.rkey : mr.lkey) == key && key != 0 && addr >= mr.addr && len <= mr.len &&
          addr - mr.addr <= mr.len - len)
        return &mr;
    return nullptr;
  }
  std::map<EndpointId, Ep>& eps() { return eps_; }
  std::uint32_t ip() const { return ip_; }

 private:
  Status post(FakeFabric::Impl::Work w);
  void wake() {
    std::uint64_t one = 1;
    (void)!::write(fd_, &one, sizeof one);
  }

  std::shared_ptr<FakeFabric::Impl> f_;
  std::uint32_t ip_;
  int fd_;
  std::map<EndpointId, Ep> eps_;
  std::map<std::uint64_t, Mr> mrs_;
  std::uint64_t next_mr_ = 1;
  std::deque<CmEvent> events_;
  bool withhold_ = false;  // CM events wait in withheld_ (a CM slower than the data)
  std::deque<CmEvent> withheld_;
  std::deque<Completion> cq_;
};

namespace {

CmEvent make_event(CmEventKind kind, EndpointId ep, std::uintptr_t context, std::span<const std::uint8_t> data = {}) {
  CmEvent e;
  e.kind = kind;
  e.ep = ep;
  e.context = context;
  e.private_len = std::min(data.size(), kMaxPrivateData);
  if (e.private_len) std::memcpy(e.private_data.data(), data.data(), e.private_len);
  return e;
}

}  // namespace

Result<EndpointId> FakeProvider::connect(std::uint32_t dst_ip, std::uint16_t port, bool privileged,
                                         const QpAttrs& attrs, std::span<const std::uint8_t> private_data,
                                         std::uintptr_t context) {
  if (private_data.size() > 56) return Failure{-EINVAL, "private data of a connect request: at most 56 bytes"};
  std::lock_guard g(f_->m);
  ++f_->stats.connects;
  f_->stats.last_qp = attrs;
  EndpointId id = f_->next_ep++;
  Ep& me = eps_[id];
  me.context = context;
  me.peer_ip = dst_ip;
  FakeProvider* dst = f_->provider(dst_ip);
  if (!dst || !f_->link_up(ip_, dst_ip)) {
    me.state = EpState::Gone;
    event(make_event(CmEventKind::Unreachable, id, context));
    return id;
  }
  if (!f_->listeners.count({dst_ip, port})) {  // IB: invalid service id
    me.state = EpState::Gone;
    event(make_event(CmEventKind::Rejected, id, context));
    return id;
  }
  EndpointId pid = f_->next_ep++;
  Ep& peer = dst->eps()[pid];
  peer.state = EpState::Requested;
  peer.peer_ip = ip_;
  peer.peer = id;
  me.peer = pid;
  CmEvent req = make_event(CmEventKind::ConnectRequest, pid, 0, private_data);
  req.peer_ip = ip_;
  req.peer_port = privileged ? 1023 : 49152;
  dst->event(req);
  return id;
}

Status FakeProvider::accept(EndpointId id, const QpAttrs& attrs, std::span<const std::uint8_t> private_data,
                            std::uintptr_t context) {
  std::lock_guard g(f_->m);
  f_->stats.last_qp = attrs;
  Ep* me = ep(id);
  if (!me || me->state != EpState::Requested) return Failure{-EINVAL, "no connection request to accept"};
  FakeProvider* src = f_->provider(me->peer_ip);
  Ep* peer = src ? src->ep(me->peer) : nullptr;
  me->context = context;
  if (!peer || peer->state != EpState::Connecting) {  // the asker gave up meanwhile
    me->state = EpState::Broken;
    for (const Recv& r : me->recvs) complete(Completion{id, r.wr_id, WcOp::Recv, WcStatus::Flushed, 0});
    me->recvs.clear();
    event(make_event(CmEventKind::Disconnected, id, context));
    return {};
  }
  me->state = peer->state = EpState::Established;
  src->event(make_event(CmEventKind::Established, me->peer, peer->context, private_data));
  event(make_event(CmEventKind::Established, id, context));
  return {};
}

Status FakeProvider::reject(EndpointId id, std::span<const std::uint8_t> private_data) {
  std::lock_guard g(f_->m);
  Ep* me = ep(id);
  if (!me || me->state != EpState::Requested) return Failure{-EINVAL, "no connection request to reject"};
  me->state = EpState::Gone;
  FakeProvider* src = f_->provider(me->peer_ip);
  if (Ep* peer = src ? src->ep(me->peer) : nullptr; peer && peer->state == EpState::Connecting) {
    peer->state = EpState::Gone;
    for (const Recv& r : peer->recvs) src->complete(Completion{me->peer, r.wr_id, WcOp::Recv, WcStatus::Flushed, 0});
    peer->recvs.clear();
    CmEvent e = make_event(CmEventKind::Rejected, me->peer, peer->context, private_data);
    e.consumer_reject = true;
    src->event(e);
  }
  return {};
}

Status FakeProvider::post_recv(EndpointId id, const Sge& sge, std::uint64_t wr_id) {
  std::lock_guard g(f_->m);
  Ep* me = ep(id);
  if (!me) return Failure{-EINVAL, "no such endpoint"};
  if (!find(sge.addr, sge.len, sge.lkey, false)) return Failure{-EINVAL, "receive buffer outside its registration"};
  if (me->state == EpState::Broken || me->state == EpState::Gone)
    complete(Completion{id, wr_id, WcOp::Recv, WcStatus::Flushed, 0});
  else
    me->recvs.push_back(Recv{sge, wr_id});
  return {};
}

Status FakeProvider::post(FakeFabric::Impl::Work w) {
  std::lock_guard g(f_->m);
  Ep* me = ep(w.ep);
  if (!me || me->state != EpState::Established) return Failure{-ENOTCONN, "endpoint not connected"};
  if (f_->holding)
    f_->held.push_back(std::move(w));
  else
    f_->run(w);
  return {};
}

FakeProvider::~FakeProvider() {
  std::lock_guard g(f_->m);
  for (auto& [id, e] : eps_)
    if (e.state == EpState::Established || e.state == EpState::Requested || e.state == EpState::Connecting)
      f_->break_conn(ip_, id);
  f_->providers.erase(ip_);
  for (auto it = f_->listeners.begin(); it != f_->listeners.end();)
    it = it->first == ip_ ? f_->listeners.erase(it) : std::next(it);
  ::close(fd_);
}

// ---------------------------------------------------------------- the fabric

void FakeFabric::Impl::break_conn(std::uint32_t ip, EndpointId id) {
  auto end = [&](FakeProvider* p, EndpointId e) {
    Ep* x = p ? p->ep(e) : nullptr;
    if (!x || x->state == EpState::Broken || x->state == EpState::Gone) return;
    bool was_up = x->state == EpState::Established;
    x->state = EpState::Broken;
    for (const Recv& r : x->recvs) p->complete(Completion{e, r.wr_id, WcOp::Recv, WcStatus::Flushed, 0});
    x->recvs.clear();
    p->event(make_event(was_up ? CmEventKind::Disconnected : CmEventKind::Unreachable, e, x->context));
  };
  FakeProvider* me = provider(ip);
  Ep* x = me ? me->ep(id) : nullptr;
  if (!x) return;
  std::uint32_t peer_ip = x->peer_ip;
  EndpointId peer = x->peer;
  end(me, id);
  end(provider(peer_ip), peer);
}

void FakeFabric::Impl::run(const Work& w) {
  FakeProvider* src = provider(w.ip);
  Ep* me = src ? src->ep(w.ep) : nullptr;
  if (!me) return;  // gone while held
  WcOp op = w.write ? WcOp::RdmaWrite : WcOp::Send;
  auto broken = [&](WcStatus s) {  // the work fails and takes the connection with it
    src->complete(Completion{w.ep, w.wr_id, op, s, 0});
    break_conn(w.ip, w.ep);
  };
  if (me->state != EpState::Established) return src->complete(Completion{w.ep, w.wr_id, op, WcStatus::Flushed, 0});
  std::size_t total = 0;
  for (const Sge& s : w.local) {
    if (!src->find(s.addr, s.len, s.lkey, false)) return broken(WcStatus::LocalProtection);
    total += s.len;
  }
  if (auto f = fail.find(w.ip); f != fail.end()) {
    WcStatus s = f->second;
    fail.erase(f);
    return broken(s);
  }
  FakeProvider* dst = provider(me->peer_ip);
  Ep* peer = dst ? dst->ep(me->peer) : nullptr;
  if (!peer || peer->state != EpState::Established || !link_up(w.ip, me->peer_ip))
    return broken(WcStatus::RetryExceeded);
  if (w.write) {
    const Mr* mr = dst->find(w.remote_addr, total, w.rkey, true);
    if (!mr) {
      ++stats.remote_access;
      return broken(WcStatus::RemoteAccess);
    }
    auto* to = reinterpret_cast<std::uint8_t*>(w.remote_addr);
    for (const Sge& s : w.local) {
      std::memcpy(to, reinterpret_cast<const void*>(s.addr), s.len);
      to += s.len;
    }
    ++stats.writes;
    stats.write_bytes += total;
    return src->complete(Completion{w.ep, w.wr_id, op, WcStatus::Success, static_cast<std::uint32_t>(total)});
  }
  if (peer->recvs.empty()) {  // receiver not ready: the retries run out
    ++stats.rnr;
    return broken(WcStatus::RetryExceeded);
  }
  Recv r = peer->recvs.front();
  peer->recvs.pop_front();
  ++stats.sends;
  if (total > r.sge.len) {  // the responder's length error; the requester sees it as a remote one
    dst->complete(Completion{me->peer, r.wr_id, WcOp::Recv, WcStatus::LocalLength, 0});
    return broken(WcStatus::RemoteAccess);
  }
  std::memcpy(reinterpret_cast<void*>(r.sge.addr), reinterpret_cast<const void*>(w.local[0].addr), total);
  src->complete(Completion{w.ep, w.wr_id, op, WcStatus::Success, static_cast<std::uint32_t>(total)});
  dst->complete(Completion{me->peer, r.wr_id, WcOp::Recv, WcStatus::Success, static_cast<std::uint32_t>(total)});
}

FakeFabric::FakeFabric() : impl_(std::make_shared<Impl>()) {}
FakeFabric::~FakeFabric() = default;

Result<std::unique_ptr<Provider>> FakeFabric::open(std::uint32_t ip) {
  std::lock_guard g(impl_->m);
  if (impl_->providers.count(ip)) return Failure{-EADDRINUSE, "a device of that address is open already"};
  auto p = std::make_unique<FakeProvider>(impl_, ip);
  impl_->providers[ip] = p.get();
  return std::unique_ptr<Provider>(std::move(p));
}

void FakeFabric::set_link(std::uint32_t a, std::uint32_t b, bool up) {
  std::lock_guard g(impl_->m);
  auto key = std::make_pair(std::min(a, b), std::max(a, b));
  if (up)
    impl_->down.erase(key);
  else
    impl_->down.insert(key);
}

void FakeFabric::fail_registrations(std::uint32_t ip, unsigned n) {
  std::lock_guard g(impl_->m);
  impl_->fail_regs[ip] = n;
}

void FakeFabric::fail_next(std::uint32_t ip, WcStatus status) {
  std::lock_guard g(impl_->m);
  impl_->fail[ip] = status;
}

void FakeFabric::withhold_events(std::uint32_t ip, bool on) {
  std::lock_guard g(impl_->m);
  if (FakeProvider* p = impl_->provider(ip)) p->withhold_events(on);
}

void FakeFabric::hold(bool on) {
  std::lock_guard g(impl_->m);
  impl_->holding = on;
}

std::size_t FakeFabric::deliver_all() {
  std::lock_guard g(impl_->m);
  std::size_t n = 0;
  while (!impl_->held.empty()) {
    Impl::Work w = std::move(impl_->held.front());
    impl_->held.pop_front();
    impl_->run(w);
    ++n;
  }
  return n;
}

FakeFabric::Stats FakeFabric::stats() const {
  std::lock_guard g(impl_->m);
  return impl_->stats;
}

}  // namespace lnet::o2ib
