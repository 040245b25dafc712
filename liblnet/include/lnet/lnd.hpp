// The driver SPI: what every LND (network driver) implements and what the core offers
// it. One SPI for all drivers (lo, tcp, mpi, up); a driver sees only these types, so the
// same driver can run inside liblnet or inside a host that forwards (the proxy).
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <lnet/config.hpp>
#include <lnet/nid.hpp>
#include <lnet/wire.hpp>

namespace lnet {

// Health status of a failed (or successful) transmission (lnet_msg_hstatus).
enum class HealthStatus : std::uint32_t {
  Ok = 0,
  LocalInterrupt,
  LocalDropped,
  LocalAborted,
  LocalNoRoute,
  LocalError,
  LocalTimeout,
  RemoteError,
  RemoteDropped,
  RemoteTimeout,
  NetworkTimeout,
};
const char* health_status_name(HealthStatus s);  // "OK", "LOCAL_TIMEOUT", ...

// A message as a driver sees it. For a send: `hdr` is what goes on the wire, the payload
// is `len` bytes starting `offset` bytes into the fragments `iov[0..niov)`. For a GET
// (len 0) the fragments are the sink its REPLY will fill: hdr.msg.get.sink_length bytes
// from `offset`; a driver that moves REPLY payloads itself posts that sink (see
// LndHost::create_reply).
struct LndMessage {
  Header hdr;
  ProcessId target;           // final destination
  Nid next_hop = Nid::any();  // the peer NI to transmit to (a gateway when routed)
  const iovec* iov = nullptr;
  unsigned niov = 0;
  std::uint32_t offset = 0;
  std::uint32_t len = 0;
  // Set by the driver before finalizing a failed message.
  HealthStatus health = HealthStatus::Ok;
};

class LndHost;
class Lnd;

// A local network interface as a driver sees it.
struct NetInterface {
  Nid nid = Nid::any();  // set by the driver's startup() unless configured
  Pid pid = 0;           // the instance's LNet pid (what HELLOs announce)
  NetConfig config;      // net, interfaces, tunables, cpts
  int cpt = 0;           // home CPU partition
  int numa_node = -1;    // -1: unknown
  LndHost* host = nullptr;
  Lnd* lnd = nullptr;
  void* lnd_data = nullptr;  // the driver's per-NI state
};

// What the core (or a forwarding host) offers drivers.
class LndHost {
 public:
  virtual ~LndHost() = default;
  // A header arrived on `ni` from the peer NI `from`. The host calls the driver's recv()
  // exactly once for it (with msg == nullptr to discard the payload), now or later.
  // Returns 0, or a negative errno (-EPROTO: bad header) after which the driver drops
  // the message and, for a connection-oriented driver, the connection.
  virtual int parse(NetInterface& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req) = 0;
  // The driver is done with `msg` (sent, received, or failed with a negative errno and
  // msg->health set). May be called from any thread, also from inside send()/recv().
  virtual void finalize(LndMessage* msg, int status) = 0;
  // The driver learnt that the peer NI is down (or up again).
  virtual void notify_peer(NetInterface& ni, Nid peer, bool alive) = 0;

  // Optimised GET, initiator side: a driver that has the target move the REPLY payload
  // straight into the sink calls this while sending `get` (not forwarded: hdr.src_nid is
  // ni's NID and next_hop the target). The result stands for the REPLY, bound to the
  // GET's MD: the driver calls set_reply_length() once it knows how much arrived, then
  // finalize() (or finalize() with an error). nullptr: the MD takes no REPLY any more;
  // send the GET as a plain one. The target side gets parse(..., rdma_req = true) and
  // then recv() with the REPLY message and the source fragments to transmit.
  virtual LndMessage* create_reply(NetInterface& ni, LndMessage& get) = 0;
  virtual void set_reply_length(LndMessage& reply, std::uint32_t len) = 0;
};

class Lnd {
 public:
  virtual ~Lnd() = default;
  virtual std::uint32_t net_type() const = 0;
  // Brings `ni` up: sets ni.nid (unless configured) and ni.lnd_data. Negative errno on failure.
  virtual int startup(NetInterface& ni) = 0;
  virtual void shutdown(NetInterface& ni) = 0;
  // Transmits `msg` to msg.next_hop. 0: accepted, finalize() follows (maybe already
  // happened); negative errno: refused, the caller finalizes.
  virtual int send(NetInterface& ni, LndMessage& msg) = 0;
  // Delivers the payload of a parsed message: `mlen` bytes into iov at `offset`, the
  // remaining rlen - mlen bytes discarded; msg == nullptr discards everything. 0: accepted
  // (finalize(msg) follows when msg != nullptr); negative errno: the caller finalizes.
  virtual int recv(NetInterface& ni, void* lnd_private, LndMessage* msg, bool delayed, const iovec* iov, unsigned niov,
                   std::uint32_t offset, std::uint32_t mlen, std::uint32_t rlen) = 0;
  // The peer-NI timeout the driver enforces, in seconds (0: the core's default).
  virtual int timeout() const { return 0; }
};

// Makes a driver for one net type; registered once per process.
using LndFactory = std::unique_ptr<Lnd> (*)();
// Registers a driver for `net_type` (replacing any earlier one).
void register_lnd(std::uint32_t net_type, LndFactory factory);

// Copies `len` bytes between fragment lists, starting at the given offsets. Helpers for
// drivers that move payload by memcpy (lo, shared memory, bounce buffers).
void copy_fragments(const iovec* dst, unsigned ndst, std::uint32_t dst_off, const iovec* src, unsigned nsrc,
                    std::uint32_t src_off, std::uint32_t len);
void copy_to_fragments(const iovec* dst, unsigned ndst, std::uint32_t dst_off, const void* src, std::uint32_t len);
void copy_from_fragments(void* dst, const iovec* src, unsigned nsrc, std::uint32_t src_off, std::uint32_t len);

}  // namespace lnet
