// lnetctl route show | add | del, and routing show.
#include <lnet/nid_range.hpp>

#include "commands.hpp"
#include "yaml_print.hpp"

namespace lnet::dlc {

namespace {

// --net and --gateway: a NID or, as the kernel's lnetctl takes it, a range of them
// (192.168.50.[11-15]@tcp, [11-16/2]): one route per gateway, at most as many as a
// peer has NIDs.
Result<std::pair<NetId, std::vector<Nid>>> route_args(const Request& r, const char* verb) {
  const std::string* net = r.arg("net");
  const std::string* gw = r.arg("gateway");
  if (!net || !gw) return Failure{-EINVAL, std::string("route ") + verb + " needs --net and --gateway"};
  auto n = NetId::parse(*net);
  if (!n) return n.failure();
  auto g = expand_nid_list(*gw, kMaxNidsPerPeer);
  if (!g) return Failure{g.code(), "--gateway '" + *gw + "': " + g.message()};
  return std::make_pair(*n, std::move(*g));
}

}  // namespace

Response route_show(Instance& lnet, const Request& r, const Hooks&) {
  std::optional<NetId> net;
  std::optional<Nid> gw;
  if (const std::string* s = r.arg("net")) {
    auto n = NetId::parse(*s);
    if (!n) return error_block("show", "route", -EINVAL, n.message());
    net = *n;
  }
  if (const std::string* s = r.arg("gateway")) {
    auto n = Nid::parse(*s);
    if (!n) return error_block("show", "route", -EINVAL, n.message());
    gw = *n;
  }
  auto hop = int_arg(r, "hop", -2, -1, 255);
  auto prio = int_arg(r, "priority", -1, 0, UINT32_MAX);
  auto verbose = int_arg(r, "verbose", 0, 0, INT_MAX);
  for (const auto* a : {&hop, &prio, &verbose})
    if (!*a) return error_block("show", "route", a->code(), a->message());
  YAML::Node list(YAML::NodeType::Sequence);
  for (const RouteInfo& ri : lnet.control().route_info()) {
    if ((net && *net != ri.net) || (gw && *gw != ri.gateway) || (*hop != -2 && *hop != ri.hops) ||
        (*prio >= 0 && static_cast<unsigned>(*prio) != ri.priority)) {
      continue;
    }
    YAML::Node e;
    e["net"] = ri.net.to_string();
    e["gateway"] = ri.gateway.to_string();
    if (*verbose > 0) {
      e["hop"] = int_node(ri.hops);
      e["priority"] = int_node(ri.priority);
      e["state"] = ri.up ? "up" : "down";
      e["type"] = ri.multi_hop ? "multi-hop" : "single-hop";
    }
    if (*verbose > 3) {  // ours besides lnetctl's (docs/interop.md)
      e["health_sensitivity"] = int_node(ri.health_sensitivity);
      e["gateway health"] = int_node(ri.gateway_health);
    }
    list.push_back(e);
  }
  if (list.size() == 0) return ok(YAML::Node());  // no route: nothing, as lnetctl
  YAML::Node root;
  root["route"] = list;
  return ok_netlink(root);
}

Response route_add(Instance& lnet, const Request& r, const Hooks&) {
  auto ng = route_args(r, "add");
  if (!ng) return error_block("add", "route", ng.code(), ng.message());
  const std::string* hop_text = r.arg("hop") ? r.arg("hop") : r.arg("hop-count");
  Request hr;
  if (hop_text) hr.args["hop"] = {*hop_text};
  auto hop = int_arg(hr, "hop", -1, -1, 255);
  auto prio = int_arg(r, "priority", 0, 0, UINT32_MAX);
  auto sens = int_arg(r, "health_sensitivity", 1, 0, 1000);
  if (!hop) return error_block("add", "route", hop.code(), hop.message());
  if (!prio) return error_block("add", "route", prio.code(), prio.message());
  if (!sens) return error_block("add", "route", sens.code(), sens.message());
  if (*hop == 0) return error_block("add", "route", -EINVAL, "--hop 0 is not 1..255");
  // One route per gateway; when one is refused, those added before it are taken back.
  std::vector<Nid> added;
  for (Nid gw : ng->second) {
    RouteConfig rc{ng->first, gw, static_cast<int>(*hop), static_cast<unsigned>(*prio), static_cast<unsigned>(*sens)};
    if (Status s = lnet.control().add_route(rc); !s) {
      for (Nid back : added) (void)lnet.control().del_route(ng->first, back);
      std::string why = ng->second.size() > 1 ? "via " + gw.to_string() + ": " + s.message() : s.message();
      return error_block("add", "route", s.code(), why);
    }
    added.push_back(gw);
  }
  return ok(YAML::Node());
}

Response route_del(Instance& lnet, const Request& r, const Hooks&) {
  auto ng = route_args(r, "del");
  if (!ng) return error_block("del", "route", ng.code(), ng.message());
  // Every route named must exist before any goes.
  auto routes = lnet.control().route_info();
  for (Nid gw : ng->second)
    if (std::none_of(routes.begin(), routes.end(),
                     [&](const RouteInfo& ri) { return ri.net == ng->first && ri.gateway == gw; }))
      return error_block("del", "route", -ENOENT,
                         "no route to " + ng->first.to_string() + " via " + gw.to_string() +
                             (ng->second.size() > 1 ? " (none of the range deleted)" : ""));
  for (Nid gw : ng->second)
    if (Status s = lnet.control().del_route(ng->first, gw); !s)
      return error_block("del", "route", s.code(),
                         ng->second.size() > 1 ? "via " + gw.to_string() + ": " + s.message() : s.message());
  return ok(YAML::Node());
}

Response routing_show(Instance& lnet, const Request&, const Hooks&) {
  const Control& c = lnet.control();
  if (!c.routing()) return ok(YAML::Node());  // not a router: nothing, as lnetctl
  YAML::Node list(YAML::NodeType::Sequence);
  auto pools = c.router_pools();
  static const char* names[] = {"tiny", "small", "large"};
  for (std::size_t cpt = 0; cpt < pools.size(); ++cpt) {
    YAML::Node cn;
    for (int k = 0; k < 3; ++k) {
      const RouterPoolInfo& p = pools[cpt].pools[k];
      YAML::Node pn;
      pn["npages"] = int_node(p.npages);
      pn["nbuffers"] = int_node(p.nbuffers);
      pn["credits"] = int_node(p.credits);
      pn["mincredits"] = int_node(p.min_credits);
      cn[names[k]] = pn;
    }
    YAML::Node item;
    item["cpt[" + std::to_string(cpt) + "]"] = cn;
    list.push_back(item);
  }
  YAML::Node en;
  en["enable"] = int_node(c.routing() ? 1 : 0);
  list.push_back(en);
  YAML::Node root;
  root["routing"] = list;
  YAML::Node b;
  BufferConfig bc = c.buffers();
  b["tiny"] = int_node(bc.tiny);
  b["small"] = int_node(bc.small);
  b["large"] = int_node(bc.large);
  root["buffers"] = b;
  return ok(root);
}

}  // namespace lnet::dlc
