// ibmock (ibmock.hpp): libibverbs' and librdmacm's calls as the o2ib driver makes them,
// in process. One mutex guards everything; work is carried out when it is posted.
#include "ibmock.hpp"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#undef ibv_reg_mr  // a macro over ibv_reg_mr_iova2 in rdma-core's header; both are given here

namespace {

constexpr int kRejConsumerDefined = 28;  // IB CM: a reject with the consumer's private data
constexpr int kRejInvalidServiceId = 8;  // IB CM: no listener on that service
constexpr int kRejTimeout = 26;          // IB CM: the other side's id went before an answer
// The private data the CM hands up: the whole area of its message, zero-padded (a
// request's on the TCP port space, a reply's, a reject's).
constexpr std::size_t kReqData = 56, kRepData = 196, kRejData = 148;

int mock_poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
int mock_req_notify_cq(ibv_cq* cq, int solicited_only);
int mock_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int mock_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);

struct Device {
  std::uint32_t ip = 0;
  ibv_device dev{};
  ibv_context ctx{};
};

struct Channel {
  rdma_event_channel ch{};
  std::deque<rdma_cm_event*> q;
};

struct Event {
  rdma_cm_event ev{};
  std::vector<std::uint8_t> data;
};

enum class State { Idle, Connecting, Connected, Gone };

struct Id {
  rdma_cm_id id{};
  Channel* channel = nullptr;
  bool bound = false;
  bool listening = false;
  bool active = false;     // it asked (rdma_connect)
  Id* listener = nullptr;  // passive: the listener its request came to
  Id* peer = nullptr;
  State state = State::Idle;
};

struct CompChannel {
  ibv_comp_channel ch{};
  ibv_cq* cq = nullptr;
  unsigned pending = 0;
};

struct Cq {
  ibv_cq cq{};
  std::deque<ibv_wc> wcs;
  bool armed = false;
};

struct Recv {
  std::uint64_t wr_id;
  ibv_sge sge;
};

struct Qp {
  ibv_qp qp{};
  Id* id = nullptr;
  std::deque<Recv> recvs;
  bool error = false;
  unsigned max_send_sge = 0;
};

struct Mr {
  ibv_mr mr{};
  int access = 0;
};

struct World {
  std::mutex m;
  std::map<std::uint32_t, std::unique_ptr<Device>> devices;
  std::map<const rdma_event_channel*, std::unique_ptr<Channel>> channels;
  std::map<const rdma_cm_id*, std::unique_ptr<Id>> ids;
  std::map<const rdma_cm_event*, std::unique_ptr<Event>> events;
  std::map<std::pair<std::uint32_t, std::uint16_t>, Id*> ports;  // bound (and listening) ids
  std::map<const ibv_comp_channel*, std::unique_ptr<CompChannel>> comps;
  std::map<const ibv_cq*, std::unique_ptr<Cq>> cqs;
  std::map<const ibv_qp*, std::unique_ptr<Qp>> qps;
  std::map<const ibv_mr*, std::unique_ptr<Mr>> mrs;
  std::set<const ibv_pd*> pds;
  std::uint32_t next_key = 0x100, next_qpn = 0x20;
  std::uint16_t next_port = 40000;
  ibmock::Stats stats;
};

World& w() {
  static World* world = new World;  // never destroyed: objects may outlive static destruction
  return *world;
}

std::uint32_t ip_of(const sockaddr* a) { return ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr); }
std::uint16_t port_of(const sockaddr* a) { return ntohs(reinterpret_cast<const sockaddr_in*>(a)->sin_port); }

int fail(int err) {
  errno = err;
  return -1;
}

void signal(int fd) {
  std::uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);
}
void drain(int fd) {
  std::uint64_t n;
  (void)!::read(fd, &n, sizeof n);
}

// ---- CM events (the world's mutex held)

void post_event(Id& id, rdma_cm_event_type type, int status = 0, const void* data = nullptr, std::size_t len = 0,
                Id* listener = nullptr, std::size_t area = 0) {
  Channel* ch = listener ? listener->channel : id.channel;
  auto e = std::make_unique<Event>();
  e->ev.id = &id.id;
  e->ev.listen_id = listener ? &listener->id : nullptr;
  e->ev.event = type;
  e->ev.status = status;
  if (len) e->data.assign(static_cast<const std::uint8_t*>(data), static_cast<const std::uint8_t*>(data) + len);
  if (e->data.size() < area) e->data.resize(area);
  e->ev.param.conn.private_data = e->data.empty() ? nullptr : e->data.data();
  e->ev.param.conn.private_data_len = static_cast<std::uint8_t>(e->data.size());
  ch->q.push_back(&e->ev);
  w().events[&e->ev] = std::move(e);
  signal(ch->ch.fd);
}

// ---- completions (the world's mutex held)

void complete(ibv_cq* cq, const ibv_wc& wc) {
  Cq& c = *w().cqs.at(cq);
  if (c.wcs.size() >= static_cast<std::size_t>(c.cq.cqe)) ++w().stats.cq_overflows;
  c.wcs.push_back(wc);
  if (c.armed && c.cq.channel) {
    c.armed = false;
    CompChannel& ch = *w().comps.at(c.cq.channel);
    ++ch.pending;
    ++w().stats.notifications;
    signal(ch.ch.fd);
  }
}

ibv_wc wc_of(const Qp& q, std::uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode op, std::uint32_t len = 0) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = status;
  wc.opcode = op;
  wc.byte_len = len;
  wc.qp_num = q.qp.qp_num;
  return wc;
}

// The queue pair to the error state: what is posted on it completes flushed.
void flush(Qp& q) {
  q.error = true;
  for (const Recv& r : q.recvs) complete(q.qp.recv_cq, wc_of(q, r.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV));
  q.recvs.clear();
}

Qp* qp_of(Id* id) { return id && id->id.qp ? w().qps.at(id->id.qp).get() : nullptr; }

// The registration with `key` holding [addr, addr + len) (remote: by rkey, with remote write).
const Mr* find_mr(std::uint64_t addr, std::size_t len, std::uint32_t key, bool remote) {
  for (const auto& [p, mr] : w().mrs) {
    std::uint64_t lo = reinterpret_cast<std::uint64_t>(mr->mr.addr);
    if ((remote ? mr->mr.rkey : mr->mr.lkey) != key) continue;
    if (remote && !(mr->access & IBV_ACCESS_REMOTE_WRITE)) continue;
    if (addr >= lo && len <= mr->mr.length && addr - lo <= mr->mr.length - len) return mr.get();
  }
  return nullptr;
}

// `id` ends its live connection: its queue pair goes to the error state, and both ends
// hear DISCONNECTED. The other end's queue pair stays as it was until that end
// disconnects too (or moves it to the error state), as with the real CM; work posted
// there meanwhile finds no peer.
void break_connection(Id& id) {
  if (Qp* q = qp_of(&id)) flush(*q);
  for (Id* end : {&id, id.peer}) {
    if (!end || end->state != State::Connected) continue;
    end->state = State::Gone;
    post_event(*end, RDMA_CM_EVENT_DISCONNECTED);
  }
}

// Drops an id's events not yet taken (they go with it).
void purge_events(Id& id) {
  auto& q = id.channel->q;
  for (auto e = q.begin(); e != q.end();) {
    if ((*e)->id == &id.id) {
      w().events.erase(*e);
      e = q.erase(e);
    } else {
      ++e;
    }
  }
  if (q.empty()) drain(id.channel->ch.fd);
}

// One send or RDMA write, carried out now. Returns the status of the requester's completion.
ibv_wc_status carry_out(Qp& q, const ibv_send_wr& wr, std::uint32_t& total) {
  std::vector<std::uint8_t> bytes;
  for (int i = 0; i < wr.num_sge; ++i) {
    const ibv_sge& s = wr.sg_list[i];
    if (!find_mr(s.addr, s.length, s.lkey, false)) return IBV_WC_LOC_PROT_ERR;
    const auto* p = reinterpret_cast<const std::uint8_t*>(s.addr);
    bytes.insert(bytes.end(), p, p + s.length);
  }
  total = static_cast<std::uint32_t>(bytes.size());
  Id* peer = q.id ? q.id->peer : nullptr;
  Qp* pq = peer && peer->state == State::Connected ? qp_of(peer) : nullptr;
  if (!pq || pq->error) return IBV_WC_RETRY_EXC_ERR;
  if (wr.opcode == IBV_WR_RDMA_WRITE) {
    if (!find_mr(wr.wr.rdma.remote_addr, bytes.size(), wr.wr.rdma.rkey, true)) {
      ++w().stats.remote_access;
      return IBV_WC_REM_ACCESS_ERR;
    }
    if (!bytes.empty()) std::memcpy(reinterpret_cast<void*>(wr.wr.rdma.remote_addr), bytes.data(), bytes.size());
    ++w().stats.writes;
    w().stats.write_bytes += bytes.size();
    return IBV_WC_SUCCESS;
  }
  if (pq->recvs.empty()) return IBV_WC_RNR_RETRY_EXC_ERR;
  Recv r = pq->recvs.front();
  pq->recvs.pop_front();
  if (bytes.size() > r.sge.length || !find_mr(r.sge.addr, r.sge.length, r.sge.lkey, false)) {
    complete(pq->qp.recv_cq, wc_of(*pq, r.wr_id, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV));
    return IBV_WC_REM_INV_REQ_ERR;
  }
  if (!bytes.empty()) std::memcpy(reinterpret_cast<void*>(r.sge.addr), bytes.data(), bytes.size());
  ++w().stats.sends;
  complete(pq->qp.recv_cq, wc_of(*pq, r.wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, total));
  return IBV_WC_SUCCESS;
}

int mock_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard g(w().m);
  Qp& q = *w().qps.at(qp);
  for (; wr; wr = wr->next) {
    if (wr->num_sge > static_cast<int>(q.max_send_sge) ||
        (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_RDMA_WRITE)) {
      *bad = wr;
      return EINVAL;
    }
    ibv_wc_opcode op = wr->opcode == IBV_WR_SEND ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;
    std::uint32_t total = 0;
    ibv_wc_status st = q.error ? IBV_WC_WR_FLUSH_ERR : carry_out(q, *wr, total);
    if (st != IBV_WC_SUCCESS && st != IBV_WC_WR_FLUSH_ERR) {
      // An error breaks the queue pair (and the responder's, for what it refused).
      flush(q);
      Id* peer = q.id ? q.id->peer : nullptr;
      if (Qp* pq = peer ? qp_of(peer) : nullptr; pq && st != IBV_WC_RETRY_EXC_ERR) flush(*pq);
    }
    if (st != IBV_WC_SUCCESS || (wr->send_flags & IBV_SEND_SIGNALED))
      complete(q.qp.send_cq, wc_of(q, wr->wr_id, st, op));  // byte_len: none (mlx5 leaves it unset)
  }
  return 0;
}

int mock_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard g(w().m);
  Qp& q = *w().qps.at(qp);
  for (; wr; wr = wr->next) {
    if (wr->num_sge != 1) {
      *bad = wr;
      return EINVAL;
    }
    if (q.error)
      complete(q.qp.recv_cq, wc_of(q, wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV));
    else
      q.recvs.push_back(Recv{wr->wr_id, wr->sg_list[0]});
  }
  return 0;
}

int mock_poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  std::lock_guard g(w().m);
  Cq& c = *w().cqs.at(cq);
  int got = 0;
  for (; got < n && !c.wcs.empty(); ++got) {
    wc[got] = c.wcs.front();
    c.wcs.pop_front();
  }
  return got;
}

int mock_req_notify_cq(ibv_cq* cq, int) {
  std::lock_guard g(w().m);
  w().cqs.at(cq)->armed = true;
  return 0;
}

Id& id_at(rdma_cm_id* id) { return *w().ids.at(id); }

void bind_port(Id& id, std::uint32_t ip, std::uint16_t port) {
  id.id.route.addr.src_sin.sin_family = AF_INET;
  id.id.route.addr.src_sin.sin_addr.s_addr = htonl(ip);
  id.id.route.addr.src_sin.sin_port = htons(port);
  id.id.verbs = &w().devices.at(ip)->ctx;
  id.bound = true;
  if (port) w().ports[{ip, port}] = &id;
}

}  // namespace

namespace ibmock {

void add_device(std::uint32_t ip) {
  std::lock_guard g(w().m);
  auto d = std::make_unique<Device>();
  d->ip = ip;
  std::snprintf(d->dev.name, sizeof d->dev.name, "mock%u", ip & 0xff);
  d->ctx.device = &d->dev;
  d->ctx.ops.poll_cq = mock_poll_cq;
  d->ctx.ops.req_notify_cq = mock_req_notify_cq;
  d->ctx.ops.post_send = mock_post_send;
  d->ctx.ops.post_recv = mock_post_recv;
  w().devices[ip] = std::move(d);
}

void reset() {
  std::lock_guard g(w().m);
  w().devices.clear();
  w().stats = Stats{};
}

Stats stats() {
  std::lock_guard g(w().m);
  Stats s = w().stats;
  s.ids = w().ids.size();
  s.channels = w().channels.size();
  s.qps = w().qps.size();
  s.cqs = w().cqs.size();
  s.mrs = w().mrs.size();
  s.pds = w().pds.size();
  s.comp_channels = w().comps.size();
  return s;
}

}  // namespace ibmock

// ---------------------------------------------------------------- libibverbs

ibv_device** ibv_get_device_list(int* num) {
  std::lock_guard g(w().m);
  auto** list = new ibv_device*[w().devices.size() + 1];
  std::size_t i = 0;
  for (auto& [ip, d] : w().devices) list[i++] = &d->dev;
  list[i] = nullptr;
  if (num) *num = static_cast<int>(i);
  return list;
}

void ibv_free_device_list(ibv_device** list) { delete[] list; }

ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  std::lock_guard g(w().m);
  auto* pd = new ibv_pd{};
  pd->context = ctx;
  w().pds.insert(pd);
  return pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  std::lock_guard g(w().m);
  for (const auto& [p, mr] : w().mrs)
    if (mr->mr.pd == pd) return ++w().stats.misuse, EBUSY;
  w().pds.erase(pd);
  delete pd;
  return 0;
}

ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
  std::lock_guard g(w().m);
  auto c = std::make_unique<CompChannel>();
  c->ch.context = ctx;
  c->ch.fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ibv_comp_channel* p = &c->ch;
  w().comps[p] = std::move(c);
  return p;
}

int ibv_destroy_comp_channel(ibv_comp_channel* ch) {
  std::lock_guard g(w().m);
  auto it = w().comps.find(ch);
  if (it == w().comps.end()) return EINVAL;
  if (it->second->cq) return ++w().stats.misuse, EBUSY;
  ::close(ch->fd);
  w().comps.erase(it);
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel, int) {
  std::lock_guard g(w().m);
  auto c = std::make_unique<Cq>();
  c->cq.context = ctx;
  c->cq.channel = channel;
  c->cq.cq_context = cq_context;
  c->cq.cqe = cqe;
  ibv_cq* p = &c->cq;
  if (channel) w().comps.at(channel)->cq = p;
  w().cqs[p] = std::move(c);
  return p;
}

int ibv_resize_cq(ibv_cq* cq, int cqe) {
  std::lock_guard g(w().m);
  if (static_cast<std::size_t>(cqe) < w().cqs.at(cq)->wcs.size()) return EINVAL;
  cq->cqe = cqe;
  return 0;
}

int ibv_destroy_cq(ibv_cq* cq) {
  std::lock_guard g(w().m);
  for (const auto& [p, q] : w().qps)
    if (q->qp.send_cq == cq || q->qp.recv_cq == cq) return ++w().stats.misuse, EBUSY;
  if (cq->channel) w().comps.at(cq->channel)->cq = nullptr;
  w().cqs.erase(cq);
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  std::lock_guard g(w().m);
  CompChannel& c = *w().comps.at(channel);
  if (c.pending == 0 || !c.cq) return fail(EAGAIN);
  if (--c.pending == 0) drain(c.ch.fd);
  *cq = c.cq;
  *cq_context = c.cq->cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq*, unsigned int) {}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t, unsigned int access) {
  std::lock_guard g(w().m);
  if (!w().pds.count(pd)) {
    errno = EINVAL;
    return nullptr;
  }
  auto m = std::make_unique<Mr>();
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.lkey = w().next_key++;
  m->mr.rkey = w().next_key++;
  m->access = static_cast<int>(access);
  ibv_mr* p = &m->mr;
  w().mrs[p] = std::move(m);
  return p;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<std::uintptr_t>(addr), static_cast<unsigned>(access));
}

int ibv_dereg_mr(ibv_mr* mr) {
  std::lock_guard g(w().m);
  return w().mrs.erase(mr) ? 0 : EINVAL;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  std::lock_guard g(w().m);
  if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_ERR) flush(*w().qps.at(qp));
  return 0;
}

// ---------------------------------------------------------------- librdmacm

rdma_event_channel* rdma_create_event_channel() {
  std::lock_guard g(w().m);
  auto c = std::make_unique<Channel>();
  c->ch.fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  rdma_event_channel* p = &c->ch;
  w().channels[p] = std::move(c);
  return p;
}

void rdma_destroy_event_channel(rdma_event_channel* ch) {
  std::lock_guard g(w().m);
  auto it = w().channels.find(ch);
  if (it == w().channels.end()) return;
  for (const auto& [p, id] : w().ids)
    if (id->channel == it->second.get()) {
      ++w().stats.misuse;  // ids still on it: kept, as the real library refuses
      return;
    }
  for (rdma_cm_event* e : it->second->q) w().events.erase(e);
  ::close(ch->fd);
  w().channels.erase(it);
}

int rdma_create_id(rdma_event_channel* ch, rdma_cm_id** out, void* context, rdma_port_space ps) {
  std::lock_guard g(w().m);
  auto id = std::make_unique<Id>();
  id->channel = w().channels.at(ch).get();
  id->id.channel = ch;
  id->id.context = context;
  id->id.ps = ps;
  id->id.qp_type = IBV_QPT_RC;
  *out = &id->id;
  w().ids[*out] = std::move(id);
  return 0;
}

int rdma_bind_addr(rdma_cm_id* cm, sockaddr* addr) {
  std::lock_guard g(w().m);
  Id& id = id_at(cm);
  std::uint32_t ip = ip_of(addr);
  std::uint16_t port = port_of(addr);
  if (addr->sa_family != AF_INET || !w().devices.count(ip)) return fail(EADDRNOTAVAIL);
  if (id.bound) return fail(EINVAL);
  if (port && w().ports.count({ip, port})) return fail(EADDRINUSE);
  bind_port(id, ip, port);
  return 0;
}

int rdma_listen(rdma_cm_id* cm, int) {
  std::lock_guard g(w().m);
  Id& id = id_at(cm);
  if (!id.bound || id.id.route.addr.src_sin.sin_port == 0) return fail(EINVAL);
  id.listening = true;
  return 0;
}

int rdma_resolve_addr(rdma_cm_id* cm, sockaddr* src, sockaddr* dst, int) {
  std::lock_guard g(w().m);
  Id& id = id_at(cm);
  if (src) {
    std::uint32_t ip = ip_of(src);
    if (id.bound || !w().devices.count(ip)) return fail(EINVAL);
    bind_port(id, ip, w().next_port++);
  }
  if (!id.bound) return fail(EINVAL);
  id.id.route.addr.dst_sin = *reinterpret_cast<const sockaddr_in*>(dst);
  post_event(id, w().devices.count(ip_of(dst)) ? RDMA_CM_EVENT_ADDR_RESOLVED : RDMA_CM_EVENT_ADDR_ERROR,
             w().devices.count(ip_of(dst)) ? 0 : -EHOSTUNREACH);
  return 0;
}

int rdma_resolve_route(rdma_cm_id* cm, int) {
  std::lock_guard g(w().m);
  post_event(id_at(cm), RDMA_CM_EVENT_ROUTE_RESOLVED);
  return 0;
}

int rdma_create_qp(rdma_cm_id* cm, ibv_pd* pd, ibv_qp_init_attr* attr) {
  std::lock_guard g(w().m);
  Id& id = id_at(cm);
  if (!id.id.verbs || id.id.qp || !w().pds.count(pd) || attr->qp_type != IBV_QPT_RC) return fail(EINVAL);
  auto q = std::make_unique<Qp>();
  q->qp.context = id.id.verbs;
  q->qp.pd = pd;
  q->qp.send_cq = attr->send_cq;
  q->qp.recv_cq = attr->recv_cq;
  q->qp.qp_num = w().next_qpn++;
  q->qp.qp_type = IBV_QPT_RC;
  q->qp.state = IBV_QPS_INIT;
  q->id = &id;
  q->max_send_sge = attr->cap.max_send_sge;
  id.id.qp = &q->qp;
  w().qps[&q->qp] = std::move(q);
  return 0;
}

void rdma_destroy_qp(rdma_cm_id* cm) {
  std::lock_guard g(w().m);
  Id& id = id_at(cm);
  if (!id.id.qp) return;
  w().qps.erase(id.id.qp);
  id.id.qp = nullptr;
}

int rdma_connect(rdma_cm_id* cm, rdma_conn_param* param) {
  std::lock_guard g(w().m);
  Id& id = id_at(cm);
  if (!id.id.qp || id.state != State::Idle) return fail(EINVAL);
  w().stats.last_retry_count = param->retry_count;
  w().stats.last_rnr_retry_count = param->rnr_retry_count;
  const sockaddr* dst = &id.id.route.addr.dst_addr;
  auto it = w().ports.find({ip_of(dst), port_of(dst)});
  if (it == w().ports.end() || !it->second->listening) {
    ++w().stats.rejects;
    post_event(id, RDMA_CM_EVENT_REJECTED, kRejInvalidServiceId, nullptr, 0, nullptr, kRejData);
    return 0;
  }
  Id& listener = *it->second;
  auto passive = std::make_unique<Id>();
  passive->channel = listener.channel;
  passive->id.channel = listener.id.channel;
  passive->id.context = listener.id.context;
  passive->id.ps = listener.id.ps;
  passive->id.qp_type = IBV_QPT_RC;
  passive->id.verbs = listener.id.verbs;
  passive->id.route.addr.src_sin = listener.id.route.addr.src_sin;
  passive->id.route.addr.dst_sin = id.id.route.addr.src_sin;
  passive->bound = true;
  passive->listener = &listener;
  passive->peer = &id;
  passive->state = State::Connecting;
  id.peer = passive.get();
  id.state = State::Connecting;
  id.active = true;
  Id& p = *passive;
  w().ids[&passive->id] = std::move(passive);
  post_event(p, RDMA_CM_EVENT_CONNECT_REQUEST, 0, param->private_data, param->private_data_len, &listener, kReqData);
  return 0;
}

int rdma_accept(rdma_cm_id* cm, rdma_conn_param* param) {
  std::lock_guard g(w().m);
  Id& id = id_at(cm);
  if (!id.id.qp || id.state != State::Connecting || !id.peer || id.peer->state != State::Connecting)
    return fail(EINVAL);
  Id& active = *id.peer;
  id.state = active.state = State::Connected;
  id.id.qp->state = active.id.qp->state = IBV_QPS_RTS;
  post_event(active, RDMA_CM_EVENT_ESTABLISHED, 0, param ? param->private_data : nullptr,
             param ? param->private_data_len : 0, nullptr, kRepData);
  post_event(id, RDMA_CM_EVENT_ESTABLISHED);
  return 0;
}

int rdma_reject(rdma_cm_id* cm, const void* data, uint8_t len) {
  std::lock_guard g(w().m);
  Id& id = id_at(cm);
  if (id.state != State::Connecting || !id.peer) return fail(EINVAL);
  Id& active = *id.peer;
  active.peer = nullptr;
  active.state = State::Gone;
  id.peer = nullptr;
  id.state = State::Gone;
  ++w().stats.rejects;
  post_event(active, RDMA_CM_EVENT_REJECTED, kRejConsumerDefined, data, len, nullptr, kRejData);
  return 0;
}

int rdma_disconnect(rdma_cm_id* cm) {
  std::lock_guard g(w().m);
  Id& id = id_at(cm);
  if (id.state == State::Gone) {  // the peer's disconnect answered: our queue pair to the error state
    if (Qp* q = qp_of(&id)) flush(*q);
    return 0;
  }
  if (id.state != State::Connected) return fail(EINVAL);
  break_connection(id);
  return 0;
}

int rdma_destroy_id(rdma_cm_id* cm) {
  std::lock_guard g(w().m);
  auto it = w().ids.find(cm);
  if (it == w().ids.end()) return fail(EINVAL);
  Id& id = *it->second;
  if (id.id.qp) {
    ++w().stats.misuse;
    return fail(EBUSY);  // rdma_destroy_qp first
  }
  if (id.state == State::Connected) {
    break_connection(id);  // the peer hears it is over, as when a node goes
  } else if (id.peer && id.peer->state == State::Connecting) {
    // A request not yet answered: the CM rejects it for the side still waiting.
    Id& other = *id.peer;
    other.state = State::Gone;
    post_event(other, RDMA_CM_EVENT_REJECTED, kRejTimeout, nullptr, 0, nullptr, kRejData);
  }
  if (id.peer) id.peer->peer = nullptr;
  if (id.listening) {
    // Requests it has not handed up yet go with it: their askers are refused.
    std::vector<Id*> unheard;
    for (rdma_cm_event* e : id.channel->q)
      if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST && e->listen_id == cm) unheard.push_back(&id_at(e->id));
    for (Id* p : unheard) {
      if (p->peer) {
        p->peer->state = State::Gone;
        p->peer->peer = nullptr;
        post_event(*p->peer, RDMA_CM_EVENT_REJECTED, kRejTimeout, nullptr, 0, nullptr, kRejData);
      }
      purge_events(*p);
      w().ids.erase(&p->id);
    }
  }
  for (auto p = w().ports.begin(); p != w().ports.end();) p = p->second == &id ? w().ports.erase(p) : std::next(p);
  purge_events(id);
  w().ids.erase(it);
  return 0;
}

int rdma_get_cm_event(rdma_event_channel* ch, rdma_cm_event** out) {
  std::lock_guard g(w().m);
  Channel& c = *w().channels.at(ch);
  if (c.q.empty()) return fail(EAGAIN);
  *out = c.q.front();
  c.q.pop_front();
  if (c.q.empty()) drain(ch->fd);
  return 0;
}

int rdma_ack_cm_event(rdma_cm_event* ev) {
  std::lock_guard g(w().m);
  return w().events.erase(ev) ? 0 : fail(EINVAL);
}
