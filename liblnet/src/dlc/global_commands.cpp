// lnetctl set, global show, stats show | reset, udsp add | del | show.
#include <cerrno>
#include <cstdlib>

#include "commands.hpp"
#include "yaml_print.hpp"

namespace lnet::dlc {

Response set_tunable(Instance& lnet, const Request& r, const Hooks&) {
  const std::string* name = r.arg("name");
  const std::string* value = r.arg("value");
  if (!name || !value) return error_block("set", "global", -EINVAL, "set needs a tunable name and a value");
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(value->c_str(), &end, 0);
  if (value->empty() || *end || errno) return error_block("set", *name, -EINVAL, "'" + *value + "' is not a number");
  Control& c = lnet.control();
  Status s;
  if (*name == "routing") {
    if (v != 0 && v != 1) return error_block("set", "routing", -EINVAL, "routing takes 0 or 1");
    s = c.set_routing(v == 1);
  } else if (*name == "tiny_buffers" || *name == "small_buffers" || *name == "large_buffers") {
    if (v < 0) return error_block("set", *name, -EINVAL, *name + " cannot be negative");
    BufferConfig b = c.buffers();
    (*name == "tiny_buffers" ? b.tiny : *name == "small_buffers" ? b.small : b.large) = static_cast<int>(v);
    s = c.set_buffers(b);
  } else {
    // max_intf: the name older lnetctl versions use.
    s = c.set_global(*name == "max_intf" ? "max_interfaces" : *name, v);
  }
  if (!s) return error_block("set", *name, s.code(), s.message());
  return ok(YAML::Node());
}

Response global_show(Instance& lnet, const Request& r, const Hooks&) {
  // -v is taken, as lnetctl takes it; every tunable is shown either way.
  if (auto verbose = int_arg(r, "verbose", 0, 0, INT_MAX); !verbose)
    return error_block("show", "global", verbose.code(), verbose.message());
  GlobalTunables g = lnet.control().globals();
  YAML::Node n;
  for (const char* name : GlobalTunables::names()) n[name] = int_node(*g.get(name));
  YAML::Node root;
  root["global"] = n;
  return ok(root);
}

Response stats_show(Instance& lnet, const Request&, const Hooks& hooks) {
  Counters k = lnet.control().counters();
  YAML::Node n;
  auto put = [&](const char* name, std::uint64_t v) { n[name] = int_node(static_cast<long>(v)); };
  put("msgs_alloc", k.msgs_alloc);
  put("msgs_max", k.msgs_max);
  put("rst_alloc", k.rst_alloc);
  put("errors", k.errors);
  put("send_count", k.send_count);
  put("resend_count", k.resend_count);
  put("response_timeout_count", k.response_timeout_count);
  put("local_interrupt_count", k.local_interrupt_count);
  put("local_dropped_count", k.local_dropped_count);
  put("local_aborted_count", k.local_aborted_count);
  put("local_no_route_count", k.local_no_route_count);
  put("local_timeout_count", k.local_timeout_count);
  put("local_error_count", k.local_error_count);
  put("remote_dropped_count", k.remote_dropped_count);
  put("remote_error_count", k.remote_error_count);
  put("remote_timeout_count", k.remote_timeout_count);
  put("network_timeout_count", k.network_timeout_count);
  put("failed_resends", k.failed_resends);
  put("successful_resends", k.successful_resends);
  put("recv_count", k.recv_count);
  put("route_count", k.route_count);
  put("drop_count", k.drop_count);
  put("send_length", k.send_length);
  put("recv_length", k.recv_length);
  put("route_length", k.route_length);
  put("drop_length", k.drop_length);
  YAML::Node root;
  root["statistics"] = n;
  YAML::Node drivers;  // each driver's own counters (Lnd::counters())
  for (const LndCounters& d : lnet.control().lnd_counters()) {
    YAML::Node c;
    for (const auto& [name, v] : d.counters) c[name] = int_node(static_cast<long>(v));
    drivers[d.driver] = c;
  }
  if (drivers.size()) root["lnd statistics"] = drivers;
  if (hooks.service_stats)
    for (const DriverCounters& d : hooks.service_stats()) {
      YAML::Node c;
      for (const auto& [name, v] : d.counters) c[name] = int_node(static_cast<long>(v));
      root[d.driver + " statistics"] = c;
    }
  return ok(root);
}

Response stats_reset(Instance& lnet, const Request&, const Hooks&) {
  lnet.control().reset_counters();
  return ok(YAML::Node());
}

Response cpt_of_nid(Instance& lnet, const Request& r, const Hooks&) {
  auto nids = list_arg(r, "nid");
  if (nids.empty()) return error_block("cpt-of-nid", "nid", -EINVAL, "cpt-of-nid needs at least one NID");
  YAML::Node list(YAML::NodeType::Sequence);
  for (const std::string& text : nids) {
    auto nid = Nid::parse(text);
    if (!nid) return error_block("cpt-of-nid", "nid", -EINVAL, nid.message());
    YAML::Node e;
    e["nid"] = nid->to_string();
    e["cpt"] = int_node(lnet.control().cpt_of_nid(*nid));
    list.push_back(e);
  }
  YAML::Node root;
  root["cpt-of-nid"] = list;
  return ok(root);
}

Response not_built(Instance&, const Request& r, const Hooks&) {
  const CommandSpec* spec = find_command(r.command);
  return error_block("manage", r.command, -EOPNOTSUPP,
                     "not supported yet: " + r.command + " (" + (spec ? spec->summary : "") + ")");
}

Response udsp_add(Instance& lnet, const Request& r, const Hooks&) {
  UdspRule u;
  if (const std::string* s = r.arg("src")) u.src = *s;
  if (const std::string* s = r.arg("dst")) u.dst = *s;
  if (const std::string* s = r.arg("rte")) u.rte = *s;
  auto prio = int_arg(r, "priority", -1, 0, UINT32_MAX);
  if (!prio) return error_block("add", "udsp", prio.code(), prio.message());
  auto idx = int_arg(r, "idx", -1, 0, 1 << 20);
  if (!idx) return error_block("add", "udsp", idx.code(), idx.message());
  if (*prio >= 0) u.priority = static_cast<unsigned>(*prio);
  if (Status s = lnet.control().add_udsp(u, static_cast<int>(*idx)); !s)
    return error_block("add", "udsp", s.code(), s.message());
  return ok(YAML::Node());
}

Response udsp_del(Instance& lnet, const Request& r, const Hooks&) {
  auto idx = int_arg(r, "idx", -1, 0, 1 << 20);
  if (!idx) return error_block("del", "udsp", idx.code(), idx.message());
  if (*idx < 0 && !r.flag("all")) return error_block("del", "udsp", -EINVAL, "udsp del needs --idx or --all");
  if (Status s = lnet.control().del_udsp(r.flag("all") ? -1 : static_cast<int>(*idx)); !s)
    return error_block("del", "udsp", s.code(), s.message());
  return ok(YAML::Node());
}

Response udsp_show(Instance& lnet, const Request& r, const Hooks&) {
  SystemConfig cfg;
  cfg.udsp = lnet.control().udsp_rules();
  auto idx = int_arg(r, "idx", -1, 0, 1 << 20);
  if (!idx) return error_block("show", "udsp", idx.code(), idx.message());
  if (*idx >= 0) {
    if (static_cast<std::size_t>(*idx) >= cfg.udsp.size())
      return error_block("show", "udsp", -ENOENT, "no rule at index " + std::to_string(*idx));
    cfg.udsp = {cfg.udsp[static_cast<std::size_t>(*idx)]};
  }
  if (cfg.udsp.empty()) return ok(YAML::Node());
  return Response{0, config_to_yaml(cfg, true)};
}

}  // namespace lnet::dlc
