// lnet::mpi::MpiLnd: the mpi driver of one communicator, for any host of the SPI.
#include <algorithm>

#include <lnet/lnd/mpi_net.hpp>
#include <lnet/lnd/numa.hpp>
#include <lnet/log.hpp>
#include <lnet/mpi.hpp>
#include <lnet/mutex.hpp>

#include "mpi_ni.hpp"

namespace lnet::mpi {

// How long a shutdown lets sends and cancellations finish before leaving them to MPI.
constexpr std::chrono::milliseconds kShutdownGrace{2000};

MpiLnd::MpiLnd(MPI_Comm comm, const Options& opts) : comm_(comm), opts_(opts) {}

MpiLnd::MpiLnd(MPI_Comm comm, std::vector<Nid> nids, const Options& opts)
    : comm_(comm), nids_(std::move(nids)), opts_(opts) {}

MpiLnd::~MpiLnd() = default;

Status MpiLnd::check_config(const NetConfig& config) const {
  const LndTunables& t = config.lnd_tunables;
  std::string net = config.net.to_string();
  if (config.net != opts_.net)
    return Failure{-EINVAL, "this MPI driver serves " + opts_.net.to_string() + ", not " + net};
  if (t.get("conns_per_peer"))
    return Failure{-EOPNOTSUPP, "not supported yet: conns_per_peer on " + net + " (MPI has no connections)"};
  if (t.get("tos")) return Failure{-EOPNOTSUPP, "not supported yet: tos on " + net + " (MPI chooses the transport)"};
  if (long to = t.get_or("timeout", 0); to < 0 || to > 3600)
    return Failure{-EINVAL, "LND timeout " + std::to_string(to) + " on " + net + " is not 0..3600"};
  return Lnd::check_config(config);  // any other key
}

int MpiLnd::startup(NetInterface& ni) {
  {
    MutexLock g(mutex_);
    if (ni_) return fail_startup(ni, -EEXIST, "one NI per communicator, and it has one");
  }
  int rank = 0, size = 0;
  for (int rc : {MPI_Comm_rank(comm_, &rank), MPI_Comm_size(comm_, &size)}) {
    if (rc != MPI_SUCCESS) return fail_startup(ni, -EIO, "MPI_Comm_rank/size failed: " + mpi_error_string(rc));
  }
  if (Status s = check_nids(ni.config.net, size); !s) return fail_startup(ni, s.code(), s.message());
  Nid want = nids_.empty() ? Nid::make(ni.config.net, static_cast<std::uint32_t>(rank))
                           : nids_[static_cast<std::size_t>(rank)];
  if (!ni.nid.is_any() && ni.nid != want)
    return fail_startup(
        ni, -EINVAL,
        "the NID of rank " + std::to_string(rank) + " is " + want.to_string() + ", not " + ni.nid.to_string());
  ni.nid = want;
  ni.numa_node = affinity_numa_node();  // the rank's cores stand for the device
  // Flow control (lnet-lnd(7)): by default the host hands a peer as many messages at a
  // time as this driver grants each peer short messages in flight.
  if (ni.config.tunables.peer_credits <= 0) ni.config.tunables.peer_credits = opts_.credits;
  auto m = std::make_unique<MpiNi>(ni, comm_, nids_, opts_);
  if (int rc = m->start()) {
    m->stop(kShutdownGrace);
    return rc;
  }
  if (on_poll_ && ni.poll) {
    ni_poll_ = ni.poll;
    ni_poll_ctx_ = ni.poll_ctx;
    ni.poll = &MpiLnd::poll_with_hook;
    ni.poll_ctx = this;
  }
  MutexLock g(mutex_);
  ni_ = m.get();
  ni.lnd_data = m.release();
  return 0;
}

bool MpiLnd::poll_with_hook(void* self) {
  auto* l = static_cast<MpiLnd*>(self);
  bool worked = l->ni_poll_(l->ni_poll_ctx_);
  return l->on_poll_(l->on_poll_ctx_) || worked;
}

Status MpiLnd::check_nids(NetId net, int size) const {
  if (nids_.empty()) return {};
  if (nids_.size() != static_cast<std::size_t>(size))
    return Failure{-EINVAL, "a table of " + std::to_string(nids_.size()) + " NIDs for a communicator of " +
                                std::to_string(size) + " ranks"};
  std::vector<Nid> sorted = nids_;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i].net() != net)
      return Failure{-EINVAL, "NID " + sorted[i].to_string() + " is not on " + net.to_string()};
    if (i && sorted[i] == sorted[i - 1])
      return Failure{-EINVAL, "NID " + sorted[i].to_string() + " is in the table twice"};
  }
  return {};
}

void MpiLnd::shutdown(NetInterface& ni) {
  auto* m = static_cast<MpiNi*>(ni.lnd_data);
  if (!m) return;
  {
    MutexLock g(mutex_);
    ni_ = nullptr;
  }
  m->stop(peers_gone_.load() ? std::chrono::milliseconds(0) : kShutdownGrace);
  delete m;
  ni.lnd_data = nullptr;
}

int MpiLnd::send(NetInterface& ni, LndMessage& msg) { return static_cast<MpiNi*>(ni.lnd_data)->send(msg); }

int MpiLnd::recv(NetInterface& ni, void* priv, LndMessage* msg, bool, const iovec* iov, unsigned niov,
                 std::uint32_t offset, std::uint32_t mlen, std::uint32_t rlen) {
  return static_cast<MpiNi*>(ni.lnd_data)->recv(priv, msg, iov, niov, offset, mlen, rlen);
}

int MpiLnd::timeout(const NetInterface& ni) const {
  auto* m = static_cast<const MpiNi*>(ni.lnd_data);
  return m ? m->timeout() : opts_.timeout;
}

std::vector<std::pair<std::string, std::uint64_t>> MpiLnd::counters() const {
  Stats s = stats();
  return {{"handshakes", s.handshakes},
          {"immediate", s.immediate},
          {"packed", s.packed},
          {"bulk", s.bulk},
          {"chunks", s.chunks},
          {"rdma_gets", s.rdma_gets},
          {"noops", s.noops},
          {"credit_waits", s.credit_waits},
          {"bad_messages", s.bad_messages},
          {"timeouts", s.timeouts},
          {"held_buffers", s.held},
          {"abandoned_receives", s.abandoned},
          {"receives_left_kept", s.left_kept},
          {"mpi_errors", s.mpi_errors}};
}

namespace {
// The mpi net type's tunables (<lnet/lnd/mpi_net.hpp>).
const bool kTunablesDeclared = [] {
  register_lnd_tunables(kMpiLnd, mpi_net_tunables());
  return true;
}();
}  // namespace

Stats MpiLnd::stats() const {
  MutexLock g(mutex_);
  return ni_ ? ni_->stats() : Stats{};
}

bool MpiLnd::progress_thread() const {
  MutexLock g(mutex_);
  return ni_ && ni_->has_thread();
}

bool MpiLnd::idle() const {
  MutexLock g(mutex_);
  return !ni_ || ni_->idle();
}

int MpiLnd::barrier(std::chrono::steady_clock::time_point deadline, MPI_Comm comm) {
  MpiNi* ni;
  {
    MutexLock g(mutex_);
    ni = ni_;
  }
  return ni ? ni->barrier(deadline, comm) : -ENETDOWN;
}

}  // namespace lnet::mpi
