// Test driver: an in-process "wire" that joins the NIs of several instances in one
// process. It serves the gni net type (numeric NIDs, set with NetConfig::nid), can hold
// sends to exercise credit queues, records where each message went, and injects raw
// headers into a receiver.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include <lnet/lnd/fragments.hpp>
#include <lnet/lnd/lnd.hpp>
#include <lnet/lnet.hpp>

namespace lnet::test {

struct SentRecord {
  Nid src;       // the local NI it left from
  Nid next_hop;  // the peer NI it went to
  MsgType type;
  Header hdr;                 // as sent
  std::uint64_t memory = 0;   // LndMessage::memory
  bool memory_alive = false;  // what the sending host said of it then
};

class Fabric {
 public:
  static Fabric& instance();
  // Registers the driver for the gni type (idempotent).
  static void install();

  void hold(bool on);
  std::size_t pending();
  bool deliver_one();  // the oldest held send; false if none
  void deliver_all();
  std::vector<SentRecord> sent();
  // What the host of the NI `nid` says now of a message's memory (LndHost::memory_alive).
  bool memory_alive(Nid nid, std::uint64_t memory);
  void clear_sent();
  // Hands `hdr` (+ payload) to the NI `dst` as if it came from `from`. Returns parse()'s result.
  int inject(Nid dst, const Header& hdr, Nid from, std::vector<std::uint8_t> payload = {});
  // How many payloads the receiving side discarded (recv with no message).
  std::size_t discarded();
  // Optimised GETs: the initiator's driver makes the REPLY (LndHost::create_reply) and the
  // target's driver copies the source straight into the GET's sink; no REPLY is sent.
  void rdma_get(bool on);
  // Sends from or to the NI `nid` fail (the driver finalizes them with -EIO and this
  // health status) until cleared with nullopt or the NI detaches.
  void fail(Nid nid, std::optional<HealthStatus> health);
  // The driver reports the link of the NI `nid` down or up again (LndHost::link_state).
  void link(Nid nid, bool up);

  // Driver side.
  int attach(NetInterface& ni);
  void detach(NetInterface& ni);
  int send(NetInterface& ni, LndMessage& msg);
  int recv(NetInterface& ni, void* priv, LndMessage* rx, const iovec* iov, unsigned niov, std::uint32_t offset,
           std::uint32_t mlen);

 private:
  struct Held {
    NetInterface* src;
    LndMessage* msg;
  };
  int deliver(NetInterface* src, LndMessage* msg);

  std::mutex mutex_;
  std::map<Nid, NetInterface*> nis_;
  bool hold_ = false;
  std::deque<Held> held_;
  std::vector<SentRecord> sent_;
  std::size_t discarded_ = 0;
  bool rdma_get_ = false;
  std::map<Nid, HealthStatus> failing_;
  std::map<NetInterface*, int> busy_;  // deliveries into each NI under way
  std::condition_variable idle_;
};

// A config with one gni NI per address (net gni<net>), for Instance::create.
Config fabric_config(std::initializer_list<std::uint32_t> addrs, unsigned net = 0, NetTunables t = {},
                     unsigned ncpts = 1);

}  // namespace lnet::test
