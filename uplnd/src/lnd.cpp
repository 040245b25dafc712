// UpLnd: the driver object lnetd hands to its Instance; one NI, on an mpi net.
#include <lnet/lnd/ifaddr.hpp>
#include <lnet/lnd/mpi_net.hpp>
#include <lnet/log.hpp>
#include <lnet/up/uplnd.hpp>

#include "up_ni.hpp"

namespace lnet::up {

// The region, offered to the host for its router buffers.
class UpLnd::Memory final : public BufferMemory {
 public:
  explicit Memory(std::unique_ptr<Region> r) : region(std::move(r)) {}
  void* allocate(std::size_t size) override { return region->allocate(size); }
  std::unique_ptr<Region> region;
};

UpLnd::UpLnd(UpOptions opts) : opts_(std::move(opts)) {
  auto r = Region::create(opts_.region_size, "lnet-bridge");
  if (r)
    memory_ = std::make_unique<Memory>(std::move(*r));
  else
    LNET_LOG(Error, kLogLnd, "the UP LND has no shared region: %s", r.message().c_str());
}

UpLnd::~UpLnd() {
  MutexLock g(mutex_);
  delete ni_;
  ni_ = nullptr;
}

std::uint32_t UpLnd::net_type() const { return kMpiLnd; }

bool UpLnd::serves(std::uint32_t type) const { return mpi_net_type(type); }

Status UpLnd::check_config(const NetConfig& config) const {
  if (config.lnd_tunables.get_or("timeout", 0) != 0)
    return Failure{-EOPNOTSUPP,
                   "not supported yet: an LND timeout on " + config.net.to_string() + " (the UP LND keeps none)"};
  return Lnd::check_config(config);
}

std::vector<std::pair<std::string, std::uint64_t>> UpLnd::counters() const {
  if (!running()) return {};
  UpStats s = stats();
  return {{"proxies", s.proxies},
          {"connections", s.connections},
          {"refused_connections", s.refused},
          {"pids", s.pids},
          {"parses", s.parses},
          {"sends", s.sends},
          {"payloads_in_place", s.in_place},
          {"payloads_copied", s.copies},
          {"payloads_inline", s.inlined},
          {"bad_messages", s.bad_messages},
          {"failed_messages", s.failed},
          {"dropped_messages", s.dropped},
          {"connections_over_limit", s.over_limit},
          {"hello_timeouts", s.hello_timeouts},
          {"kept_receives", s.kept},
          {"kept_receives_now", s.kept_now}};
}

namespace {
// The mpi net type's tunables (<lnet/lnd/mpi_net.hpp>).
const bool kTunablesDeclared = [] {
  register_lnd_tunables(kMpiLnd, mpi_net_tunables());
  return true;
}();
}  // namespace

int UpLnd::startup(NetInterface& ni) {
  MutexLock g(mutex_);
  if (ni_) return fail_startup(ni, -EEXIST, "lnetd serves one mpi net (its bridge is " + opts_.bridge + ")");
  if (!memory_) return fail_startup(ni, -ENOMEM, "no shared memory region for the bridge");
  if (ni.nid.is_any()) {
    auto ip = interface_ipv4(ni.config.interfaces.empty() ? std::string() : ni.config.interfaces.front());
    if (!ip) return fail_startup(ni, ip.code(), ip.message());
    ni.nid = Nid::make(ni.config.net, *ip);
  }
  if (!mpi_node_address(ni.nid.addr()))
    return fail_startup(ni, -EINVAL, ni.nid.to_string() + " is an application's address, not an IPv4 one");
  if (ni.config.tunables.peer_credits == 0) ni.config.tunables.peer_credits = 32;
  auto* u = new UpNi(ni, *memory_->region, opts_);
  u->set_nets(nets_);
  if (Status s = u->start(); !s) {
    delete u;
    return fail_startup(ni, s.code(), s.message());
  }
  ni.lnd_data = u;
  ni_ = u;
  return 0;
}

void UpLnd::shutdown(NetInterface& ni) {
  auto* u = static_cast<UpNi*>(ni.lnd_data);
  if (!u) return;
  u->stop();
  MutexLock g(mutex_);
  if (ni_ == u) ni_ = nullptr;
  ni.lnd_data = nullptr;
  delete u;
}

int UpLnd::send(NetInterface& ni, LndMessage& msg) { return static_cast<UpNi*>(ni.lnd_data)->send(msg); }

int UpLnd::recv(NetInterface& ni, void* lnd_private, LndMessage* msg, bool delayed, const iovec* iov, unsigned niov,
                std::uint32_t offset, std::uint32_t mlen, std::uint32_t rlen) {
  return static_cast<UpNi*>(ni.lnd_data)
      ->recv(static_cast<Desc*>(lnd_private), msg, iov, niov, offset, mlen, rlen, delayed);
}

BufferMemory* UpLnd::router_memory() { return memory_.get(); }

bool UpLnd::link_alive(const NetInterface& ni) const {
  (void)ni;  // this driver's one NI, which may be going down: ni_ under the lock
  MutexLock g(mutex_);
  return ni_ && ni_->proxies() > 0;
}

UpStats UpLnd::stats() const {
  MutexLock g(mutex_);
  return ni_ ? ni_->stats() : UpStats{};
}

bool UpLnd::running() const {
  MutexLock g(mutex_);
  return ni_ != nullptr;
}

void UpLnd::set_nets(std::vector<NetId> nets) {
  MutexLock g(mutex_);
  nets_ = nets;
  if (ni_) ni_->set_nets(std::move(nets));
}

}  // namespace lnet::up
