// Portal 0's targets: the ping target (an MD answering GETs with this node's ping info,
// replaced with the next sequence number when the NIs change) and the push target (one
// pushed ping info at a time, handed to discovery). It works through the API calls of
// its host (the core) and tells discovery when peers should be pushed.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <lnet/api.hpp>

#include "net/state.hpp"
#include "peer/discovery.hpp"
#include "portals/portal_table.hpp"

namespace lnet::core {

class PingTargetHost {
 public:
  virtual Result<MdHandle> md_attach(MeHandle me, const MdDesc& desc, Unlink unlink) = 0;
  virtual int md_unlink(MdHandle md) = 0;
  virtual int me_unlink(MeHandle me) = 0;

 protected:
  ~PingTargetHost() = default;
};

class PingTarget {
 public:
  PingTarget(net::State& st, portals::PortalTable& portals, peer::Discovery& discovery, PingTargetHost& host, Pid pid)
      : st_(st), portals_(portals), discovery_(discovery), host_(host), pid_(pid) {}
  PingTarget(const PingTarget&) = delete;
  PingTarget& operator=(const PingTarget&) = delete;

  // Both targets posted (startup); 0 or -errno.
  int setup();
  // The ping info now (our NIs and their status, our features).
  PingInfo info() const;
  // A new buffer for the ping target; discovered peers are pushed it (`force_push`:
  // even those that would not be pushed again). Under the configuration mutex.
  void refresh(bool force_push = false);

 private:
  void post_push_target();
  void on_push(const Event& ev);

  net::State& st_;
  portals::PortalTable& portals_;
  peer::Discovery& discovery_;
  PingTargetHost& host_;
  const Pid pid_;

  MeHandle ping_me_;
  MdHandle ping_md_;
  std::vector<std::uint8_t> push_buf_;             // the push target's buffer (its MD's handler alone uses it)
  std::atomic<std::size_t> push_target_bytes_{0};  // what it should hold (a truncated push grows it)
};

}  // namespace lnet::core
