// Messages from proxies: read, checked, and handled one handler per type. A message that
// does not decode, comes out of order, names a pid the proxy does not own or a
// descriptor that is not its own is refused with an ERROR, logged and counted; after
// kMaxBad of them the connection is closed.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <lnet/lnd/fragments.hpp>
#include <lnet/log.hpp>

#include "up_ni.hpp"

namespace lnet::up {

namespace {

constexpr int kReadBatch = 64;  // packets read per wake-up before others get a turn

std::string pid_text(Pid p) {
  return "pid " + std::to_string(p & ~kPidUserFlag) + ((p & kPidUserFlag) ? "(user)" : "");
}

}  // namespace

bool UpNi::read_ready(Conn& c) {
  std::uint8_t buf[kMaxFrame + 1];
  for (int i = 0; i < kReadBatch; ++i) {
    ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return true;
      close_conn(c, errno_string(errno).c_str());
      return false;
    }
    if (n == 0) {
      close_conn(c, "closed");
      return false;
    }
    if (static_cast<std::size_t>(n) > kMaxFrame) {
      if (!refuse(c, "a packet of " + std::to_string(n) + " bytes (at most 512)")) return false;
      continue;
    }
    auto m = decode(std::span<const std::uint8_t>(buf, static_cast<std::size_t>(n)));
    if (!m) {
      if (!refuse(c, m.message())) return false;
      continue;
    }
    if (!handle(c, *m)) return false;
  }
  return true;
}

bool UpNi::handle(Conn& c, const Message& m) {
  Type t = type_of(m);
  if (!c.hello && t != Type::Hello) return refuse(c, std::string(type_name(t)) + " before HELLO");
  if (c.hello && t == Type::Hello) return refuse(c, "a second HELLO");
  switch (t) {
    case Type::Hello: return on_hello(c, std::get<Hello>(m));
    case Type::PidNew:
    case Type::PidRegister:
    case Type::PidRelease: return on_pid(c, m);
    case Type::Parse: return on_parse(c, std::get<Parse>(m));
    case Type::RecvDone: {
      const RecvDone& d = std::get<RecvDone>(m);
      return on_done(c, d.desc, false, d.status, d.health, d.flags);
    }
    case Type::SendDone: {
      const SendDone& d = std::get<SendDone>(m);
      return on_done(c, d.desc, true, d.status, d.health, d.flags);
    }
    case Type::MemRelease: return on_mem_release(c, std::get<MemRelease>(m).desc);
    case Type::Notify: return on_notify(c, std::get<Notify>(m));
    case Type::Error: {
      const Error& e = std::get<Error>(m);
      LNET_LOG(Warn, kLogLnd, "%s: %s reports: %s (%s)", ni_.nid.to_string().c_str(), c.name.c_str(), e.text.c_str(),
               errno_string(e.code).c_str());
      return true;
    }
    case Type::Welcome:
    case Type::PidReply:
    case Type::Recv:
    case Type::Send: break;
  }
  return refuse(c, std::string(type_name(t)) + " is lnetd's to send, not a proxy's");
}

bool UpNi::on_hello(Conn& c, const Hello& h) {
  if (h.version != kBridgeVersion)
    return refuse(c, "protocol version " + std::to_string(h.version) + " (this lnetd speaks " +
                         std::to_string(kBridgeVersion) + ")");
  Welcome w;
  w.nid = ni_.nid;
  w.pid = ni_.pid;
  w.region_size = region_.size();
  w.max_payload = kMaxPayload;
  std::uint8_t frame[kMaxFrame];
  MutexLock g(mu_);
  c.hello = true;
  c.rank = h.rank;
  c.name = "proxy rank " + std::to_string(h.rank) + " (pid " + std::to_string(c.os_pid) + ")";
  for (NetId n : nets_) {
    if (w.nnets == kMaxNets) break;
    w.nets[w.nnets++] = n;
  }
  // The WELCOME carries the region's fd; it is the first thing written, so the socket
  // has room for it.
  std::size_t len = encode(Message{w}, std::span<std::uint8_t, kMaxFrame>(frame, kMaxFrame));
  if (send_frame(c.fd, std::span<const std::uint8_t>(frame, len), region_.fd(), MSG_DONTWAIT) !=
      static_cast<long>(len)) {
    LNET_LOG(Warn, kLogLnd, "%s: WELCOME to %s: %s", ni_.nid.to_string().c_str(), c.name.c_str(),
             errno_string(errno).c_str());
    c.broken = true;
    return true;
  }
  LNET_LOG(Info, kLogLnd, "%s: %s connected", ni_.nid.to_string().c_str(), c.name.c_str());
  return true;
}

// A fresh pid (user flag set), not one in use; pids are not reused until the counter
// wraps, so a late message of a gone application finds no owner.
int UpNi::fresh_pid_locked(Pid* pid) {
  for (unsigned tries = 0;; ++tries) {
    Pid p = kPidUserFlag | next_pid_;
    next_pid_ = (next_pid_ + 1) & ~kPidUserFlag;
    if (next_pid_ == 0) next_pid_ = 1;
    if (!apps_.count(p)) {
      *pid = p;
      return 0;
    }
    if (tries > 1000000) return -EAGAIN;
  }
}

bool UpNi::on_pid(Conn& c, const Message& m) {
  PidReply r;
  r.nid = ni_.nid;
  DoneList done;
  std::string why;
  {
    MutexLock g(mu_);
    std::uint32_t ranks = 0;
    // A proxy's pids, and all proxies', are bounded: beyond, the proxy is told -ENOSPC.
    bool full = c.pids.size() >= opts_.proxy_pids || apps_.size() >= opts_.max_pids;
    if (const PidNew* n = std::get_if<PidNew>(&m)) {
      r.cookie = n->cookie;
      ranks = n->ranks;
      if (ranks == 0 || ranks > kMaxRanks)
        why = "PID_NEW for " + std::to_string(ranks) + " ranks (1.." + std::to_string(kMaxRanks) + ")";
      else
        r.status = full ? -ENOSPC : fresh_pid_locked(&r.pid);
    } else if (const PidRegister* rg = std::get_if<PidRegister>(&m)) {
      r.cookie = rg->cookie;
      r.pid = rg->pid;
      ranks = rg->ranks;
      if (ranks == 0 || ranks > kMaxRanks) {
        why = "PID_REGISTER for " + std::to_string(ranks) + " ranks (1.." + std::to_string(kMaxRanks) + ")";
      } else if (!(rg->pid & kPidUserFlag) || rg->pid == kPidAny) {
        why = "PID_REGISTER of " + pid_text(rg->pid) + ", not an application pid";
      } else {
        r.status = apps_.count(rg->pid) ? -EEXIST : full ? -ENOSPC : 0;
      }
    } else {
      const PidRelease& rl = std::get<PidRelease>(m);
      r.cookie = rl.cookie;
      r.pid = rl.pid;
      if (!c.pids.count(rl.pid)) why = "PID_RELEASE of " + pid_text(rl.pid) + ", which this proxy did not register";
    }
    if (why.empty()) {
      if (std::holds_alternative<PidRelease>(m)) {
        fail_descs_locked(c, r.pid, done);
        stats_.failed += done.size();
      } else if (r.status == 0) {
        App& a = apps_[r.pid];
        a.pid = r.pid;
        a.owner = &c;
        a.ranks = ranks;
        a.serial = ++app_serial_;
        c.pids.insert(r.pid);
      }
      reply_locked(c, r);
    }
  }
  if (!why.empty()) return refuse(c, why);
  if (r.status == 0 && std::holds_alternative<PidRelease>(m))
    LNET_LOG(Info, kLogLnd, "%s: %s released by %s: %zu messages failed", ni_.nid.to_string().c_str(),
             pid_text(r.pid).c_str(), c.name.c_str(), done.size());
  else if (r.status == 0)
    LNET_LOG(Info, kLogLnd, "%s: %s %s by %s", ni_.nid.to_string().c_str(), pid_text(r.pid).c_str(),
             std::holds_alternative<PidNew>(m) ? "allocated" : "registered", c.name.c_str());
  finalize_all(done);
  return true;
}

namespace {

// Whether `nid` is one of the application's rank NIDs (0..ranks-1 on the MPI network).
bool rank_of(Nid nid, NetId net, std::uint32_t ranks) {
  return nid.net() == net && !nid.is_large() && !mpi_node_address(nid.addr()) && nid.addr() < ranks;
}

}  // namespace

bool UpNi::on_parse(Conn& c, const Parse& p) {
  Desc* d;
  // c.pids changes on this thread only.
  if (!c.pids.count(p.pid)) return refuse(c, "PARSE for " + pid_text(p.pid) + ", which this proxy did not register");
  std::uint32_t ranks;
  {
    MutexLock g(mu_);
    ranks = apps_[p.pid].ranks;
  }
  // The message is the application's own: sent by one of its ranks, whose NID its header
  // names as the source (so that nothing a proxy forwards claims another node's NID).
  if (!rank_of(p.from, ni_.nid.net(), ranks))
    return refuse(c, "PARSE from " + p.from.to_string() + ", not a rank of " + pid_text(p.pid) + " (" +
                         std::to_string(ranks) + " ranks on " + ni_.nid.net().to_string() + ")");
  if (p.hdr.src_nid != p.from)
    return refuse(c, "PARSE of a message from " + p.hdr.src_nid.to_string() + " sent by " + p.from.to_string());
  // An application answers as LNet's pid only what was sent to that pid at its rank (the
  // REPLY and ACK of app_for_locked()'s messages): nothing else may claim it.
  bool answer = p.hdr.src_pid == kPidLustre && (p.hdr.type == MsgType::Reply || p.hdr.type == MsgType::Ack);
  if (p.hdr.src_pid != p.pid && !answer)
    return refuse(c, "PARSE of a message from " + pid_text(p.hdr.src_pid) + " for " + pid_text(p.pid));
  if (p.hdr.payload_length > kMaxPayload)
    return refuse(c, "PARSE of a " + std::to_string(p.hdr.payload_length) + "-byte payload (at most 1 MiB)");
  {
    MutexLock g(mu_);
    d = c.held < opts_.proxy_credits ? new_desc_locked(Desc::Kind::Recv, &c, p.pid) : nullptr;
    if (!d) {
      drop_parse_locked(c, p);
      return true;
    }
    d->cookie = p.cookie;
    d->rdma = p.flags & kParseRdma;
    if (p.flags & kParseInline) {
      d->inlined = true;
      d->data_len = p.hdr.payload_length;
      std::memcpy(d->data, p.data, d->data_len);
      ++stats_.inlined;
    }
    ++stats_.parses;
  }
  int rc = host_.parse(ni_, p.hdr, p.from, d, d->rdma);
  if (rc < 0 && d->inlined) {  // the proxy is done with it: nothing to tell
    MutexLock g(mu_);
    free_desc_locked(d);
  } else if (rc < 0) {
    // The host takes no payload and makes no recv() call: tell the proxy to discard it.
    MutexLock g(mu_);
    d->status = rc;
    d->msg = nullptr;
    if (!d->conn) {
      free_desc_locked(d);
    } else {
      d->state = Desc::State::Pending;
      submit_locked(apps_[d->pid], *d);
    }
  }
  return true;
}

void UpNi::drop_parse_locked(Conn& c, const Parse& p) {
  ++stats_.dropped;
  if (!(p.flags & kParseInline)) {  // the proxy waits for a RECV: a discard
    Recv r;
    r.cookie = p.cookie;
    r.status = -ENOBUFS;
    r.rlen = p.hdr.payload_length;
    reply_locked(c, r);
  }
  std::uint64_t held_back = 0;
  if (drop_log_.allow(&held_back))
    LNET_LOG(Warn, kLogLnd, "%s: %s: a message of %s dropped: %u held for it (credits %u), %zu in all (at most %u)%s",
             ni_.nid.to_string().c_str(), c.name.c_str(), pid_text(p.pid).c_str(), c.held, opts_.proxy_credits,
             descs_used_, opts_.max_descs,
             held_back ? (" (and " + std::to_string(held_back) + " more since the last line)").c_str() : "");
}

bool UpNi::on_notify(Conn& c, const Notify& n) {
  std::uint32_t ranks = 0;
  {
    MutexLock g(mu_);
    if (c.pids.count(n.pid)) ranks = apps_[n.pid].ranks;
  }
  if (!ranks) return refuse(c, "NOTIFY for " + pid_text(n.pid) + ", which this proxy did not register");
  // A proxy speaks for its applications' ranks, not for other nodes of the net.
  if (!rank_of(n.peer, ni_.nid.net(), ranks))
    return refuse(c, "NOTIFY for " + n.peer.to_string() + ", not a rank of " + pid_text(n.pid));
  host_.notify_peer(ni_, n.peer, n.alive);
  return true;
}

bool UpNi::on_done(Conn& c, DescRef ref, bool is_send, int status, std::uint32_t health, std::uint32_t flags) {
  LndMessage* msg = nullptr;
  bool kept = false;
  {
    MutexLock g(mu_);
    Desc* d = find_desc_locked(ref, is_send ? Desc::Kind::Send : Desc::Kind::Recv, c);
    if (d && (flags & kDoneKept) && (d->flags & kRecvSource)) {
      d = nullptr;  // a source's bytes are only read: nothing to keep
    } else if (d) {
      msg = d->msg;
      if (d->bounce && !is_send && !(d->flags & kRecvSource) && status == 0 && d->mlen) {
        copy_to_fragments(d->iov, d->niov, d->iov_offset, d->bounce->data, d->mlen);
        ++stats_.copies;
      }
      bool bounced = d->bounce != nullptr;
      // The proxy's MPI may still write its bytes: they stay out of use until its
      // MEM_RELEASE (a bounce stays the descriptor's; memory in place, the host's).
      kept = (flags & kDoneKept) && d->msg && d->mlen && keep_locked(*d);
      if (!kept) {
        free_desc_locked(d);  // gives its bounce back
        if (bounced) {        // what waited for one may go now, to any proxy
          for (auto& [fd, other] : conns_) flush_locked(*other);
        } else {
          flush_locked(c);
        }
      }
    }
  }
  if (!msg)
    return refuse(c, std::string(is_send ? "SEND_DONE" : "RECV_DONE") + " for descriptor " + std::to_string(ref.index) +
                         "/" + std::to_string(ref.gen) + ", not one of this proxy's active ones" +
                         ((flags & kDoneKept) ? " that it could write" : ""));
  msg->health = static_cast<HealthStatus>(health);
  host_.finalize(msg, status);
  return true;
}

bool UpNi::on_mem_release(Conn& c, DescRef ref) {
  DoneList done;
  bool found = false;
  {
    MutexLock g(mu_);
    Desc* d = ref.index < descs_.size() ? &descs_[ref.index] : nullptr;
    found = d && d->gen == ref.gen && d->kind == Desc::Kind::Recv && d->state == Desc::State::Kept && d->conn == &c;
    if (found) {
      unkeep_locked(*d, done);
      for (auto& [fd, other] : conns_) flush_locked(*other);  // a bounce may have come back
    }
  }
  if (!found)
    return refuse(c, "MEM_RELEASE for descriptor " + std::to_string(ref.index) + "/" + std::to_string(ref.gen) +
                         ", not one whose memory this proxy keeps");
  finalize_all(done);
  return true;
}

}  // namespace lnet::up
