// What the portals layer sees of a message: the MD it is bound to, the event it will
// deliver, what an incoming PUT/GET asks for, and the one link it waits by (on a lazy
// portal, or behind another event of its MD). The core's Message is a Delivery.
#pragma once

#include <lnet/event.hpp>
#include <lnet/lnd/fifo.hpp>

#include "portals/lib_md.hpp"

namespace lnet::portals {

struct Delivery : FifoLink {
  LibMd* md = nullptr;
  MatchInfo match;  // kept while it waits on a lazy portal
  Event ev;
  bool event_only = false;  // the portals' own carrier of an UNLINK event
  bool tracked = false;     // a request that armed its MD's response tracking
};

using DeliveryQueue = Fifo<Delivery>;

// Finishes a delivery once its MD event has been delivered (the core: ACK, credits,
// back to the pool).
class Completer {
 public:
  virtual void complete(Delivery* d) = 0;

 protected:
  ~Completer() = default;
};

}  // namespace lnet::portals
