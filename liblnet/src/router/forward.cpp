// Forwarding on a router: a message for another node takes a router credit of the peer
// it came from and a buffer of the pool that fits it (both may queue), is received into
// the buffer, and is sent on towards its destination with its header unchanged.
#include "core/core.hpp"

namespace lnet::core {

bool Core::take_router_resources_locked(Message* msg) {
  PeerNi* lp = msg->rxpeer;
  if (!msg->rtr_credit) {
    msg->rtr_credit = true;
    if (--lp->rtr_credits < lp->min_rtr_credits) lp->min_rtr_credits = lp->rtr_credits;
    if (lp->rtr_credits < 0) {
      lp->rtrq.push_back(msg);
      return false;
    }
  }
  RtrPool* pool = &pools_[msg->rtr_cpt * kNumPools + static_cast<unsigned>(pool_for(msg->hdr.payload_length))];
  if (msg->rtr_pool < 0) {
    msg->rtr_pool = pool_for(msg->hdr.payload_length);
    if (--pool->credits < pool->min_credits) pool->min_credits = pool->credits;
    if (pool->credits < 0) {
      pool->waiting.push_back(msg);
      return false;
    }
  }
  RtrBuffer* b = pool->free;
  if (b) {
    pool->free = b->next;
  } else {
    // Buffers are made the first time they are needed, up to the pool's size.
    pool->all.push_back(std::make_unique<RtrBuffer>());
    b = pool->all.back().get();
    std::size_t size = static_cast<std::size_t>(kRtrPoolPages[msg->rtr_pool]) * kRtrPageSize;
    if (size) b->data = std::make_unique<char[]>(size);
    b->iov = iovec{b->data.get(), size};
  }
  b->next = nullptr;
  msg->rtrbuf = b;
  return true;
}

void Core::router_recv(Message* msg) {
  std::uint32_t len = msg->hdr.payload_length;
  lnd_recv(msg, false, &msg->rtrbuf->iov, 1, 0, len, len);
}

void Core::forward(Message* msg) {
  bool ready;
  {
    std::lock_guard g(net_locks_[msg->rtr_cpt]);
    ready = take_router_resources_locked(msg);
  }
  // When it waits, the driver keeps the payload until a credit or a buffer comes back.
  if (ready) router_recv(msg);
}

void Core::forward_received(Message* msg) {
  msg->receiving = false;
  msg->sending = true;
  msg->iov = &msg->rtrbuf->iov;
  msg->niov = 1;
  msg->offset = 0;
  msg->len = msg->hdr.payload_length;
  if (int rc = send_forward(msg)) {
    msg->health = HealthStatus::LocalNoRoute;
    finalize(msg, rc);
  }
}

int Core::send_forward(Message* msg) { return send(Nid::any(), msg, msg->hdr.dest_nid); }

void Core::release_router_resources(Message* msg) {
  MsgQueue ready;
  {
    std::lock_guard g(net_locks_[msg->rtr_cpt]);
    if (msg->rtr_pool >= 0) {
      RtrPool& pool = pools_[msg->rtr_cpt * kNumPools + static_cast<unsigned>(msg->rtr_pool)];
      if (msg->rtrbuf) {
        msg->rtrbuf->next = pool.free;
        pool.free = msg->rtrbuf;
        msg->rtrbuf = nullptr;
      }
      msg->rtr_pool = -1;
      if (++pool.credits <= 0) {
        if (Message* w = pool.waiting.pop_front()) {
          if (take_router_resources_locked(w)) ready.push_back(w);
        }
      }
    }
    if (msg->rtr_credit) {
      msg->rtr_credit = false;
      PeerNi* lp = msg->rxpeer;
      if (++lp->rtr_credits <= 0) {
        if (Message* w = lp->rtrq.pop_front()) {
          if (take_router_resources_locked(w)) ready.push_back(w);
        }
      }
    }
  }
  while (Message* w = ready.pop_front()) router_recv(w);
}

}  // namespace lnet::core
