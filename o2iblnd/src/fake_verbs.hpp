// An in-process RDMA fabric for the o2ib driver's tests (docs/design/o2iblnd.md §2.2): a
// Provider per IPv4 address; connections by address and port with private data, accepted
// or rejected; sends into the peer's posted receive buffers, in order; RDMA writes into
// the peer's registered memory, checked by key, rights and bounds as an HCA checks them;
// completions and CM events behind an eventfd. What a device does wrong is the tests' to
// ask for: a link down, a send with no receive posted (RNR), a bad remote key, a held
// wire, a peer that vanishes. Not part of the installed driver.
#pragma once

#include <cstdint>
#include <memory>

#include "verbs.hpp"

namespace lnet::o2ib {

class FakeFabric {
 public:
  FakeFabric();
  ~FakeFabric();
  FakeFabric(const FakeFabric&) = delete;
  FakeFabric& operator=(const FakeFabric&) = delete;

  // The device of `ip` (one per address: -EADDRINUSE for a second). Closing it is the
  // node vanishing: its peers' connections break.
  Result<std::unique_ptr<Provider>> open(std::uint32_t ip);

  // ---- faults
  // A link down between two addresses: connects between them are Unreachable, and work
  // posted on a connection between them fails RetryExceeded (the connection breaks).
  void set_link(std::uint32_t a, std::uint32_t b, bool up);
  // The next send or write posted from `ip` completes with `status` (the connection breaks).
  void fail_next(std::uint32_t ip, WcStatus status);
  // The next `n` registrations on `ip`'s device fail (-ENOMEM: as past a locked-memory limit).
  void fail_registrations(std::uint32_t ip, unsigned n);
  // While held, sends and writes wait on the wire (in order) until delivered; the memory
  // they read is read at delivery, as a device reads it when it gets to the work.
  void hold(bool on);
  std::size_t deliver_all();  // what was delivered (or failed)
  // While withheld, the CM events of `ip`'s device wait (its completions do not): data
  // arriving on a connection before the driver has heard it is established, as it can
  // on a real fabric.
  void withhold_events(std::uint32_t ip, bool on);

  // ---- what crossed
  struct Stats {
    std::uint64_t connects = 0, sends = 0, writes = 0, write_bytes = 0, rnr = 0, remote_access = 0;
    std::uint64_t regs = 0, live_mrs = 0;  // memory registrations made, and not yet dropped
    QpAttrs last_qp;                       // what the last connect or accept asked of its queue pair
  };
  Stats stats() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace lnet::o2ib
