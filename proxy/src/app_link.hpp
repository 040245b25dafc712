// One application as a proxy rank serves it: the MPI LND over the communicator shared
// with the application's ranks, hosted by a forwarder to the node's lnetd (seed 002
// §2.3.1): the driver's parse() becomes a PARSE on the bridge and lnetd's RECV the
// driver's recv(); lnetd's SEND the driver's send(); the driver's finalize() a RECV_DONE
// or SEND_DONE. Payloads stay in the bridge's shared region: MPI receives into it and
// sends from it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include <lnet/lnd/lnd.hpp>
#include <lnet/mpi.hpp>
#include <lnet/mutex.hpp>
#include <lnet/up/client.hpp>

namespace lnet::proxy {

// A message of the driver's as this host owns it: lnetd's SEND, or the target of a RECV.
struct LinkMsg : LndMessage {
  LinkMsg* next = nullptr;
  bool is_send = false;
  bool inline_parse = false;  // a small payload received here, then PARSEd with it
  bool kept = false;          // failed while MPI may still write its region bytes (keep_memory)
  up::DescRef desc;           // lnetd's descriptor, echoed in the *_DONE
  iovec frag{};               // the region bytes (or `data`)
  Nid from;                   // inline_parse: the peer NI it came from
  std::uint8_t data[up::kMaxInline];
};

class AppLink final : public LndHost {
 public:
  // `serial`: this rank's number for the application (in the cookies of its PARSEs, so
  // lnetd's RECV finds it); `comm`: the communicator with the application (not owned);
  // `nids`: the NID of each of its ranks (this rank's is its proxy NID).
  AppLink(up::BridgeClient& bridge, std::uint64_t serial, Pid app_pid, MPI_Comm comm, std::vector<Nid> nids,
          const mpi::Options& opts);
  ~AppLink() override;

  int start();
  // Fails what is in flight and shuts the driver down. `app_gone`: the application is
  // dead, so nothing running in MPI will finish and the shutdown waits for none of it.
  void stop(bool app_gone = false);
  Pid pid() const { return pid_; }
  std::uint64_t serial() const { return serial_; }
  // The application a PARSE cookie belongs to.
  static std::uint64_t serial_of(std::uint64_t cookie) { return cookie >> kSerialShift; }

  // From the bridge thread.
  void on_recv(const up::Recv& r);
  void on_send(const up::Send& s);
  // The bridge thread drives the driver when it runs no thread of its own (polled()):
  // one round of its progress, true when it found work (false while stopped).
  bool poll();
  bool polled() const { return polled_; }
  // MPI moves data of the driver's, or a send waits in it.
  bool busy() const { return !lnd_->idle(); }
  // Messages the driver refused: malformed, or with a header lnetd would refuse (another
  // application's pid, an oversized payload). An application that sends one is dropped.
  std::uint64_t bad_messages() const { return lnd_->stats().bad_messages; }

  // The driver's host.
  int parse(NetInterface& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req) override;
  void finalize(LndMessage* msg, int status) override;
  void notify_peer(NetInterface& ni, Nid peer, bool alive) override;
  LndMessage* create_reply(NetInterface& ni, LndMessage& get) override;
  // A receive into the region failed while MPI may still write it: lnetd is told so with
  // the RECV_DONE (kDoneKept) and lends the bytes to no one until release_memory() sends
  // MEM_RELEASE, or until this process has exited.
  std::uintptr_t keep_memory(LndMessage& msg) override;
  void release_memory(std::uintptr_t token) override;
  void set_reply_length(LndMessage& reply, std::uint32_t len) override;

 private:
  // A cookie: the serial (24 bits), the slot's generation (16), the slot (24).
  static constexpr unsigned kSerialShift = 40, kGenShift = 24;
  static constexpr std::uint64_t kSlotMask = (1u << kGenShift) - 1, kGenMask = 0xffff;
  struct Slot {
    std::uint32_t gen = 1;
    void* priv = nullptr;  // the driver's, between parse() and recv()
    bool used = false;
  };
  std::uint64_t park(void* priv);
  void* unpark(std::uint64_t cookie);
  void done(const up::DescRef& d, bool is_send, int status, HealthStatus h, std::uint32_t flags = 0);
  void stop_locked() LNET_REQUIRES(life_);

  up::BridgeClient& bridge_;
  std::uint64_t serial_;
  Pid pid_;
  std::uint32_t inline_max_;  // payloads up to this go inline in their PARSE
  bool polled_;
  std::shared_ptr<mpi::MpiLnd> lnd_;
  NetInterface ni_;
  // Held shared while lnetd's messages go into the driver, exclusively to stop it.
  SharedMutex life_;
  bool started_ LNET_GUARDED_BY(life_) = false;
  mutable Mutex mu_;
  std::vector<Slot> slots_ LNET_GUARDED_BY(mu_);
  std::vector<std::uint32_t> free_ LNET_GUARDED_BY(mu_);
};

}  // namespace lnet::proxy
