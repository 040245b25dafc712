// A O2ibNi's life and its progress thread (o2ib_ni.hpp): the message buffers registered
// once, the listener, one epoll on the device's event fd and the thread's own wake-up,
// CM events and completions drained after each wake-up, a tick each second while
// connections exist (timeouts, keepalives, reaping); asleep when idle.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include <lnet/log.hpp>

#include "o2ib_ni.hpp"

namespace lnet::o2ib {

namespace {

constexpr auto kTick = std::chrono::seconds(1);
constexpr auto kShutdownGrace = std::chrono::seconds(5);

std::uint64_t incarnation_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u + static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

}  // namespace

std::vector<std::pair<std::string, std::uint64_t>> counter_list(const O2ibNi::Counters& n,
                                                                const RegCache::Stats& cache) {
  auto v = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  return {{"conns_established", v(n.conns_established)},
          {"conns_closed", v(n.conns_closed)},
          {"conns_rejected", v(n.conns_rejected)},
          {"connect_failed", v(n.connect_failed)},
          {"bad_messages", v(n.bad_messages)},
          {"timeouts", v(n.timeouts)},
          {"immediate", v(n.immediate)},
          {"rdma_put", v(n.rdma_put)},
          {"rdma_get", v(n.rdma_get)},
          {"rdma_bytes", v(n.rdma_bytes)},
          {"noops", v(n.noops)},
          {"naks", v(n.naks)},
          {"registrations", v(n.registrations) + cache.misses},
          {"reg_cache_hits", cache.hits},
          {"reg_cache_entries", cache.entries}};
}

O2ibNi::O2ibNi(NetInterface& ni, std::unique_ptr<Provider> dev, std::uint32_t ip, const NetParams& p)
    : ni_(ni), host_(*ni.host), dev_(std::move(dev)), ip_(ip), p_(p), cache_(*dev_, p.reg_cache), timeout_(p.timeout) {
  me_.nid = ni.nid.value();
  me_.incarnation = incarnation_now();
  me_.queue_depth = static_cast<std::uint16_t>(p.queue_depth);
  me_.max_frags = kMaxFrags;
}

O2ibNi::~O2ibNi() {
  if (epfd_ >= 0) ::close(epfd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

int O2ibNi::start() {
  std::string net = ni_.nid.to_string();
  tx_mem_ = std::make_unique<std::uint8_t[]>(std::size_t{p_.ntx} * kMsgSize);
  auto mr = dev_->reg(tx_mem_.get(), std::size_t{p_.ntx} * kMsgSize, false);
  if (!mr) return fail_startup(ni_, mr.code(), "registering the message buffers: " + mr.message());
  tx_mr_ = *mr;
  txs_ = std::vector<Tx>(p_.ntx);
  {
    MutexLock g(tx_mutex_);
    for (std::size_t i = 0; i < txs_.size(); ++i) {
      txs_[i].net = this;
      txs_[i].buf = tx_mem_.get() + i * kMsgSize;
      txs_[i].next = free_tx_;
      free_tx_ = &txs_[i];
    }
  }
  if (Status s = dev_->listen(p_.service); !s) {
    dev_->dereg(tx_mr_);
    return fail_startup(ni_, s.code(), "listening on RDMA CM port " + std::to_string(p_.service) + ": " + s.message());
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (wake_fd_ < 0 || epfd_ < 0) {
    int err = errno;
    return fail_startup(ni_, -err, std::string("eventfd/epoll_create1: ") + std::strerror(err));
  }
  for (int fd : {dev_->event_fd(), wake_fd_}) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &e) < 0) {
      int err = errno;
      return fail_startup(ni_, -err, std::string("epoll_ctl: ") + std::strerror(err));
    }
  }
  thread_ = std::thread([this] { thread_main(); });
  LNET_LOG(Info, kLogLnd, "%s: up (queue depth %u, %u message buffers)", net.c_str(), p_.queue_depth, p_.ntx);
  return 0;
}

void O2ibNi::wake() {
  std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void O2ibNi::stop() {
  stopping_.store(true, std::memory_order_release);
  wake();
  if (thread_.joinable()) thread_.join();
  // What the grace left: endpoints destroyed, messages failed.
  Done done;
  {
    WriteLock g(peers_mutex_);
    for (auto& [nid, p] : peers_) {
      MutexLock pg(p->mutex);
      for (auto& c : p->conns) {
        if (c->ep) dev_->destroy(c->ep);
        if (c->rx_mr.id) dev_->dereg(c->rx_mr);
      }
      p->conns.clear();
      p->conn = p->dialing = nullptr;
    }
  }
  for (Tx& tx : txs_) {
    if (!tx.busy) continue;
    tx.sending = 0;
    tx.waiting = false;
    tx_fail(&tx, -ESHUTDOWN, HealthStatus::LocalAborted, done);
  }
  deliver(done);
  {
    MutexLock g(tx_mutex_);
    for (auto& b : bounces_) dev_->dereg(b->mr);
    bounces_.clear();
    free_bounce_ = nullptr;
  }
  cache_.clear();
  dev_->dereg(tx_mr_);
  dev_.reset();
}

void O2ibNi::thread_main() {
  Done done;
  auto next_tick = Clock::now() + kTick;
  Clock::time_point stop_by{};
  bool closing = false;
  Completion wc[32];
  std::vector<Peer*> dials;
  for (;;) {
    // Ticks while connections exist, or registrations of MDs that may go.
    bool busy = nconns_.load(std::memory_order_relaxed) > 0 || cache_.holds_md_memory();
    epoll_event ev[2];
    int wait_ms = closing ? 100 : busy ? 1000 : -1;
    (void)::epoll_wait(epfd_, ev, 2, wait_ms);
    std::uint64_t n;
    (void)!::read(wake_fd_, &n, sizeof n);
    dev_->arm();
    if (stopping_.load(std::memory_order_acquire) && !closing) {
      closing = true;
      stop_by = Clock::now() + kShutdownGrace;
      close_all(done);
    }
    {
      MutexLock g(dial_mutex_);
      dials.swap(dial_q_);
    }
    for (Peer* p : dials) dial(*p, done);
    dials.clear();
    CmEvent e;
    while (dev_->next_event(e)) on_cm_event(e, done);
    for (const auto& [rx, nob] : std::exchange(early_, {}))
      on_rx_completion(rx, Completion{0, 0, WcOp::Recv, WcStatus::Success, nob}, done, true);
    while (std::size_t got = dev_->poll(wc))
      for (std::size_t i = 0; i < got; ++i) on_completion(wc[i], done);
    deliver(done);
    auto now = Clock::now();
    if (now >= next_tick || closing) {
      sweep_registrations();
      tick(now, done);
      deliver(done);
      next_tick = now + kTick;
    }
    if (closing && (nconns_.load() == 0 || now >= stop_by)) break;
  }
}

void O2ibNi::close_all(Done& done) {
  ReadLock g(peers_mutex_);
  for (auto& [nid, p] : peers_) {
    MutexLock pg(p->mutex);
    fail_pending(*p, -ESHUTDOWN, HealthStatus::LocalAborted, done);
    for (auto& c : p->conns) close_conn(*c, -ESHUTDOWN, done);
  }
}

void O2ibNi::request_dial(Peer& p) {
  if (p.dial_wanted) return;
  p.dial_wanted = true;
  {
    MutexLock g(dial_mutex_);
    dial_q_.push_back(&p);
  }
  wake();
}

void O2ibNi::on_completion(const Completion& c, Done& done) {
  std::uint64_t tag = c.wr_id & kWrTagMask;
  if (tag == kWrRecv)
    on_rx_completion(reinterpret_cast<Rx*>(c.wr_id & ~kWrTagMask), c, done);
  else
    on_tx_completion(reinterpret_cast<Tx*>(c.wr_id & ~kWrTagMask), tag == kWrWrite, c, done);
}

void O2ibNi::on_tx_completion(Tx* tx, bool write, const Completion& wc, Done& done) {
  Peer& p = *tx->peer;
  MutexLock g(p.mutex);
  Conn& c = *tx->conn;
  --c.posted;
  --tx->sending;
  if (!write) c.credits.on_send_done();
  // Done now unless it waits for a reply (then the reply, or the close below, ends it).
  bool finished = tx->sending == 0 && !tx->waiting;
  if (wc.status != WcStatus::Success) {
    int rc = wc.status == WcStatus::Flushed ? (c.close_rc ? c.close_rc : -ECONNABORTED) : -EIO;
    if (tx->status >= 0) {
      tx->status = rc;
      tx->health = health_of(rc, wc.status);
    }
    if (c.state != ConnState::Closing) {
      LNET_LOG(Warn, kLogLnd, "o2ib: %s to %s failed: %s; closing the connection", write ? "an RDMA write" : "a send",
               p.nid.to_string().c_str(), wc_status_name(wc.status));
      close_conn(c, rc, done);
    }
  }
  if (finished) {
    // Its RDMA writes all went (a write's completion carries no byte count on hardware).
    if (tx->status >= 0)
      for (const Sge& s : tx->wsge) n_.rdma_bytes.fetch_add(s.len, std::memory_order_relaxed);
    tx_finish(tx, done);
  }
  if (c.state == ConnState::Established) schedule(c, done);
  reap(c, done);
}

void O2ibNi::tick(Clock::time_point now, Done& done) {
  ReadLock g(peers_mutex_);
  for (auto& [nid, pp] : peers_) {
    Peer& p = *pp;
    MutexLock pg(p.mutex);
    for (Tx* tx = p.pending.front(); tx; tx = Fifo<Tx>::next(tx)) {
      if (tx->deadline > now) continue;
      LNET_LOG(Warn, kLogLnd, "o2ib: timed out connecting to %s", p.nid.to_string().c_str());
      n_.timeouts.fetch_add(1, std::memory_order_relaxed);
      fail_pending(p, -ETIMEDOUT, HealthStatus::NetworkTimeout, done);
      done.notices.emplace_back(p.nid, false);
      break;
    }
    for (std::size_t i = 0; i < p.conns.size();) {
      Conn& c = *p.conns[i];
      if (c.state == ConnState::Established) check_conn(c, now, done);
      if (!reap(c, done)) ++i;
    }
  }
}

// Cached registrations of memory the host says is gone (an MD unlinked) are dropped: they
// would pin pages the application may free (asked with no lock of ours held).
void O2ibNi::sweep_registrations() {
  for (std::uint64_t m : cache_.idle_memories())
    if (!host_.memory_alive(m)) cache_.drop_memory(m);
}

// An established connection at a tick: a message past its deadline closes it; a silent
// one gets a NOOP (keepalive).
void O2ibNi::check_conn(Conn& c, Clock::time_point now, Done& done) {
  auto overdue = [now](Tx* tx) { return tx->deadline <= now; };
  bool late = false;
  for (Tx* tx : c.waiting) late = late || overdue(tx);
  for (Tx* tx = c.queue.front(); tx && !late; tx = Fifo<Tx>::next(tx)) late = overdue(tx);
  for (Tx* tx = c.nocred.front(); tx && !late; tx = Fifo<Tx>::next(tx)) late = overdue(tx);
  for (Tx* tx = c.rsrvd.front(); tx && !late; tx = Fifo<Tx>::next(tx)) late = overdue(tx);
  if (late) {
    LNET_LOG(Warn, kLogLnd, "o2ib: timed out waiting on %s (%d s); closing the connection",
             c.peer->nid.to_string().c_str(), timeout());
    n_.timeouts.fetch_add(1, std::memory_order_relaxed);
    close_conn(c, -ETIMEDOUT, done);
    return;
  }
  if (p_.keepalive > 0 && now - c.last_send >= std::chrono::seconds(p_.keepalive)) maybe_noop(c, true, done);
}

// Finalizations and notices, with no lock held.
void O2ibNi::deliver(Done& done) {
  for (const auto& [nid, up] : done.notices) host_.notify_peer(ni_, nid, up);
  done.notices.clear();
  while (Tx* tx = done.txs.pop_front()) {
    LndMessage* msg = tx->msg;
    LndMessage* reply = tx->reply;
    int status = tx->status, reply_rc = tx->reply_rc;
    HealthStatus health = tx->health;
    std::uint32_t reply_len = tx->reply_len;
    put_tx(tx);  // its memory let go before the host hears: the MD may go next
    if (msg) {
      if (status < 0) msg->health = health;
      host_.finalize(msg, status);
    }
    if (reply) {
      int rc = status < 0 ? status : reply_rc;
      if (rc == 0) host_.set_reply_length(*reply, reply_len);
      if (rc < 0) reply->health = rc == -ENODATA ? HealthStatus::Ok : health;
      host_.finalize(reply, rc);
    }
  }
}

HealthStatus health_of(int rc, WcStatus wc) {
  if (wc == WcStatus::RetryExceeded) return HealthStatus::NetworkTimeout;
  if (wc == WcStatus::RemoteAccess) return HealthStatus::RemoteError;
  if (wc == WcStatus::LocalProtection || wc == WcStatus::LocalLength) return HealthStatus::LocalError;
  switch (-rc) {
    case ETIMEDOUT: return HealthStatus::RemoteTimeout;
    case ESHUTDOWN: return HealthStatus::LocalAborted;
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EHOSTUNREACH: return HealthStatus::RemoteDropped;
    case EPROTO:
    case ESTALE: return HealthStatus::RemoteError;
    default: return HealthStatus::LocalError;
  }
}

}  // namespace lnet::o2ib
