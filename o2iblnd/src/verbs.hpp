// What the o2ib driver asks of an RDMA device and of the RDMA connection manager, in the
// driver's own terms (docs/design/o2iblnd.md §2.2): rdma-core's verbs and RDMA CM, or the
// fake device the tests run the driver on (fake_verbs.hpp). One Provider serves one NI
// address. Threads: connect(), disconnect(), reg(), dereg() and the post_* calls from any
// thread; the rest (events, accept, reject, destroy, poll) from one thread, the driver's
// progress thread. Connections are reliable connected queue pairs; address and route
// resolution happen inside connect(). An endpoint id stays valid until destroy(); no
// call may name it after that.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include <lnet/result.hpp>

namespace lnet::o2ib {

using EndpointId = std::uint64_t;  // one connection: a CM id and its queue pair (0: none)

struct MemoryRegion {
  std::uint64_t id = 0;  // the provider's handle (0: none)
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;  // 0 unless registered for remote writes
};

// One scatter/gather element: registered memory the device reads or fills.
struct Sge {
  std::uint64_t addr = 0;
  std::uint32_t len = 0;
  std::uint32_t lkey = 0;
};

enum class WcOp : std::uint8_t { Send, RdmaWrite, Recv };
enum class WcStatus : std::uint8_t {
  Success,
  Flushed,          // the queue pair went to error (the connection is going): work not done
  RemoteAccess,     // an RDMA write outside the remote region or without its rights
  RetryExceeded,    // the peer did not answer (gone, or the link): the connection breaks
  LocalProtection,  // a local element outside its registration
  LocalLength,      // Recv: the message was longer than the posted buffer
};
const char* wc_status_name(WcStatus s);

struct Completion {
  EndpointId ep = 0;
  std::uint64_t wr_id = 0;
  WcOp op = WcOp::Send;
  WcStatus status = WcStatus::Success;
  std::uint32_t byte_len = 0;  // Recv: what arrived
};

enum class CmEventKind : std::uint8_t {
  ConnectRequest,  // a peer asks (ep: a new endpoint to accept or reject)
  Established,     // the connection is up (active side: the accept's private data)
  Rejected,        // active side: refused (consumer: by the peer's driver, with private data)
  Unreachable,     // active side: no route, no such address, or no answer
  Disconnected,    // the connection is gone (either side); destroy() the endpoint
};
const char* cm_event_name(CmEventKind k);

inline constexpr std::size_t kMaxPrivateData = 196;  // RDMA CM's largest (a reject on IB)

struct CmEvent {
  CmEventKind kind = CmEventKind::Disconnected;
  EndpointId ep = 0;
  std::uintptr_t context = 0;  // what connect() or accept() was given
  std::uint32_t peer_ip = 0;   // ConnectRequest: the asking address and port
  std::uint16_t peer_port = 0;
  bool consumer_reject = false;  // Rejected: by the peer's driver (not: no listener)
  std::size_t private_len = 0;
  std::array<std::uint8_t, kMaxPrivateData> private_data{};
  std::span<const std::uint8_t> data() const { return {private_data.data(), private_len}; }
};

// A connection's queue pair: the work requests it takes at once, and how often the
// device retries a send that met no acknowledgement (retry_count) or no receive posted
// on the other side (rnr_retry_count; 7: without end), as the CM's connection parameters.
struct QpAttrs {
  unsigned send_wr = 0;
  unsigned recv_wr = 0;
  std::uint8_t retry_count = 5;
  std::uint8_t rnr_retry_count = 6;
};

class Provider {
 public:
  virtual ~Provider() = default;
  // Readable when a CM event or a completion waits (after arm()); the driver's progress
  // thread sleeps on it.
  virtual int event_fd() const = 0;
  // Consumes the wake-up and asks for the next one: call before draining events and
  // completions, so that nothing arriving meanwhile is missed.
  virtual void arm() = 0;

  // ---- connections
  virtual Status listen(std::uint16_t port) = 0;
  // Connects to dst_ip:port, offering `private_data`; the outcome is an Established,
  // Rejected or Unreachable event naming the endpoint. `privileged`: from a port below
  // 1024 (root only).
  virtual Result<EndpointId> connect(std::uint32_t dst_ip, std::uint16_t port, bool privileged, const QpAttrs& attrs,
                                     std::span<const std::uint8_t> private_data, std::uintptr_t context) = 0;
  virtual Status accept(EndpointId ep, const QpAttrs& attrs, std::span<const std::uint8_t> private_data,
                        std::uintptr_t context) = 0;
  virtual Status reject(EndpointId ep, std::span<const std::uint8_t> private_data) = 0;
  // Breaks the connection: posted work completes Flushed, then a Disconnected event.
  virtual void disconnect(EndpointId ep) = 0;
  // Frees the endpoint (after Disconnected, a rejected or refused connect, or a reject).
  virtual void destroy(EndpointId ep) = 0;
  // The next CM event, if one waits.
  virtual bool next_event(CmEvent& out) = 0;

  // ---- memory
  virtual Result<MemoryRegion> reg(void* addr, std::size_t len, bool remote_write) = 0;
  virtual void dereg(const MemoryRegion& mr) = 0;

  // ---- data (on an established endpoint; a failure here is the post's, not the work's)
  // Receives may also be posted as soon as connect() or a ConnectRequest named the
  // endpoint, before accept() (from the progress thread only, until established): the
  // device keeps them for the queue pair. Every posted receive completes: with data,
  // or Flushed once the connection ends, fails to come up, or accept() fails.
  virtual Status post_recv(EndpointId ep, const Sge& sge, std::uint64_t wr_id) = 0;
  virtual Status post_send(EndpointId ep, const Sge& sge, std::uint64_t wr_id) = 0;
  virtual Status post_write(EndpointId ep, std::span<const Sge> local, std::uint64_t remote_addr, std::uint32_t rkey,
                            std::uint64_t wr_id) = 0;
  // Up to out.size() completions; how many. `op` is certain only on success.
  virtual std::size_t poll(std::span<Completion> out) = 0;
};

// rdma-core's provider for the RDMA device that has `ip` (the NI's address): -ENODEV
// "no RDMA device has address ..." where none has.
Result<std::unique_ptr<Provider>> open_rdma(std::uint32_t ip);
// The RDMA devices this machine has (0: none; the device tests say "skipped").
int rdma_device_count();

}  // namespace lnet::o2ib
