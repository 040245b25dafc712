// Applying a document to a running instance: add, delete or show what it names, all
// of it or nothing.
#include <lnet/dlc.hpp>

#include <algorithm>
#include <functional>
#include <unordered_set>

namespace lnet::dlc {

namespace {

// Show: the current state of what the document names.
std::string show_named(Instance& lnet, const SystemConfig& cfg) {
  SystemConfig now = export_config(lnet);
  SystemConfig sel;
  for (const auto& nc : now.nets)
    for (const auto& want : cfg.nets)
      if (want.net == nc.net) {
        sel.nets.push_back(nc);
        break;
      }
  for (const auto& r : now.routes)
    for (const auto& want : cfg.routes)
      if (want.net == r.net && want.gateway == r.gateway) sel.routes.push_back(r);
  for (const auto& p : now.peers)
    for (const auto& want : cfg.peers)
      if (want.primary == p.primary) sel.peers.push_back(p);
  if (cfg.routing) sel.routing = now.routing;
  if (cfg.buffers) sel.buffers = now.buffers;
  if (cfg.global) sel.global = now.global;
  return config_to_yaml(sel, true);
}

// Delete: everything named must exist before anything goes.
Status delete_named(Control& c, const SystemConfig& cfg) {
  auto nis = c.ni_info();
  for (const auto& nc : cfg.nets) {
    bool found = false;
    for (const auto& i : nis) found = found || i.nid.net() == nc.net;
    if (!found) return Failure{-ENOENT, "no network " + nc.net.to_string() + " to delete"};
  }
  auto routes = c.route_configs();
  for (const auto& r : cfg.routes) {
    bool found = false;
    for (const auto& x : routes) found = found || (x.net == r.net && x.gateway == r.gateway);
    if (!found) return Failure{-ENOENT, "no route to " + r.net.to_string() + " via " + r.gateway.to_string()};
  }
  for (const auto& r : cfg.routes) (void)c.del_route(r.net, r.gateway);
  // A list that names the primary deletes the peer (as lnetctl peer del --prim_nid P --nid P,...).
  for (const auto& p : cfg.peers) (void)c.del_peer(p.primary, p.lists_primary ? std::vector<Nid>{} : p.nids);
  for (const auto& f : cfg.faults) (void)c.del_faults(f.delay, f.source, f.dest);
  for (const auto& nc : cfg.nets) {
    for (const auto& i : nis) {
      if (i.nid.net() != nc.net) continue;
      if (nc.nid && *nc.nid != i.nid) continue;
      if (!nc.interfaces.empty() && i.interfaces != nc.interfaces) continue;
      (void)c.del_ni(i.nid);
    }
  }
  return {};
}

// The items of `items` the instance does not have (`has`); a line in *kept for each one
// it has (`name`).
template <typename T, typename Has, typename Name>
std::vector<T> not_had(const std::vector<T>& items, Has has, Name name, std::string* kept) {
  std::vector<T> rest;
  for (const T& x : items) {
    if (!has(x))
      rest.push_back(x);
    else if (kept)
      *kept += "# " + name(x) + ": configured already, left as it is\n";
  }
  return rest;
}

// Merge: the part of the document the instance does not have yet; *kept gets a line for
// each item it has.
SystemConfig not_yet_configured(Control& c, const SystemConfig& cfg, std::string* kept) {
  SystemConfig rest = cfg;
  auto nis = c.ni_info();
  rest.nets = not_had(
      cfg.nets,
      [&](const NetConfig& nc) {
        return nc.net.type() == kLoLnd || std::any_of(nis.begin(), nis.end(), [&](const auto& i) {
                 return i.nid.net() == nc.net &&
                        (nc.nid ? *nc.nid == i.nid : nc.interfaces.empty() || nc.interfaces == i.interfaces);
               });
      },
      [](const NetConfig& nc) { return "net " + (nc.nid ? nc.nid->to_string() : nc.net.to_string()); }, kept);
  auto routes = c.route_configs();
  rest.routes = not_had(
      cfg.routes,
      [&](const RouteConfig& r) {
        return std::any_of(routes.begin(), routes.end(),
                           [&](const auto& x) { return x.net == r.net && x.gateway == r.gateway; });
      },
      [](const RouteConfig& r) { return "route to " + r.net.to_string() + " via " + r.gateway.to_string(); }, kept);
  auto peers = c.configured_peers();
  rest.peers = not_had(
      cfg.peers,
      [&](const PeerConfig& p) {  // the peer, with every NID the document names
        return std::any_of(peers.begin(), peers.end(), [&](const PeerConfig& x) {
          return x.primary == p.primary && std::all_of(p.nids.begin(), p.nids.end(), [&](Nid n) {
                   return n == x.primary || std::find(x.nids.begin(), x.nids.end(), n) != x.nids.end();
                 });
        });
      },
      [](const PeerConfig& p) { return "peer " + p.primary.to_string(); }, kept);
  auto rules = c.udsp_rules();
  rest.udsp = not_had(
      cfg.udsp, [&](const UdspRule& u) { return std::find(rules.begin(), rules.end(), u) != rules.end(); },
      [](const UdspRule& u) { return "udsp rule " + u.src + (u.dst.empty() ? "" : " -> " + u.dst); }, kept);
  auto drops = c.faults(false), delays = c.faults(true);
  rest.faults = not_had(
      cfg.faults,
      [&](const FaultRule& f) {
        const auto& have = f.delay ? delays : drops;
        return std::any_of(have.begin(), have.end(), [&](const FaultRuleInfo& x) { return x.rule == f; });
      },
      [](const FaultRule& f) {
        return std::string(f.delay ? "delay" : "drop") + " rule " + f.source.to_string() + " -> " + f.dest.to_string();
      },
      kept);
  return rest;
}

// Add, in order; a failure undoes what was done, last first.
class Adder {
 public:
  explicit Adder(Control& c) : c_(c) {}
  ~Adder() {
    if (!done_)
      for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) (*it)();
  }
  Status run(const SystemConfig& cfg) {
    if (!cfg.global_keys.empty()) {  // what the document names, over what the instance has
      GlobalTunables g = c_.globals();
      for (const auto& [name, value] : cfg.global_keys)
        if (Status s = g.set(name, value); !s) return s;
      if (Status s = global(g); !s) return Failure{s.code(), "'global': " + s.message()};
    } else if (cfg.global) {
      if (Status s = global(*cfg.global); !s) return s;
    }
    if (cfg.buffers)
      if (Status s = buffers(*cfg.buffers); !s) return s;
    // Routing on before the nets come up: a router's first ping reply already says it
    // routes (a kernel peer that reads RTE_DISABLED there keeps its routes through this
    // node down until its next router check).
    if (cfg.routing && *cfg.routing)
      if (Status s = routing(true); !s) return s;
    for (const auto& nc : cfg.nets)
      if (Status s = net(nc); !s) return s;
    // Peers before routes: the gateways an export lists among the peers keep their place.
    for (const auto& p : cfg.peers)
      if (Status s = peer(p); !s) return s;
    for (const auto& rt : cfg.routes)
      if (Status s = route(rt); !s) return s;
    for (const auto& u : cfg.udsp)
      if (Status s = udsp(u); !s) return s;
    if (cfg.routing && !*cfg.routing)
      if (Status s = routing(false); !s) return s;
    for (const FaultRule& f : cfg.faults) {  // last: checked when parsed
      if (Status s = c_.add_fault(f); !s) return s;
      undo_.push_back([this, f] { (void)c_.del_faults(f.delay, f.source, f.dest); });
    }
    done_ = true;
    return {};
  }

 private:
  Status global(const GlobalTunables& g) {
    GlobalTunables before = c_.globals();
    if (Status s = c_.set_globals(g); !s) return s;
    undo_.push_back([this, before] { (void)c_.set_globals(before); });
    return {};
  }
  Status buffers(const BufferConfig& b) {
    BufferConfig before = c_.buffers();
    if (Status s = c_.set_buffers(b); !s) return s;
    undo_.push_back([this, before] { (void)c_.set_buffers(before); });
    return {};
  }
  Status net(const NetConfig& nc) {
    auto r = c_.add_ni(nc);
    if (!r) return Failure{r.code(), "cannot add " + nc.net.to_string() + ": " + r.message()};
    Nid nid = *r;
    undo_.push_back([this, nid] { (void)c_.del_ni(nid); });
    return {};
  }
  Status route(const RouteConfig& rt) {
    if (Status s = c_.add_route(rt); !s) return s;
    undo_.push_back([this, rt] { (void)c_.del_route(rt.net, rt.gateway); });
    return {};
  }
  Status peer(const PeerConfig& p) {
    if (!peers_listed_) {  // the configured peers before this import, listed once
      for (const auto& x : c_.configured_peers()) configured_.insert(x.primary);
      peers_listed_ = true;
    }
    bool existed = configured_.count(p.primary) > 0;
    if (Status s = c_.add_peer(p, true); !s) return s;
    if (!existed) undo_.push_back([this, p] { (void)c_.del_peer(p.primary, {}, true); });
    configured_.insert(p.primary);
    return {};
  }
  Status udsp(const UdspRule& u) {
    if (Status s = c_.add_udsp(u, -1); !s) return s;
    undo_.push_back([this] { (void)c_.del_udsp(static_cast<int>(c_.udsp_rules().size()) - 1); });
    return {};
  }
  Status routing(bool on) {
    bool before = c_.routing();
    if (Status s = c_.set_routing(on); !s) return s;
    undo_.push_back([this, before] { (void)c_.set_routing(before); });
    return {};
  }

  Control& c_;
  std::vector<std::function<void()>> undo_;
  std::unordered_set<Nid> configured_;
  bool peers_listed_ = false;
  bool done_ = false;
};

}  // namespace

Status apply_config(Instance& lnet, const SystemConfig& given, ImportMode mode, std::string* shown) {
  const SystemConfig* use = &given;
  SystemConfig resolved;
  if (!given.ip2nets.empty()) {  // the rules become NIs on this host's interfaces
    auto host = host_interfaces();
    if (!host) return host.failure();
    auto nis = resolve_ip2nets(given.ip2nets, *host);
    if (!nis) return nis.failure();
    resolved = given;
    resolved.ip2nets.clear();
    for (NetConfig& nc : *nis) {
      bool listed = false;
      for (const NetConfig& x : resolved.nets) listed = listed || (x.net == nc.net && x.interfaces == nc.interfaces);
      if (!listed) resolved.nets.push_back(nc);
    }
    use = &resolved;
  }
  const SystemConfig& cfg = *use;
  if (cfg.selftest)
    return Failure{-EOPNOTSUPP,
                   "not supported yet: 'selftest' on a running instance (lnetd takes it from its configuration file "
                   "or --selftest)"};
  switch (mode) {
    case ImportMode::Show:
      if (shown) *shown = show_named(lnet, cfg);
      return {};
    case ImportMode::Del: return delete_named(lnet.control(), cfg);
    case ImportMode::Add: return Adder(lnet.control()).run(cfg);
    case ImportMode::Merge: {
      std::string kept;
      SystemConfig rest = not_yet_configured(lnet.control(), cfg, &kept);
      if (shown) *shown = kept;
      return Adder(lnet.control()).run(rest);
    }
  }
  return {};
}

}  // namespace lnet::dlc
