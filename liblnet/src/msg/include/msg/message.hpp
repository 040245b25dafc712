// The message of an instance: one PUT/GET/ACK/REPLY from commit to finalize, pooled (no heap
// allocation per message once warm). It is what the driver sees (LndMessage) and what
// the portals deliver events of (Delivery), and it waits in one queue at a time through
// the Delivery's link: the net layer's credit and router queues hold it as a FifoLink.
#pragma once

#include <lnet/event.hpp>
#include <lnet/lnd/fifo.hpp>
#include <lnet/lnd/lnd.hpp>

#include "portals/delivery.hpp"

namespace lnet::net {
struct Ni;
struct PeerNi;
struct RtrBuffer;
}  // namespace lnet::net

namespace lnet::msg {

struct Message;

// What finishes a message once it is finalized (the core of its instance).
class Owner {
 public:
  virtual void process(Message* msg) = 0;

 protected:
  ~Owner() = default;
};

struct Message : LndMessage, portals::Delivery {
  Owner* owner = nullptr;
  unsigned cpt = 0;        // CPT whose locks guard its credits
  unsigned alloc_cpt = 0;  // CPT that counts it in msgs_alloc

  bool sending = false;         // transmit phase (also an ACK/REPLY made from a received message)
  bool receiving = false;       // receive phase
  bool tx_committed = false;    // counted as sent
  bool peer_tx_credit = false;  // holds a peer NI tx credit
  bool tx_credit = false;       // holds an NI tx credit
  bool tx_delayed = false;      // waited in a credit queue
  bool ack_wanted = false;      // received PUT: ACK once delivered
  bool rdma_get = false;        // the driver moves the REPLY payload itself
  bool routing = false;         // being forwarded (not for us)
  bool rtr_credit = false;      // holds a router credit of rxpeer
  bool recovery = false;        // a recovery ping: to exactly its NID, never resent
  bool rx_delayed = false;      // a fault rule held it after parse() returned
  int rtr_pool = -1;            // holds a credit (and rtrbuf, a buffer) of this pool
  unsigned rtr_cpt = 0;         // CPT of the router resources (the sender's)
  int status = 0;
  // Resend (health): the source NID asked for, the sends so far beyond the first, and
  // when resending must stop (steady clock, ns; 0: not a request of ours).
  Nid self = Nid::any();
  unsigned retries = 0;
  std::int64_t deadline_ns = 0;
  // When a request of ours was made (steady clock, ns; 0: not one): its egress time and
  // round trip are counted from it (put_egress_*, get_rtt_*, put_ack_* of net show -v).
  std::int64_t start_ns = 0;

  net::Ni* txni = nullptr;
  net::PeerNi* txpeer = nullptr;
  net::Ni* rxni = nullptr;
  net::PeerNi* rxpeer = nullptr;  // the peer NI it came from (router credits)
  // A REPLY made by create_reply(): the peer NI the GET went to, whose driver moved the
  // payload. Its arrival is hearing from that peer NI, as a REPLY message would be.
  net::PeerNi* reply_from = nullptr;
  net::RtrBuffer* rtrbuf = nullptr;
  Nid from = Nid::any();  // the peer NI it arrived from
  void* lnd_private = nullptr;
};

using MsgQueue = Fifo<Message>;

// A message the net layer queued (as a FifoLink), back as the message it is.
inline Message* as_message(FifoLink* link) { return static_cast<Message*>(link); }
inline Message* as_message(portals::Delivery* d) { return static_cast<Message*>(d); }

// Process-wide pool of message objects with per-thread caches.
Message* msg_alloc();
void msg_free(Message* m);

}  // namespace lnet::msg
