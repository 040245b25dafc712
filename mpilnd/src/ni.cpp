// An MPI LND NI: set-up on its communicator, start (the pool, progress), stop, and what
// it reports (statistics, idleness, a barrier for collective ends).
#include <algorithm>
#include <cerrno>
#include <random>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

#include "mpi_ni.hpp"

namespace lnet::mpi {

std::string mpi_error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<std::size_t>(len));
}

MpiNi::MpiNi(NetInterface& ni, MPI_Comm comm, const std::vector<Nid>& nids, const Options& opts)
    : ni_(ni), host_(*ni.host), opts_(opts), comm_(comm), nids_(nids) {
  for (std::size_t r = 0; r < nids_.size(); ++r) by_nid_.emplace_back(nids_[r], static_cast<int>(r));
  std::sort(by_nid_.begin(), by_nid_.end());
  // A failure here (it would be the communicator's) makes start() fail.
  setup_ok_ = check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank") &&
              check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size") &&
              check(MPI_Query_thread(&thread_level_), "MPI_Query_thread");
  if (!setup_ok_) size_ = 0;
  owner_ = std::this_thread::get_id();
  std::random_device rd;
  stamp_ =
      (static_cast<std::uint64_t>(rd()) << 32) ^ static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
  void* ub = nullptr;
  int flag = 0;
  if (check(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag), "MPI_Comm_get_attr(MPI_TAG_UB)") && flag && ub)
    tag_ub_ = static_cast<std::uint32_t>(*static_cast<int*>(ub));  // else the least MPI promises
  grant_ = std::clamp(opts_.credits, 1, 255);
  timeout_ = static_cast<int>(ni.config.lnd_tunables.get_or("timeout", 0));
  if (timeout_ <= 0) timeout_ = opts_.timeout;
  // LNET_MPI_TIMEOUT=0: LNet's derived lnd_timeout (lnet-facts §5.1), when the host has one.
  if (timeout_ == 0) timeout_ = ni.host && ni.host->lnd_timeout() > 0 ? ni.host->lnd_timeout() : 50;
  buf_size_ = kMsgHdrSize + std::max<std::size_t>(kHelloSize, kHeaderSize + opts_.short_max);
  peers_.resize(static_cast<std::size_t>(size_));
}

MpiNi::~MpiNi() = default;

bool MpiNi::may_call_mpi() const {
  return thread_level_ == MPI_THREAD_MULTIPLE || std::this_thread::get_id() == owner_;
}

bool MpiNi::check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return true;
  stats_.mpi_errors.fetch_add(1, std::memory_order_relaxed);
  LNET_LOG(Error, kLogLnd, "%s: %s failed: %s", ni_.nid.to_string().c_str(), what, mpi_error_string(rc).c_str());
  if (opts_.on_error == OnError::Abort) {
    LNET_LOG(Error, kLogLnd, "%s: LNET_MPI_ON_ERROR=abort: calling MPI_Abort", ni_.nid.to_string().c_str());
    MPI_Abort(comm_, rc);
  }
  return false;
}

int MpiNi::start() {
  if (!setup_ok_) return fail_startup(ni_, -EIO, "MPI_Comm_rank, MPI_Comm_size or MPI_Query_thread failed (logged)");
  MutexLock lk(mu_);
  pool_.resize(opts_.pool_depth);
  reqs_.resize(opts_.pool_depth, MPI_REQUEST_NULL);
  owners_.resize(opts_.pool_depth);
  seen_.resize(opts_.pool_depth);
  for (unsigned i = 0; i < opts_.pool_depth; ++i) {
    owners_[i] = Owner{Owner::PoolRx, reinterpret_cast<void*>(static_cast<std::uintptr_t>(i))};
    if (!init_pool_rx_locked(i)) return fail_startup(ni_, -EIO, "MPI_Recv_init of the receive pool failed (logged)");
  }
  if (opts_.pool_depth && !check(MPI_Startall(static_cast<int>(opts_.pool_depth), reqs_.data()), "MPI_Startall"))
    return fail_startup(ni_, -EIO, "MPI_Startall of the receive pool failed (logged)");
  lk.unlock();

  bool want_thread = opts_.progress == ProgressMode::Thread ||
                     (opts_.progress == ProgressMode::Auto && thread_level_ == MPI_THREAD_MULTIPLE);
  if (want_thread && thread_level_ != MPI_THREAD_MULTIPLE)
    return fail_startup(ni_, -EINVAL, "LNET_MPI_PROGRESS=thread needs MPI_THREAD_MULTIPLE");
  if (want_thread) {
    MutexLock g(nap_mu_);  // thread_id_ is set before the thread looks
    thread_ = std::thread([this] {
      { MutexLock w(nap_mu_); }
      thread_main();
    });
    thread_id_ = thread_.get_id();
  } else {
    // The host polls us (lnet-lnd(7)): liblnet from its waits, another host from its own.
    ni_.poll = [](void* self) { return static_cast<MpiNi*>(self)->progress(); };
    ni_.poll_ctx = this;
  }
  LNET_LOG(Info, kLogLnd, "%s up: rank %d of %d, short messages up to %u bytes, %u receives, %d credits, %s progress",
           ni_.nid.to_string().c_str(), rank_, size_, opts_.short_max, opts_.pool_depth, grant_,
           want_thread ? "thread" : "application");
  return 0;
}

bool MpiNi::idle() {
  MutexLock g(mu_);
  if (reqs_.size() > opts_.pool_depth || !deferred_.empty() || !deferred_bulk_.empty()) return false;
  for (Peer* p : contacted_)
    if (!p->queue.empty()) return false;
  return true;
}

int MpiNi::barrier(Clock::time_point deadline, MPI_Comm comm) {
  MPI_Request r;
  {
    MutexLock g(mu_);
    if (!check(MPI_Ibarrier(comm == MPI_COMM_NULL ? comm_ : comm, &r), "MPI_Ibarrier")) return -EIO;
  }
  for (;;) {
    if (!has_thread()) progress();
    int flag = 0;
    {
      MutexLock g(mu_);
      if (!check(MPI_Test(&r, &flag, MPI_STATUS_IGNORE), "MPI_Test")) return -EIO;
    }
    if (flag) return 0;
    if (Clock::now() >= deadline) return -ETIMEDOUT;  // the request is left to MPI
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Stats MpiNi::stats() const {
  Stats s;
  s.handshakes = stats_.handshakes.load();
  s.immediate = stats_.immediate.load();
  s.packed = stats_.packed.load();
  s.bulk = stats_.bulk.load();
  s.chunks = stats_.chunks.load();
  s.rdma_gets = stats_.rdma_gets.load();
  s.noops = stats_.noops.load();
  s.credit_waits = stats_.credit_waits.load();
  s.bad_messages = stats_.bad_messages.load();
  s.timeouts = stats_.timeouts.load();
  s.held = stats_.held.load();
  s.abandoned = stats_.abandoned.load();
  s.left_kept = stats_.left_kept.load();
  s.mpi_errors = stats_.mpi_errors.load();
  return s;
}

void MpiNi::stop(std::chrono::milliseconds grace) {
  stopping_.store(true);
  if (thread_.joinable()) {
    {
      MutexLock g(nap_mu_);
      nap_cv_.notify_one();
    }
    thread_.join();
  }
  MutexLock pl(progress_mu_);
  Done done;
  {
    MutexLock g(mu_);
    stopped_ = true;
    fail_queued_locked(done);
    cancel_receives_locked();
  }
  // Let sends and cancellations finish for a moment; what is left after that is
  // abandoned to MPI (its messages fail here).
  auto deadline = Clock::now() + grace;
  for (;;) {
    MutexLock g(mu_);
    if (reqs_.size() <= opts_.pool_depth) break;
    bool broken = reap_locked(done) < 0;
    if (!broken && Clock::now() < deadline) continue;
    abandon_requests_locked(done);
    break;
  }
  complete(done);
}

// Sends and receives not yet handed to MPI fail.
void MpiNi::fail_queued_locked(Done& done) {
  while (Tx* tx = deferred_.pop_front()) fail_tx_locked(tx, -ESHUTDOWN, HealthStatus::LocalAborted, done);
  while (Bulk* b = deferred_bulk_.pop_front()) {
    b->rc = -ESHUTDOWN;
    done.bulks.push_back(b);
  }
  for (Peer* p : contacted_)
    while (Tx* tx = p->queue.pop_front()) fail_tx_locked(tx, -ESHUTDOWN, HealthStatus::LocalAborted, done);
}

void MpiNi::cancel_receives_locked() {
  // The pool: cancel, complete and free every persistent receive.
  for (unsigned i = 0; i < opts_.pool_depth && i < reqs_.size(); ++i) {
    if (reqs_[i] == MPI_REQUEST_NULL) continue;
    int flag = 0;
    // Inactive or done: nothing to cancel. (A failed test leaves it to the cancel.)
    if (!check(MPI_Test(&reqs_[i], &flag, MPI_STATUS_IGNORE), "MPI_Test")) flag = 0;
    if (!flag) {
      check(MPI_Cancel(&reqs_[i]), "MPI_Cancel");
      check(MPI_Wait(&reqs_[i], MPI_STATUS_IGNORE), "MPI_Wait");
    }
    check(MPI_Request_free(&reqs_[i]), "MPI_Request_free");
  }
  // Receives still posted will never be written: cancel them.
  for (std::size_t i = opts_.pool_depth; i < reqs_.size(); ++i)
    if (owners_[i].kind == Owner::BulkChunk && !static_cast<Bulk*>(owners_[i].obj)->send)  // (Cancelled: already)
      check(MPI_Cancel(&reqs_[i]), "MPI_Cancel");
}

// The requests still running after the grace period: freed (MPI finishes them on its
// own) and their messages failed. MPI may write into a receive's memory for as long as
// this process lives: it is never given back (the host keeps it, and the discard buffer
// is MPI's for good).
void MpiNi::abandon_requests_locked(Done& done) {
  LNET_LOG(Warn, kLogLnd, "%s: %zu MPI requests still running at shutdown; left to MPI", ni_.nid.to_string().c_str(),
           reqs_.size() - opts_.pool_depth);
  for (std::size_t r = opts_.pool_depth; r < reqs_.size(); ++r) {
    Owner o = owners_[r];
    check(MPI_Request_free(&reqs_[r]), "MPI_Request_free");
    if (o.kind == Owner::Held) continue;  // MPI may still read it: it stays MPI's
    if (o.kind == Owner::KeptChunk) {
      leave_kept_locked(static_cast<Kept*>(o.obj));
      continue;
    }
    if (o.kind == Owner::TxShort) {
      // MPI may still read the message: its buffer is left to it for good.
      auto* tx = static_cast<Tx*>(o.obj);
      (void)new Bytes(std::move(tx->buf));
      tx_part_done_locked(tx, -ESHUTDOWN, done);
    } else {
      auto* b = static_cast<Bulk*>(o.obj);
      if (!b->rc) b->rc = -ESHUTDOWN;
      if (!b->send) leave_receive_locked(b);
      if (++b->done >= b->nchunks) bulk_finished_locked(b, done);
    }
  }
  reqs_.resize(opts_.pool_depth);
  owners_.resize(opts_.pool_depth);
  seen_.resize(opts_.pool_depth);
}

void MpiNi::leave_kept_locked(Kept* k) {
  if (--k->requests > 0) return;
  (void)k->discard.release();  // MPI's for good; the host's memory (token) is never released
  stats_.left_kept.fetch_add(1, std::memory_order_relaxed);
  delete k;
}

void MpiNi::leave_receive_locked(Bulk* b) {
  if (b->kept || b->left) return;  // kept already (its KeptChunks are left), or done
  b->left = true;
  stats_.left_kept.fetch_add(1, std::memory_order_relaxed);
  if (!b->msg) {
    (void)b->discard.release();
    return;
  }
  if (!host_.keep_memory(*b->msg))
    LNET_LOG(Error, kLogLnd,
             "%s: a receive from %s left to MPI at shutdown: the host cannot keep its memory, which MPI may still "
             "write",
             ni_.nid.to_string().c_str(), b->peer ? b->peer->nid.to_string().c_str() : "?");
}

}  // namespace lnet::mpi
