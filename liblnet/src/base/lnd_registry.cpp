// The process-wide table of LND factories. It names no driver: each registers itself
// (the built-in ones when liblnet is loaded) or is registered by the program.
#include "base/lnd_registry.hpp"

#include <map>

#include <lnet/mutex.hpp>

namespace lnet {

namespace {
struct Registry {
  Mutex mutex;
  std::map<std::uint32_t, LndFactory> factories LNET_GUARDED_BY(mutex);
};
Registry& registry() {
  static Registry* r = new Registry;  // drivers register from static initialisers
  return *r;
}
}  // namespace

void register_lnd(std::uint32_t net_type, LndFactory factory) {
  Registry& r = registry();
  MutexLock g(r.mutex);
  r.factories[net_type] = factory;
}

std::unique_ptr<Lnd> make_lnd(std::uint32_t net_type) {
  Registry& r = registry();
  MutexLock g(r.mutex);
  auto it = r.factories.find(net_type);
  return it == r.factories.end() ? nullptr : it->second();
}

}  // namespace lnet

namespace lnet {

Status Lnd::check_config(const NetConfig& config) const {
  const LndTunables& t = config.lnd_tunables;
  const LndTunables none;
  std::string net = config.net.to_string();
  if (t.conns_per_peer != none.conns_per_peer)
    return Failure{-EOPNOTSUPP, "not supported yet: conns_per_peer on " + net + " (its driver takes no such tunable)"};
  if (t.timeout != none.timeout)
    return Failure{-EOPNOTSUPP, "not supported yet: an LND timeout on " + net + " (its driver takes no such tunable)"};
  if (t.tos != none.tos)
    return Failure{-EOPNOTSUPP, "not supported yet: tos on " + net + " (its driver takes no such tunable)"};
  return {};
}

}  // namespace lnet
