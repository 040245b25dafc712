// The Control of an instance (lnet/control.hpp): what lnetctl, YAML import and the
// tools change and show. It configures the core and its parts (peer, health, router)
// and reads their state; it holds no state of its own. A friend of the core: the
// configuration mutex and the NI bring-up it drives are the core's.
#pragma once

#include <lnet/control.hpp>

#include "core/core.hpp"

namespace lnet::core {

class Admin final : public Control {
 public:
  explicit Admin(Core& c) : c_(c) {}

  Result<Nid> add_ni(const NetConfig& nc) override;
  Status del_ni(Nid nid) override;
  std::vector<NetConfig> net_configs() const override;
  std::vector<NiInfo> ni_info() const override;
  Status add_peer(const PeerConfig& p, bool configured) override;
  Status del_peer(Nid primary, const std::vector<Nid>& nids, bool force) override;
  std::vector<PeerConfig> configured_peers() const override;
  std::vector<PeerInfo> peer_info() const override;
  Result<PeerInfo> discover(Nid nid, bool force, std::chrono::milliseconds timeout) override;
  Status add_route(const RouteConfig& r) override { return c_.router_.add_route(r); }
  Status del_route(NetId net, Nid gateway) override { return c_.router_.del_route(net, gateway); }
  std::vector<RouteConfig> route_configs() const override { return c_.st_.routes.configs(); }
  std::vector<RouteInfo> route_info() const override { return c_.router_.route_info(); }
  Status set_routing(bool on) override { return c_.router_.set_routing(on); }
  bool routing() const override { return c_.st_.routing.load() && !c_.st_.routing_draining.load(); }
  bool routing_draining() const override { return c_.st_.routing_draining.load(); }
  void set_large_nids(bool on) override { c_.st_.large_nids.store(on); }
  bool large_nids() const override { return c_.st_.large_nids.load(); }
  Status set_buffers(const BufferConfig& b) override { return c_.router_.set_buffers(b); }
  BufferConfig buffers() const override { return c_.router_.buffers(); }
  std::vector<RouterCptInfo> router_pools() const override { return c_.router_.router_pools(); }
  GlobalTunables globals() const override;
  Status set_global(std::string_view name, long value) override;
  Status set_globals(const GlobalTunables& g) override;
  Status set_ni_health(Nid nid, int value) override;
  Status set_lnd_timeout(NetId net, int seconds) override;
  Status set_lnd_tunable(Nid nid, std::string_view name, long value) override;
  Status set_peer_ni_health(Nid nid, int value) override { return c_.health_.set_peer_ni_health(nid, value); }
  Status set_peer_state(Nid nid, std::uint32_t state) override;
  std::vector<Nid> recovery_queue(bool local) const override { return c_.health_.recovery_queue(local); }
  Status add_fault(const FaultRule& rule) override;
  int del_faults(bool delay, Nid source, Nid dest) override { return c_.faults_.rules.del(delay, source, dest); }
  void reset_faults(bool delay) override { c_.faults_.rules.reset(delay); }
  std::vector<FaultRuleInfo> faults(bool delay) const override { return c_.faults_.rules.list(delay); }
  Status add_udsp(const UdspRule& rule, int idx) override;
  Status del_udsp(int idx) override;
  std::vector<UdspRule> udsp_rules() const override;
  Counters counters() const override { return c_.st_.counters.snapshot(); }
  void reset_counters() override;
  std::vector<LndCounters> lnd_counters() const override;
  unsigned cpt_count() const override { return c_.st_.cpts.count(); }
  unsigned cpt_of_nid(Nid nid) const override { return c_.st_.cpts.of_nid(nid); }

 private:
  // Global tunables checked and taken; the ping target follows the discovery setting.
  Status apply_globals_locked(const GlobalTunables& g) LNET_REQUIRES(c_.nets_.mutex());

  Core& c_;
};

}  // namespace lnet::core
