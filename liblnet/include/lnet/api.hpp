// lnet::Instance: one LNet per process (LNetNIInit), with PUT/GET/ping, match entries and
// memory descriptors, and the RAII handles Me and Md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <lnet/config.hpp>
#include <lnet/control.hpp>
#include <lnet/event.hpp>
#include <lnet/md.hpp>
#include <lnet/nid.hpp>
#include <lnet/result.hpp>
#include <lnet/stats.hpp>
#include <lnet/wire.hpp>

namespace lnet {

namespace core {
class Core;
}
class Lnd;

// The answer to a ping: the peer's pid, features and NIDs (0@lo first).
struct PingResult {
  ProcessId id;  // whom we pinged (pid as answered)
  PingInfo info;
};

class Instance {
 public:
  // Brings up 0@lo and the configured networks. `pid` kPidAny: getpid() with the user
  // flag set (a userspace client); anything else is used as given (e.g. kPidLustre).
  // `drivers` serve their net types in this instance, before the drivers registered for
  // the process (<lnet/lnd/lnd.hpp>): a driver made for one communicator, say.
  static Result<std::unique_ptr<Instance>> create(const Config& config = {}, Pid pid = kPidAny,
                                                  std::vector<std::shared_ptr<Lnd>> drivers = {});
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  Pid pid() const;
  // The local NIDs, 0@lo first (LNetGetId order).
  std::vector<Nid> nids() const;
  // Distance to `nid`: 0 local, 1 on a directly connected net; -EHOSTUNREACH otherwise.
  // *src gets the local NID that would be used, *order the index of that net.
  int dist(Nid nid, Nid* src, std::uint32_t* order) const;

  // Match entries (LNetMEAttach / LNetMEInsert / LNetMEUnlink).
  Result<MeHandle> me_attach(unsigned portal, ProcessId match_id, std::uint64_t match_bits, std::uint64_t ignore_bits,
                             Unlink unlink, InsPos pos);
  Result<MeHandle> me_insert(MeHandle current, ProcessId match_id, std::uint64_t match_bits, std::uint64_t ignore_bits,
                             Unlink unlink, InsPos pos);
  int me_unlink(MeHandle me);

  // Memory descriptors (LNetMDAttach / LNetMDBind / LNetMDUnlink).
  Result<MdHandle> md_attach(MeHandle me, const MdDesc& md, Unlink unlink);
  Result<MdHandle> md_bind(const MdDesc& md, Unlink unlink);
  int md_unlink(MdHandle md);

  // LNetPut / LNetGet. `self` Nid::any() lets multi-rail choose the local NI. A
  // `recovery` GET is sent as LNet's health recovery pings are: to exactly the target's
  // NID (no other NI of a multi-rail peer) and never resent.
  int put(Nid self, MdHandle md, AckReq ack, ProcessId target, unsigned portal, std::uint64_t match_bits,
          std::uint32_t offset, std::uint64_t hdr_data);
  int get(Nid self, MdHandle md, ProcessId target, unsigned portal, std::uint64_t match_bits, std::uint32_t offset);
  int get(Nid self, MdHandle md, ProcessId target, unsigned portal, std::uint64_t match_bits, std::uint32_t offset,
          bool recovery);

  // Unmatched PUTs to a lazy portal wait for a later MD instead of being dropped.
  int set_lazy_portal(unsigned portal);
  int clear_lazy_portal(unsigned portal);

  // GETs the peer's ping info (portal 0, kPingMatchBits); pid kPidAny means kPidLustre.
  // `source`: the local NID to ping from (Nid::any(): multi-rail chooses). Fails with
  // -ETIMEDOUT when no answer arrives within `timeout`. Blocks: never call it from an
  // event handler.
  Result<PingResult> ping(ProcessId target, std::chrono::milliseconds timeout, unsigned max_nids = 16,
                          Nid source = Nid::any());
  // This node's own ping info (what a ping of it answers).
  PingInfo ping_info() const;

  // Drives the drivers that the application progresses (the MPI LND without its
  // progress thread; see lnet/progress.hpp) once: completions are handled and their
  // events delivered from this call. True if anything happened. Blocking calls
  // (EventQueue::poll with a timeout, ping) drive progress by themselves.
  bool progress();

  // An event queue for MDs of this instance.
  std::shared_ptr<EventQueue> make_event_queue(std::size_t capacity, EventQueue::Callback callback = {});

  Counters counters() const;
  void reset_counters();
  std::vector<NiInfo> nets() const;
  std::vector<PeerInfo> peers() const;

  // The configuration API: what lnetctl drives (networks, peers, routes, tunables).
  Control& control();
  const Control& control() const;

 private:
  friend class core::Core;  // Core::of(): white-box tests reach the core of an instance
  explicit Instance(std::unique_ptr<core::Core> c);
  std::unique_ptr<core::Core> core_;
};

// A match entry that is unlinked when this object goes away (unless released).
class Me {
 public:
  Me() = default;
  Me(Instance& lnet, MeHandle h, Unlink unlink) : lnet_(&lnet), h_(h), unlink_(unlink) {}
  Me(Me&& o) noexcept : lnet_(o.lnet_), unlink_(o.unlink_) { h_ = o.release(); }
  Me& operator=(Me&& o) noexcept {
    if (this != &o) {
      reset();
      lnet_ = o.lnet_;
      unlink_ = o.unlink_;
      h_ = o.release();
    }
    return *this;
  }
  ~Me() { reset(); }
  static Result<Me> attach(Instance& lnet, unsigned portal, ProcessId match_id, std::uint64_t match_bits,
                           std::uint64_t ignore_bits, Unlink unlink = Unlink::Unlink, InsPos pos = InsPos::After);

  MeHandle handle() const { return h_; }
  // Whether the ME goes when its MD is unlinked.
  Unlink unlink_mode() const { return unlink_; }
  MeHandle release() { return std::exchange(h_, MeHandle{}); }
  void reset() {
    if (lnet_ && h_.is_valid()) (void)lnet_->me_unlink(h_);
    h_ = {};
  }

 private:
  Instance* lnet_ = nullptr;
  MeHandle h_;
  Unlink unlink_ = Unlink::Unlink;
};

// A memory descriptor that is unlinked when this object goes away (unless released).
class Md {
 public:
  Md() = default;
  Md(Instance& lnet, MdHandle h) : lnet_(&lnet), h_(h) {}
  Md(Md&& o) noexcept : lnet_(o.lnet_), h_(o.release()) {}
  Md& operator=(Md&& o) noexcept {
    if (this != &o) {
      reset();
      lnet_ = o.lnet_;
      h_ = o.release();
    }
    return *this;
  }
  ~Md() { reset(); }
  static Result<Md> bind(Instance& lnet, const MdDesc& desc, Unlink unlink = Unlink::Unlink);
  // Attaches to `me`. An ME made with Unlink::Unlink now lives and dies with the MD, so
  // `me` gives up its handle; a Retain ME stays owned by `me` (unlinking it unlinks the MD).
  static Result<Md> attach(Instance& lnet, Me& me, const MdDesc& desc, Unlink unlink = Unlink::Unlink);

  MdHandle handle() const { return h_; }
  MdHandle release() { return std::exchange(h_, MdHandle{}); }
  void reset() {
    if (lnet_ && h_.is_valid()) (void)lnet_->md_unlink(h_);
    h_ = {};
  }

 private:
  Instance* lnet_ = nullptr;
  MdHandle h_;
};

}  // namespace lnet
