#include "app_link.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <lnet/lnd/pool.hpp>
#include <lnet/log.hpp>

namespace lnet::proxy {

AppLink::AppLink(up::BridgeClient& bridge, std::uint64_t serial, Pid app_pid, MPI_Comm comm, std::vector<Nid> nids,
                 const mpi::Options& opts)
    : bridge_(bridge),
      serial_(serial & 0xffffff),
      pid_(app_pid),
      // Only payloads the driver holds already (its short messages): their recv() is
      // a copy, so the PARSE goes out at once.
      inline_max_(std::min<std::uint32_t>(up::kMaxInline, opts.short_max)),
      polled_(opts.progress == mpi::ProgressMode::Poll),
      lnd_(std::make_shared<mpi::MpiLnd>(comm, std::move(nids), opts)) {
  ni_.host = this;
  ni_.lnd = lnd_.get();
  ni_.pid = bridge.welcome().pid;
  ni_.config.net = bridge.welcome().nid.net();
}

AppLink::~AppLink() { stop(); }

int AppLink::start() {
  WriteLock g(life_);
  if (int rc = lnd_->startup(ni_)) return rc;
  started_ = true;
  if (ni_.nid != bridge_.welcome().nid) {
    LNET_LOG(Error, kLogLnd, "proxy: the table names this rank %s, but its lnetd is %s", ni_.nid.to_string().c_str(),
             bridge_.welcome().nid.to_string().c_str());
    stop_locked();
    return -EINVAL;
  }
  return 0;
}

bool AppLink::poll() {
  ReadLock life(life_);
  return started_ && ni_.poll && ni_.poll(ni_.poll_ctx);
}

void AppLink::stop(bool app_gone) {
  WriteLock g(life_);
  if (app_gone) lnd_->peers_gone();
  stop_locked();
}

void AppLink::stop_locked() {
  if (!started_) return;
  started_ = false;
  lnd_->shutdown(ni_);
}

std::uint64_t AppLink::park(void* priv) {
  MutexLock g(mu_);
  std::uint32_t i;
  if (!free_.empty()) {
    i = free_.back();
    free_.pop_back();
  } else {
    // As many slots as messages in flight from the application: bounded by its credits.
    i = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[i];
  s.used = true;
  s.priv = priv;
  return (serial_ << kSerialShift) | (std::uint64_t{s.gen} << kGenShift) | i;
}

void* AppLink::unpark(std::uint64_t cookie) {
  MutexLock g(mu_);
  auto i = static_cast<std::uint32_t>(cookie & kSlotMask);
  auto gen = static_cast<std::uint32_t>((cookie >> kGenShift) & kGenMask);
  if (serial_of(cookie) != serial_ || i >= slots_.size() || !slots_[i].used || slots_[i].gen != gen) return nullptr;
  Slot& s = slots_[i];
  s.used = false;
  if (++s.gen > kGenMask) s.gen = 1;
  free_.push_back(i);
  return s.priv;
}

int AppLink::parse(NetInterface&, const Header& hdr, Nid from, void* lnd_private, bool rdma_req) {
  // What lnetd would refuse is refused here, so that every PARSE it gets has its RECV.
  if (hdr.src_pid != pid_ || hdr.payload_length > kMaxPayload) return -EPROTO;
  if (!rdma_req && hdr.payload_length <= inline_max_) {
    // The immediate receive: the payload is taken now and goes with the PARSE
    // (finalize() sends it), which saves lnetd's RECV and the RECV_DONE.
    LinkMsg* m = Pool<LinkMsg>::take();
    *static_cast<LndMessage*>(m) = LndMessage{};
    m->is_send = false;
    m->inline_parse = true;
    m->kept = false;
    m->hdr = hdr;
    m->from = from;
    m->frag = iovec{m->data, hdr.payload_length};
    m->iov = &m->frag;
    m->niov = 1;
    int rc = lnd_->recv(ni_, lnd_private, m, false, &m->frag, 1, 0, hdr.payload_length, hdr.payload_length);
    if (rc < 0) Pool<LinkMsg>::give(m);
    return rc;
  }
  std::uint64_t cookie = park(lnd_private);
  if (Status s = bridge_.send(up::Parse{cookie, pid_, rdma_req ? up::kParseRdma : 0u, from, hdr}); !s) {
    (void)unpark(cookie);
    return s.code();
  }
  return 0;
}

void AppLink::on_recv(const up::Recv& r) {
  ReadLock life(life_);
  if (!started_) {
    if (r.status == 0) done(r.desc, false, -ESHUTDOWN, HealthStatus::LocalAborted);
    return;
  }
  void* priv = unpark(r.cookie);
  if (!priv) {
    LNET_LOG(Warn, kLogLnd, "proxy: RECV for cookie %llx, not a message of pid %u's",
             static_cast<unsigned long long>(r.cookie), pid_);
    if (r.status == 0) done(r.desc, false, -EPROTO, HealthStatus::LocalError);
    return;
  }
  bool delayed = r.flags & up::kRecvDelayed;
  if (r.status < 0) {  // lnetd takes none of it
    (void)lnd_->recv(ni_, priv, nullptr, delayed, nullptr, 0, 0, 0, r.rlen);
    return;
  }
  char* at = bridge_.region().at(r.offset, r.mlen);
  LinkMsg* m = Pool<LinkMsg>::take();
  *static_cast<LndMessage*>(m) = LndMessage{};
  m->is_send = false;
  m->inline_parse = false;
  m->kept = false;
  m->desc = r.desc;
  m->frag = iovec{at, r.mlen};
  m->iov = &m->frag;
  m->niov = 1;
  if (r.flags & up::kRecvSource) {
    m->hdr = r.hdr;
    m->len = r.mlen;
  }
  int rc = at ? lnd_->recv(ni_, priv, m, delayed, &m->frag, 1, 0, r.mlen, r.rlen) : -EPROTO;
  if (!at) (void)lnd_->recv(ni_, priv, nullptr, delayed, nullptr, 0, 0, 0, r.rlen);
  if (rc < 0) {
    done(r.desc, false, rc, HealthStatus::LocalError);
    Pool<LinkMsg>::give(m);
  }
}

void AppLink::on_send(const up::Send& s) {
  ReadLock life(life_);
  char* at = bridge_.region().at(s.offset, s.len);
  if (!started_) {
    done(s.desc, true, -ESHUTDOWN, HealthStatus::LocalAborted);
    return;
  }
  if (s.pid != pid_ || !at) {
    done(s.desc, true, -EPROTO, HealthStatus::LocalError);
    return;
  }
  LinkMsg* m = Pool<LinkMsg>::take();
  *static_cast<LndMessage*>(m) = LndMessage{};
  m->is_send = true;
  m->inline_parse = false;
  m->kept = false;
  m->desc = s.desc;
  m->hdr = s.hdr;
  m->target = s.target;
  m->next_hop = s.next_hop;
  m->frag = iovec{at, s.len};
  m->iov = &m->frag;
  m->niov = 1;
  m->len = s.len;
  if (int rc = lnd_->send(ni_, *m); rc < 0) {
    done(s.desc, true, rc, HealthStatus::LocalNoRoute);
    Pool<LinkMsg>::give(m);
  }
}

void AppLink::finalize(LndMessage* msg, int status) {
  auto* m = static_cast<LinkMsg*>(msg);
  if (m->inline_parse) {
    if (status == 0) {
      up::Parse p{0, pid_, up::kParseInline, m->from, m->hdr};
      std::memcpy(p.data, m->data, m->hdr.payload_length);
      if (Status s = bridge_.send(p); !s) LNET_LOG(Warn, kLogLnd, "proxy: %s", s.message().c_str());
    } else {
      LNET_LOG(Warn, kLogLnd, "proxy: a message from pid %u not received: %d", pid_, status);
    }
    Pool<LinkMsg>::give(m);
    return;
  }
  done(m->desc, m->is_send, status, status ? m->health : HealthStatus::Ok, m->kept && status < 0 ? up::kDoneKept : 0u);
  Pool<LinkMsg>::give(m);
}

void AppLink::done(const up::DescRef& d, bool is_send, int status, HealthStatus h, std::uint32_t flags) {
  auto health = static_cast<std::uint32_t>(h);
  Status s =
      is_send ? bridge_.send(up::SendDone{d, status, health}) : bridge_.send(up::RecvDone{d, status, health, flags});
  if (!s) LNET_LOG(Warn, kLogLnd, "proxy: %s", s.message().c_str());
}

// The token names lnetd's descriptor (its generation is never 0).
std::uintptr_t AppLink::keep_memory(LndMessage& msg) {
  auto& m = static_cast<LinkMsg&>(msg);
  if (m.is_send || m.inline_parse || m.len) return 0;  // only a RECV's target is written
  m.kept = true;
  return (std::uintptr_t{m.desc.index} << 32) | m.desc.gen;
}

void AppLink::release_memory(std::uintptr_t token) {
  up::DescRef d{static_cast<std::uint32_t>(token >> 32), static_cast<std::uint32_t>(token)};
  if (Status s = bridge_.send(up::MemRelease{d}); !s) LNET_LOG(Warn, kLogLnd, "proxy: %s", s.message().c_str());
}

// lnetd takes news of the application's ranks only (the proxies' NIDs are its own peers').
void AppLink::notify_peer(NetInterface&, Nid peer, bool alive) {
  if (peer.is_large() || mpi_node_address(peer.addr())) return;
  (void)bridge_.send(up::Notify{pid_, peer, alive});
}

// GETs to the application go as plain GETs: the REPLY comes back through lnetd.
LndMessage* AppLink::create_reply(NetInterface&, LndMessage&) { return nullptr; }
void AppLink::set_reply_length(LndMessage&, std::uint32_t) {}

}  // namespace lnet::proxy
