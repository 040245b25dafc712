// The process-wide list of drivers to poll (NetInterface::poll of the driver SPI), which
// every blocking wait of liblnet drives (<lnet/progress.hpp>). The core adds an NI's
// poll function once its driver has started and removes it before it shuts down.
#pragma once

#include <lnet/lnd/lnd.hpp>

namespace lnet {

// Adds fn(ctx); returns an id for remove_progress. At most 16 at once (-ENOSPC).
int add_progress(PollFn fn, void* ctx);
// Removes it; returns once no call of that function is running.
void remove_progress(int id);

}  // namespace lnet
