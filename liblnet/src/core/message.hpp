// The core's message: one PUT/GET/ACK/REPLY from commit to finalize, pooled (no heap
// allocation per message once warm) and queued through one intrusive link.
#pragma once

#include <lnet/event.hpp>
#include <lnet/lnd.hpp>

#include "portals/lib_md.hpp"

namespace lnet::core {

class Core;
struct Ni;
struct PeerNi;
struct RtrBuffer;

struct Message : LndMessage {
  Core* core = nullptr;
  Message* next = nullptr;  // in at most one queue at a time
  unsigned cpt = 0;         // CPT whose locks guard its credits
  unsigned alloc_cpt = 0;   // CPT that counts it in msgs_alloc

  bool sending = false;         // transmit phase (also an ACK/REPLY made from a received message)
  bool receiving = false;       // receive phase
  bool tx_committed = false;    // counted as sent
  bool peer_tx_credit = false;  // holds a peer NI tx credit
  bool tx_credit = false;       // holds an NI tx credit
  bool tx_delayed = false;      // waited in a credit queue
  bool ack_wanted = false;      // received PUT: ACK once delivered
  bool rdma_get = false;        // the driver moves the REPLY payload itself
  bool event_only = false;      // carries an UNLINK event and nothing else
  bool routing = false;         // being forwarded (not for us)
  bool rtr_credit = false;      // holds a router credit of rxpeer
  int rtr_pool = -1;            // holds a credit (and rtrbuf, a buffer) of this pool
  unsigned rtr_cpt = 0;         // CPT of the router resources (the sender's)
  int status = 0;

  portals::LibMd* md = nullptr;
  Ni* txni = nullptr;
  PeerNi* txpeer = nullptr;
  Ni* rxni = nullptr;
  PeerNi* rxpeer = nullptr;  // the peer NI it came from (router credits)
  RtrBuffer* rtrbuf = nullptr;
  Nid from = Nid::any();  // the peer NI it arrived from
  void* lnd_private = nullptr;
  portals::MatchInfo match;  // kept while it waits on a lazy portal
  Event ev;
};

// FIFO of messages through Message::next.
struct MsgQueue {
  Message* head = nullptr;
  Message* tail = nullptr;

  bool empty() const { return head == nullptr; }
  void push_back(Message* m) {
    m->next = nullptr;
    if (tail)
      tail->next = m;
    else
      head = m;
    tail = m;
  }
  Message* pop_front() {
    Message* m = head;
    if (m) {
      head = m->next;
      if (!head) tail = nullptr;
      m->next = nullptr;
    }
    return m;
  }
  // Removes and returns every message for which pred(m) is true, in order.
  template <class P>
  MsgQueue take_if(P&& pred) {
    MsgQueue out, keep;
    while (Message* m = pop_front()) (pred(m) ? out : keep).push_back(m);
    *this = keep;
    return out;
  }
};

// Process-wide pool of message objects with per-thread caches.
Message* msg_alloc();
void msg_free(Message* m);

}  // namespace lnet::core
