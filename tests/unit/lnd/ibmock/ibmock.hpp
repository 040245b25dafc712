// ibmock: the parts of libibverbs and librdmacm that the o2ib driver's rdma-core layer
// (o2iblnd/src/rdma_verbs.cpp) calls, in this process, so that layer runs in tests on
// machines without an RDMA device (in the spirit of UCX's ibmock). A test binary links
// these definitions in place of the real libraries.
//
// What it models, as the verbs and the RDMA CM behave on a reliable connected queue pair:
// devices by IPv4 address; the CM's event channels (an eventfd each, non-blocking
// reads), address and route resolution, listeners by address and port, connection
// requests with private data, accept, reject (a consumer reject carries status 28 and
// private data; a connect that finds no listener is rejected with status 8), disconnect
// and an id destroyed under a live connection (the peer sees DISCONNECTED); completion
// channels armed by ibv_req_notify_cq that fire on the next completion; memory regions
// checked by key, range and rights; sends into the peer's posted receives in order, RDMA
// writes into its registered memory, each completing at once on both sides; a queue pair
// moved to the error state flushing what is posted on it. Not modelled: link loss, RDMA
// reads, SRQs, UD, timeouts (nothing is ever late).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ibmock {

// A device with that IPv4 address (host order); its port's CM answers for it.
void add_device(std::uint32_t ip);
// Forgets every device (the objects made on them must be gone).
void reset();

struct Stats {
  std::size_t ids = 0, channels = 0, qps = 0, cqs = 0, mrs = 0, pds = 0, comp_channels = 0;  // alive now
  std::uint64_t sends = 0, writes = 0, write_bytes = 0, rejects = 0, cq_overflows = 0, remote_access = 0;
  std::uint64_t notifications = 0;  // completion channel wake-ups (a CQ armed, then a completion)
  std::uint64_t misuse = 0;         // calls the real libraries refuse (a busy object destroyed)
  std::uint8_t last_retry_count = 0, last_rnr_retry_count = 0;  // of the last rdma_connect
};
Stats stats();

}  // namespace ibmock
