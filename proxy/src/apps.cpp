// The applications' lives on a proxy rank: accept (with a rescue when the application
// that knocked never connects), set-up (pid, NIDs, the forwarding MPI LND, the TABLE),
// heartbeats, and the end (goodbye or silence).
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <lnet/log.hpp>

#include "proxy.hpp"

namespace lnet::proxy {

namespace mp = lnet::mpi::proxy;
using Clock = std::chrono::steady_clock;

namespace {

struct RankAnswer {
  std::int32_t status;
  std::uint32_t pad;
  std::uint64_t nid;
};

// The TABLE of every rank's answer: the proxies' NIDs, or the first rank's refusal (in
// this rank's words `why` when it is rank 0's).
mp::Table table_of(const std::vector<RankAnswer>& all, std::uint32_t pid, const std::string& why) {
  mp::Table t;
  t.pid = pid;
  for (int r = 0; r < static_cast<int>(all.size()) && t.status == 0; ++r) {
    const RankAnswer& x = all[static_cast<std::size_t>(r)];
    if (x.status < 0) {
      t.status = x.status;
      t.error = r == 0 && !why.empty()
                    ? why
                    : "proxy rank " + std::to_string(r) + " could not take the pid (its log says why)";
    }
    t.proxies.emplace_back(x.nid);
  }
  return t;
}

}  // namespace

void ProxyRank::accept_app(std::uint64_t serial) {
  App a;
  a.serial = serial;
  // MPI_Comm_accept cannot time out: if the application that knocked never connects,
  // rank 0 connects to its own port after the deadline, and the ranks drop that.
  Mutex mu;
  std::condition_variable cv;
  bool accepted = false, rescued = false;
  std::thread watchdog;
  if (rank_ == 0) {
    watchdog = std::thread([&] {
      MutexLock g(mu);
      auto deadline = Clock::now() + std::chrono::seconds(opts_.timeout);
      while (!accepted && Clock::now() < deadline) (void)g.wait_until(cv, deadline);
      if (accepted) return;
      rescued = true;
      g.unlock();
      LNET_LOG(Warn, kLogDaemon, "proxy: application %llu knocked but did not connect within %d s",
               static_cast<unsigned long long>(serial), opts_.timeout);
      // The rescue goes through the name server too: when that is gone, nothing ends the
      // accept, and a job that answers no knock is better ended (its supervisor, or the
      // site, starts it again with a live server) than left hanging.
      std::thread([port = port_] {
        MPI_Comm self;
        if (MPI_Comm_connect(port.c_str(), MPI_INFO_NULL, 0, MPI_COMM_SELF, &self) == MPI_SUCCESS)
          MPI_Comm_disconnect(&self);
      }).detach();
      g.lock();
      auto give_up = Clock::now() + std::chrono::seconds(opts_.timeout);
      while (!accepted && Clock::now() < give_up) (void)g.wait_until(cv, give_up);
      if (accepted) return;
      LNET_LOG(Error, kLogDaemon,
               "proxy rank 0: MPI_Comm_accept cannot be ended: connecting to its own port did not return within %d s "
               "either (is ompi-server gone?): exiting, as this job can accept no application any more",
               opts_.timeout);
      std::fflush(nullptr);
      std::_Exit(3);
    });
  }
  int rc = MPI_Comm_accept(rank_ == 0 ? port_.c_str() : nullptr, MPI_INFO_NULL, 0, comm_, &a.inter);
  int drop = 0;
  {
    MutexLock g(mu);
    accepted = true;
    drop = rescued ? 1 : 0;
    cv.notify_all();
  }
  MPI_Bcast(&drop, 1, MPI_INT, 0, comm_);
  if (rc != MPI_SUCCESS || drop) {
    if (rc != MPI_SUCCESS)
      LNET_LOG(Error, kLogDaemon, "proxy: MPI_Comm_accept failed: %s", mpi::mpi_error_string(rc).c_str());
    else
      MPI_Comm_disconnect(&a.inter);
    if (watchdog.joinable()) watchdog.join();
    return;
  }
  if (watchdog.joinable()) watchdog.join();
  adopt_app(std::move(a));
}

// Collective: set up the application on the intercommunicator `a.inter` (accepted, or
// the parent that spawned this job).
void ProxyRank::adopt_app(App a) {
  std::uint64_t serial = a.serial;
  MPI_Comm_set_errhandler(a.inter, MPI_ERRORS_RETURN);
  MPI_Comm_remote_size(a.inter, &a.ranks);
  // The merge waits for the application: only one that said HELLO gets that far.
  int hello = rank_ == 0 ? (await_hello(a) ? 1 : 0) : 0;
  MPI_Bcast(&hello, 1, MPI_INT, 0, comm_);
  if (!hello) {
    MPI_Comm_free(&a.inter);  // local: a disconnect would wait for the silent side
    return;
  }
  if (int rc = MPI_Intercomm_merge(a.inter, 1, &a.merged); rc != MPI_SUCCESS) {
    LNET_LOG(Error, kLogDaemon, "proxy: MPI_Intercomm_merge failed: %s", mpi::mpi_error_string(rc).c_str());
    MPI_Comm_free(&a.inter);
    return;
  }
  MPI_Comm_set_errhandler(a.merged, MPI_ERRORS_RETURN);
  if (Status s = setup_app(a); !s) {
    if (rank_ == 0)
      LNET_LOG(Error, kLogDaemon, "proxy: application %llu: %s", static_cast<unsigned long long>(serial),
               s.message().c_str());
    if (a.link) {
      a.link->stop();
      up_->detach(*a.link);
    }
    if (a.pid) (void)up_->call(up::PidRelease{0, a.pid}, std::chrono::seconds(opts_.timeout));
    MPI_Comm_free(&a.merged);
    MPI_Comm_free(&a.inter);
    return;
  }
  a.last_heard = Clock::now();
  // The receive goes into the App where it stays (the map's node).
  App& kept = apps_.emplace(serial, std::move(a)).first->second;
  if (rank_ == 0) {
    MPI_Irecv(kept.ctl_buf, mp::kControlSize, MPI_BYTE, 0, mp::kTagControl, kept.inter, &kept.ctl);
    LNET_LOG(Info, kLogDaemon, "proxy: application %llu: %d rank(s), pid %u", static_cast<unsigned long long>(serial),
             kept.ranks, kept.pid);
  }
}

// Rank 0: the application's HELLO on the intercommunicator, within --timeout.
bool ProxyRank::await_hello(const App& a) {
  std::uint8_t buf[mp::kControlSize] = {};
  MPI_Request r;
  if (int rc = MPI_Irecv(buf, mp::kControlSize, MPI_BYTE, 0, mp::kTagControl, a.inter, &r); rc != MPI_SUCCESS) {
    LNET_LOG(Error, kLogDaemon, "proxy: application %llu: MPI_Irecv failed: %s",
             static_cast<unsigned long long>(a.serial), mpi::mpi_error_string(rc).c_str());
    return false;
  }
  MPI_Status st;
  if (int rc = mpi::wait_until(&r, Clock::now() + std::chrono::seconds(opts_.timeout), &st); rc != 0) {
    MPI_Cancel(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    std::string why = rc == -ETIMEDOUT ? "sent no HELLO within " + std::to_string(opts_.timeout) + " s"
                                       : std::string("its HELLO could not be received");
    LNET_LOG(Warn, kLogDaemon, "proxy: application %llu (%d rank(s)) connected but %s: dropped",
             static_cast<unsigned long long>(a.serial), a.ranks, why.c_str());
    return false;
  }
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  auto c = mp::decode_control(std::span<const std::uint8_t>(buf, static_cast<std::size_t>(n)));
  if (!c || *c != mp::Control::Hello) {
    LNET_LOG(Warn, kLogDaemon, "proxy: application %llu: %s instead of HELLO: dropped",
             static_cast<unsigned long long>(a.serial), c ? "another control message" : c.message().c_str());
    return false;
  }
  return true;
}

ProxyRank::PidTaken ProxyRank::take_pid(App& a) {
  auto timeout = std::chrono::seconds(opts_.timeout);
  PidTaken mine;
  if (rank_ == 0) {
    auto r = up_->call(up::PidNew{0, static_cast<std::uint32_t>(a.ranks)}, timeout);
    if (r && r->status == 0) {
      a.pid = r->pid;
      mine.nid = r->nid.value();
    } else {
      mine.status = r ? r->status : r.code();
      mine.why = r ? "PID_NEW: " + errno_string(r->status) : r.message();
    }
  }
  mine.pid = a.pid;
  MPI_Bcast(&mine.pid, 1, MPI_UNSIGNED, 0, comm_);
  if (rank_ != 0 && mine.pid != 0) {
    auto r = up_->call(up::PidRegister{0, mine.pid, static_cast<std::uint32_t>(a.ranks)}, timeout);
    if (r && r->status == 0) {
      a.pid = mine.pid;
      mine.nid = r->nid.value();
    } else {
      mine.status = r ? r->status : r.code();
      mine.why = r ? "PID_REGISTER: " + errno_string(r->status) : r.message();
    }
  } else if (rank_ != 0) {
    mine.status = -EIO;
  }
  if (!mine.why.empty())
    LNET_LOG(Error, kLogDaemon, "proxy rank %d: application pid %u: %s", rank_, mine.pid, mine.why.c_str());
  return mine;
}

void ProxyRank::start_link(App& a, mp::Table& t) {
  std::vector<Nid> nids;
  NetId net = up_->welcome().nid.net();
  for (int r = 0; r < a.ranks; ++r) nids.push_back(Nid::make(net, static_cast<std::uint32_t>(r)));
  nids.insert(nids.end(), t.proxies.begin(), t.proxies.end());
  a.link = std::make_shared<AppLink>(up_->bridge(), a.serial, a.pid, a.merged, nids, opts_.lnd);
  up_->attach(a.link);
  int rc = a.link->start();
  up_->wake();  // its driver wants polling now
  int ok = rc == 0, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm_);
  if (!all_ok) {
    t.status = rc ? rc : -EIO;
    t.error = "the MPI LND did not start on every proxy rank (their logs say why)";
  }
}

// Collective over the proxy's ranks: the pid (rank 0 gets it, the others register it),
// every rank's NID, the forwarding driver, then the TABLE to the application.
Status ProxyRank::setup_app(App& a) {
  PidTaken mine = take_pid(a);
  RankAnswer answer{mine.status, 0, mine.nid};
  std::vector<RankAnswer> all(static_cast<std::size_t>(size_));
  MPI_Allgather(&answer, sizeof answer, MPI_BYTE, all.data(), sizeof answer, MPI_BYTE, comm_);
  mp::Table t = table_of(all, mine.pid, mine.why);
  if (t.status == 0) start_link(a, t);
  const up::Welcome& w = up_->welcome();
  t.nets.assign(w.nets, w.nets + std::min<std::size_t>(w.nnets, mp::kMaxNets));
  if (t.status < 0) t.proxies.clear();
  if (rank_ == 0) {
    if (!send_table(t, a.inter) && t.status == 0)
      t = mp::Table{-ETIMEDOUT, 0, {}, {}, "the application did not take its table"};
  }
  int status = t.status;
  MPI_Bcast(&status, 1, MPI_INT, 0, comm_);
  if (status < 0) return Failure{status, t.error.empty() ? "set-up failed" : t.error};
  return {};
}

bool ProxyRank::send_table(const mp::Table& t, MPI_Comm inter) {
  auto bytes = mp::encode(t);
  MPI_Request r;
  if (MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, mp::kTagTable, inter, &r) != MPI_SUCCESS)
    return false;
  if (mpi::wait_until(&r, Clock::now() + std::chrono::seconds(opts_.timeout)) == 0) return true;
  MPI_Request_free(&r);
  (void)new std::vector<std::uint8_t>(std::move(bytes));  // MPI may still read it
  return false;
}

void ProxyRank::check_apps() {
  std::vector<std::pair<std::uint64_t, bool>> ended;
  auto now = Clock::now();
  for (auto& [serial, a] : apps_) {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Test(&a.ctl, &flag, &st) != MPI_SUCCESS || !flag) break;
      int n = 0;
      MPI_Get_count(&st, MPI_BYTE, &n);
      auto c = mp::decode_control(std::span<const std::uint8_t>(a.ctl_buf, static_cast<std::size_t>(n)));
      if (!c) LNET_LOG(Warn, kLogDaemon, "proxy: application %u: %s", a.pid, c.message().c_str());
      a.last_heard = now;
      if (c && *c == mp::Control::Bye) {
        ended.emplace_back(serial, true);
        break;
      }
      MPI_Irecv(a.ctl_buf, mp::kControlSize, MPI_BYTE, 0, mp::kTagControl, a.inter, &a.ctl);
    }
    if (a.ctl != MPI_REQUEST_NULL && now - a.last_heard > std::chrono::seconds(opts_.client_timeout)) {
      LNET_LOG(Warn, kLogDaemon, "proxy: application pid %u silent for %d s: gone", a.pid, opts_.client_timeout);
      ended.emplace_back(serial, false);
    } else if (a.ctl != MPI_REQUEST_NULL && misbehaves(a, 0)) {
      ended.emplace_back(serial, false);
    }
  }
  for (auto [serial, graceful] : ended) {
    ring({mp::RankLine::End, serial, graceful});
    end_app(serial, graceful);
  }
}

// An application whose messages this rank's driver refused (logged once per rank).
bool ProxyRank::misbehaves(App& a, int reported_by) {
  std::uint64_t bad = a.link ? a.link->bad_messages() : 0;
  if (bad == 0 || a.bad_reported) return false;
  a.bad_reported = true;
  LNET_LOG(Warn, kLogDaemon, "proxy rank %d: application pid %u sent %llu message(s) the MPI LND refused: dropped",
           reported_by, a.pid, static_cast<unsigned long long>(bad));
  return true;
}

void ProxyRank::end_app(std::uint64_t serial, bool graceful) {
  auto it = apps_.find(serial);
  if (it == apps_.end()) return;
  App& a = it->second;
  if (a.ctl != MPI_REQUEST_NULL) {
    MPI_Cancel(&a.ctl);
    MPI_Wait(&a.ctl, MPI_STATUS_IGNORE);
  }
  // Every message of the application's is answered (lnetd's with an error) before its
  // pid goes.
  a.link->stop(!graceful);
  up_->detach(*a.link);
  if (!up_->gone())
    if (auto r = up_->call(up::PidRelease{0, a.pid}, std::chrono::seconds(opts_.timeout)); !r || r->status)
      LNET_LOG(Warn, kLogDaemon, "proxy rank %d: PID_RELEASE of %u: %s", rank_, a.pid,
               r ? errno_string(r->status).c_str() : r.message().c_str());
  if (graceful) {
    MPI_Comm_free(&a.merged);
    MPI_Comm_disconnect(&a.inter);
  } else {
    // A gone application takes no part in a disconnect: the communicators are left.
    MPI_Comm_free(&a.merged);
    MPI_Comm_free(&a.inter);
  }
  if (rank_ == 0)
    LNET_LOG(Info, kLogDaemon, "proxy: application pid %u %s", a.pid, graceful ? "said goodbye" : "dropped");
  apps_.erase(it);
}

void ProxyRank::end_all() {
  while (!apps_.empty()) end_app(apps_.begin()->first, false);
}

}  // namespace lnet::proxy
