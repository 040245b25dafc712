// The verbs layer over rdma-core (verbs.hpp): librdmacm for connections, libibverbs for
// the protection domain, registrations, one completion queue per device shared by its
// connections, and the RC queue pairs. One epoll fd stands for the CM event channel and
// the completion channel. Address and route resolution are driven here, inside
// next_event(): the driver sees connection-level events only.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "verbs.hpp"

namespace lnet::o2ib {

namespace {

constexpr int kResolveTimeoutMs = 5000;
constexpr int kCqEntries = 8192;
constexpr int kIbRejConsumerDefined = 28;  // the IB CM's reason for a reject with private data

sockaddr_in ipv4(std::uint32_t ip, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(ip);
  a.sin_port = htons(port);
  return a;
}

std::string dotted(std::uint32_t ip) {
  in_addr a{htonl(ip)};
  char b[INET_ADDRSTRLEN];
  return inet_ntop(AF_INET, &a, b, sizeof b) ? b : "?";
}

Failure errno_failure(const char* what) { return Failure{-errno, std::string(what) + ": " + std::strerror(errno)}; }

WcStatus status_of(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return WcStatus::Success;
    case IBV_WC_WR_FLUSH_ERR: return WcStatus::Flushed;
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR: return WcStatus::RemoteAccess;
    case IBV_WC_LOC_PROT_ERR: return WcStatus::LocalProtection;
    case IBV_WC_LOC_LEN_ERR: return WcStatus::LocalLength;
    default: return WcStatus::RetryExceeded;  // the rest: the peer or the path is gone
  }
}

struct Conn {
  rdma_cm_id* id = nullptr;
  std::uintptr_t context = 0;
  QpAttrs attrs;
  bool privileged = false;
  std::vector<std::uint8_t> private_data;  // a connect's, sent once the route is known
  // Receives posted before the queue pair exists (the progress thread's): posted when it
  // is made, or completed Flushed if it never is.
  std::vector<std::pair<Sge, std::uint64_t>> early;
};

class RdmaProvider final : public Provider {
 public:
  ~RdmaProvider() override;
  Status open(std::uint32_t ip);

  int event_fd() const override { return epfd_; }
  void arm() override;
  Status listen(std::uint16_t port) override;
  Result<EndpointId> connect(std::uint32_t dst_ip, std::uint16_t port, bool privileged, const QpAttrs& attrs,
                             std::span<const std::uint8_t> private_data, std::uintptr_t context) override;
  Status accept(EndpointId ep, const QpAttrs& attrs, std::span<const std::uint8_t> private_data,
                std::uintptr_t context) override;
  Status reject(EndpointId ep, std::span<const std::uint8_t> private_data) override;
  void disconnect(EndpointId ep) override;
  void destroy(EndpointId ep) override;
  bool next_event(CmEvent& out) override;
  Result<MemoryRegion> reg(void* addr, std::size_t len, bool remote_write) override;
  void dereg(const MemoryRegion& mr) override;
  Status post_recv(EndpointId ep, const Sge& sge, std::uint64_t wr_id) override;
  Status post_send(EndpointId ep, const Sge& sge, std::uint64_t wr_id) override;
  Status post_write(EndpointId ep, std::span<const Sge> local, std::uint64_t remote_addr, std::uint32_t rkey,
                    std::uint64_t wr_id) override;
  std::size_t poll(std::span<Completion> out) override;

 private:
  // An endpoint id is its Conn's address: the data path looks nothing up.
  static Conn* conn(EndpointId ep) { return reinterpret_cast<Conn*>(ep); }
  static EndpointId id_of(Conn* c) { return reinterpret_cast<EndpointId>(c); }
  EndpointId add(rdma_cm_id* id, std::uintptr_t context);
  Status post(EndpointId ep, std::span<const Sge> local, ibv_wr_opcode op, std::uint64_t remote_addr,
              std::uint32_t rkey, std::uint64_t wr_id);
  Status make_qp(Conn& c);
  static rdma_conn_param conn_param(const QpAttrs& attrs, std::span<const std::uint8_t> private_data);
  bool translate(rdma_cm_event* ev, CmEvent& out);  // false: handled here, nothing for the driver
  void connect_request(rdma_cm_event* ev, CmEvent& out);
  Status bind_privileged(rdma_cm_id* id);
  // A connection that failed before it was up: every receive posted on it completes
  // Flushed (the queue pair to the error state, the early ones completed here).
  void flush(Conn& c);

  std::mutex m_;  // conns_ (connect() may come from any thread)
  std::uint32_t ip_ = 0;
  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* anchor_ = nullptr;  // bound to the address: names the device
  rdma_cm_id* listener_ = nullptr;
  ibv_context* verbs_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* comp_ = nullptr;
  ibv_cq* cq_ = nullptr;
  // The CQ is shared by every connection: it grows (ibv_resize_cq) so that it holds the
  // work requests all their queue pairs may have outstanding, as ko2iblnd's CQ per
  // connection does; it never overflows.
  unsigned cq_wrs_ = 0;  // the queue pairs' send + receive depths, summed
  Status grow_cq(unsigned more);
  int epfd_ = -1;
  std::map<Conn*, std::unique_ptr<Conn>> conns_;
  std::map<std::uint32_t, EndpointId> by_qp_;  // the progress thread's only
  std::vector<Completion> soft_;               // flushed early receives, returned by poll()
};

Status RdmaProvider::open(std::uint32_t ip) {
  ip_ = ip;
  if (rdma_device_count() == 0) return Failure{-ENODEV, "no RDMA device on this machine"};
  channel_ = rdma_create_event_channel();
  if (!channel_) return errno_failure("rdma_create_event_channel");
  ::fcntl(channel_->fd, F_SETFL, ::fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
  if (rdma_create_id(channel_, &anchor_, nullptr, RDMA_PS_TCP)) return errno_failure("rdma_create_id");
  sockaddr_in a = ipv4(ip, 0);
  if (rdma_bind_addr(anchor_, reinterpret_cast<sockaddr*>(&a)) || !anchor_->verbs)
    return Failure{-ENODEV, "no RDMA device has address " + dotted(ip)};
  verbs_ = anchor_->verbs;
  pd_ = ibv_alloc_pd(verbs_);
  if (!pd_) return errno_failure("ibv_alloc_pd");
  comp_ = ibv_create_comp_channel(verbs_);
  if (!comp_) return errno_failure("ibv_create_comp_channel");
  ::fcntl(comp_->fd, F_SETFL, ::fcntl(comp_->fd, F_GETFL) | O_NONBLOCK);
  cq_ = ibv_create_cq(verbs_, kCqEntries, nullptr, comp_, 0);
  if (!cq_) return errno_failure("ibv_create_cq");
  if (ibv_req_notify_cq(cq_, 0)) return errno_failure("ibv_req_notify_cq");
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) return errno_failure("epoll_create1");
  for (int fd : {channel_->fd, comp_->fd}) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &e)) return errno_failure("epoll_ctl");
  }
  return {};
}

EndpointId RdmaProvider::add(rdma_cm_id* id, std::uintptr_t context) {
  auto c = std::make_unique<Conn>();
  c->id = id;
  c->context = context;
  Conn* raw = c.get();
  std::lock_guard g(m_);
  conns_[raw] = std::move(c);
  return id_of(raw);
}

RdmaProvider::~RdmaProvider() {
  for (auto& [raw, c] : conns_) {
    if (c->id->qp) rdma_destroy_qp(c->id);
    rdma_destroy_id(c->id);
  }
  if (listener_) rdma_destroy_id(listener_);
  if (cq_) ibv_destroy_cq(cq_);
  if (comp_) ibv_destroy_comp_channel(comp_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (anchor_) rdma_destroy_id(anchor_);
  if (channel_) rdma_destroy_event_channel(channel_);
  if (epfd_ >= 0) ::close(epfd_);
}

void RdmaProvider::arm() {
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  while (ibv_get_cq_event(comp_, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
  (void)ibv_req_notify_cq(cq_, 0);
}

Status RdmaProvider::listen(std::uint16_t port) {
  if (rdma_create_id(channel_, &listener_, nullptr, RDMA_PS_TCP)) return errno_failure("rdma_create_id");
  sockaddr_in a = ipv4(ip_, port);
  if (rdma_bind_addr(listener_, reinterpret_cast<sockaddr*>(&a))) return errno_failure("rdma_bind_addr");
  if (rdma_listen(listener_, 256)) return errno_failure("rdma_listen");
  return {};
}

Status RdmaProvider::bind_privileged(rdma_cm_id* id) {
  for (std::uint16_t port = 1023; port >= 512; --port) {
    sockaddr_in a = ipv4(ip_, port);
    if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a)) == 0) return {};
    if (errno != EADDRINUSE) return errno_failure("rdma_bind_addr");
  }
  return Failure{-EADDRINUSE, "no privileged port free"};
}

Result<EndpointId> RdmaProvider::connect(std::uint32_t dst_ip, std::uint16_t port, bool privileged,
                                         const QpAttrs& attrs, std::span<const std::uint8_t> private_data,
                                         std::uintptr_t context) {
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel_, &id, nullptr, RDMA_PS_TCP)) return errno_failure("rdma_create_id");
  EndpointId ep = add(id, context);
  Conn* c = conn(ep);
  c->attrs = attrs;
  c->private_data.assign(private_data.begin(), private_data.end());
  id->context = c;
  Status s = privileged ? bind_privileged(id) : Status{};
  sockaddr_in src = ipv4(ip_, 0), dst = ipv4(dst_ip, port);
  if (s && rdma_resolve_addr(id, privileged ? nullptr : reinterpret_cast<sockaddr*>(&src),
                             reinterpret_cast<sockaddr*>(&dst), kResolveTimeoutMs))
    s = errno_failure("rdma_resolve_addr");
  if (!s) {
    std::lock_guard g(m_);
    conns_.erase(c);
    rdma_destroy_id(id);
    return s.failure();
  }
  return ep;
}

Status RdmaProvider::make_qp(Conn& c) {
  ibv_qp_init_attr attr{};
  if (Status g = grow_cq(c.attrs.send_wr + c.attrs.recv_wr); !g) return g;
  attr.send_cq = attr.recv_cq = cq_;
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = c.attrs.send_wr;
  attr.cap.max_recv_wr = c.attrs.recv_wr;
  attr.cap.max_send_sge = 2;
  attr.cap.max_recv_sge = 1;
  if (rdma_create_qp(c.id, pd_, &attr)) return errno_failure("rdma_create_qp");
  by_qp_[c.id->qp->qp_num] = id_of(&c);
  std::vector<std::pair<Sge, std::uint64_t>> early = std::move(c.early);
  c.early.clear();
  for (const auto& [sge, wr_id] : early)
    if (Status s = post_recv(id_of(&c), sge, wr_id); !s) return s;
  return {};
}

Status RdmaProvider::grow_cq(unsigned more) {
  cq_wrs_ += more;
  if (cq_wrs_ <= static_cast<unsigned>(cq_->cqe)) return {};
  int want = std::max(2 * cq_->cqe, static_cast<int>(cq_wrs_));
  if (int rc = ibv_resize_cq(cq_, want); rc) {
    cq_wrs_ -= more;
    return Failure{-rc, "ibv_resize_cq to " + std::to_string(want) + " entries: " + std::strerror(rc)};
  }
  return {};
}

void RdmaProvider::flush(Conn& c) {
  if (c.id->qp) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    (void)ibv_modify_qp(c.id->qp, &a, IBV_QP_STATE);
  }
  for (const auto& [sge, wr_id] : c.early)
    soft_.push_back(Completion{id_of(&c), wr_id, WcOp::Recv, WcStatus::Flushed, 0});
  c.early.clear();
}

rdma_conn_param RdmaProvider::conn_param(const QpAttrs& attrs, std::span<const std::uint8_t> private_data) {
  rdma_conn_param p{};
  p.private_data = private_data.data();
  p.private_data_len = static_cast<std::uint8_t>(private_data.size());
  p.responder_resources = 0;  // no RDMA reads or atomics, as ko2iblnd
  p.initiator_depth = 0;
  p.flow_control = 1;
  p.retry_count = attrs.retry_count;
  p.rnr_retry_count = attrs.rnr_retry_count;
  return p;
}

Status RdmaProvider::accept(EndpointId ep, const QpAttrs& attrs, std::span<const std::uint8_t> private_data,
                            std::uintptr_t context) {
  Conn* c = conn(ep);
  c->context = context;
  c->attrs = attrs;
  Status s = make_qp(*c);
  rdma_conn_param p = conn_param(attrs, private_data);
  if (s && rdma_accept(c->id, &p)) s = errno_failure("rdma_accept");
  if (!s) flush(*c);
  return s;
}

Status RdmaProvider::reject(EndpointId ep, std::span<const std::uint8_t> private_data) {
  Conn* c = conn(ep);
  if (rdma_reject(c->id, private_data.data(), static_cast<std::uint8_t>(private_data.size())))
    return errno_failure("rdma_reject");
  return {};
}

void RdmaProvider::disconnect(EndpointId ep) { (void)rdma_disconnect(conn(ep)->id); }

void RdmaProvider::destroy(EndpointId ep) {
  Conn* c = conn(ep);
  if (c->id->qp) {
    cq_wrs_ -= c->attrs.send_wr + c->attrs.recv_wr;
    by_qp_.erase(c->id->qp->qp_num);
    rdma_destroy_qp(c->id);
  }
  rdma_destroy_id(c->id);
  std::lock_guard g(m_);
  conns_.erase(c);
}

namespace {
// The private data an event carries (a CONNREQ, CONNACK or rejection), as much as fits.
void copy_private_data(const rdma_cm_event* ev, CmEvent& out) {
  out.private_len = std::min<std::size_t>(ev->param.conn.private_data_len, kMaxPrivateData);
  if (out.private_len) std::memcpy(out.private_data.data(), ev->param.conn.private_data, out.private_len);
}
}  // namespace

// A connection request: ev->id is the new connection's (its context the listener's).
void RdmaProvider::connect_request(rdma_cm_event* ev, CmEvent& out) {
  EndpointId ep = add(ev->id, 0);
  ev->id->context = conn(ep);
  out.kind = CmEventKind::ConnectRequest;
  out.ep = ep;
  const auto* peer = reinterpret_cast<const sockaddr_in*>(rdma_get_peer_addr(ev->id));
  out.peer_ip = ntohl(peer->sin_addr.s_addr);
  out.peer_port = ntohs(peer->sin_port);
  copy_private_data(ev, out);
}

bool RdmaProvider::translate(rdma_cm_event* ev, CmEvent& out) {
  auto data = [&] { copy_private_data(ev, out); };
  // A connection's id carries its Conn (the listener's and the anchor's carry nothing).
  Conn* c = static_cast<Conn*>(ev->id->context);
  out.ep = c ? id_of(c) : 0;
  out.context = c ? c->context : 0;
  switch (ev->event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(ev->id, kResolveTimeoutMs) == 0) return false;
      out.kind = CmEventKind::Unreachable;
      if (c) flush(*c);
      return c != nullptr;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      if (!c) return false;
      rdma_conn_param p = conn_param(c->attrs, c->private_data);
      if (make_qp(*c) && rdma_connect(ev->id, &p) == 0) return false;
      out.kind = CmEventKind::Unreachable;
      flush(*c);
      return true;
    }
    case RDMA_CM_EVENT_CONNECT_REQUEST: connect_request(ev, out); return true;
    case RDMA_CM_EVENT_ESTABLISHED:
      out.kind = CmEventKind::Established;
      data();
      return c != nullptr;
    case RDMA_CM_EVENT_REJECTED:
      out.kind = CmEventKind::Rejected;
      out.consumer_reject = ev->status == kIbRejConsumerDefined;
      data();
      if (c) flush(*c);
      return c != nullptr;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      out.kind = CmEventKind::Unreachable;
      if (c) flush(*c);
      return c != nullptr;
    case RDMA_CM_EVENT_DISCONNECTED:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      // The CM tells of the peer's disconnect without touching our queue pair: our side
      // disconnects too (answering the peer, as ko2iblnd), which moves the queue pair to
      // the error state, so that what is posted on it completes flushed.
      out.kind = CmEventKind::Disconnected;
      if (c && c->id->qp) (void)rdma_disconnect(ev->id);
      return c != nullptr;
    default: return false;  // TIMEWAIT_EXIT, ADDR_CHANGE, CONNECT_RESPONSE, ...
  }
}

bool RdmaProvider::next_event(CmEvent& out) {
  for (;;) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(channel_, &ev)) return false;  // EAGAIN: none
    out = CmEvent{};
    bool for_driver = translate(ev, out);
    rdma_ack_cm_event(ev);
    if (for_driver) return true;
  }
}

Result<MemoryRegion> RdmaProvider::reg(void* addr, std::size_t len, bool remote_write) {
  int access = IBV_ACCESS_LOCAL_WRITE | (remote_write ? IBV_ACCESS_REMOTE_WRITE : 0);
  ibv_mr* mr = ibv_reg_mr(pd_, addr, len, access);
  if (!mr) return errno_failure("ibv_reg_mr");
  return MemoryRegion{reinterpret_cast<std::uint64_t>(mr), mr->lkey, remote_write ? mr->rkey : 0};
}

void RdmaProvider::dereg(const MemoryRegion& mr) {
  if (mr.id) (void)ibv_dereg_mr(reinterpret_cast<ibv_mr*>(mr.id));
}

Status RdmaProvider::post_recv(EndpointId ep, const Sge& sge, std::uint64_t wr_id) {
  ibv_qp* qp = conn(ep)->id->qp;
  if (!qp) {
    conn(ep)->early.emplace_back(sge, wr_id);
    return {};
  }
  ibv_sge s{sge.addr, sge.len, sge.lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &s;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(qp, &wr, &bad);
  return rc ? Failure{-rc, std::string("ibv_post_recv: ") + std::strerror(rc)} : Status{};
}

Status RdmaProvider::post(EndpointId ep, std::span<const Sge> local, ibv_wr_opcode op, std::uint64_t remote_addr,
                          std::uint32_t rkey, std::uint64_t wr_id) {
  ibv_qp* qp = conn(ep)->id->qp;
  if (!qp) return Failure{-ENOTCONN, "endpoint has no queue pair"};
  if (local.size() > 2) return Failure{-EINVAL, "more than 2 local elements in one work request"};
  ibv_sge sges[2];
  for (std::size_t i = 0; i < local.size(); ++i) sges[i] = ibv_sge{local[i].addr, local[i].len, local[i].lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = sges;
  wr.num_sge = static_cast<int>(local.size());
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.opcode = op;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp, &wr, &bad);
  return rc ? Failure{-rc, std::string("ibv_post_send: ") + std::strerror(rc)} : Status{};
}

Status RdmaProvider::post_send(EndpointId ep, const Sge& sge, std::uint64_t wr_id) {
  return post(ep, std::span(&sge, 1), IBV_WR_SEND, 0, 0, wr_id);
}

Status RdmaProvider::post_write(EndpointId ep, std::span<const Sge> local, std::uint64_t remote_addr,
                                std::uint32_t rkey, std::uint64_t wr_id) {
  return post(ep, local, IBV_WR_RDMA_WRITE, remote_addr, rkey, wr_id);
}

std::size_t RdmaProvider::poll(std::span<Completion> out) {
  ibv_wc wc[32];
  std::size_t n = 0;
  while (n < out.size() && !soft_.empty()) {
    out[n++] = soft_.back();
    soft_.pop_back();
  }
  while (n < out.size()) {
    int got = ibv_poll_cq(cq_, static_cast<int>(std::min<std::size_t>(32, out.size() - n)), wc);
    if (got <= 0) break;
    for (int i = 0; i < got; ++i) {
      Completion& c = out[n++];
      auto it = by_qp_.find(wc[i].qp_num);
      c.ep = it == by_qp_.end() ? 0 : it->second;
      c.wr_id = wc[i].wr_id;
      c.status = status_of(wc[i].status);
      c.op = wc[i].opcode == IBV_WC_RECV         ? WcOp::Recv
             : wc[i].opcode == IBV_WC_RDMA_WRITE ? WcOp::RdmaWrite
                                                 : WcOp::Send;
      c.byte_len = wc[i].byte_len;
    }
  }
  return n;
}

}  // namespace

Result<std::unique_ptr<Provider>> open_rdma(std::uint32_t ip) {
  auto p = std::make_unique<RdmaProvider>();
  if (Status s = p->open(ip); !s) return s.failure();
  return std::unique_ptr<Provider>(std::move(p));
}

int rdma_device_count() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list) ibv_free_device_list(list);
  return list ? n : 0;
}

}  // namespace lnet::o2ib
