// A message's send credits: its peer NI's, then its NI's on the message's CPT.
#include "msg/credits.hpp"

#include <algorithm>

#include "net/ni.hpp"
#include "net/peer_table.hpp"

namespace lnet::msg {

bool take_credits_locked(Message* msg) {
  net::PeerNi* lpni = msg->txpeer;
  net::TxQueue& tq = msg->txni->tx_queue(lpni->nid, msg->cpt);
  if (!msg->peer_tx_credit) {
    msg->peer_tx_credit = true;
    lpni->txq_nob.fetch_add(msg->len + kHeaderSize, std::memory_order_relaxed);
    int c = lpni->tx_credits.fetch_sub(1, std::memory_order_relaxed) - 1;
    lpni->min_tx_credits = std::min(lpni->min_tx_credits, c);
    if (c < 0) {
      msg->tx_delayed = true;
      lpni->txq.push_back(msg);
      return false;
    }
  }
  if (!msg->tx_credit) {
    msg->tx_credit = true;
    net::TxQueueLock l(*msg->txni, tq);
    int c = --tq.credits;
    tq.min_credits = std::min(tq.min_credits, c);
    if (c < 0) {
      msg->tx_delayed = true;
      tq.delayed.push_back(msg);
      return false;
    }
  }
  return true;
}

void return_credits_locked(Message* msg, MsgQueue& to_send) {
  net::PeerNi* lpni = msg->txpeer;
  net::TxQueue& tq = msg->txni->tx_queue(lpni->nid, msg->cpt);
  if (msg->tx_credit) {
    msg->tx_credit = false;
    net::TxQueueLock l(*msg->txni, tq);
    if (++tq.credits <= 0) {
      // The head waiter already holds its peer credit: it can go.
      if (FifoLink* next = tq.delayed.pop_front()) to_send.push_back(as_message(next));
    }
  }
  if (msg->peer_tx_credit) {
    msg->peer_tx_credit = false;
    lpni->txq_nob.fetch_sub(msg->len + kHeaderSize, std::memory_order_relaxed);
    int c = lpni->tx_credits.fetch_add(1, std::memory_order_relaxed) + 1;
    if (c <= 0) {
      if (FifoLink* link = lpni->txq.pop_front()) {
        Message* next = as_message(link);
        if (take_credits_locked(next)) to_send.push_back(next);
      }
    }
  }
}

}  // namespace lnet::msg
