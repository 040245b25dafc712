// lnet::mpi::Session: the collective start and end of LNet over an MPI communicator.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include <lnet/log.hpp>
#include <lnet/mpi.hpp>

#include "mpi_lnd.hpp"

namespace lnet::mpi {

namespace {

std::string mpi_failure(const char* what, int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
    return std::string(what) + " failed: MPI error " + std::to_string(rc);
  return std::string(what) + " failed: " + std::string(text, static_cast<std::size_t>(len));
}

}  // namespace

Result<std::unique_ptr<Session>> Session::start(MPI_Comm comm) {
  auto cfg = Config::from_env();
  if (!cfg) return cfg.failure();
  auto opts = Options::from_env();
  if (!opts) return opts.failure();
  return start(comm, *cfg, *opts);
}

Result<std::unique_ptr<Session>> Session::start(MPI_Comm comm, Config cfg, Options opts) {
  int inited = 0, finalized = 0;
  if (int rc = MPI_Initialized(&inited); rc != MPI_SUCCESS) return Failure{-EIO, mpi_failure("MPI_Initialized", rc)};
  if (int rc = MPI_Finalized(&finalized); rc != MPI_SUCCESS) return Failure{-EIO, mpi_failure("MPI_Finalized", rc)};
  if (!inited || finalized) return Failure{-EINVAL, "MPI is not initialised: call MPI_Init before starting LNet"};
  if (comm == MPI_COMM_NULL) return Failure{-EINVAL, "no communicator (MPI_COMM_NULL)"};
  NetId net = NetId::make(kMpiLnd, opts.net_number);
  for (const NetConfig& nc : cfg.nets)
    if (nc.net == net) return Failure{-EINVAL, net.to_string() + " is configured already: the session adds it"};

  std::unique_ptr<Session> s(new Session);
  s->net_ = opts.net_number;
  // Our own communicator: never traffic on the application's.
  if (int rc = MPI_Comm_dup(comm, &s->comm_); rc != MPI_SUCCESS) return Failure{-EIO, mpi_failure("MPI_Comm_dup", rc)};
  int rc = MPI_Comm_set_errhandler(s->comm_, MPI_ERRORS_RETURN);
  const char* what = "MPI_Comm_set_errhandler";
  if (rc == MPI_SUCCESS) {
    rc = MPI_Comm_rank(s->comm_, &s->rank_);
    what = "MPI_Comm_rank";
  }
  if (rc == MPI_SUCCESS) {
    rc = MPI_Comm_size(s->comm_, &s->size_);
    what = "MPI_Comm_size";
  }
  if (rc != MPI_SUCCESS) {
    (void)MPI_Comm_free(&s->comm_);  // already failing: its own error adds nothing
    s->comm_ = MPI_COMM_NULL;
    return Failure{-EIO, mpi_failure(what, rc)};
  }
  // One pid for the whole job: rank 0's, as a userspace client's (LNET_PID_USERFLAG).
  unsigned pid = static_cast<unsigned>(getpid()) | kPidUserFlag;
  if (rc = MPI_Bcast(&pid, 1, MPI_UNSIGNED, 0, s->comm_); rc != MPI_SUCCESS) {
    (void)MPI_Comm_free(&s->comm_);
    s->comm_ = MPI_COMM_NULL;
    return Failure{-EIO, mpi_failure("MPI_Bcast", rc)};
  }
  s->pid_ = pid;

  register_mpi_lnd();
  bool taken = find_ni(opts.net_number) != nullptr;
  std::string error;
  int code = 0;
  if (taken) {
    code = -EBUSY;
    error = net.to_string() + " is already up in this process";
  } else {
    set_comm_for_net(opts.net_number, s->comm_, opts);
    NetConfig nc;
    nc.net = net;
    nc.nid = Nid::make(net, static_cast<std::uint32_t>(s->rank_));
    // As with LNet's own drivers, peer_credits is the driver's per-peer credit count: the
    // core hands a peer no more messages at a time than the driver may have in flight.
    nc.tunables.peer_credits = opts.credits;
    cfg.nets.push_back(nc);
    auto inst = Instance::create(cfg, pid);
    if (inst) {
      s->lnet_ = std::move(*inst);
    } else {
      code = inst.code();
      error = inst.message();
    }
  }
  // Everyone up, or everyone down: a rank that failed must not leave the others waiting
  // in a later collective.
  int ok = code == 0 ? 1 : 0, all = 0;
  if (rc = MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, s->comm_); rc != MPI_SUCCESS) {
    all = 0;
    if (!code) {
      code = -EIO;
      error = mpi_failure("MPI_Allreduce", rc);
    }
  }
  if (!all) {
    s->lnet_.reset();
    if (!taken) clear_comm_for_net(opts.net_number);
    if (int frc = MPI_Comm_free(&s->comm_); frc != MPI_SUCCESS)
      LNET_LOG(Warn, kLogLnd, "%s", mpi_failure("MPI_Comm_free", frc).c_str());
    s->comm_ = MPI_COMM_NULL;
    if (!code) {
      code = -EIO;
      error = "another rank failed to start LNet";
    }
    return Failure{code, "cannot start LNet over MPI: " + error};
  }
  return s;
}

Session::~Session() {
  if (comm_ == MPI_COMM_NULL) return;
  if (MpiNi* ni = find_ni(net_)) {
    // Our own transfers first, then everyone's: peers may still be sending to us.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!ni->idle() && std::chrono::steady_clock::now() < deadline) {
      if (ni->has_thread() || !lnet_->progress()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (!ni->idle()) LNET_LOG(Warn, kLogLnd, "rank %d: transfers still running when LNet ends", rank_);
    if (int rc = ni->barrier(std::chrono::steady_clock::now() + std::chrono::seconds(60)); rc != 0)
      LNET_LOG(Warn, kLogLnd, "rank %d: the closing barrier failed (%d); ending anyway", rank_, rc);
  }
  lnet_.reset();
  clear_comm_for_net(net_);
  if (int rc = MPI_Comm_free(&comm_); rc != MPI_SUCCESS)
    LNET_LOG(Warn, kLogLnd, "%s", mpi_failure("MPI_Comm_free", rc).c_str());
}

Nid Session::nid(int rank) const { return Nid::make(NetId::make(kMpiLnd, net_), static_cast<std::uint32_t>(rank)); }

bool Session::progress_thread() const {
  MpiNi* ni = find_ni(net_);
  return ni && ni->has_thread();
}

Stats Session::stats() const {
  MpiNi* ni = find_ni(net_);
  return ni ? ni->stats() : Stats{};
}

}  // namespace lnet::mpi
