// lnet::mpi::Session: a Group, an MpiLnd for its communicator (or, with LNET_PROXY, for
// the communicator merged with a parallel proxy's), and an Instance with the driver's NI,
// started and ended collectively.
#include <thread>

#include <lnet/control.hpp>
#include <lnet/log.hpp>
#include <lnet/mpi.hpp>

#include "proxy_client.hpp"

namespace lnet::mpi {

Result<std::unique_ptr<Session>> Session::start(MPI_Comm comm) {
  auto cfg = Config::from_env();
  if (!cfg) return cfg.failure();
  auto opts = Options::from_env();
  if (!opts) return opts.failure();
  return start(comm, *cfg, *opts);
}

namespace {

// One route per net the proxies' lnetds reach and per proxy rank: every proxy is a
// gateway to every such net.
Status add_proxy_routes(Instance& lnet, const proxy::Table& t) {
  for (NetId net : t.nets)
    for (Nid gw : t.proxies)
      if (Status s = lnet.control().add_route(RouteConfig{net, gw, 1, 0}); !s)
        return Failure{s.code(), "route to " + net.to_string() + " via " + gw.to_string() + ": " + s.message()};
  return {};
}

}  // namespace

Result<std::unique_ptr<Session>> Session::start(MPI_Comm comm, Config cfg, Options opts) {
  auto group = Group::create(comm);
  if (!group) return group.failure();
  std::unique_ptr<Session> s(new Session);
  s->group_ = std::move(*group);
  s->pid_ = s->group_->pid();
  if (!opts.proxy.empty()) {
    auto link = ProxyLink::open(*s->group_, opts);
    if (!link) return Failure{link.code(), "cannot start LNet over MPI: " + link.message()};
    s->link_ = std::move(*link);
    // The job is on its proxies' network (their lnetds chose it) unless LNET_MPI_NET
    // names one; every rank has the same table, so every rank fails alike.
    const std::vector<Nid>& proxies = s->link_->table().proxies;
    if (!opts.net_given && !proxies.empty()) opts.net = proxies.front().net();
    for (Nid p : proxies)
      if (p.net() != opts.net)
        return Failure{-EINVAL, "cannot start LNet over MPI: the proxy's lnetds are on " + p.net().to_string() +
                                    ", this job on " + opts.net.to_string() + " (LNET_MPI_NET)"};
  }
  NetId net = opts.net;
  s->net_ = net;
  for (const NetConfig& nc : cfg.nets)
    if (nc.net == net) return Failure{-EINVAL, net.to_string() + " is configured already: the session adds it"};
  if (s->link_) {
    s->pid_ = s->link_->table().pid;
    s->lnd_ = std::make_shared<MpiLnd>(s->link_->merged(), s->link_->nids(net, s->group_->size()), opts);
    s->lnd_->on_poll(&ProxyLink::poll, s->link_.get());  // heartbeats without a thread of their own
  } else {
    s->lnd_ = std::make_shared<MpiLnd>(s->group_->comm(), opts);
  }
  NetConfig nc;
  nc.net = net;
  nc.nid = Nid::make(net, static_cast<std::uint32_t>(s->group_->rank()));
  cfg.nets.push_back(nc);
  Status mine;
  if (auto inst = Instance::create(cfg, s->pid_, {s->lnd_})) {
    s->lnet_ = std::move(*inst);
    if (s->link_) mine = add_proxy_routes(*s->lnet_, s->link_->table());
  } else {
    mine = inst.failure();
  }
  // Everyone up, or everyone down.
  if (Status all = s->group_->agree(mine); !all) {
    s->lnet_.reset();
    return Failure{all.code(), "cannot start LNet over MPI: " + all.message()};
  }
  if (s->link_) s->link_->start_heartbeat();
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
    // Over the job's own ranks: the proxy's are not part of its end.
    if (int rc = lnd_->barrier(std::chrono::steady_clock::now() + std::chrono::seconds(60), group_->comm()); rc != 0)
      LNET_LOG(Warn, kLogLnd, "rank %d: the closing barrier failed: %s; ending anyway", rank(),
               errno_string(rc).c_str());
  }
  lnet_.reset();  // shuts the NI down before the communicator goes with the group
  link_.reset();  // the goodbye, and the proxy's communicators
}

Nid Session::nid(int rank) const { return Nid::make(net_, static_cast<std::uint32_t>(rank)); }

std::vector<Nid> Session::proxies() const { return link_ ? link_->table().proxies : std::vector<Nid>{}; }

}  // namespace lnet::mpi
