// The 64 portals with their match entries, and every MD and ME of an instance, in per-CPT
// resource containers (each with its own lock, handle table and object pool). Request
// portals keep one ordered list of wildcard MEs; RDMA portals hash unique MEs by NID on
// the CPT of that NID. A portal's kind is fixed by its first ME.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <lnet/lnd/header.hpp>
#include <lnet/md.hpp>
#include <lnet/mutex.hpp>
#include <lnet/result.hpp>

#include "base/cpt.hpp"
#include "portals/delivery.hpp"
#include "portals/handle_table.hpp"
#include "portals/match_table.hpp"

namespace lnet::portals {

enum class RxMatch { Matched, Delayed, Dropped };

// PUTs that may wait on one lazy portal before newer ones are dropped: bounds what a
// peer can make us hold.
inline constexpr std::size_t kMaxDelayedPerPortal = 4096;

class PortalTable {
 public:
  PortalTable(const CptTable& cpts, std::uint64_t interface_cookie);
  ~PortalTable();
  PortalTable(const PortalTable&) = delete;
  PortalTable& operator=(const PortalTable&) = delete;

  std::uint64_t interface_cookie() const { return iface_cookie_; }

  Result<MeHandle> me_attach(unsigned portal, ProcessId match_id, std::uint64_t match_bits, std::uint64_t ignore_bits,
                             Unlink unlink, InsPos pos);
  Result<MeHandle> me_insert(MeHandle current, ProcessId match_id, std::uint64_t match_bits, std::uint64_t ignore_bits,
                             Unlink unlink, InsPos pos);
  int me_unlink(MeHandle me, Completer& c);
  // Attaching may match PUTs waiting on a lazy portal: they are returned in `matched`
  // (MD committed, to be received) and `dropped`.
  Result<MdHandle> md_attach(MeHandle me, const MdDesc& desc, Unlink unlink, DeliveryQueue& matched,
                             DeliveryQueue& dropped);
  Result<MdHandle> md_bind(const MdDesc& desc, Unlink unlink);
  int md_unlink(MdHandle md, Completer& c);
  static int validate(const MdDesc& desc);

  // Commits a bound MD to an outgoing PUT/GET: msg gets the MD (its whole payload).
  // -ENOENT: no usable MD; -EMSGSIZE: longer than max_length. With rsp_deadline (steady
  // clock, ns) the MD awaits a response (its ACK or REPLY) until then: one
  // deadline per MD, the latest request's.
  int commit_send(MdHandle mdh, Delivery* msg, std::uint32_t max_length, std::int64_t rsp_deadline = 0);
  // The peer NI a tracked request was handed to (each attempt's).
  static void note_next_hop(Delivery* msg, Nid nid) {
    if (msg->tracked) msg->md->rsp_next_hop.store(nid.value(), std::memory_order_relaxed);
  }
  // Response tracking: every MD whose response is due by now_ns is unlinked as LNet
  // unlinks it (unlink_md_locked: an UNLINK event, or -ETIMEDOUT on the event of the
  // message still using it); no ACK or REPLY event is made up. `expired` is
  // called with the next hop of each such request before its event is delivered (no
  // lock held), so that what it counts is there when the application sees the event
  // (unless another thread is delivering an event of that MD at that very moment).
  void expire_responses(std::int64_t now_ns, Completer& c, const std::function<void(Nid)>& expired);
  // The earliest response deadline (0: none awaited), and how many are awaited.
  std::int64_t next_response_deadline() const;
  std::size_t tracked_responses() const;
  // Matches an incoming PUT/GET described by msg->match. Matched: msg->md is committed and
  // msg->ev.offset/mlength are set. Delayed: queued on its lazy portal.
  RxMatch match_incoming(Delivery* msg);
  // Finds the MD an ACK or REPLY is for and commits it. For a REPLY *mlength is cut to
  // the MD (with kMdTruncate). -ENOENT / -EMSGSIZE: drop the message; -ETIMEDOUT: drop
  // it, it came after its deadline (the MD's timeout event is on its way).
  int match_response(Delivery* msg, const WireHandle& wh, bool reply, std::uint32_t rlength, std::uint32_t* mlength);
  // Detaches a finished message from its MD and delivers msg->ev (status already set) to
  // the MD's handler/queue, then calls c.complete(msg) (maybe later, on the thread that
  // is delivering this MD's events).
  void finalize_md(Delivery* msg, Completer& c);

  // Keeps a committed MD (and its memory) past the end of the message using it, for a
  // driver whose network may still write into it (LndHost::keep_memory): the MD is not
  // retired before md_release(token). The token is never 0.
  std::uintptr_t md_keep(LibMd* md);
  // Gives a kept MD back: retired now if it was unlinked or exhausted meanwhile (its
  // UNLINK event is delivered).
  void md_release(std::uintptr_t token, Completer& c);

  int set_lazy(unsigned portal);
  // Stops queueing; waiting messages are returned to be dropped.
  int clear_lazy(unsigned portal, DeliveryQueue& dropped);
  // Unlinks every ME and MD (shutdown); waiting messages are returned to be dropped.
  void clear_all(DeliveryQueue& dropped, Completer& c);

  // Whether the MD of that handle still exists (not yet retired: its memory is still the
  // MD's).
  bool md_alive(std::uint64_t cookie) const;
  std::size_t live_mds() const;
  std::size_t live_mes() const;

 private:
  enum class Kind : int { Unset, Wildcard, Unique };
  // A CPT's MEs and MDs. Its lock also guards the CPT's match tables and the fields of
  // its MEs and MDs, which the analysis cannot name (the CPT is chosen at run time).
  struct alignas(kCacheLine) Res {
    Mutex lock;
    HandleTable handles LNET_GUARDED_BY(lock);
    LibMd* md_free LNET_GUARDED_BY(lock) = nullptr;
    LibMe* me_free LNET_GUARDED_BY(lock) = nullptr;
    std::vector<std::unique_ptr<LibMd>> mds LNET_GUARDED_BY(lock);
    std::vector<std::unique_ptr<LibMe>> mes LNET_GUARDED_BY(lock);
    // MDs awaiting a response, earliest deadline first.
    LibMd* rsp_head LNET_GUARDED_BY(lock) = nullptr;
    LibMd* rsp_tail LNET_GUARDED_BY(lock) = nullptr;
    std::size_t rsp_count LNET_GUARDED_BY(lock) = 0;
  };
  struct Portal {
    Mutex mutex;  // leaf lock: kind changes, lazy flag, waiting messages
    std::atomic<Kind> kind{Kind::Unset};
    std::atomic<bool> lazy{false};
    DeliveryQueue delayed LNET_GUARDED_BY(mutex);
    std::atomic<std::uint64_t> attach_gen{0};  // MD attaches so far
    std::vector<MatchTable> tables;            // per CPT; a request portal uses tables[home]
    unsigned home = 0;
  };

  Failure set_kind(unsigned portal, bool unique, InsPos pos);  // code 0: fits
  MatchTable& table_of(LibMe* me) { return portals_[me->portal].tables[me->cpt]; }
  struct Sink {
    EventHandler handler;
    std::shared_ptr<EventQueue> eq;
  };
  LibMd* alloc_md(Res& r) LNET_REQUIRES(r.lock);
  // Returns the MD to the pool; its handler and queue move to *doomed (if given).
  void free_md(Res& r, LibMd* md, Sink* doomed = nullptr) LNET_REQUIRES(r.lock);
  LibMe* make_me(Res& r, unsigned cpt, unsigned portal, ProcessId id, std::uint64_t bits, std::uint64_t ignore,
                 Unlink unlink) LNET_REQUIRES(r.lock);
  // The container a handle's cookie points to (nullptr for a malformed cookie).
  Res* res_for(std::uint64_t cookie, HandleType type);
  void free_me(Res& r, LibMe* me) LNET_REQUIRES(r.lock);
  void fill_md(LibMd* md, const MdDesc& d, Unlink unlink);
  void fill_md_event(const LibMd* md, Event& ev) const;
  // Takes the MD off its ME; frees the ME if it was attached with Unlink (or `force`).
  void detach_from_me(Res& r, LibMd* md, bool force) LNET_REQUIRES(r.lock);
  // After a successful match: consume it, and detach an exhausted auto-unlink MD.
  void commit(Res& r, const MatchResult& m, Delivery* msg) LNET_REQUIRES(r.lock);
  void rsp_attach(Res& r, LibMd* md, std::int64_t deadline) LNET_REQUIRES(r.lock);
  void rsp_detach(Res& r, LibMd* md) LNET_REQUIRES(r.lock);
  // Marks an idle MD gone; returns true when its sink wants an UNLINK event.
  bool retire_locked(Res& r, LibMd* md) LNET_REQUIRES(r.lock);
  // Hands a delivery whose event is out to the completer (or back to the pool: an
  // UNLINK carrier).
  static void finish(Delivery* d, Completer& c);
  // Both are called with r.lock held and release it (events are delivered unlocked);
  // `before`, if set, runs once the lock is released and before the event goes out.
  void sink_event(Res& r, LibMd* md, Delivery* msg, Completer& c, const std::function<void()>& before = {})
      LNET_RELEASE(r.lock);
  // Unlinks an MD as LNetMDUnlink does, also when its response timed out: an idle one
  // gets an UNLINK event (status 0, unlinked) now; a busy one none, and the event of its
  // last in-flight message says unlinked (-ETIMEDOUT if it went well). `before` runs
  // once the lock is released, before any event goes out.
  void unlink_md_locked(Res& r, LibMd* md, Completer& c, const std::function<void()>& before = {}) LNET_RELEASE(r.lock);
  // Retires an MD no message uses: its UNLINK event (if it has a sink) is delivered.
  void retire_idle_locked(Res& r, LibMd* md, Completer& c, const std::function<void()>& before = {})
      LNET_RELEASE(r.lock);

  const CptTable& cpts_;
  std::uint64_t iface_cookie_;
  std::unique_ptr<Res[]> res_;
  std::unique_ptr<Portal[]> portals_;
};

}  // namespace lnet::portals
