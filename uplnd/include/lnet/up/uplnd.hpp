// The UP LND: the host side of the parallel proxy (seed 002 §2.3.1). lnetd runs it as the
// driver of its `mpi` net: one NI, <primary IPv4>@mpi<N>, whose peers are the ranks of
// MPI applications, reached through the proxy ranks that connect to its bridge (a
// Unix-domain socket; opening it is "opening /dev/lnet"). Payloads cross the bridge in a
// shared memory region without a copy: lnetd's router buffers live in it (the driver
// offers it as router memory), so a forwarded payload is where the proxy's MPI reads and
// writes. Bridge protocol: <lnet/up/bridge.hpp>, docs/design/bridge.md.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <lnet/lnd/lnd.hpp>
#include <lnet/mutex.hpp>
#include <lnet/result.hpp>

namespace lnet::up {

inline constexpr const char* kDefaultBridge = "/run/lnet/bridge.sock";

struct UpOptions {
  std::string bridge = kDefaultBridge;             // the bridge socket's path
  std::optional<gid_t> group;                      // may connect besides root
  std::size_t region_size = std::size_t{1} << 30;  // bytes of shared memory (sparse)
  unsigned bounce_small = 256;                     // 4 KiB bounce buffers: payloads of lnetd's own MDs
  unsigned bounce_large = 32;                      // 1 MiB bounce buffers
  // What a proxy (root or the bridge group) can make lnetd hold: docs/design/threats.md.
  unsigned max_proxies = 256;                     // connections at once, before and after their HELLO
  std::chrono::milliseconds hello_timeout{5000};  // a connection without a HELLO by then is closed
  unsigned proxy_credits = 16384;                 // messages from one proxy held at once; beyond, dropped
  unsigned max_descs = 65536;                     // messages held for all proxies, both ways
  unsigned proxy_pids = 4096;                     // application pids one proxy may hold
  unsigned max_pids = 65536;                      // application pids all proxies may hold
};

// What the UP LND counted since its NI started.
struct UpStats {
  std::uint64_t proxies = 0;         // connected now
  std::uint64_t connections = 0;     // accepted since start
  std::uint64_t refused = 0;         // connections from a uid that may not connect
  std::uint64_t pids = 0;            // application pids registered now
  std::uint64_t parses = 0;          // LNet messages from applications
  std::uint64_t sends = 0;           // LNet messages to applications
  std::uint64_t in_place = 0;        // payloads that crossed the bridge without a copy
  std::uint64_t copies = 0;          // payloads copied through a bounce buffer (lnetd's own MDs)
  std::uint64_t inlined = 0;         // small payloads that came inline in their PARSE
  std::uint64_t bad_messages = 0;    // bridge messages refused
  std::uint64_t failed = 0;          // messages failed because their proxy went away
  std::uint64_t dropped = 0;         // PARSEs dropped: the proxy's credits or lnetd's descriptors ran out
  std::uint64_t over_limit = 0;      // connections closed at once: max_proxies were connected
  std::uint64_t hello_timeouts = 0;  // connections closed for want of a HELLO
  std::uint64_t kept = 0;            // failed receives whose bytes were held while a proxy's MPI could write them
  std::uint64_t kept_now = 0;        // of those, held now (until MEM_RELEASE or the proxy's process exits)
};

class UpNi;

class UpLnd final : public Lnd {
 public:
  explicit UpLnd(UpOptions opts = {});
  ~UpLnd() override;

  std::uint32_t net_type() const override;
  // Any type an MPI network can have: mpi, or the kernel's type a site chose for it.
  bool serves(std::uint32_t type) const override;
  int startup(NetInterface& ni) override;
  void shutdown(NetInterface& ni) override;
  int send(NetInterface& ni, LndMessage& msg) override;
  int recv(NetInterface& ni, void* lnd_private, LndMessage* msg, bool delayed, const iovec* iov, unsigned niov,
           std::uint32_t offset, std::uint32_t mlen, std::uint32_t rlen) override;
  BufferMemory* router_memory() override;
  // A proxy is attached: the NI is alive while its applications are quiet.
  bool link_alive(const NetInterface& ni) const override;
  // Its tunables are the mpi net type's (timeout, shown only: it keeps no timeout).
  Status check_config(const NetConfig& config) const override;
  std::vector<std::pair<std::string, std::uint64_t>> counters() const override;
  std::string counters_name() const override { return "up"; }

  UpStats stats() const;
  // Whether an NI of this driver is up (lnetd has an mpi net).
  bool running() const;
  const UpOptions& options() const { return opts_; }
  // The nets lnetd reaches besides this one, which proxies tell their applications
  // (the host sets them, and again whenever its nets change).
  void set_nets(std::vector<NetId> nets);

 private:
  class Memory;
  UpOptions opts_;
  std::unique_ptr<Memory> memory_;
  mutable Mutex mutex_;  // ni_ against the queries
  UpNi* ni_ LNET_GUARDED_BY(mutex_) = nullptr;
  std::vector<NetId> nets_ LNET_GUARDED_BY(mutex_);
};

}  // namespace lnet::up
