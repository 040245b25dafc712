// lnetctl fault drop|delay add|del|reset|show (lnet-facts §10), and fault rules in YAML.
#include <cerrno>

#include "commands.hpp"
#include "yaml_print.hpp"

namespace lnet::dlc {

namespace {

bool is_delay(const Request& r) { return r.command.rfind("fault delay", 0) == 0; }
const char* kind(const Request& r) { return is_delay(r) ? "delay" : "drop"; }

bool listed(const std::string& key) { return key == "portal" || key == "message" || key == "health_error"; }

}  // namespace

YAML::Node fault_rule_node(const FaultRule& rule) {
  YAML::Node n;
  for (const auto& [key, value] : rule.to_fields()) {
    bool number = key == "rate" || key == "interval" || key == "latency" || key == "portal" || key == "random" ||
                  key == "drop_all";
    YAML::Node v = number ? int_node(std::stol(value)) : YAML::Node(value);
    if (listed(key))
      n[key].push_back(v);
    else
      n[key] = v;
  }
  return n;
}

Result<FaultRule> fault_rule_from_yaml(const YAML::Node& n, bool delay) {
  std::string line = " (line " + std::to_string(n.Mark().line + 1) + ")";
  if (!n.IsMap())
    return Failure{-EINVAL, std::string("a fault ") + (delay ? "delay" : "drop") + " rule must be a mapping" + line};
  std::vector<std::pair<std::string, std::string>> fields;
  for (const auto& kv : n) {
    std::string key = kv.first.Scalar();
    if (key == "statistics") continue;  // what show prints
    if (kv.second.IsSequence()) {
      for (const auto& item : kv.second) fields.emplace_back(key, item.Scalar());
    } else if (kv.second.IsScalar()) {
      fields.emplace_back(key, kv.second.Scalar());
    } else {
      return Failure{-EINVAL, "fault rule field '" + key + "' must be a value or a list" + line};
    }
  }
  auto r = FaultRule::from_fields(delay, fields);
  if (!r) return Failure{r.code(), r.message() + line};
  return r;
}

Response fault_add(Instance& lnet, const Request& r, const Hooks&) {
  std::vector<std::pair<std::string, std::string>> fields;
  for (const auto& [name, values] : r.args) {
    if (values.empty()) fields.emplace_back(name, "1");  // a flag: random, drop_all
    for (const std::string& v : values) fields.emplace_back(name, v);
  }
  auto rule = FaultRule::from_fields(is_delay(r), fields);
  if (!rule) return error_block("add", std::string("fault ") + kind(r), rule.code(), rule.message());
  if (Status s = lnet.control().add_fault(*rule); !s)
    return error_block("add", std::string("fault ") + kind(r), s.code(), s.message());
  return ok(YAML::Node());
}

Response fault_del(Instance& lnet, const Request& r, const Hooks&) {
  Nid nids[2] = {Nid::any(), Nid::any()};
  const char* names[2] = {"source", "dest"};
  for (int i = 0; i < 2; ++i) {
    const std::string* v = r.arg(names[i]);
    if (!v || *v == "*") continue;
    auto n = Nid::parse(*v);
    if (!n)
      return error_block("del", std::string("fault ") + kind(r), -EINVAL, std::string(names[i]) + ": " + n.message());
    nids[i] = *n;
  }
  if (!r.flag("all") && nids[0].is_any() && nids[1].is_any())
    return error_block("del", std::string("fault ") + kind(r), -EINVAL,
                       std::string("fault ") + kind(r) + " del needs --source, --dest or --all");
  int n = lnet.control().del_faults(is_delay(r), nids[0], nids[1]);
  if (n == 0) return error_block("del", std::string("fault ") + kind(r), -ENOENT, "no such rule");
  return ok(YAML::Node());
}

Response fault_reset(Instance& lnet, const Request& r, const Hooks&) {
  lnet.control().reset_faults(is_delay(r));
  return ok(YAML::Node());
}

Response fault_show(Instance& lnet, const Request& r, const Hooks&) {
  bool delay = is_delay(r);
  YAML::Node list(YAML::NodeType::Sequence);
  for (const FaultRuleInfo& i : lnet.control().faults(delay)) {
    YAML::Node n = fault_rule_node(i.rule);
    YAML::Node st;
    st["count"] = int_node(static_cast<long>(i.count));
    st["put"] = int_node(static_cast<long>(i.put));
    st["ack"] = int_node(static_cast<long>(i.ack));
    st["get"] = int_node(static_cast<long>(i.get));
    st["reply"] = int_node(static_cast<long>(i.reply));
    st[delay ? "delayed" : "dropped"] = int_node(static_cast<long>(i.fired));
    n["statistics"] = st;
    list.push_back(n);
  }
  YAML::Node root;
  root[delay ? "delay" : "drop"] = list;
  return ok(root);
}

}  // namespace lnet::dlc
