// The driver SPI: what every LND (network driver) implements and what its host offers
// it. One SPI for all drivers (lo, tcp, mpi, up): a driver sees only these types, so the
// same driver runs inside liblnet's core or inside any other host (the proxy hosts the
// MPI LND and forwards to a bridge). The contract in full, with which thread may make
// each call and who owns what: lnet-lnd(7) (docs/man/lnet-lnd.7.md).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <lnet/config.hpp>
#include <lnet/lnd/header.hpp>
#include <lnet/nid.hpp>
#include <lnet/result.hpp>

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

// A message as a driver sees it; the host owns it, the driver holds it from send() or
// recv() until it finalizes it. For a send: `hdr` is what goes on the wire, the payload
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
  // Who keeps the fragments' memory beyond this message: 0, only the message (it may be
  // freed once the message is finalized); else an id that LndHost::memory_alive()
  // answers for (an MD's handle that takes any number of operations, kHostMemory for the
  // host's router buffers). The memory of iov stays as it is while memory_alive(memory)
  // says so, so a driver may keep what it made for it (an RDMA registration) until then.
  std::uint64_t memory = 0;
  // Set by the driver before finalizing a failed message.
  HealthStatus health = HealthStatus::Ok;
};

// LndMessage::memory of the host's router buffers: alive as long as the host.
inline constexpr std::uint64_t kHostMemory = ~std::uint64_t{3};

class LndHost;
class Lnd;

// One round of a driver's progress; true if it did any work (completed or started
// something).
using PollFn = bool (*)(void* ctx);

// A local network interface as a driver sees it. The host owns it; it outlives every
// call the driver gets for it.
struct NetInterface {
  Nid nid = Nid::any();  // set by the driver's startup() unless configured
  Pid pid = 0;           // the host's LNet pid (what HELLOs announce)
  // Net, interfaces, tunables, CPTs. Flow control: once startup() returns, the host
  // keeps at most config.tunables.credits messages handed to send() and not yet
  // finalized on this NI, and at most config.tunables.peer_credits to any one peer NI
  // (next_hop). startup() sets peer_credits when the configuration left it at 0 (the
  // driver's default), and may lower either to what the driver can carry. So a driver
  // that queues sends (for a connection, a handshake, credits of its own) holds at most
  // peer_credits per peer and needs no bound of its own.
  NetConfig config;
  int cpt = 0;         // home CPU partition
  int numa_node = -1;  // the device's NUMA node, set by startup() when known (lnet/lnd/numa.hpp); -1: unknown
  LndHost* host = nullptr;
  Lnd* lnd = nullptr;
  void* lnd_data = nullptr;  // the driver's per-NI state
  // Progress. A driver with threads of its own leaves `poll` null. One without sets it
  // in startup(): from startup()'s return until it calls shutdown(), the host calls
  // poll(poll_ctx) from the threads that wait for this NI's work (liblnet: every
  // blocking wait, EventQueue::poll, Instance::progress()), never two at once.
  PollFn poll = nullptr;
  void* poll_ctx = nullptr;
  // Why startup() failed, in words (set with fail_startup()): the host's error names it
  // instead of the bare errno ("cannot start network o2ib: no RDMA device on this machine").
  std::string startup_error;
};

// For a driver's startup(): logs "cannot start NET: WHY", keeps `why` in
// ni.startup_error and returns `rc` (negative errno).
int fail_startup(NetInterface& ni, int rc, std::string why);

// What the core (or another host) offers drivers. Every call may come from any thread
// of the driver's, and from inside send() or recv(); the host holds none of its locks
// while it calls the driver.
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
  // The driver learnt that `ni`'s own link came up (the UP LND: a proxy attached): a
  // router that reported the NI down for its silence reports it up at once, not at its
  // next look, so that a route through it is up before the first message takes it.
  virtual void link_up(NetInterface& ni) { (void)ni; }
  // The driver learnt that `ni`'s link went down (its interface down, no carrier, its
  // address gone) or came back: the NI is down (net show, our ping info, not selected)
  // while it is. Called when the state changes and at startup() if it starts down.
  virtual void link_state(NetInterface& ni, bool up) {
    (void)ni;
    (void)up;
  }
  // The per-attempt timeout LNet derives for drivers, in seconds: (transaction_timeout -
  // 1) / (retry_count + 1), at least 1 (lnet-facts §5.1); 0: this host derives none. A
  // driver whose own timeout is set to 0 takes it when an NI comes up.
  virtual int lnd_timeout() const { return 0; }
  // Large NIDs (lnet configure --large): an NI given an interface takes its IPv6 address
  // before its IPv4 one.
  virtual bool large_nids() const { return false; }
  // Whether the memory a message named (LndMessage::memory) is still as it was: false
  // once it may be freed (its MD unlinked and retired), and for 0. A driver that keeps
  // something made for that memory asks now and then, and drops it once this says false.
  virtual bool memory_alive(std::uint64_t memory) const {
    (void)memory;
    return false;
  }
  // Memory a network may still write after its message failed (a receive MPI matched
  // cannot be cancelled): before finalizing such a message, a driver asks the host to
  // keep the message's memory as it is. The message's event then goes out at once, but
  // its MD is not unlinked (no event says so: the application does not have the memory
  // back) until the driver calls release_memory(token), which it does once the network
  // is done with it, or when it shuts the NI down. 0: the host cannot keep it; the driver
  // then finalizes only when the network is done with the memory. keep_memory() takes
  // only a lock of the host's own and calls nothing, so a driver may call it under its
  // locks; release_memory() may deliver events and is called with none held.
  virtual std::uintptr_t keep_memory(LndMessage& msg) {
    (void)msg;
    return 0;
  }
  virtual void release_memory(std::uintptr_t token) { (void)token; }

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

// Memory a driver offers its host for router buffers, so that a payload forwarded
// through the driver already sits where the driver passes it on without a copy (the UP
// LND's region shared with the proxies).
class BufferMemory {
 public:
  virtual ~BufferMemory() = default;
  // `size` bytes, page aligned, valid as long as the driver object lives; nullptr when
  // there is none left (the host then uses its own memory).
  virtual void* allocate(std::size_t size) = 0;
};

class Lnd {
 public:
  virtual ~Lnd() = default;
  virtual std::uint32_t net_type() const = 0;
  // Whether the driver also brings up NIs of another net type when no driver is
  // registered for it (the MPI network's drivers take any type an MPI network can have:
  // mpi_net_type()).
  virtual bool serves(std::uint32_t type) const { return type == net_type(); }
  // Whether this driver can bring up an NI with `config`. An LND tunable the driver does
  // not take (or a value it cannot honour) fails, naming it: "not supported yet: ...".
  // The host asks before startup(). By default every LND tunable must be left alone.
  virtual Status check_config(const NetConfig& config) const;
  // Brings `ni` up: sets ni.nid (unless configured), ni.lnd_data, the flow-control
  // tunables and, for a driver without threads, ni.poll. Negative errno on failure,
  // its reason given with fail_startup().
  virtual int startup(NetInterface& ni) = 0;
  // Takes `ni` down: every message the driver holds for it is finalized before it
  // returns (with -ESHUTDOWN when it could not complete), and no call reaches the host
  // for it afterwards.
  virtual void shutdown(NetInterface& ni) = 0;
  // Transmits `msg` to msg.next_hop. 0: accepted, finalize() follows (maybe already
  // happened). A negative errno refuses it (the caller finalizes); a driver refuses only
  // what it cannot carry at all (-EHOSTUNREACH: not a peer on this net, -ESHUTDOWN:
  // going down), never to push back: the host's credits are the back-pressure.
  virtual int send(NetInterface& ni, LndMessage& msg) = 0;
  // Delivers the payload of a parsed message: `mlen` bytes into iov at `offset`, the
  // remaining rlen - mlen bytes discarded; msg == nullptr discards everything. 0: accepted
  // (finalize(msg) follows when msg != nullptr); negative errno: the caller finalizes.
  // `delayed`: the host kept the message after parse() returned (a lazy portal, a
  // router buffer); the driver kept its payload until now.
  virtual int recv(NetInterface& ni, void* lnd_private, LndMessage* msg, bool delayed, const iovec* iov, unsigned niov,
                   std::uint32_t offset, std::uint32_t mlen, std::uint32_t rlen) = 0;
  // The timeout the driver enforces on `ni`'s transfers, in seconds (0: none of its own).
  virtual int timeout(const NetInterface& ni) const {
    (void)ni;
    return 0;
  }
  // Sets that timeout at run time (lnetctl net set --lnd-timeout; 0: LNet's derived
  // lnd_timeout). 0, or a negative errno (-EOPNOTSUPP: the driver's is fixed).
  virtual int set_timeout(NetInterface& ni, int seconds) {
    (void)ni;
    (void)seconds;
    return -EOPNOTSUPP;
  }
  // Sets one of the driver's tunables (its LndTunableSpec, value within its range) on `ni`
  // at run time (lnetctl net set --conns-per-peer). 0, or a negative errno (-EOPNOTSUPP:
  // the driver takes it only when the NI comes up).
  virtual int set_tunable(NetInterface& ni, std::string_view name, long value) {
    (void)ni;
    (void)name;
    (void)value;
    return -EOPNOTSUPP;
  }
  // Whether `ni`'s link is known to be alive even when nothing arrives on it (the UP
  // LND: a proxy is attached). A router reports an NI that heard nothing for
  // router_ping_timeout + alive_router_check_interval down to its peers, unless this says
  // its link is alive: an idle proxy gateway is not a dead one. Called from the host's
  // monitor thread.
  virtual bool link_alive(const NetInterface& ni) const {
    (void)ni;
    return false;
  }
  // Memory for the host's router buffers (nullptr: the host's own). A host asks the
  // drivers it was handed when it is created and uses the first that offers some; it
  // keeps that driver object alive as long as it has router buffers.
  virtual BufferMemory* router_memory() { return nullptr; }
  // The value in effect on `ni` of one of the driver's tunables (its LndTunableSpec),
  // given what was configured (or the default): what `net show -v` and export print.
  // The default: "timeout" is the driver's timeout(), the others as configured.
  virtual long tunable_in_effect(const NetInterface& ni, std::string_view name, long configured) const {
    return name == "timeout" ? timeout(ni) : configured;
  }
  // The driver's own counters (`lnetctl stats show` prints them under its name), in a
  // fixed order; read without stopping the driver.
  virtual std::vector<std::pair<std::string, std::uint64_t>> counters() const { return {}; }
  // The name its counters go under ("socklnd", "mpilnd", "up").
  virtual std::string counters_name() const { return {}; }
};

// Makes a driver for one net type; registered once per process.
using LndFactory = std::unique_ptr<Lnd> (*)();
// Registers a driver for `net_type` (replacing any earlier one). Drivers built into
// liblnet register themselves when it is loaded; others are registered by the program
// that links them, or handed to Instance::create as objects.
void register_lnd(std::uint32_t net_type, LndFactory factory);

}  // namespace lnet
