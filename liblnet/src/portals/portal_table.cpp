// Match entries, memory descriptors and their events: attach/insert/unlink, matching of
// incoming messages, lazy-portal queueing, and per-MD serialised event delivery.
#include "portals/portal_table.hpp"

#include <cerrno>
#include <climits>

#include <lnet/lnd/pool.hpp>
#include <lnet/mutex.hpp>

#include "base/clock.hpp"

namespace lnet::portals {

namespace {
// The portals' own carrier of an UNLINK event (an MD unlinked while idle) or of a
// response's timeout.
struct UnlinkEvent : Delivery {};

}  // namespace

PortalTable::PortalTable(const CptTable& cpts, std::uint64_t interface_cookie)
    : cpts_(cpts),
      iface_cookie_(interface_cookie),
      res_(std::make_unique<Res[]>(cpts.count())),
      portals_(std::make_unique<Portal[]>(kMaxPortals)) {
  for (unsigned i = 0; i < kMaxPortals; ++i) {
    portals_[i].tables.resize(cpts.count());
    portals_[i].home = i % cpts.count();
  }
}

PortalTable::~PortalTable() = default;

int PortalTable::validate(const MdDesc& d) {
  if (d.options & kMdKiov) return -EINVAL;  // page fragments exist only in the kernel
  std::uint64_t total = 0;
  if (d.options & kMdIovec) {
    if (d.iov.size() > kMaxIov) return -EINVAL;
    for (const iovec& v : d.iov) {
      if (v.iov_base == nullptr && v.iov_len > 0) return -EINVAL;
      total += v.iov_len;
    }
  } else {
    if (d.start == nullptr && d.length > 0) return -EINVAL;
    total = d.length;
  }
  if (total > UINT32_MAX) return -EINVAL;
  if (d.threshold < kMdThreshInf) return -EINVAL;
  if ((d.options & kMdMaxSize) && (d.max_size < 0 || static_cast<std::uint64_t>(d.max_size) > total)) {
    return -EINVAL;
  }
  return 0;
}

namespace {
// Pops an object off a per-CPT free list (linked through next_free), or makes one.
template <class T>
T* pool_take(T*& free_list, std::vector<std::unique_ptr<T>>& all) {
  if (T* t = free_list) {
    free_list = t->next_free;
    t->next_free = nullptr;
    return t;
  }
  all.push_back(std::make_unique<T>());
  return all.back().get();
}
template <class T>
void pool_give(T*& free_list, T* t) {
  t->cookie = kInvalidCookie;
  t->next_free = free_list;
  free_list = t;
}
}  // namespace

LibMd* PortalTable::alloc_md(Res& r) { return pool_take(r.md_free, r.mds); }

void PortalTable::free_md(Res& r, LibMd* md, Sink* doomed) {
  // The handler may own LNet objects (an Md, an Me): it is destroyed by the caller
  // after the lock is dropped, never here.
  if (doomed) {
    doomed->handler = std::move(md->handler);
    doomed->eq = std::move(md->eq);
  }
  md->handler = nullptr;
  md->eq.reset();
  md->iov_storage.clear();
  pool_give(r.md_free, md);
}

LibMe* PortalTable::make_me(Res& r, unsigned cpt, unsigned portal, ProcessId id, std::uint64_t bits,
                            std::uint64_t ignore, Unlink unlink) {
  LibMe* me = pool_take(r.me_free, r.mes);
  me->cpt = cpt;
  me->portal = portal;
  me->match_id = id;
  me->match_bits = bits;
  me->ignore_bits = ignore;
  me->unlink = unlink;
  me->md = nullptr;
  me->cookie = r.handles.insert(me, HandleType::Me, cpt);
  return me;
}

PortalTable::Res* PortalTable::res_for(std::uint64_t cookie, HandleType type) {
  unsigned cpt = cookie_cpt(cookie);
  return cookie_is(cookie, type) && cpt < cpts_.count() ? &res_[cpt] : nullptr;
}

void PortalTable::free_me(Res& r, LibMe* me) {
  me->md = nullptr;
  pool_give(r.me_free, me);
}

void PortalTable::fill_md(LibMd* md, const MdDesc& d, Unlink unlink) {
  if (d.options & kMdIovec) {
    md->start = const_cast<iovec*>(d.iov.data());
    md->iov_storage.assign(d.iov.begin(), d.iov.end());
    md->iov = md->iov_storage.data();
    md->niov = static_cast<unsigned>(d.iov.size());
    std::uint64_t total = 0;
    for (const iovec& v : d.iov) total += v.iov_len;
    md->length = static_cast<std::uint32_t>(total);
  } else {
    md->start = d.start;
    md->iov_inline = iovec{d.start, d.length};
    md->iov = &md->iov_inline;
    md->niov = 1;
    md->length = static_cast<std::uint32_t>(d.length);
  }
  md->offset = 0;
  md->max_size = d.max_size;
  md->threshold = d.threshold;
  md->lasting = d.threshold == kMdThreshInf;
  md->options = d.options;
  md->user_ptr = d.user_ptr;
  md->handler = d.handler;
  md->eq = d.eq;
  if (md->eq) md->eq->md_attached();
  md->refcount = 0;
  md->auto_unlink = unlink == Unlink::Unlink;
  md->zombie = md->aborted = md->on_portal = md->dead = md->delivering = false;
  md->me = nullptr;
  md->deferred = {};
}

void PortalTable::fill_md_event(const LibMd* md, Event& ev) const {
  ev.md_handle = MdHandle{md->cookie};
  ev.md_start = md->start;
  ev.md_length = md->length;
  ev.md_niov = md->niov;
  ev.md_threshold = md->threshold;
  ev.md_max_size = md->max_size;
  ev.md_options = md->options;
  ev.md_user_ptr = md->user_ptr;
}

Failure PortalTable::set_kind(unsigned portal, bool unique, InsPos pos) {
  Portal& p = portals_[portal];
  MutexLock g(p.mutex);
  Kind want = unique ? Kind::Unique : Kind::Wildcard;
  Kind k = p.kind.load(std::memory_order_relaxed);
  if (k == Kind::Unset) {
    if (unique) {
      for (auto& t : p.tables) t = MatchTable(true);
    }
    p.kind.store(want, std::memory_order_release);
    k = want;
  }
  std::string where = "portal " + std::to_string(portal);
  // Request (wildcard) and RDMA (unique) buffers never share a portal.
  if (k != want) {
    return Failure{
        -EPERM, where + (unique ? " is a request portal: a unique ME (exact NID and pid, no ignore bits) does not fit"
                                : " is an RDMA portal: a wildcard ME does not fit")};
  }
  if (unique && pos == InsPos::Before)
    return Failure{-EPERM, where + " is an RDMA portal: MEs cannot be inserted before others"};
  return Failure{0, {}};
}

Result<MeHandle> PortalTable::me_attach(unsigned portal, ProcessId id, std::uint64_t bits, std::uint64_t ignore,
                                        Unlink unlink, InsPos pos) {
  if (portal >= kMaxPortals) return Failure{-EINVAL, "portal " + std::to_string(portal) + " is not below 64"};
  Portal& p = portals_[portal];
  bool unique = !id.nid.is_any() && id.pid != kPidAny && ignore == 0;
  if (Failure f = set_kind(portal, unique, pos); f.code) return f;
  unsigned cpt = unique ? cpts_.of_nid(id.nid) : p.home;
  Res& r = res_[cpt];
  MutexLock g(r.lock);
  LibMe* me = make_me(r, cpt, portal, id, bits, ignore, unlink);
  MatchTable& t = p.tables[cpt];
  if (pos == InsPos::Before)
    t.insert_head(me);
  else
    t.insert_tail(me);
  return MeHandle{me->cookie};
}

Result<MeHandle> PortalTable::me_insert(MeHandle current, ProcessId id, std::uint64_t bits, std::uint64_t ignore,
                                        Unlink unlink, InsPos pos) {
  Res* rp = res_for(current.cookie, HandleType::Me);
  if (!rp) return Failure{-ENOENT, "no such ME"};
  bool unique = !id.nid.is_any() && id.pid != kPidAny && ignore == 0;
  Res& r = *rp;
  unsigned cpt = cookie_cpt(current.cookie);
  MutexLock g(r.lock);
  auto* cur = static_cast<LibMe*>(r.handles.lookup(current.cookie, HandleType::Me));
  if (!cur) return Failure{-ENOENT, "no such ME"};
  Portal& p = portals_[cur->portal];
  if (p.kind.load(std::memory_order_acquire) != Kind::Wildcard || unique) {
    return Failure{-EPERM, "MEs can only be inserted on a request portal, and only wildcard ones"};
  }
  LibMe* me = make_me(r, cpt, cur->portal, id, bits, ignore, unlink);
  MatchTable& t = table_of(cur);
  if (pos == InsPos::Before)
    t.insert_before(cur, me);
  else
    t.insert_after(cur, me);
  return MeHandle{me->cookie};
}

void PortalTable::detach_from_me(Res& r, LibMd* md, bool force) {
  LibMe* me = md->me;
  if (!me) return;
  md->me = nullptr;
  me->md = nullptr;
  if (force || me->unlink == Unlink::Unlink) {
    table_of(me).remove(me);
    r.handles.remove(me->cookie);
    free_me(r, me);
  }
}

bool PortalTable::retire_locked(Res& r, LibMd* md) {
  rsp_detach(r, md);
  detach_from_me(r, md, false);
  r.handles.remove(md->cookie);
  md->dead = true;
  if (md->eq) md->eq->md_detached();
  return md->has_sink();
}

void PortalTable::finish(Delivery* d, Completer& c) {
  if (d->event_only) {
    Pool<UnlinkEvent>::give(static_cast<UnlinkEvent*>(d));
    return;
  }
  c.complete(d);
}

void PortalTable::sink_event(Res& r, LibMd* md, Delivery* msg, Completer& c, const std::function<void()>& before) {
  if (!md->has_sink()) {
    if (md->dead) free_md(r, md);
    r.lock.unlock();
    if (before) before();
    finish(msg, c);
    return;
  }
  if (md->delivering) {
    // Another thread runs this MD's sink: it delivers this event after its own, in order.
    md->deferred.push_back(msg);
    r.lock.unlock();
    if (before) before();
    return;
  }
  md->delivering = true;
  r.lock.unlock();
  if (before) before();
  for (;;) {
    if (md->eq) md->eq->post(msg->ev);
    if (md->handler) md->handler(msg->ev);
    finish(msg, c);
    r.lock.lock();
    msg = md->deferred.pop_front();
    if (!msg) break;
    r.lock.unlock();
  }
  md->delivering = false;
  Sink doomed;
  if (md->dead) free_md(r, md, &doomed);
  r.lock.unlock();
}

void PortalTable::unlink_md_locked(Res& r, LibMd* md, Completer& c, const std::function<void()>& before) {
  md->zombie = md->aborted = true;
  rsp_detach(r, md);  // no response is awaited any more
  if (md->refcount > 0) {
    // In-flight messages finish first; the last one's event says "unlinked" (and
    // -ETIMEDOUT if it went well: finalize_md).
    detach_from_me(r, md, false);
    r.lock.unlock();
    if (before) before();
    return;
  }
  retire_idle_locked(r, md, c, before);
}

void PortalTable::retire_idle_locked(Res& r, LibMd* md, Completer& c, const std::function<void()>& before) {
  if (!retire_locked(r, md)) {
    if (!md->delivering) free_md(r, md);
    r.lock.unlock();
    if (before) before();
    return;
  }
  Delivery* carrier = Pool<UnlinkEvent>::take();
  *carrier = Delivery{};
  carrier->event_only = true;
  fill_md_event(md, carrier->ev);
  carrier->ev.type = EventType::Unlink;
  carrier->ev.unlinked = true;
  sink_event(r, md, carrier, c, before);
}

int PortalTable::me_unlink(MeHandle meh, Completer& c) {
  Res* rp = res_for(meh.cookie, HandleType::Me);
  if (!rp) return -ENOENT;
  Res& r = *rp;
  r.lock.lock();  // unlink_md_locked releases it
  auto* me = static_cast<LibMe*>(r.handles.lookup(meh.cookie, HandleType::Me));
  if (!me) {
    r.lock.unlock();
    return -ENOENT;
  }
  LibMd* md = me->md;
  if (md) {
    detach_from_me(r, md, true);
    unlink_md_locked(r, md, c);
    return 0;
  }
  table_of(me).remove(me);
  r.handles.remove(me->cookie);
  free_me(r, me);
  r.lock.unlock();
  return 0;
}

Result<MdHandle> PortalTable::md_attach(MeHandle meh, const MdDesc& desc, Unlink unlink, DeliveryQueue& matched,
                                        DeliveryQueue& dropped) {
  if (int rc = validate(desc)) return Failure{rc, "invalid memory descriptor"};
  Res* rp = res_for(meh.cookie, HandleType::Me);
  if (!rp) return Failure{-ENOENT, "no such ME"};
  Res& r = *rp;
  unsigned cpt = cookie_cpt(meh.cookie);
  MutexLock g(r.lock);
  auto* me = static_cast<LibMe*>(r.handles.lookup(meh.cookie, HandleType::Me));
  if (!me) return Failure{-ENOENT, "no such ME"};
  if (me->md) return Failure{-EBUSY, "the ME already has an MD"};
  LibMd* md = alloc_md(r);
  fill_md(md, desc, unlink);
  md->cpt = cpt;
  md->on_portal = true;
  md->me = me;
  me->md = md;
  md->cookie = r.handles.insert(md, HandleType::Md, cpt);
  MdHandle h{md->cookie};

  // PUTs waiting on a lazy portal get their chance at the new MD, in arrival order.
  Portal& p = portals_[me->portal];
  MutexLock pg(p.mutex);
  p.attach_gen.fetch_add(1, std::memory_order_release);
  DeliveryQueue keep;
  bool open = true;
  while (Delivery* m = p.delayed.pop_front()) {
    MatchResult res = open ? try_match(me, m->match) : MatchResult{};
    if (res.status == MatchStatus::None) {
      keep.push_back(m);
    } else if (res.status == MatchStatus::Drop) {
      dropped.push_back(m);
    } else {
      commit(r, res, m);
      matched.push_back(m);
      open = !md->zombie;  // exhausted and detached
    }
  }
  p.delayed = keep;
  return h;
}

Result<MdHandle> PortalTable::md_bind(const MdDesc& desc, Unlink unlink) {
  if (int rc = validate(desc)) return Failure{rc, "invalid memory descriptor"};
  if (desc.options & (kMdOpPut | kMdOpGet)) {
    return Failure{-EINVAL, "an MD for sending (bind) cannot take incoming PUT/GET"};
  }
  unsigned cpt = cpts_.current();
  Res& r = res_[cpt];
  MutexLock g(r.lock);
  LibMd* md = alloc_md(r);
  fill_md(md, desc, unlink);
  md->cpt = cpt;
  md->cookie = r.handles.insert(md, HandleType::Md, cpt);
  return MdHandle{md->cookie};
}

int PortalTable::md_unlink(MdHandle mdh, Completer& c) {
  Res* rp = res_for(mdh.cookie, HandleType::Md);
  if (!rp) return -ENOENT;
  Res& r = *rp;
  r.lock.lock();  // unlink_md_locked releases it
  auto* md = static_cast<LibMd*>(r.handles.lookup(mdh.cookie, HandleType::Md));
  if (!md || md->zombie) {  // unlinked already, even if a message still uses it
    r.lock.unlock();
    return -ENOENT;
  }
  unlink_md_locked(r, md, c);
  return 0;
}

int PortalTable::commit_send(MdHandle mdh, Delivery* msg, std::uint32_t max_length, std::int64_t rsp_deadline) {
  Res* rp = res_for(mdh.cookie, HandleType::Md);
  if (!rp) return -ENOENT;
  Res& r = *rp;
  MutexLock g(r.lock);
  auto* md = static_cast<LibMd*>(r.handles.lookup(mdh.cookie, HandleType::Md));
  if (!md || md->threshold == 0 || md->zombie || md->on_portal) return -ENOENT;
  if (md->length > max_length) return -EMSGSIZE;
  if (md->threshold != kMdThreshInf) md->threshold--;
  md->refcount++;
  msg->md = md;
  fill_md_event(md, msg->ev);
  if (rsp_deadline) {
    rsp_attach(r, md, rsp_deadline);
    md->rsp_next_hop.store(Nid::kAnyValue, std::memory_order_relaxed);
    msg->tracked = true;
  }
  return 0;
}

void PortalTable::commit(Res& r, const MatchResult& m, Delivery* msg) {
  if (commit_match(m)) {
    m.md->zombie = true;
    detach_from_me(r, m.md, false);
  }
  msg->md = m.md;
  msg->ev.offset = m.offset;
  msg->ev.mlength = m.mlength;
  fill_md_event(m.md, msg->ev);
}

// Not analysed: the lock is chosen at run time (the CPT of the initiator, then perhaps
// of the source NID), which the analysis cannot follow.
RxMatch PortalTable::match_incoming(Delivery* msg) LNET_NO_THREAD_SAFETY_ANALYSIS {
  const MatchInfo& info = msg->match;
  if (info.portal >= kMaxPortals) return RxMatch::Dropped;
  Portal& p = portals_[info.portal];
  for (;;) {
    // An MD attached between our look and our queueing must see this message: the
    // attach generation (bumped under the portal mutex) tells us to look again.
    std::uint64_t gen = p.attach_gen.load(std::memory_order_acquire);
    Kind kind = p.kind.load(std::memory_order_acquire);
    unsigned cpt = kind == Kind::Unique ? cpts_.of_nid(info.initiator.nid) : p.home;
    std::unique_lock lk(res_[cpt].lock);
    if (p.kind.load(std::memory_order_acquire) != kind) continue;  // the first ME just arrived
    MatchResult m;
    if (kind != Kind::Unset) m = p.tables[cpt].match(info, info.initiator.nid);
    if (m.status == MatchStatus::None && kind == Kind::Unique && !info.source.is_any() &&
        info.source != info.initiator.nid) {
      // Multi-rail: an ME posted for the NID the message came from matches too.
      unsigned cpt2 = cpts_.of_nid(info.source);
      if (cpt2 != cpt) {
        lk.unlock();
        lk = std::unique_lock(res_[cpt2].lock);
        cpt = cpt2;
      }
      m = p.tables[cpt].match(info, info.source);
    }
    if (m.status == MatchStatus::Ok) {
      commit(res_[cpt], m, msg);
      return RxMatch::Matched;
    }
    if (m.status == MatchStatus::Drop) return RxMatch::Dropped;
    // Only PUTs wait on a lazy portal, a bounded number of them, and on the reserved
    // portal only pushes (nothing else could ever match there).
    bool may_wait = info.op == kMdOpPut && (info.portal != kReservedPortal || info.match_bits == kPingMatchBits);
    if (!may_wait || !p.lazy.load(std::memory_order_relaxed)) return RxMatch::Dropped;
    MutexLock pg(p.mutex);
    if (p.attach_gen.load(std::memory_order_relaxed) != gen) continue;
    if (!p.lazy.load(std::memory_order_relaxed) || p.delayed.size() >= kMaxDelayedPerPortal) return RxMatch::Dropped;
    p.delayed.push_back(msg);
    return RxMatch::Delayed;
  }
}

int PortalTable::match_response(Delivery* msg, const WireHandle& wh, bool reply, std::uint32_t rlength,
                                std::uint32_t* mlength) {
  if (wh.interface_cookie != iface_cookie_) return -ENOENT;
  std::uint64_t cookie = wh.object_cookie;
  Res* rp = res_for(cookie, HandleType::Md);
  if (!rp) return -ENOENT;
  Res& r = *rp;
  MutexLock g(r.lock);
  auto* md = static_cast<LibMd*>(r.handles.lookup(cookie, HandleType::Md));
  if (!md || md->threshold == 0 || md->on_portal || md->zombie) return -ENOENT;
  if (md->rsp_deadline) {
    if (coarse_now_ns() >= md->rsp_deadline) return -ETIMEDOUT;  // too late: its timeout is being delivered
    rsp_detach(r, md);
  }
  if (reply) {
    if (rlength > md->length && !(md->options & kMdTruncate)) return -EMSGSIZE;
    *mlength = rlength < md->length ? rlength : md->length;
  }
  if (md->threshold != kMdThreshInf) md->threshold--;
  md->refcount++;
  msg->md = md;
  fill_md_event(md, msg->ev);
  return 0;
}

void PortalTable::finalize_md(Delivery* msg, Completer& c) {
  LibMd* md = msg->md;
  msg->md = nullptr;
  Res& r = res_[md->cpt];
  r.lock.lock();   // sink_event releases it
  md->refcount--;  // the event keeps the MD as it was when this message took it
  // A request that failed gets no response: its MD stops waiting for one.
  if (msg->tracked && msg->ev.status != 0) rsp_detach(r, md);
  msg->tracked = false;
  // An MD unlinked under it (by the user or a response timeout) ends it as LNet does.
  if (md->aborted && msg->ev.status == 0) msg->ev.status = -ETIMEDOUT;
  if (md->refcount == 0 && !md->dead && (md->zombie || (md->auto_unlink && md->exhausted()))) {
    retire_locked(r, md);
    msg->ev.unlinked = true;
  }
  sink_event(r, md, msg, c);
}

int PortalTable::set_lazy(unsigned portal) {
  if (portal >= kMaxPortals) return -EINVAL;
  Portal& p = portals_[portal];
  MutexLock g(p.mutex);
  p.lazy.store(true, std::memory_order_relaxed);
  return 0;
}

int PortalTable::clear_lazy(unsigned portal, DeliveryQueue& dropped) {
  if (portal >= kMaxPortals) return -EINVAL;
  Portal& p = portals_[portal];
  MutexLock g(p.mutex);
  p.lazy.store(false, std::memory_order_relaxed);
  dropped.splice(p.delayed);
  return 0;
}

void PortalTable::clear_all(DeliveryQueue& dropped, Completer& c) {
  for (unsigned i = 0; i < kMaxPortals; ++i) (void)clear_lazy(i, dropped);
  for (unsigned cpt = 0; cpt < cpts_.count(); ++cpt) {
    Res& r = res_[cpt];
    std::vector<std::uint64_t> mes, mds;
    {
      MutexLock g(r.lock);
      for (auto& me : r.mes)
        if (me->cookie != kInvalidCookie) mes.push_back(me->cookie);
      for (auto& md : r.mds)
        if (md->cookie != kInvalidCookie && !md->dead) mds.push_back(md->cookie);
    }
    for (std::uint64_t c1 : mes) (void)me_unlink(MeHandle{c1}, c);
    for (std::uint64_t c2 : mds) (void)md_unlink(MdHandle{c2}, c);
  }
}

bool PortalTable::md_alive(std::uint64_t cookie) const {
  unsigned cpt = cookie_cpt(cookie);
  if (!cookie_is(cookie, HandleType::Md) || cpt >= cpts_.count()) return false;
  Res& r = res_[cpt];
  MutexLock g(r.lock);
  return r.handles.lookup(cookie, HandleType::Md) != nullptr;
}

std::size_t PortalTable::live_mds() const {
  std::size_t n = 0;
  for (unsigned cpt = 0; cpt < cpts_.count(); ++cpt) {
    MutexLock g(res_[cpt].lock);
    for (auto& md : res_[cpt].mds) n += md->cookie != kInvalidCookie;
  }
  return n;
}

std::size_t PortalTable::live_mes() const {
  std::size_t n = 0;
  for (unsigned cpt = 0; cpt < cpts_.count(); ++cpt) {
    MutexLock g(res_[cpt].lock);
    for (auto& me : res_[cpt].mes) n += me->cookie != kInvalidCookie;
  }
  return n;
}

}  // namespace lnet::portals
