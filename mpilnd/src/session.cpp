// lnet::mpi::Session: a Group, an MpiLnd for its communicator, and an Instance with the
// driver's NI, started and ended collectively.
#include <thread>

#include <lnet/log.hpp>
#include <lnet/mpi.hpp>

namespace lnet::mpi {

Result<std::unique_ptr<Session>> Session::start(MPI_Comm comm) {
  auto cfg = Config::from_env();
  if (!cfg) return cfg.failure();
  auto opts = Options::from_env();
  if (!opts) return opts.failure();
  return start(comm, *cfg, *opts);
}

Result<std::unique_ptr<Session>> Session::start(MPI_Comm comm, Config cfg, Options opts) {
  NetId net = NetId::make(kMpiLnd, opts.net_number);
  for (const NetConfig& nc : cfg.nets)
    if (nc.net == net) return Failure{-EINVAL, net.to_string() + " is configured already: the session adds it"};
  auto group = Group::create(comm);
  if (!group) return group.failure();
  std::unique_ptr<Session> s(new Session);
  s->group_ = std::move(*group);
  s->net_ = opts.net_number;
  s->lnd_ = std::make_shared<MpiLnd>(s->group_->comm(), opts);
  NetConfig nc;
  nc.net = net;
  nc.nid = Nid::make(net, static_cast<std::uint32_t>(s->group_->rank()));
  cfg.nets.push_back(nc);
  Status mine;
  if (auto inst = Instance::create(cfg, s->group_->pid(), {s->lnd_}))
    s->lnet_ = std::move(*inst);
  else
    mine = inst.failure();
  // Everyone up, or everyone down.
  if (Status all = s->group_->agree(mine); !all) {
    s->lnet_.reset();
    return Failure{all.code(), "cannot start LNet over MPI: " + all.message()};
  }
  return s;
}

Session::~Session() {
  if (lnet_) {
    // Our own transfers first, then everyone's: peers may still be sending to us.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!lnd_->idle() && std::chrono::steady_clock::now() < deadline) {
      if (lnd_->progress_thread() || !lnet_->progress()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (!lnd_->idle()) LNET_LOG(Warn, kLogLnd, "rank %d: transfers still running when LNet ends", rank());
    if (int rc = lnd_->barrier(std::chrono::steady_clock::now() + std::chrono::seconds(60)); rc != 0)
      LNET_LOG(Warn, kLogLnd, "rank %d: the closing barrier failed: %s; ending anyway", rank(),
               errno_string(rc).c_str());
  }
  lnet_.reset();  // shuts the NI down before the communicator goes with the group
}

Nid Session::nid(int rank) const { return Nid::make(NetId::make(kMpiLnd, net_), static_cast<std::uint32_t>(rank)); }

}  // namespace lnet::mpi
