// The process-wide table of LND factories. It names no driver: each registers itself
// (the built-in ones when liblnet is loaded) or is registered by the program.
#include "base/lnd_registry.hpp"

#include <algorithm>
#include <map>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

namespace lnet {

namespace {
struct Registry {
  Mutex mutex;
  std::map<std::uint32_t, LndFactory> factories LNET_GUARDED_BY(mutex);
  std::map<std::uint32_t, std::vector<LndTunableSpec>> tunables LNET_GUARDED_BY(mutex);
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

void register_lnd_tunables(std::uint32_t net_type, std::vector<LndTunableSpec> specs) {
  Registry& r = registry();
  MutexLock g(r.mutex);
  r.tunables[net_type] = std::move(specs);
}

std::vector<LndTunableSpec> lnd_tunables_of(std::uint32_t net_type) {
  Registry& r = registry();
  MutexLock g(r.mutex);
  auto it = r.tunables.find(net_type);
  // A type an MPI network can have takes the mpi type's keys unless its own driver is
  // here and declared its own (docs/design/mpi-net-type.md).
  if (it == r.tunables.end() && mpi_net_type(net_type)) it = r.tunables.find(kMpiLnd);
  return it == r.tunables.end() ? std::vector<LndTunableSpec>{} : it->second;
}

std::vector<std::uint32_t> registered_lnd_tunable_types() {
  Registry& r = registry();
  MutexLock g(r.mutex);
  std::vector<std::uint32_t> out;
  for (const auto& kv : r.tunables) out.push_back(kv.first);
  return out;
}

std::unique_ptr<Lnd> make_lnd(std::uint32_t net_type) {
  Registry& r = registry();
  MutexLock g(r.mutex);
  auto it = r.factories.find(net_type);
  return it == r.factories.end() ? nullptr : it->second();
}

}  // namespace lnet

namespace lnet {

int fail_startup(NetInterface& ni, int rc, std::string why) {
  LNET_LOG(Error, kLogLnd, "cannot start %s: %s", ni.config.net.to_string().c_str(), why.c_str());
  ni.startup_error = std::move(why);
  return rc;
}

Status Lnd::check_config(const NetConfig& config) const {
  // Every key set is one of the net type's tunables, settable, within its range.
  std::string net = config.net.to_string();
  std::vector<LndTunableSpec> specs = lnd_tunables_of(config.net.type());
  for (const auto& kv : config.lnd_tunables.values) {
    const std::string& name = kv.first;
    long value = kv.second;
    auto spec = std::find_if(specs.begin(), specs.end(), [&name](const LndTunableSpec& t) { return t.name == name; });
    if (spec == specs.end())
      return Failure{-EOPNOTSUPP, "not supported yet: " + name + " on " + net + " (its driver takes no such tunable)"};
    if (spec->read_only) continue;  // shown only; the driver keeps its own
    if (value < spec->min || value > spec->max)
      return Failure{-EINVAL, name + " " + std::to_string(value) + " on " + net + " is outside " +
                                  std::to_string(spec->min) + ".." + std::to_string(spec->max)};
  }
  return {};
}

}  // namespace lnet
