// The classic C API over one process-wide lnet::Instance.
#include <lnet/lnet.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include <lnet/api.hpp>
#include <lnet/capi.hpp>
#include <lnet/control.hpp>
#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

using namespace lnet;

namespace {

Mutex g_init_mutex;
int g_refs LNET_GUARDED_BY(g_init_mutex) = 0;
std::unique_ptr<Instance> g_owner LNET_GUARDED_BY(g_init_mutex);
std::atomic<Instance*> g_inst{nullptr};

Mutex g_eq_mutex;
std::unordered_map<__u64, std::shared_ptr<EventQueue>> g_eqs LNET_GUARDED_BY(g_eq_mutex);
__u64 g_next_eq LNET_GUARDED_BY(g_eq_mutex) = 1;

Instance* inst() { return g_inst.load(std::memory_order_acquire); }

// The C API keeps the classic 64-bit lnet_nid_t: a value whose top byte is set is no NID
// (-EINVAL where one is given), and a large NID (IPv6) is not given out (LNET_NID_ANY in
// events, -EOVERFLOW where it is asked for).
bool fits(lnet_nid_t nid) { return Nid::fits_nid4(nid); }
ProcessId to_id(lnet_process_id id) { return ProcessId{Nid(id.nid), id.pid}; }
lnet_nid_t nid4(Nid n) { return n.is_large() ? Nid::any().value() : n.value(); }
lnet_process_id to_c(ProcessId id) { return lnet_process_id{nid4(id.nid), id.pid}; }

std::shared_ptr<EventQueue> find_eq(lnet_handle_eq h) {
  MutexLock g(g_eq_mutex);
  auto it = g_eqs.find(h.cookie);
  return it == g_eqs.end() ? nullptr : it->second;
}

void to_c_event(const Event& e, __u64 eq_cookie, lnet_event* out) {
  std::memset(out, 0, sizeof *out);
  out->target = to_c(e.target);
  out->initiator = to_c(e.initiator);
  out->source = to_c(e.source);
  out->sender = nid4(e.sender);
  out->type = static_cast<lnet_event_kind>(e.type);
  out->pt_index = e.pt_index;
  out->match_bits = e.match_bits;
  out->rlength = e.rlength;
  out->mlength = e.mlength;
  out->md_handle.cookie = e.md_handle.cookie;
  out->md.start = e.md_start;
  out->md.length = (e.md_options & kMdIovec) ? e.md_niov : e.md_length;
  out->md.threshold = e.md_threshold;
  out->md.max_size = e.md_max_size;
  out->md.options = e.md_options;
  out->md.user_ptr = e.md_user_ptr;
  out->md.eq_handle.cookie = eq_cookie;
  out->md.bulk_handle.cookie = kInvalidCookie;
  out->hdr_data = e.hdr_data;
  out->msg_type = static_cast<__u32>(e.msg_type);
  out->status = e.status;
  out->unlinked = e.unlinked;
  out->offset = e.offset;
  out->sequence = static_cast<unsigned long>(e.sequence);
}

int to_desc(const lnet_md& md, MdDesc& d) {
  if (md.options & LNET_MD_BULK_HANDLE) return -EOPNOTSUPP;  // not supported: bulk handles
  d.options = md.options;
  if (md.options & LNET_MD_IOVEC) {
    if (md.length > LNET_MAX_IOV || (md.length > 0 && md.start == nullptr)) return -EINVAL;
    d.iov = std::span<const iovec>(static_cast<const iovec*>(md.start), md.length);
  } else {
    d.start = md.start;
    d.length = md.length;
  }
  d.threshold = md.threshold;
  d.max_size = md.max_size;
  d.user_ptr = md.user_ptr;
  if (!LNetEQHandleIsInvalid(md.eq_handle)) {
    d.eq = find_eq(md.eq_handle);
    if (!d.eq) return -ENOENT;
  }
  return 0;
}

std::chrono::milliseconds to_timeout(signed long t) {
  if (t < 0 || t == LONG_MAX) return std::chrono::milliseconds(-1);
  return std::chrono::milliseconds(t);
}

char* ring_buffer() {
  thread_local char bufs[8][64];
  thread_local unsigned next = 0;
  return bufs[next++ % 8];
}

// The C API never lets an exception out: allocation failures become `on_error`
// (-ENOMEM for int-returning calls).
template <class R, class F>
R guarded(R on_error, F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return on_error;
  }
}

// A call on the initialised instance: -ENETDOWN before LNetNIInit.
template <class F>
int with_lnet(F&& f) noexcept {
  return guarded<int>(-ENOMEM, [&]() -> int {
    Instance* l = inst();
    return l ? f(*l) : -ENETDOWN;
  });
}

char* keep(const std::string& s) {
  char* b = ring_buffer();
  std::snprintf(b, 64, "%s", s.c_str());
  return b;
}

}  // namespace

namespace lnet::capi {

int attach(Instance* lnet) {
  MutexLock g(g_init_mutex);
  if (g_refs > 0) return -EALREADY;
  g_inst.store(lnet, std::memory_order_release);
  g_refs = 1;
  return 0;
}

void detach() {
  MutexLock g(g_init_mutex);
  g_refs = 0;
  g_inst.store(nullptr, std::memory_order_release);
  g_owner.reset();
  MutexLock eg(g_eq_mutex);
  g_eqs.clear();
}

}  // namespace lnet::capi

extern "C" {

int LNetNIInit(lnet_pid_t requested_pid) {
  return guarded<int>(-ENOMEM, [&]() -> int {
    MutexLock g(g_init_mutex);
    if (g_refs > 0) return g_refs++;
    auto cfg = Config::from_env();
    if (!cfg) {
      LNET_LOG(Error, kLogCore, "LNetNIInit: %s", cfg.message().c_str());
      return cfg.code();
    }
    auto created = Instance::create(*cfg, requested_pid);
    if (!created) {
      LNET_LOG(Error, kLogCore, "LNetNIInit: %s", created.message().c_str());
      return created.code();
    }
    g_owner = std::move(*created);
    g_inst.store(g_owner.get(), std::memory_order_release);
    g_refs = 1;
    return 0;
  });
}

int LNetNIFini(void) {
  return guarded<int>(-ENOMEM, [&]() -> int {
    MutexLock g(g_init_mutex);
    if (g_refs == 0) return -ENETDOWN;
    if (--g_refs > 0) return 0;
    g_inst.store(nullptr, std::memory_order_release);
    g_owner.reset();
    MutexLock eg(g_eq_mutex);
    g_eqs.clear();
    return 0;
  });
}

int LNetGetId(unsigned int index, struct lnet_process_id* id) {
  return with_lnet([&](Instance& l) -> int {
    if (!id) return -EINVAL;
    auto nids = l.nids();
    if (index >= nids.size()) return -ENOENT;
    if (nids[index].is_large()) {
      LNET_LOG(Warn, kLogCore, "LNetGetId(%u): %s is a large NID, which lnet_nid_t cannot hold", index,
               nids[index].to_string().c_str());
      return -EOVERFLOW;
    }
    *id = lnet_process_id{nids[index].value(), l.pid()};
    return 0;
  });
}

int LNetDist(lnet_nid_t nid, lnet_nid_t* srcnid, __u32* order) {
  return with_lnet([&](Instance& l) -> int {
    if (!fits(nid)) return -EINVAL;
    Nid src;
    std::uint32_t ord = 0;
    int rc = l.dist(Nid(nid), &src, &ord);
    if (rc >= 0 && src.is_large()) return -EOVERFLOW;
    if (rc >= 0) {
      if (srcnid) *srcnid = src.value();
      if (order) *order = ord;
    }
    return rc;
  });
}

int LNetMEAttach(unsigned int portal, struct lnet_process_id match_id, __u64 match_bits, __u64 ignore_bits,
                 enum lnet_unlink unlink, enum lnet_ins_pos pos, struct lnet_handle_me* handle_out) {
  return with_lnet([&](Instance& l) -> int {
    if (!handle_out || unlink > LNET_UNLINK || pos > LNET_INS_LOCAL || !fits(match_id.nid)) return -EINVAL;
    auto r = l.me_attach(portal, to_id(match_id), match_bits, ignore_bits, static_cast<Unlink>(unlink),
                         static_cast<InsPos>(pos));
    if (!r) return r.code();
    handle_out->cookie = r->cookie;
    return 0;
  });
}

int LNetMEInsert(struct lnet_handle_me current, struct lnet_process_id match_id, __u64 match_bits, __u64 ignore_bits,
                 enum lnet_unlink unlink, enum lnet_ins_pos pos, struct lnet_handle_me* handle_out) {
  return with_lnet([&](Instance& l) -> int {
    if (!handle_out || unlink > LNET_UNLINK || pos > LNET_INS_LOCAL || !fits(match_id.nid)) return -EINVAL;
    auto r = l.me_insert(MeHandle{current.cookie}, to_id(match_id), match_bits, ignore_bits,
                         static_cast<Unlink>(unlink), static_cast<InsPos>(pos));
    if (!r) return r.code();
    handle_out->cookie = r->cookie;
    return 0;
  });
}

int LNetMEUnlink(struct lnet_handle_me current) {
  return with_lnet([&](Instance& l) -> int { return l.me_unlink(MeHandle{current.cookie}); });
}

int LNetMDAttach(struct lnet_handle_me me, struct lnet_md md, enum lnet_unlink unlink,
                 struct lnet_handle_md* handle_out) {
  return with_lnet([&](Instance& l) -> int {
    if (!handle_out || unlink > LNET_UNLINK) return -EINVAL;
    MdDesc d;
    if (int rc = to_desc(md, d)) return rc;
    auto r = l.md_attach(MeHandle{me.cookie}, d, static_cast<Unlink>(unlink));
    if (!r) return r.code();
    handle_out->cookie = r->cookie;
    return 0;
  });
}

int LNetMDBind(struct lnet_md md, enum lnet_unlink unlink, struct lnet_handle_md* handle_out) {
  return with_lnet([&](Instance& l) -> int {
    if (!handle_out || unlink > LNET_UNLINK) return -EINVAL;
    MdDesc d;
    if (int rc = to_desc(md, d)) return rc;
    auto r = l.md_bind(d, static_cast<Unlink>(unlink));
    if (!r) return r.code();
    handle_out->cookie = r->cookie;
    return 0;
  });
}

int LNetMDUnlink(struct lnet_handle_md md) {
  return with_lnet([&](Instance& l) -> int { return l.md_unlink(MdHandle{md.cookie}); });
}

int LNetEQAlloc(unsigned int count, lnet_eq_handler_t handler, struct lnet_handle_eq* handle_out) {
  return with_lnet([&](Instance& l) -> int {
    if (!handle_out || (count == 0 && handler == nullptr) || count > (1U << 24)) return -EINVAL;
    MutexLock g(g_eq_mutex);
    __u64 cookie = g_next_eq++;
    EventQueue::Callback cb;
    if (handler) {
      cb = [handler, cookie](const Event& e) {
        lnet_event ce;
        to_c_event(e, cookie, &ce);
        handler(&ce);
      };
    }
    g_eqs[cookie] = l.make_event_queue(count, std::move(cb));
    handle_out->cookie = cookie;
    return 0;
  });
}

int LNetEQFree(struct lnet_handle_eq eq) {
  return guarded<int>(-ENOMEM, [&]() -> int {
    MutexLock g(g_eq_mutex);
    auto it = g_eqs.find(eq.cookie);
    if (it == g_eqs.end()) return -ENOENT;
    if (it->second->attached_mds() > 0) return -EBUSY;  // an MD still posts to it
    g_eqs.erase(it);
    return 0;
  });
}

int LNetEQPoll(struct lnet_handle_eq* eqs, int neq, signed long timeout, struct lnet_event* event_out, int* which_out) {
  return guarded<int>(-ENOMEM, [&]() -> int {
    if (!eqs || neq < 1 || !event_out) return -EINVAL;
    std::vector<std::shared_ptr<EventQueue>> held;
    std::vector<EventQueue*> qs;
    for (int i = 0; i < neq; ++i) {
      auto q = find_eq(eqs[i]);
      if (!q) return -ENOENT;
      qs.push_back(q.get());
      held.push_back(std::move(q));
    }
    Event e;
    int which = 0;
    int rc = qs.size() == 1 ? qs[0]->poll(e, to_timeout(timeout))
                            : EventQueue::poll_many(qs, to_timeout(timeout), e, &which);
    if (rc != 0) {
      to_c_event(e, eqs[which].cookie, event_out);
      if (which_out) *which_out = which;
    }
    return rc;
  });
}

int LNetEQGet(struct lnet_handle_eq eq, struct lnet_event* event_out) {
  return guarded<int>(-ENOMEM, [&]() -> int {
    int which;
    return LNetEQPoll(&eq, 1, 0, event_out, &which);
  });
}

int LNetEQWait(struct lnet_handle_eq eq, struct lnet_event* event_out) {
  return guarded<int>(-ENOMEM, [&]() -> int {
    int which;
    return LNetEQPoll(&eq, 1, LONG_MAX, event_out, &which);
  });
}

int LNetPut(lnet_nid_t self, struct lnet_handle_md md, enum lnet_ack_req ack, struct lnet_process_id target,
            unsigned int portal, __u64 match_bits, unsigned int offset, __u64 hdr_data) {
  return with_lnet([&](Instance& l) -> int {
    if (ack > LNET_NOACK_REQ || !fits(self) || !fits(target.nid)) return -EINVAL;
    return l.put(Nid(self), MdHandle{md.cookie}, static_cast<AckReq>(ack), to_id(target), portal, match_bits, offset,
                 hdr_data);
  });
}

int LNetGet(lnet_nid_t self, struct lnet_handle_md md, struct lnet_process_id target, unsigned int portal,
            __u64 match_bits, unsigned int offset, bool recovery) {
  return with_lnet([&](Instance& l) -> int {
    if (!fits(self) || !fits(target.nid)) return -EINVAL;
    return l.get(Nid(self), MdHandle{md.cookie}, to_id(target), portal, match_bits, offset, recovery);
  });
}

int LNetSetLazyPortal(int portal) {
  return with_lnet([&](Instance& l) -> int {
    if (portal < 0) return -EINVAL;
    return l.set_lazy_portal(static_cast<unsigned>(portal));
  });
}

int LNetClearLazyPortal(int portal) {
  return with_lnet([&](Instance& l) -> int {
    if (portal < 0) return -EINVAL;
    return l.clear_lazy_portal(static_cast<unsigned>(portal));
  });
}

char* libcfs_nid2str(lnet_nid_t nid) {
  return guarded<char*>(nullptr, [&] { return keep(fits(nid) ? Nid(nid).to_string() : "<?>"); });
}
char* libcfs_net2str(__u32 net) {
  return guarded<char*>(nullptr, [&] { return keep(NetId(net).to_string()); });
}
char* libcfs_id2str(struct lnet_process_id id) {
  return guarded<char*>(nullptr, [&] { return keep(fits(id.nid) ? to_id(id).to_string() : "<?>"); });
}

lnet_nid_t libcfs_str2nid(const char* str) {
  return guarded<lnet_nid_t>(Nid::any().value(), [&]() -> lnet_nid_t {
    auto n = str ? Nid::parse(str) : Result<Nid>(Nid::any());
    return n ? nid4(*n) : Nid::any().value();  // an IPv6 NID does not fit either
  });
}

__u32 libcfs_str2net(const char* str) {
  return guarded<__u32>(NetId::any().value(), [&]() -> __u32 {
    auto n = str ? NetId::parse(str) : Result<NetId>(NetId::any());
    return n ? n->value() : NetId::any().value();
  });
}

int lnet_ping(struct lnet_process_id target, int timeout_ms, struct lnet_process_id* ids_out, int n_ids) {
  return with_lnet([&](Instance& l) -> int {
    if (n_ids < 0 || (n_ids > 0 && !ids_out) || timeout_ms < 0 || !fits(target.nid)) return -EINVAL;
    auto r = l.ping(to_id(target), std::chrono::milliseconds(timeout_ms), static_cast<unsigned>(n_ids > 0 ? n_ids : 1));
    if (!r) return r.code();
    int n = 0;
    for (const NiStatus& ns : r->info.nis) {
      if (ns.nid.is_large()) continue;  // the classic entries only
      if (n < n_ids) ids_out[n] = lnet_process_id{ns.nid.value(), r->info.pid};
      ++n;
    }
    return n;
  });
}

int lnet_add_ni(lnet_nid_t nid, const char* interface) {
  return with_lnet([&](Instance& l) -> int {
    if (!fits(nid) || Nid(nid).is_any() || Nid(nid).is_lo()) return -EINVAL;
    NetConfig nc;
    nc.net = Nid(nid).net();
    nc.nid = Nid(nid);
    if (interface) nc.interfaces.emplace_back(interface);
    auto r = l.control().add_ni(nc);
    if (!r) LNET_LOG(Error, kLogConfig, "lnet_add_ni %s: %s", Nid(nid).to_string().c_str(), r.message().c_str());
    return r ? 0 : r.code();
  });
}

int lnet_del_ni(lnet_nid_t nid) {
  return with_lnet([&](Instance& l) -> int {
    if (!fits(nid) || Nid(nid).is_any()) return -EINVAL;
    Status s = l.control().del_ni(Nid(nid));
    return s ? 0 : s.code();
  });
}

int lnet_add_route(__u32 net, lnet_nid_t gateway, int hops, unsigned int priority) {
  return with_lnet([&](Instance& l) -> int {
    if (!fits(gateway) || Nid(gateway).is_any() || hops < -1 || hops == 0 || hops > 255) return -EINVAL;
    RouteConfig r{NetId(net), Nid(gateway), hops, priority};
    Status s = l.control().add_route(r);
    if (!s)
      LNET_LOG(Error, kLogConfig, "lnet_add_route %s via %s: %s", NetId(net).to_string().c_str(),
               Nid(gateway).to_string().c_str(), s.message().c_str());
    return s ? 0 : s.code();
  });
}

int lnet_del_route(__u32 net, lnet_nid_t gateway) {
  return with_lnet([&](Instance& l) -> int {
    if (!fits(gateway)) return -EINVAL;
    Status s = l.control().del_route(NetId(net), Nid(gateway));
    return s ? 0 : s.code();
  });
}

}  // extern "C"
