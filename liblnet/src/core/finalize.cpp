// Finalizing messages: credits back (which may release queued messages), the MD's event,
// then the ACK a PUT asked for, and the message back to the pool. A thread that is
// already finalizing queues nested finalizations (loopback sends finalize inline) so the
// stack never grows with the number of messages.
#include "base/clock.hpp"
#include "core/core.hpp"

#include <lnet/mutex.hpp>

namespace lnet::core {

namespace {

struct FinalizeQueue {
  bool active = false;
  MsgQueue queue;
};
// Initial-exec (no call into the dynamic loader per message): see progress.cpp.
[[gnu::tls_model("initial-exec")]] thread_local FinalizeQueue tl_finalizing;
}  // namespace

void Core::finalize(LndMessage* lmsg, int status) {
  auto* msg = static_cast<Message*>(lmsg);
  if (status != 0 && msg->status == 0) msg->status = status;
  FinalizeQueue& f = tl_finalizing;
  if (f.active) {
    f.queue.push_back(msg);
    return;
  }
  f.active = true;
  msg->owner->process(msg);
  while (Message* m = f.queue.pop_front()) m->owner->process(m);
  f.active = false;
}

void Core::return_credits(Message* msg) {
  MsgQueue to_send;
  {
    MutexLock g(st_.locks[msg->cpt]);
    msg::return_credits_locked(msg, to_send);
  }
  bool stop = st_.stopping.load(std::memory_order_relaxed);
  std::int64_t now = to_send.empty() ? 0 : coarse_now_ns();
  while (Message* m = to_send.pop_front()) {
    if (stop) {
      m->health = HealthStatus::LocalAborted;
      finalize(m, -ESHUTDOWN);
    } else if (m->deadline_ns && now >= m->deadline_ns) {
      // It waited for credits past its deadline: it would be too late anyway.
      m->health = HealthStatus::LocalTimeout;
      finalize(m, -ETIMEDOUT);
    } else {
      ni_send(m);
    }
  }
}

// A PUT of ours went out: from LNetPut to the end of its send, on its NI and peer NI.
void Core::note_egress(Message* msg) {
  auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(0, steady_now_ns() - msg->start_ns));
  if (msg->txni) msg->txni->latency.put_egress.add(ns);
  if (msg->txpeer) msg->txpeer->latency.put_egress.add(ns);
}

void Core::process(Message* msg) {
  if (msg->sending) {
    msg->sending = false;
    bool again = false;
    if (msg->tx_committed) {
      health_.account(msg);
      if (msg->status != 0) {
        st_.counters.health(msg->cpt, msg->health);
        again = health_.may_resend(msg);
      }
    }
    if (msg->status != 0 && msg->tx_committed && !again) {
      st_.counters.add(msg->cpt, kDropCount);
      st_.counters.add(msg->cpt, kDropLength, msg->len);
      if (msg->txni) msg->txni->stats.add(TypeStats::kDropped, msg->hdr.type);
      if (msg->txpeer) msg->txpeer->stats.add(TypeStats::kDropped, msg->hdr.type);
    }
    if (msg->tx_credit || msg->peer_tx_credit) return_credits(msg);
    if (again) {
      resend(msg);  // its event waits for the last attempt
      return;
    }
    if (msg->retries) st_.counters.add(msg->cpt, msg->status ? kFailedResends : kSuccessfulResends);
    if (msg->status == 0 && msg->start_ns && msg->hdr.type == MsgType::Put && !msg->routing) note_egress(msg);
  } else if (msg->receiving) {
    if (msg->routing && msg->status == 0) {
      router_.forward_received(msg);  // the payload is in our buffer: on to the next hop
      return;
    }
    if (msg->status != 0) {
      st_.counters.add(msg->cpt, kDropCount);
      st_.counters.add(msg->cpt, kDropLength, msg->hdr.payload_length);
      if (msg->rxni) msg->rxni->stats.add(TypeStats::kDropped, msg->hdr.type);
    } else if (msg->reply_from) {
      // An optimised GET's REPLY: the peer NI answered (its health rises, as for a REPLY
      // heard; a recovery ping of a gateway over such a driver brings it back so).
      health_.note_received_from(msg->reply_from);
    }
  }
  if (msg->md) {
    msg->ev.status = msg->status;
    portals_.finalize_md(msg, *this);  // delivers the event, then complete(msg)
  } else {
    complete(msg);
  }
}

void Core::complete(portals::Delivery* d) {
  Message* msg = as_message(d);
  if (msg->routing) {
    router_.release_resources(msg);
    free_msg(msg);
    return;
  }
  if (msg->receiving && msg->ack_wanted && msg->status == 0) {
    // The PUT is delivered: the same message goes back as its ACK.
    const Header::Put put = msg->hdr.msg.put;
    ProcessId src{msg->hdr.src_nid, msg->hdr.src_pid};
    msg->receiving = false;
    msg->ack_wanted = false;
    msg->sending = true;
    msg->target = src;
    msg->iov = nullptr;
    msg->niov = 0;
    msg->memory = 0;
    msg->offset = msg->len = 0;
    Header& h = msg->hdr;
    h.type = MsgType::Ack;
    h.payload_length = 0;
    h.dest_pid = src.pid;
    h.msg.ack.dst_wmd = put.ack_wmd;
    h.msg.ack.match_bits = put.match_bits;
    h.msg.ack.mlength = msg->ev.mlength;
    // To the source, through the router it came by when routed.
    if (int rc = send(msg->rxni->nid, msg, src.nid)) {
      msg->health = HealthStatus::LocalError;
      finalize(msg, rc);
    }
    return;
  }
  free_msg(msg);
}

void Core::resend(Message* msg) {
  st_.counters.add(msg->cpt, kResendCount);
  ++msg->retries;
  msg->status = 0;
  msg->health = HealthStatus::Ok;
  msg->tx_committed = msg->tx_delayed = false;
  msg->txni = nullptr;
  msg->txpeer = nullptr;
  msg->sending = true;
  if (int rc = send(msg->self, msg, msg->target.nid)) {
    msg->health = HealthStatus::LocalError;
    finalize(msg, rc);
  }
}

}  // namespace lnet::core
