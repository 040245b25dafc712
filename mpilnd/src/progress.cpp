// MPI LND progress: one round (deferred work, timeouts, completed requests, the pool),
// the completions handed back to the host, and the progress thread.
#include <thread>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

#include "mpi_ni.hpp"

namespace lnet::mpi {

namespace {

constexpr auto kTimeoutScan = std::chrono::milliseconds(100);
// A request given up on (seen_): it times out once; MPI still completes it.
constexpr auto kGivenUp = Clock::time_point::max();
// Timeouts a cancelled receive is waited for before it is left to MPI.
constexpr int kAbandonAfter = 4;

}  // namespace

int MpiNi::reap_locked(Done& done) {
  const std::size_t depth = opts_.pool_depth;
  int n = static_cast<int>(reqs_.size() - depth);
  if (n == 0) return 0;
  indices_.resize(reqs_.size());
  statuses_.resize(reqs_.size());
  int out = 0;
  int rc = MPI_Testsome(n, reqs_.data() + depth, &out, indices_.data(), statuses_.data());
  if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
    check(rc, "MPI_Testsome");
    return -1;
  }
  if (out == MPI_UNDEFINED || out == 0) return 0;
  completed_.clear();
  for (int k = 0; k < out; ++k) {
    std::size_t i = depth + static_cast<std::size_t>(indices_[static_cast<std::size_t>(k)]);
    const MPI_Status& st = statuses_[static_cast<std::size_t>(k)];
    completed_.push_back(Completion{owners_[i], st, rc == MPI_ERR_IN_STATUS ? st.MPI_ERROR : MPI_SUCCESS});
  }
  // Drop the finished one-shot requests (MPI set them to MPI_REQUEST_NULL).
  compact_requests_locked();
  // Their owners may post more requests, so only now that the table is compact.
  for (const Completion& c : completed_) {
    if (c.owner.kind == Owner::TxShort) {
      if (c.err != MPI_SUCCESS) check(c.err, "MPI_Isend");
      tx_part_done_locked(static_cast<Tx*>(c.owner.obj), c.err == MPI_SUCCESS ? 0 : -EIO, done);
    } else if (c.owner.kind == Owner::Held) {
      delete static_cast<Bytes*>(c.owner.obj);  // MPI is done with it at last (nullptr: a bulk send's)
      stats_.held.fetch_sub(1, std::memory_order_relaxed);
    } else if (c.owner.kind == Owner::KeptChunk) {
      kept_done_locked(static_cast<Kept*>(c.owner.obj), done);
    } else {  // a bulk chunk, cancelled or not
      if (c.err != MPI_SUCCESS) check(c.err, "bulk transfer");
      bulk_chunk_done_locked(static_cast<Bulk*>(c.owner.obj), c.status, c.err, done);
    }
  }
  return out;
}

// The pool: its receives match arriving messages in the order they were started (MPI's
// non-overtaking rule), and they are restarted in the order they complete, so only the
// oldest one needs testing. The cost is one test per message, whatever the depth, and
// messages are handled in the order they arrived. After a round that found none, the
// first goes to the host at once: testing the next receive first would run MPI's
// progress engine once more and, in request-response traffic, find nothing. While
// messages keep coming they are taken in batches.
void MpiNi::test_pool_locked(Done& done, bool* worked) {
  const std::size_t depth = opts_.pool_depth;
  const std::size_t limit = pool_busy_ ? depth : 1;
  std::size_t found = 0;
  for (; found < limit && reqs_[pool_head_] != MPI_REQUEST_NULL; ++found) {
    int flag = 0;
    MPI_Status st;
    int trc = MPI_Test(&reqs_[pool_head_], &flag, &st);
    if (!flag && trc == MPI_SUCCESS) break;
    pool_rx_locked(static_cast<int>(pool_head_), st, trc, done);
    pool_head_ = pool_head_ + 1 == depth ? 0 : pool_head_ + 1;
  }
  pool_busy_ = found > 0;
  *worked |= pool_busy_;
}

bool MpiNi::progress() {
  if (!may_call_mpi()) return false;
  if (!progress_mu_.try_lock()) return false;  // another thread runs a round
  Done done;
  bool worked = round_locked(done);
  progress_mu_.unlock();
  complete(done);
  return worked;
}

bool MpiNi::round_locked(Done& done) {
  bool worked = false;
  {
    MutexLock g(mu_);
    if (stopped_) return false;
    while (Tx* tx = deferred_.pop_front()) {
      enqueue_locked(tx, done);
      worked = true;
    }
    while (Bulk* b = deferred_bulk_.pop_front()) {
      if (!post_bulk_locked(b)) {
        b->rc = -EIO;
        if (b->done >= b->nchunks) bulk_finished_locked(b, done);
      }
      worked = true;
    }
    // The clock is read every so many rounds only: a busy loop would spend more time
    // in it than in MPI.
    if ((++rounds_ & 255) == 0) {
      auto now = Clock::now();
      if (now >= next_timeout_check_) {
        check_timeouts_locked(now, done);
        next_timeout_check_ = now + kTimeoutScan;
      }
    }
    // Sends and bulk transfers (MPI_Testsome also runs MPI's progress engine once).
    worked |= reap_locked(done) > 0;
    test_pool_locked(done, &worked);
  }
  if (!pool_work_.empty()) {
    parse_pool_work();
    MutexLock g(mu_);
    finish_pool_work_locked(done);
  }
  return worked;
}

void MpiNi::check_timeouts_locked(Clock::time_point now, Done& done) {
  expire_requests_locked(now, done);
  for (Peer* p : contacted_) {
    if (p->state == Peer::State::Querying && now >= p->query_deadline) {
      LNET_LOG(Warn, kLogLnd, "%s: no answer to the handshake from %s within %d s", ni_.nid.to_string().c_str(),
               p->nid.to_string().c_str(), timeout_);
      p->state = Peer::State::New;  // the next send asks again
      while (Tx* tx = p->queue.pop_front()) {
        stats_.timeouts.fetch_add(1, std::memory_order_relaxed);
        fail_tx_locked(tx, -ETIMEDOUT, HealthStatus::RemoteTimeout, done);
      }
      if (!p->down) {
        p->down = true;
        done.health.emplace_back(p->nid, false);
      }
      continue;
    }
    // Sends waiting for a credit that does not come.
    while (!p->queue.empty() && p->queue.front()->deadline <= now) {
      Tx* tx = p->queue.pop_front();
      stats_.timeouts.fetch_add(1, std::memory_order_relaxed);
      fail_tx_locked(tx, -ETIMEDOUT, HealthStatus::RemoteTimeout, done);
    }
  }
}

// A request still running when its message's attempt is due (its Tx's deadline: the
// timeout after send(); else the timeout after a scan first saw it) is given up on and
// its peer reported down. A bulk transfer's receives are cancelled, and MPI writes into no memory after it
// is given back: the transfer fails at once while the host keeps the MD's memory (and we
// the discard buffer) until MPI has completed each of them, cancelled or not; a host that
// cannot keep it has the transfer wait for them. A receive MPI matched already cannot be
// cancelled, and without fault tolerance MPI may never complete one from a peer that
// died: after kAbandonAfter more timeouts it is left to MPI (counted, logged), so that
// nothing waits forever. Sends fail at once and their requests stay MPI's (Owner::Held):
// a short send's buffer is ours and kept until MPI is done with it; a bulk send's is the
// MD's, which MPI may still read (never write) after the message's event.
void MpiNi::expire_requests_locked(Clock::time_point now, Done& done) {
  const std::size_t depth = opts_.pool_depth;
  bool freed = false;  // requests left to MPI: the table is compacted after the scan
  for (std::size_t r = depth; r < reqs_.size(); ++r) {
    if (seen_[r] == kGivenUp) continue;
    if (seen_[r] == Clock::time_point{}) {
      seen_[r] = now;
      continue;
    }
    if (owners_[r].kind == Owner::Cancelled || owners_[r].kind == Owner::KeptChunk) {
      if (now - seen_[r] >= std::chrono::seconds(timeout_ * kAbandonAfter)) {
        abandon_locked(r, done);
        freed = true;
      }
      continue;
    }
    if (now - seen_[r] < std::chrono::seconds(timeout_)) continue;
    seen_[r] = kGivenUp;
    Owner o = owners_[r];
    Peer* peer;
    if (o.kind == Owner::TxShort) {
      auto* tx = static_cast<Tx*>(o.obj);
      peer = tx->peer;
      owners_[r] = Owner{Owner::Held, new Bytes(std::move(tx->buf))};
      stats_.held.fetch_add(1, std::memory_order_relaxed);
      tx_part_done_locked(tx, -ETIMEDOUT, done);
    } else {
      auto* b = static_cast<Bulk*>(o.obj);
      peer = b->peer;
      if (!b->rc) b->rc = -ETIMEDOUT;
      if (!b->send) {
        give_up_receive_locked(r, b, now, done);
      } else {
        // A send only reads its memory, and a peer that is gone may never let MPI complete
        // it: the transfer fails now (its chunk counted done), the request stays MPI's.
        owners_[r] = Owner{Owner::Held, nullptr};
        stats_.held.fetch_add(1, std::memory_order_relaxed);
        if (++b->done >= b->nchunks) bulk_finished_locked(b, done);
      }
    }
    stats_.timeouts.fetch_add(1, std::memory_order_relaxed);
    if (peer && !peer->down) {
      LNET_LOG(Warn, kLogLnd, "%s: a transfer with %s made no progress for %d s: given up, the peer reported down",
               ni_.nid.to_string().c_str(), peer->nid.to_string().c_str(), timeout_);
      peer->down = true;
      done.health.emplace_back(peer->nid, false);
    }
  }
  if (freed) compact_requests_locked();
}

void MpiNi::give_up_receive_locked(std::size_t r, Bulk* b, Clock::time_point now, Done& done) {
  check(MPI_Cancel(&reqs_[r]), "MPI_Cancel");  // completes soon unless matched already
  seen_[r] = now;
  if (!b->kept) {
    std::uintptr_t token = b->msg ? host_.keep_memory(*b->msg) : 0;
    if (b->msg && !token) {
      owners_[r].kind = Owner::Cancelled;
      return;
    }
    b->kept = new Kept{token, std::move(b->discard), b->peer->nid, 0};
  }
  owners_[r] = Owner{Owner::KeptChunk, b->kept};
  ++b->kept->requests;
  if (++b->done >= b->nchunks) bulk_finished_locked(b, done);
}

void MpiNi::kept_done_locked(Kept* k, Done& done) {
  if (--k->requests > 0) return;
  if (k->token) done.released.push_back(k->token);
  delete k;
}

void MpiNi::abandon_locked(std::size_t r, Done& done) {
  Owner o = owners_[r];
  Nid from = o.kind == Owner::KeptChunk ? static_cast<Kept*>(o.obj)->from : static_cast<Bulk*>(o.obj)->peer->nid;
  LNET_LOG(Error, kLogLnd,
           "%s: a receive from %s that MPI matched did not complete in %d s after it was cancelled: its memory is "
           "given back, and MPI may still write into it if that peer resumes",
           ni_.nid.to_string().c_str(), from.to_string().c_str(), timeout_ * kAbandonAfter);
  check(MPI_Request_free(&reqs_[r]), "MPI_Request_free");  // MPI finishes it on its own
  stats_.abandoned.fetch_add(1, std::memory_order_relaxed);
  if (o.kind == Owner::KeptChunk) {
    kept_done_locked(static_cast<Kept*>(o.obj), done);
    return;
  }
  auto* b = static_cast<Bulk*>(o.obj);
  if (++b->done >= b->nchunks) bulk_finished_locked(b, done);
}

// Keeps the running requests after the persistent pool, in order, without the finished
// ones (MPI_REQUEST_NULL).
void MpiNi::compact_requests_locked() {
  const std::size_t depth = opts_.pool_depth;
  std::size_t w = depth;
  for (std::size_t r = depth; r < reqs_.size(); ++r) {
    if (reqs_[r] == MPI_REQUEST_NULL) continue;
    reqs_[w] = reqs_[r];
    owners_[w] = owners_[r];
    seen_[w] = seen_[r];
    ++w;
  }
  reqs_.resize(w);
  owners_.resize(w);
  seen_.resize(w);
  in_flight_.store(w > depth, std::memory_order_relaxed);
}

void MpiNi::complete(Done& done) {
  for (const auto& [nid, up] : done.health) host_.notify_peer(ni_, nid, up);
  done.health.clear();
  for (std::uintptr_t token : done.released) host_.release_memory(token);
  done.released.clear();
  for (unsigned i = 0; i < done.nsent; ++i) {
    done.sent[i].msg->health = done.sent[i].health;
    host_.finalize(done.sent[i].msg, done.sent[i].rc);
  }
  done.nsent = 0;
  if (done.txs.empty() && done.bulks.empty()) return;
  Fifo<Tx> txs = std::exchange(done.txs, {});
  Fifo<Bulk> bulks = std::exchange(done.bulks, {});
  for (Tx* tx = txs.front(); tx; tx = tx->next) {
    tx->msg->health = tx->health;
    host_.finalize(tx->msg, tx->rc);
  }
  for (Bulk* b = bulks.front(); b; b = b->next) {
    if (!b->msg) continue;
    if (b->sink && b->rc == 0) host_.set_reply_length(*b->msg, static_cast<std::uint32_t>(b->bytes));
    if (b->rc) b->msg->health = b->rc == -ENODATA ? HealthStatus::Ok : HealthStatus::LocalError;
    host_.finalize(b->msg, b->rc);
  }
  while (Tx* tx = txs.pop_front()) put_tx(tx);
  while (Bulk* b = bulks.pop_front()) put_bulk(b);
}

// The progress thread waits as IdlePolicy says; a send or receive started by another
// thread wakes it from a nap (kick).
void MpiNi::thread_main() {
  IdlePolicy idle(opts_.idle_us);
  while (!stopping_.load(std::memory_order_acquire)) {
    int us = idle.after_round(progress(), [this] { return in_flight_.load(std::memory_order_relaxed); });
    if (us == 0) continue;
    MutexLock lk(nap_mu_);
    napping_.store(true);
    if (!kicked_.exchange(false) && !stopping_.load()) lk.wait_for(nap_cv_, std::chrono::microseconds(us));
    napping_.store(false);
  }
}

void MpiNi::kick() {
  if (!thread_.joinable() || std::this_thread::get_id() == thread_id_) return;
  kicked_.store(true);
  if (napping_.load()) {
    MutexLock g(nap_mu_);
    nap_cv_.notify_one();
  }
}

}  // namespace lnet::mpi
