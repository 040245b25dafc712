// The credits a message takes on its way out (lnet-facts: credits): one of its peer NI's
// tx credits, then one of its NI's on its CPT; without one it waits in that queue, in
// order. Both calls are made under the message's CPT net lock.
#pragma once

#include "msg/message.hpp"

namespace lnet::msg {

// Takes the credits `msg` still lacks: true when it holds both and may go now; false
// when it was queued to wait for one.
bool take_credits_locked(Message* msg);
// Gives back the credits `msg` holds; the waiters they let go (holding both now) are
// added to `to_send`.
void return_credits_locked(Message* msg, MsgQueue& to_send);

}  // namespace lnet::msg
