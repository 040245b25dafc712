// The fault rules of one instance (lnetctl fault, lnet-facts §10) and their decisions:
// drop a message on receive, fail a send with a health status, or hold a received message
// for a while. The data path asks only when rules of that kind exist (one relaxed load).
#pragma once

#include <atomic>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include <lnet/fault.hpp>
#include <lnet/lnd/header.hpp>
#include <lnet/lnd/lnd.hpp>
#include <lnet/mutex.hpp>

#include "health/health.hpp"
#include "msg/message.hpp"
#include "net/ni.hpp"

namespace lnet::core {

class FaultTable {
 public:
  Status add(const FaultRule& rule);
  // Removes the rules of that kind whose source and destination are these (any: every
  // one); how many went.
  int del(bool delay, Nid source, Nid dest);
  // Zeroes the counters of the rules of that kind (and starts their windows again).
  void reset(bool delay);
  std::vector<FaultRuleInfo> list(bool delay) const;

  bool receive_rules() const { return rx_.load(std::memory_order_relaxed); }
  bool send_rules() const { return tx_.load(std::memory_order_relaxed); }

  enum class Verdict { Pass, Drop, Delay };
  // A message `hdr` received on the NI `local`: passed, dropped (drop rules without
  // health errors) or delayed by *latency seconds (delay rules).
  Verdict on_receive(const Header& hdr, Nid local, unsigned* latency);
  // A message leaving from `local`: the health status its send fails with, if a drop
  // rule with health errors fires.
  std::optional<HealthStatus> on_send(const Header& hdr, Nid local);

 private:
  struct Rule {
    FaultRuleInfo info;
    std::uint64_t fire_at = 0;   // rate: the match (by count) that fires in this window
    std::int64_t fire_time = 0;  // interval: when the next one fires (ns)
    std::int64_t time_base = 0;  // interval: the end of this window (ns)
  };
  void start_window(Rule& r, std::int64_t now) LNET_REQUIRES(mutex_);
  // Whether a message that matched `r` is the one to act on (its window's, ...).
  bool decide(Rule& r, std::int64_t now) LNET_REQUIRES(mutex_);
  // decide(), counting what fired by message type.
  bool fires(Rule& r, std::int64_t now, MsgType type) LNET_REQUIRES(mutex_);
  void refresh_flags() LNET_REQUIRES(mutex_);

  mutable Mutex mutex_;
  std::vector<Rule> drop_ LNET_GUARDED_BY(mutex_);
  std::vector<Rule> delay_ LNET_GUARDED_BY(mutex_);
  std::minstd_rand rng_ LNET_GUARDED_BY(mutex_){std::random_device{}()};
  std::atomic<bool> rx_{false};
  std::atomic<bool> tx_{false};
};

// What the rules act through: the core's receive path.
class FaultHost {
 public:
  // A received message checked and handed on (`delayed`: a rule held it; parse() returned
  // long ago).
  virtual int parse_received(net::Ni& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req,
                             bool delayed) = 0;
  // A received message dropped: counted, its payload discarded by its driver.
  virtual void drop_payload(net::Ni& ni, unsigned cpt, const Header& hdr, void* lnd_private, bool delayed) = 0;
  // A message's send failed (its health says how).
  virtual void finalize(LndMessage* msg, int status) = 0;

 protected:
  ~FaultHost() = default;
};

// The rules and what they do to messages: drop or hold received ones (a held message is
// handed back when its time comes, through the health monitor's wake-ups), fail sends.
class Faults {
 public:
  Faults(const CptTable& cpts, health::Health& health, FaultHost& host) : cpts_(cpts), health_(health), host_(host) {}

  FaultTable rules;

  // True when the rules took the received message (dropped, or held).
  [[gnu::cold]] bool on_receive(net::Ni& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req);
  // True when a rule failed the send (finalized).
  [[gnu::cold]] bool on_send(msg::Message* msg);
  // Hands back the held messages that are due (all of them, discarded, with `discard`);
  // the earliest still held (0: none).
  std::int64_t release(std::int64_t now, bool discard);

 private:
  struct Held {
    net::Ni* ni;
    Header hdr;
    Nid from;
    void* lnd_private;
    bool rdma_req;
  };
  const CptTable& cpts_;
  health::Health& health_;
  FaultHost& host_;
  Mutex mutex_;
  std::multimap<std::int64_t, Held> held_ LNET_GUARDED_BY(mutex_);  // by release time
};

}  // namespace lnet::core
