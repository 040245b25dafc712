// lnet-xfer: the command line, the instance, the mode.
#include <cstdio>
#include <cstdlib>

#include <lnet/o2ib/o2iblnd.hpp>

#include "xfer.hpp"

using namespace lnet;
using namespace lnet::xfer;

namespace {

[[noreturn]] void bad(const std::string& why) {
  std::fprintf(stderr, "lnet-xfer: %s\nTry 'lnet-xfer --help'.\n", why.c_str());
  std::exit(2);
}

// The instance: the NIs of --nid (else of LNET_NETWORKS / LNET_IP2NETS), the tunables
// and fault rules of LNET_*, the routes and the peer.
std::unique_ptr<Instance> bring_up(const Args& a) {
  auto env = Config::from_env();
  if (!env) {
    std::fprintf(stderr, "lnet-xfer: %s\n", env.message().c_str());
    std::exit(1);
  }
  Config cfg = *env;
  if (!a.nids.empty()) cfg.nets.clear();
  for (Nid nid : a.nids) {
    NetConfig nc;
    nc.net = nid.net();
    nc.nid = nid;
    cfg.nets.push_back(nc);
  }
  if (cfg.nets.empty()) bad("no network: give --nid NID or set LNET_NETWORKS");
  // A client is pid 12345 too, as Lustre's own nodes are.
  auto created = Instance::create(cfg, a.mode == "serve" ? a.pid : kPidLustre);
  if (!created) {
    std::fprintf(stderr, "lnet-xfer: %s\n", created.message().c_str());
    std::exit(1);
  }
  std::unique_ptr<Instance> lnet = std::move(*created);
  for (const auto& [net, gw] : a.routes)
    if (Status s = lnet->control().add_route(RouteConfig{net, gw, -1, 0}); !s) {
      std::fprintf(stderr, "lnet-xfer: route %s via %s: %s\n", net.to_string().c_str(), gw.to_string().c_str(),
                   s.message().c_str());
      std::exit(1);
    }
  if (a.peer && !a.peer_nids.empty())
    if (Status s = lnet->control().add_peer(PeerConfig{*a.peer, true, a.peer_nids}, true); !s) {
      std::fprintf(stderr, "lnet-xfer: peer %s: %s\n", a.peer->to_string().c_str(), s.message().c_str());
      std::exit(1);
    }
  return lnet;
}

}  // namespace

int main(int argc, char** argv) {
  lnet::o2ib::register_o2ib_lnd();  // o2ib NIs (an RDMA port) besides tcp ones
  auto parsed = parse_args(argc, argv);
  if (!parsed) bad(parsed.message());
  Args a = *parsed;
  if (a.help || a.version) {
    std::fputs(a.help ? usage().c_str() : "lnet-xfer (lnet-mpi) 0.1.0\n", stdout);
    return 0;
  }
  std::unique_ptr<Instance> lnet = bring_up(a);
  if (a.mode == "serve") return serve(*lnet, a);
  if (a.mode == "ping") return ping(*lnet, a);
  if (a.mode == "check") return check(*lnet, a);
  if (a.mode == "stream") return stream(*lnet, a);
  return transfer(*lnet, a);
}
