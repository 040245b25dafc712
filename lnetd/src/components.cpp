// The components lnetd runs beside liblnet: the UP LND (the bridge that parallel proxies
// connect to), the o2ib LND (InfiniBand and RoCE ports through rdma-core) and LNet
// self-test. A new one is a class here and a line in
// make_components().
#include "components.hpp"

#include <algorithm>

#include <lnet/log.hpp>
#include <lnet/o2ib/o2iblnd.hpp>
#include <lnet/peer_cred.hpp>
#include <lnet/up/uplnd.hpp>
#include <selftest/console.hpp>
#include <selftest/framework.hpp>
#include <selftest/lst.hpp>
#include <selftest/services.hpp>

namespace lnetd {

namespace po = boost::program_options;
using namespace lnet;

namespace {

// The UP LND serves the MPI network (the proxies' bridge): an mpi net, or a net of a
// kernel type a site chose for it (mpi_net_type()); its shared region holds the router
// buffers, so forwarded payloads cross the bridge without a copy.
class UpComponent final : public Component {
 public:
  void add_options(po::options_description& opts) override {
    opts.add_options()("bridge", po::value(&opts_.bridge)->default_value(up::kDefaultBridge),
                       "the UP LND's bridge socket, where proxies connect (mpi nets)")(
        "bridge-group", po::value(&group_), "group whose members may connect a proxy besides root")(
        "bridge-size", po::value(&mib_)->default_value(1024),
        "MiB of shared memory for payloads crossing the bridge (router buffers live there)");
  }
  bool take_options(const po::variables_map& vm) override {
    if (vm.count("bridge-group") && !group_.empty()) {  // "": no group (a unit's empty setting)
      opts_.group = group_id(group_);                   // a name or a number
      if (!opts_.group) {
        LNET_LOG(Error, kLogDaemon, "no group '%s' (--bridge-group)", group_.c_str());
        return false;
      }
    }
    if (mib_ < 16 || mib_ > (1u << 20)) {
      LNET_LOG(Error, kLogDaemon, "bad --bridge-size %u (16..1048576 MiB)", mib_);
      return false;
    }
    opts_.region_size = std::size_t{mib_} << 20;
    return true;
  }
  std::vector<std::shared_ptr<Lnd>> drivers() override {
    up_ = std::make_shared<up::UpLnd>(opts_);
    return {up_};
  }
  // Proxies pass the nets this lnetd reaches to their applications as the nets behind it.
  void changed(Instance& lnet) override { up_->set_nets(routed_nets(lnet.control())); }

 private:
  // The nets this lnetd reaches besides the MPI network: its other local nets, and the
  // nets of its routes. Its NIs of a type an MPI network can have are the UP LND's (no
  // other driver of lnetd takes one), and a route to a net of that type leads back to MPI.
  static std::vector<NetId> routed_nets(Control& c) {
    std::vector<NetId> out;
    std::vector<std::uint32_t> mpi_types{kMpiLnd};
    for (const NiInfo& i : c.ni_info())
      if (mpi_net_type(i.nid.net().type())) mpi_types.push_back(i.nid.net().type());
    auto add = [&out, &mpi_types](NetId n) {
      if (n.type() == kLoLnd || std::find(mpi_types.begin(), mpi_types.end(), n.type()) != mpi_types.end()) return;
      for (NetId have : out)
        if (have == n) return;
      out.push_back(n);
    };
    for (const NiInfo& i : c.ni_info()) add(i.nid.net());
    for (const RouteConfig& r : c.route_configs()) add(r.net);
    return out;
  }

  up::UpOptions opts_;
  std::string group_;
  unsigned mib_ = 1024;
  std::shared_ptr<up::UpLnd> up_;
};

// The o2ib LND: o2ib nets on the node's RDMA ports (an NI fails to come up, saying so,
// where the node has no RDMA device). Its tunables are known from the start, so that a
// configuration's "lnd tunables" of an o2ib net are read as its own.
class O2ibComponent final : public Component {
 public:
  O2ibComponent() { register_lnd_tunables(kO2ibLnd, o2ib::o2ib_tunables()); }
  std::vector<std::shared_ptr<Lnd>> drivers() override { return {o2ib::make_o2ib_lnd()}; }
};

// LNet self-test: the node's framework and services, and the console lst talks to
// (`lst ...` requests of the control socket).
class SelftestComponent final : public Component {
 public:
  ~SelftestComponent() override { stop(); }
  void add_options(po::options_description& opts) override {
    opts.add_options()("selftest",
                       "run LNet self-test: the test framework (ping, brw) and the lst console (as selftest: enable)");
  }
  bool take_options(const po::variables_map& vm) override {
    flag_ = vm.count("selftest") > 0;
    return true;
  }
  Status start(Instance& lnet, const dlc::SystemConfig& cfg) override {
    dlc::SelftestConfig stc = cfg.selftest.value_or(dlc::SelftestConfig{});
    if (!flag_ && !stc.enable) return {};
    // The console's NID names its sessions on the self-test wire, which carries 64-bit
    // NIDs only: the first classic NID, so that a node with IPv6 NIs before its IPv4
    // ones can still run a console; a node with large NIDs only cannot (new_session
    // says so).
    Nid self = Nid::any();
    for (Nid n : lnet.nids())
      if (!n.is_lo() && (self == Nid::any() || (self.is_large() && !n.is_large()))) self = n;
    rpc_ =
        std::make_unique<selftest::RpcNode>(lnet, std::chrono::seconds(stc.rpc_timeout ? stc.rpc_timeout : 1u << 30));
    fw_ = std::make_unique<selftest::Framework>(*rpc_, std::chrono::seconds(stc.session_timeout));
    services_ = std::make_unique<selftest::TestServices>(*rpc_);
    if (Status s = fw_->start(); !s) return Failure{s.code(), "cannot start self-test: " + s.message()};
    if (Status s = services_->start(); !s) return Failure{s.code(), "cannot start self-test: " + s.message()};
    console_ = std::make_unique<selftest::Console>(*rpc_, self);
    if (Status s = console_->serve_join(); !s)
      return Failure{s.code(), "cannot start the self-test console: " + s.message()};
    LNET_LOG(Info, kLogDaemon, "self-test on: framework (session_timeout %us, rpc_timeout %us) and lst console",
             stc.session_timeout, stc.rpc_timeout);
    return {};
  }
  std::optional<dlc::Response> handle(const dlc::Request& req) override {
    if (req.command.rfind(std::string(selftest::lst::kPrefix), 0) != 0) return std::nullopt;
    if (!console_)
      return dlc::Response{-EOPNOTSUPP, "self-test is off in this lnetd (selftest: enable, or lnetd --selftest)\n"};
    return selftest::lst::execute(*console_, req);
  }
  std::vector<dlc::DriverCounters> service_stats() override {
    if (!fw_) return {};
    auto fw = fw_->fw_counters();
    auto rpc = rpc_->counters();
    auto session = fw_->session();
    return {{"selftest",
             {{"session", session ? 1 : 0},
              {"zombie_sessions", fw.zombie_sessions},
              {"active_batches", fw.active_batches},
              {"rejected_requests", fw_->rejected()},
              {"rpcs_sent", rpc.rpcs_sent},
              {"rpcs_rcvd", rpc.rpcs_rcvd},
              {"rpc_errors", rpc.errors},
              {"rpcs_dropped", rpc.rpcs_dropped},
              {"rpcs_expired", rpc.rpcs_expired},
              {"brw_requests_refused", services_->brw_errors()},
              {"ping_requests_refused", services_->ping_errors()}}}};
  }
  void stop() override {  // the console and framework before the RPC layer they use
    console_.reset();
    fw_.reset();
    services_.reset();
    rpc_.reset();
  }

 private:
  bool flag_ = false;
  std::unique_ptr<selftest::RpcNode> rpc_;
  std::unique_ptr<selftest::Framework> fw_;
  std::unique_ptr<selftest::TestServices> services_;
  std::unique_ptr<selftest::Console> console_;
};

}  // namespace

std::vector<std::unique_ptr<Component>> make_components() {
  std::vector<std::unique_ptr<Component>> c;
  c.push_back(std::make_unique<UpComponent>());
  c.push_back(std::make_unique<O2ibComponent>());
  c.push_back(std::make_unique<SelftestComponent>());
  return c;
}

}  // namespace lnetd
