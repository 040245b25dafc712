// Messages come from the process-wide Pool (per-thread caches, batched refills).
#include <lnet/lnd/pool.hpp>
#include "msg/message.hpp"

namespace lnet::msg {

Message* msg_alloc() {
  Message* m = Pool<Message>::take();
  *m = Message{};
  return m;
}

void msg_free(Message* m) { Pool<Message>::give(m); }

}  // namespace lnet::msg
