// The Receive and Send paths of seed 002 §2.3.1 (the non-immediate variant): the host's
// recv() and send() become descriptors of the application's pid, which go to its proxy as
// RECV and SEND and come back as RECV_DONE and SEND_DONE. Payloads stay where they are
// when they lie in the shared region (router buffers); others go through a bounce buffer.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <lnet/lnd/fragments.hpp>
#include <lnet/log.hpp>

#include "up_ni.hpp"

namespace lnet::up {

namespace {

constexpr std::uint32_t kSmallBounce = 4096;
constexpr std::uint32_t kLargeBounce = 1u << 20;

}  // namespace

// ---------------------------------------------------------------- the host's calls

// Every application of the MPI network has ranks 0..N-1 there, so a rank's NID names no
// application: the pid does. LNet's own pid at a rank's NID is what a peer's LNet sends
// to the node behind that NID (a discovery ping or push, a self-test console's RPC to a
// node it names by NID): the application registered first that has the rank answers, as
// the only LNet instance at that NID would (docs/design/bridge.md).
App* UpNi::app_for_locked(Pid pid, Nid nid) {
  auto it = apps_.find(pid);
  if (it != apps_.end()) return it->second.owner ? &it->second : nullptr;
  if (pid != kPidLustre || nid.is_large() || mpi_node_address(nid.addr())) return nullptr;
  App* first = nullptr;
  for (auto& [p, a] : apps_)
    if (a.owner && a.ranks > nid.addr() && (!first || a.serial < first->serial)) first = &a;
  return first;
}

int UpNi::send(LndMessage& msg) {
  MutexLock g(mu_);
  App* found = app_for_locked(msg.hdr.dest_pid, msg.hdr.dest_nid);
  if (!found) return -EHOSTUNREACH;
  App& app = *found;
  Desc* d = new_desc_locked(Desc::Kind::Send, app.owner, app.pid);
  if (!d) return -ENOMEM;  // max_descs held: the core fails the message
  d->msg = &msg;
  d->mlen = msg.len;
  if (!place_locked(*d, msg.iov, msg.niov, msg.offset, msg.len)) {
    d->iov = msg.iov;
    d->niov = msg.niov;
    d->iov_offset = msg.offset;
  }
  d->state = Desc::State::Pending;
  ++stats_.sends;
  submit_locked(app, *d);
  return 0;
}

int UpNi::recv(Desc* d, LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t mlen,
               std::uint32_t rlen, bool delayed) {
  MutexLock g(mu_);
  if (d->kind != Desc::Kind::Recv || d->state != Desc::State::Parsed) {
    LNET_LOG(Error, kLogLnd, "%s: recv() for descriptor %u not waiting for it", ni_.nid.to_string().c_str(), d->index);
    return -EINVAL;
  }
  if (d->inlined) {  // the immediate receive: the payload is here, whether its proxy is or not
    if (msg && mlen) copy_to_fragments(iov, niov, offset, d->data, std::min(mlen, d->data_len));
    free_desc_locked(d);
    g.unlock();
    if (msg) host_.finalize(msg, 0);
    return 0;
  }
  if (!d->conn) {  // its proxy went away after the PARSE
    free_desc_locked(d);
    return -ECONNRESET;
  }
  d->msg = msg;
  d->flags = delayed ? kRecvDelayed : 0;
  if (!msg) {
    d->status = -ENOENT;  // nothing takes it: the proxy discards the payload
  } else {
    if (d->rdma) d->flags |= kRecvSource;  // the REPLY of an optimised GET: its payload goes out
    d->mlen = mlen;
    d->rlen = rlen;
    if (!place_locked(*d, iov, niov, offset, mlen)) {
      d->iov = iov;
      d->niov = niov;
      d->iov_offset = offset;
    }
  }
  d->state = Desc::State::Pending;
  submit_locked(apps_[d->pid], *d);
  return 0;
}

// ---------------------------------------------------------------- descriptors

Desc* UpNi::new_desc_locked(Desc::Kind kind, Conn* c, Pid pid) {
  if (descs_used_ >= opts_.max_descs) return nullptr;
  Desc* d;
  if (!free_descs_.empty()) {
    d = &descs_[free_descs_.back()];
    free_descs_.pop_back();
  } else {
    d = &descs_.emplace_back();
    d->index = static_cast<std::uint32_t>(descs_.size() - 1);
  }
  std::uint32_t index = d->index, gen = d->gen;
  *d = Desc{};
  d->index = index;
  d->gen = gen;
  d->kind = kind;
  d->conn = c;
  d->pid = pid;
  ++descs_used_;
  if (kind == Desc::Kind::Recv && c) ++c->held;
  return d;
}

void UpNi::uncount_locked(Desc& d) {
  if (d.kind == Desc::Kind::Recv && d.conn) --d.conn->held;
}

void UpNi::free_desc_locked(Desc* d) {
  uncount_locked(*d);
  --descs_used_;
  if (d->bounce) give_bounce_locked(d->bounce);
  d->bounce = nullptr;
  d->kind = Desc::Kind::Free;
  d->msg = nullptr;
  d->conn = nullptr;
  if (++d->gen == 0) d->gen = 1;
  free_descs_.push_back(d->index);
}

Desc* UpNi::find_desc_locked(DescRef ref, Desc::Kind kind, const Conn& c) {
  if (ref.index >= descs_.size()) return nullptr;
  Desc& d = descs_[ref.index];
  if (d.gen != ref.gen || d.kind != kind || d.state != Desc::State::Active || d.conn != &c) return nullptr;
  return &d;
}

bool UpNi::place_locked(Desc& d, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t len) {
  if (len == 0) {
    d.offset = 0;
    return true;
  }
  // The fragment that holds the start; in place only when the whole range is in it.
  for (unsigned i = 0; i < niov; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= static_cast<std::uint32_t>(iov[i].iov_len);
      continue;
    }
    if (len > iov[i].iov_len - offset) return false;
    auto at = region_.offset_of(static_cast<char*>(iov[i].iov_base) + offset, len);
    if (!at) return false;
    d.offset = *at;
    return true;
  }
  return false;
}

// ---------------------------------------------------------------- to the proxy

void UpNi::submit_locked(App& app, Desc& d) {
  if (!app.pending.empty() || !dispatch_locked(d)) app.pending.push_back(&d);
}

bool UpNi::dispatch_locked(Desc& d) {
  Conn& c = *d.conn;
  bool payload = d.status == 0 && d.msg && d.mlen > 0;
  if (payload && d.iov && !d.bounce) {  // not in the region: through a bounce buffer
    d.bounce = take_bounce_locked(d.mlen);
    if (!d.bounce) return false;
    d.offset = static_cast<std::uint64_t>(d.bounce->data - region_.base());
  }
  bool outgoing = d.kind == Desc::Kind::Send || (d.flags & kRecvSource);
  if (payload && d.bounce && outgoing && !d.filled) {
    copy_from_fragments(d.bounce->data, d.iov, d.niov, d.iov_offset, d.mlen);
    d.filled = true;
    ++stats_.copies;
  }
  int rc;
  if (d.kind == Desc::Kind::Send) {
    Send s;
    s.desc = DescRef{d.index, d.gen};
    s.pid = d.pid;
    s.target = d.msg->target;
    s.next_hop = d.msg->next_hop;
    s.offset = d.offset;
    s.len = d.mlen;
    s.hdr = d.msg->hdr;
    rc = write_locked(c, s);
  } else {
    Recv r;
    r.cookie = d.cookie;
    r.desc = DescRef{d.index, d.gen};
    r.status = d.status;
    r.flags = d.flags;
    if (d.status == 0 && d.msg) {
      r.offset = d.offset;
      r.mlen = d.mlen;
      r.rlen = d.rlen;
      if (d.flags & kRecvSource) r.hdr = d.msg->hdr;
    }
    rc = write_locked(c, r);
  }
  if (rc == 0) return false;  // no room: it waits, bounce and all
  if (payload && !d.bounce) ++stats_.in_place;
  if (d.status != 0 || !d.msg) {
    free_desc_locked(&d);  // a discard: nothing comes back for it
    return true;
  }
  d.state = Desc::State::Active;  // rc < 0: the connection closes and fails it
  return true;
}

void UpNi::flush_locked(Conn& c) {
  while (!c.backlog.empty()) {
    const auto& f = c.backlog.front();
    ssize_t n = ::send(c.fd, f.data(), f.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      arm_out_locked(c, true);
      return;
    }
    if (n < 0) c.broken = true;
    c.backlog.pop_front();
  }
  for (Pid p : c.pids) {
    App& app = apps_[p];
    while (Desc* d = app.pending.front()) {
      if (!dispatch_locked(*d)) break;
      app.pending.pop_front();
    }
  }
}

int UpNi::write_locked(Conn& c, const Message& m) {
  if (c.broken) return -1;
  if (!c.backlog.empty()) {
    arm_out_locked(c, true);
    return 0;
  }
  std::uint8_t frame[kMaxFrame];
  std::size_t len = encode(m, std::span<std::uint8_t, kMaxFrame>(frame, kMaxFrame));
  ssize_t n = ::send(c.fd, frame, len, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n == static_cast<ssize_t>(len)) return 1;
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
    arm_out_locked(c, true);
    return 0;
  }
  LNET_LOG(Warn, kLogLnd, "%s: write to %s: %s", ni_.nid.to_string().c_str(), c.name.c_str(),
           n < 0 ? errno_string(errno).c_str() : "short");
  c.broken = true;
  arm_out_locked(c, true);  // wakes the NI's thread, which closes it
  return -1;
}

void UpNi::reply_locked(Conn& c, const Message& m) {
  if (write_locked(c, m) != 0) return;
  std::uint8_t frame[kMaxFrame];
  std::size_t len = encode(m, std::span<std::uint8_t, kMaxFrame>(frame, kMaxFrame));
  c.backlog.emplace_back(frame, frame + len);
}

void UpNi::arm_out_locked(Conn& c, bool on) {
  if (c.out_armed == on) return;
  c.out_armed = on;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0u);
  ev.data.ptr = &c;
  (void)epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
}

// ---------------------------------------------------------------- bounce buffers

Bounce* UpNi::take_bounce_locked(std::uint32_t len) {
  bool small = len <= kSmallBounce;
  if (len > kLargeBounce) return nullptr;
  Bounce*& free = small ? free_small_ : free_large_;
  if (Bounce* b = free) {
    free = b->next;
    return b;
  }
  unsigned& made = small ? small_made_ : large_made_;
  if (made >= (small ? opts_.bounce_small : opts_.bounce_large)) return nullptr;
  std::uint32_t size = small ? kSmallBounce : kLargeBounce;
  char* data = static_cast<char*>(region_.allocate(size));
  if (!data) return nullptr;
  ++made;
  auto b = std::make_unique<Bounce>();
  b->data = data;
  b->size = size;
  bounces_.push_back(std::move(b));
  return bounces_.back().get();
}

void UpNi::give_bounce_locked(Bounce* b) {
  Bounce*& free = b->size == kSmallBounce ? free_small_ : free_large_;
  b->next = free;
  free = b;
}

// ---------------------------------------------------------------- failures

namespace {

// Whether the proxy may write d's bytes: a RECV it has, with a payload to take.
bool proxy_writes(const Desc& d) {
  return d.kind == Desc::Kind::Recv && d.state == Desc::State::Active && d.msg && d.status == 0 && d.mlen > 0 &&
         !(d.flags & kRecvSource);
}

}  // namespace

bool UpNi::keep_locked(Desc& d) {
  if (!d.bounce) {
    d.token = d.msg ? host_.keep_memory(*d.msg) : 0;
    if (!d.token) {
      LNET_LOG(Warn, kLogLnd,
               "%s: the host cannot keep the memory of a failed receive from %s that the proxy may still write",
               ni_.nid.to_string().c_str(), d.conn ? d.conn->name.c_str() : "a gone proxy");
      return false;
    }
  }
  d.state = Desc::State::Kept;
  d.msg = nullptr;
  ++stats_.kept;
  ++stats_.kept_now;
  return true;
}

void UpNi::unkeep_locked(Desc& d, DoneList& done) {
  if (d.token) done.push_back(Done{nullptr, 0, HealthStatus::Ok, d.token});
  d.token = 0;
  --stats_.kept_now;
  free_desc_locked(&d);
}

void UpNi::fail_descs_locked(Conn& c, Pid pid, DoneList& done, Grave* grave) {
  for (Pid p : c.pids) {
    if (pid && p != pid) continue;
    apps_[p].pending = Fifo<Desc>();
  }
  for (Desc& d : descs_) {
    if (d.kind == Desc::Kind::Free || d.conn != &c) continue;
    if (d.state == Desc::State::Kept) {  // the connection's, not an application's
      if (pid) continue;
      if (!grave) {
        unkeep_locked(d, done);
        continue;
      }
      uncount_locked(d);
      d.conn = nullptr;
      grave->descs.push_back(&d);
      continue;
    }
    if (pid && d.pid != pid) continue;
    if (d.state == Desc::State::Parsed) {
      uncount_locked(d);
      d.conn = nullptr;  // the host still calls recv() for it, which fails
      continue;
    }
    if (d.msg && d.status == 0)
      done.push_back(Done{d.msg, -ECONNRESET,
                          d.kind == Desc::Kind::Send ? HealthStatus::RemoteDropped : HealthStatus::LocalError});
    if (grave && proxy_writes(d) && keep_locked(d)) {
      uncount_locked(d);
      d.conn = nullptr;
      grave->descs.push_back(&d);
      continue;
    }
    free_desc_locked(&d);
  }
  if (pid) {
    apps_.erase(pid);
    c.pids.erase(pid);
  } else {
    for (Pid p : c.pids) apps_.erase(p);
    c.pids.clear();
  }
}

}  // namespace lnet::up
