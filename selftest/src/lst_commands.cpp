// lst's commands as the console runs them: each handler takes one request, works on the
// Console and answers the YAML document the user's half prints (lst_user.cpp). The
// table that dispatches to them is lst_table.cpp.
#include "lst_commands.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>

#include <yaml-cpp/yaml.h>

namespace lnet::selftest::lst {

namespace detail {

dlc::Response fail(int rc, const std::string& what) { return {rc, what + "\n"}; }
dlc::Response fail(const Failure& f) { return fail(f.code, f.message); }
Result<std::uint32_t> number(const std::string& text, const char* what, std::uint32_t lo, std::uint32_t hi) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < lo || v > hi)
    return Failure{-EINVAL, std::string("bad ") + what + ": '" + text + "' (" + std::to_string(lo) + ".." +
                                std::to_string(hi) + ")"};
  return static_cast<std::uint32_t>(v);
}

namespace {

dlc::Response ok(const YAML::Node& n) {
  YAML::Emitter out;
  out << n;
  return {0, std::string(out.c_str()) + "\n"};
}

const std::vector<std::string>& values(const dlc::Request& r, const char* name) {
  static const std::vector<std::string> none;
  auto it = r.args.find(name);
  return it == r.args.end() ? none : it->second;
}
std::string value_or(const dlc::Request& r, const char* name, const std::string& dflt) {
  const std::string* v = r.arg(name);
  return v ? *v : dflt;
}

// update_group --clean's states; "invalid" is lst's word for busy, down and unknown at once.
Result<std::vector<NodeState>> states_named(const std::string& s) {
  if (s == "active") return std::vector{NodeState::Active};
  if (s == "busy") return std::vector{NodeState::Busy};
  if (s == "down") return std::vector{NodeState::Down};
  if (s == "unknown") return std::vector{NodeState::Unknown};
  if (s == "invalid") return std::vector{NodeState::Busy, NodeState::Down, NodeState::Unknown};
  return Failure{-EINVAL, "bad node state '" + s + "' (active, busy, down, unknown, invalid)"};
}

// As lst prints nodes: PID-NID (12345-10.0.0.1@tcp, U42-0@mpi).
std::string shown(const ProcessId& id) { return id.to_string(); }

YAML::Node node_yaml(const ProcessId& id, NodeState st) {
  YAML::Node n;
  n["id"] = shown(id);
  n["state"] = node_state_name(st);
  return n;
}

YAML::Node reply_yaml(Console& c, const NodeReply& r) {
  YAML::Node n = node_yaml(r.id, c.state(r.id));
  n["rc"] = r.rc;
  n["status"] = r.status;
  return n;
}

YAML::Node counters_yaml(const StatReply& s) {
  YAML::Node n;
  n["running_ms"] = s.fw.running_ms;
  n["active_batches"] = s.fw.active_batches;
  n["zombie_sessions"] = s.fw.zombie_sessions;
  n["brw_errors"] = s.fw.brw_errors;
  n["ping_errors"] = s.fw.ping_errors;
  n["rpc_errors"] = s.rpc.errors;
  n["rpcs_sent"] = s.rpc.rpcs_sent;
  n["rpcs_rcvd"] = s.rpc.rpcs_rcvd;
  n["rpcs_dropped"] = s.rpc.rpcs_dropped;
  n["rpcs_expired"] = s.rpc.rpcs_expired;
  n["bulk_get"] = s.rpc.bulk_get;
  n["bulk_put"] = s.rpc.bulk_put;
  n["msgs_alloc"] = s.lnet.msgs_alloc;
  n["msgs_max"] = s.lnet.msgs_max;
  n["errors"] = s.lnet.errors;
  n["send_count"] = s.lnet.send_count;
  n["recv_count"] = s.lnet.recv_count;
  n["route_count"] = s.lnet.route_count;
  n["drop_count"] = s.lnet.drop_count;
  n["send_length"] = s.lnet.send_length;
  n["recv_length"] = s.lnet.recv_length;
  n["route_length"] = s.lnet.route_length;
  n["drop_length"] = s.lnet.drop_length;
  return n;
}

std::chrono::seconds seconds_of(const dlc::Request& r, const char* name, std::uint32_t dflt, Failure* bad) {
  const std::string* v = r.arg(name);
  if (!v) return std::chrono::seconds(dflt);
  auto n = number(*v, name, 1, 0x7fffffff);  // any positive number of seconds, as lst takes
  if (!n) {
    *bad = n.failure();
    return std::chrono::seconds(dflt);
  }
  return std::chrono::seconds(*n);
}

// Arguments that are group names or node lists, resolved to (label, nodes) in order.
Result<std::vector<std::pair<std::string, std::vector<ProcessId>>>> targets(Console& c,
                                                                            const std::vector<std::string>& args,
                                                                            const PidDefault& dflt) {
  std::vector<std::pair<std::string, std::vector<ProcessId>>> out;
  auto groups = c.groups();
  for (const auto& a : args) {
    if (std::find(groups.begin(), groups.end(), a) != groups.end()) {
      auto ids = c.resolve({a}, {});
      if (!ids) return ids.failure();
      out.emplace_back(a, *ids);
      continue;
    }
    auto ids = parse_ids(a, dflt);
    if (!ids) return Failure{ids.code(), "'" + a + "' is neither a group nor a node list: " + ids.message()};
    out.emplace_back(a, *ids);
  }
  if (out.empty()) return Failure{-EINVAL, "name groups or nodes"};
  return out;
}

std::string one_name(const dlc::Request& r, const char* dflt) {
  const auto& v = values(r, "name");
  return v.empty() ? dflt : v[0];
}

dlc::Response group_result(Console& c, const std::string& name, const Result<std::vector<NodeStatus>>& st) {
  if (!st) return fail(st.failure());
  YAML::Node g;
  g["name"] = name;
  YAML::Node nodes(YAML::NodeType::Sequence);
  for (const auto& n : *st) nodes.push_back(node_yaml(n.id, n.state));
  g["nodes"] = nodes;
  (void)c;
  YAML::Node doc;
  doc["group"] = g;
  return ok(doc);
}

// add_group NAME IDS...: as lst does it, one id list after another: a list that does not
// parse is ignored, one whose nodes did not all take the session (down, busy) is reported
// node by node and ends the command; the group is made here and deleted again when no
// list was added whole. Answers each list's outcome; fails only for the group itself.
dlc::Response add_group(Console& c, const std::vector<std::string>& args, const PidDefault& dflt) {
  if (args.size() < 2) return fail(-EINVAL, "usage: lst add_group NAME NODES...");
  const std::string& g = args[0];
  if (g.empty() || g.size() >= kNameSize)
    return fail(-EINVAL, "bad group name '" + g + "' (1 to " + std::to_string(kNameSize - 1) + " characters)");
  if (c.has_group(g)) return fail(-EEXIST, "group '" + g + "' exists");
  YAML::Node lists(YAML::NodeType::Sequence);
  bool added = false;
  int last_rc = 0;
  for (std::size_t i = 1; i < args.size(); ++i) {
    YAML::Node l;
    l["arg"] = args[i];
    auto ids = parse_ids(args[i], dflt);
    if (!ids) {
      l["result"] = "invalid";
      l["error"] = ids.message();
      lists.push_back(l);
      last_rc = ids.code();
      continue;
    }
    auto st = c.add_group(g, *ids);
    if (!st) {  // the console's own refusal (no session, ...): nothing more can be added
      l["result"] = "failed";
      l["error"] = st.message();
      lists.push_back(l);
      last_rc = st.code();
      break;
    }
    YAML::Node failed(YAML::NodeType::Sequence);
    for (const auto& n : *st) {
      if (n.state == NodeState::Active) continue;
      if (std::find(ids->begin(), ids->end(), n.id) == ids->end()) continue;  // an earlier list's
      YAML::Node x = node_yaml(n.id, n.state);
      x["rc"] = n.rc;
      x["status"] = n.status;
      failed.push_back(x);
    }
    l["result"] = failed.size() ? "failed" : "added";
    if (failed.size()) l["nodes"] = failed;
    lists.push_back(l);
    last_rc = failed.size() ? -EIO : 0;
    if (failed.size()) break;  // as lst: the lists after it are not tried
    added = true;
  }
  YAML::Node doc;
  doc["group"]["name"] = g;
  doc["group"]["lists"] = lists;
  doc["group"]["rc"] = last_rc;
  if (!added) {
    Status s = c.del_group(g);
    doc["group"]["deleted"] = s.ok();
    if (!s) doc["group"]["delete_error"] = s.message();
  }
  return ok(doc);
}

}  // namespace

// ---- the commands ----

namespace {

dlc::Response session_yaml(const Result<Console::SessionInfo>& s) {
  if (!s) return fail(s.failure());
  YAML::Node n;
  n["name"] = s->name;
  n["id"] = std::to_string(s->sid.stamp) + "@" + Nid(s->sid.nid).to_string();
  n["key"] = s->key;
  n["timeout"] = static_cast<long>(s->timeout.count());
  n["force"] = s->force;
  n["features"] = s->feats;
  n["nodes"] = s->nodes;
  YAML::Node doc;
  doc["session"] = n;
  return ok(doc);
}

// The nodes' answers about a batch; `field` (when set) each node's active count.
dlc::Response batch_nodes(Console& c, const std::string& b, const Result<std::vector<NodeReply>>& rs,
                          const char* field) {
  if (!rs) return fail(rs.failure());
  YAML::Node n;
  n["name"] = b;
  YAML::Node nodes(YAML::NodeType::Sequence);
  for (const auto& r : *rs) {
    YAML::Node x = reply_yaml(c, r);
    if (field && r.rc == 0) x[field] = std::get<BatchReply>(r.msg.body).active;
    nodes.push_back(x);
  }
  n["nodes"] = nodes;
  YAML::Node doc;
  doc["batch"] = n;
  return ok(doc);
}

YAML::Node test_yaml(Console& c, const Console::TestInfo& t) {
  YAML::Node x;
  x["index"] = t.index;
  x["type"] = t.spec.service == Service::Ping ? "ping" : "brw";
  x["loop"] = t.spec.loop == kLoopForever ? -1L : static_cast<long>(t.spec.loop);
  x["concurrency"] = t.spec.concurrency;
  x["distribute"] = std::to_string(t.spec.dist) + ":" + std::to_string(t.spec.span);
  x["from"] = t.spec.from;
  x["to"] = t.spec.to;
  if (t.spec.service == Service::Brw) {
    x["op"] = t.spec.op == BrwOp::Read ? "read" : "write";
    x["size"] = t.spec.size;
    const char* chk[] = {"none", "none", "simple", "full", "discard"};
    x["check"] = chk[static_cast<unsigned>(t.spec.check)];
    x["off"] = t.spec.offset;
  }
  YAML::Node cl(YAML::NodeType::Sequence), sv(YAML::NodeType::Sequence);
  for (const auto& id : t.clients) cl.push_back(node_yaml(id, c.state(id)));
  for (const auto& id : t.servers) sv.push_back(node_yaml(id, c.state(id)));
  x["clients"] = cl;
  x["servers"] = sv;
  return x;
}

// The nodes `lst ping` asks: a group's, a batch's clients (or servers), node lists, or
// every group's.
Result<std::vector<ProcessId>> ping_targets(const Call& k) {
  Console& c = k.c;
  const dlc::Request& req = k.req;
  std::vector<ProcessId> ids;
  auto add = [&ids](const ProcessId& id) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  if (const std::string* g = req.arg("group")) return c.resolve({*g}, {});
  if (const std::string* b = req.arg("batch")) {
    auto tests = c.batch_tests(*b);
    if (!tests) return tests.failure();
    for (const auto& t : *tests)
      for (const auto& id : req.flag("server") ? t.servers : t.clients) add(id);
    return ids;
  }
  if (req.arg("nodes") || !values(req, "args").empty()) {
    // --nodes LIST, and node lists after the command (lst ping 10.0.0.[1-4]@tcp).
    std::vector<std::string> lists = values(req, "nodes");
    for (const auto& a : values(req, "args")) lists.push_back(a);
    for (const auto& l : lists) {
      auto r = parse_ids(l, k.dflt);
      if (!r) return r.failure();
      for (const auto& id : *r) add(id);
    }
    return ids;
  }
  return c.resolve(c.groups(), {});
}

// ping, stat and show_error: each set of nodes asked, each node's answer.
dlc::Response ask_nodes(const Call& k, const std::vector<std::pair<std::string, std::vector<ProcessId>>>& sets,
                        bool ping, std::chrono::seconds timeout) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& [label, ids] : sets) {
    auto rs = ping ? k.c.ping(ids, timeout) : k.c.stat(ids, timeout);
    YAML::Node g;
    g["name"] = label;
    YAML::Node nodes(YAML::NodeType::Sequence);
    for (const auto& r : rs) {
      YAML::Node x = reply_yaml(k.c, r);
      if (r.rc == 0 && ping) {
        const auto& d = std::get<DebugReply>(r.msg.body);
        x["session"] = d.name;
        x["session_nid"] = d.sid.is_invalid() ? std::string("<?>") : Nid(d.sid.nid).to_string();
      }
      if (r.rc == 0 && !ping) x["counters"] = counters_yaml(std::get<StatReply>(r.msg.body));
      nodes.push_back(x);
    }
    g["nodes"] = nodes;
    list.push_back(g);
  }
  YAML::Node doc;
  doc["groups"] = list;
  return ok(doc);
}

}  // namespace

dlc::Response new_session(const Call& k) {
  Failure bad{0, ""};
  auto timeout = seconds_of(k.req, "timeout", 300, &bad);
  if (bad.code) return fail(-EINVAL, "Invalid timeout value: '" + *k.req.arg("timeout") + "' (seconds, above 0)");
  std::string sname = one_name(k.req, "");
  if (sname.empty()) sname = "lst-" + std::to_string(k.key);
  if (Status s = k.c.new_session(sname, k.key, timeout, k.req.flag("force")); !s) return fail(s.failure());
  return session_yaml(k.c.session(k.key));
}

dlc::Response show_session(const Call& k) { return session_yaml(k.c.session_info()); }

dlc::Response end_session(const Call& k) {
  if (Status s = k.c.end_session(k.key); !s) return fail(s.failure());
  YAML::Node doc;
  doc["session"] = "ended";
  return ok(doc);
}

dlc::Response add_group(const Call& k) { return add_group(k.c, values(k.req, "args"), k.dflt); }

dlc::Response update_group(const Call& k) {
  Console& c = k.c;
  const dlc::Request& req = k.req;
  std::string g = one_name(req, "");
  if (g.empty()) return fail(-EINVAL, "usage: lst update_group NAME --refresh|--clean STATE|--remove NODES");
  int how = (req.flag("refresh") ? 1 : 0) + (req.arg("clean") ? 1 : 0) + (req.arg("remove") ? 1 : 0);
  if (how != 1) return fail(-EINVAL, "give one of --refresh, --clean STATE, --remove NODES");
  if (req.flag("refresh")) return group_result(c, g, c.refresh_group(g));
  if (const std::string* st = req.arg("clean")) {
    auto states = states_named(*st);
    if (!states) return fail(states.failure());
    for (NodeState s : *states)
      if (Status r = c.clean_group(g, s); !r) return fail(r.failure());
  } else {
    auto ids = parse_ids(*req.arg("remove"), k.dflt);
    if (!ids) return fail(ids.failure());
    if (Status r = c.remove_nodes(g, *ids); !r) return fail(r.failure());
  }
  return group_result(c, g, c.group_nodes(g));
}

dlc::Response list_group(const Call& k) {
  std::vector<std::string> names = values(k.req, "name");
  if (names.empty()) names = k.c.groups();
  YAML::Node list(YAML::NodeType::Sequence);
  YAML::Node doc;
  for (const auto& g : names) {
    auto st = k.c.group_nodes(g);
    if (!st && st.code() == -ENOENT) {  // as lst: the groups before it are listed, and no error
      doc["missing"] = g;
      break;
    }
    if (!st) return fail(st.failure());
    YAML::Node n;
    n["name"] = g;
    YAML::Node nodes(YAML::NodeType::Sequence);
    for (const auto& s : *st) nodes.push_back(node_yaml(s.id, s.state));
    n["nodes"] = nodes;
    list.push_back(n);
  }
  doc["groups"] = list;
  return ok(doc);
}

dlc::Response del_group(const Call& k) {
  std::string g = one_name(k.req, "");
  if (g.empty()) return fail(-EINVAL, "usage: lst del_group NAME");
  if (Status s = k.c.del_group(g); !s) return fail(s.failure());
  YAML::Node doc;
  doc["deleted"] = g;
  return ok(doc);
}

dlc::Response add_batch(const Call& k) {
  std::string b = one_name(k.req, "");
  if (b.empty()) return fail(-EINVAL, "usage: lst add_batch NAME");
  if (Status s = k.c.add_batch(b); !s) return fail(s.failure());
  YAML::Node doc;
  doc["batch"] = b;
  return ok(doc);
}

dlc::Response add_test(const Call& k) {
  auto t = test_spec(k.req);
  if (!t) return fail(t.failure());
  std::string b = value_or(k.req, "batch", "batch");
  std::vector<NodeReply> failed;
  auto idx = k.c.add_test(b, *t, &failed);
  if (!idx) {
    std::string text = idx.message();
    for (const auto& f : failed)
      text +=
          "\n  " + shown(f.id) + ": " + (f.rc ? errno_string(f.rc) : "refused with status " + std::to_string(f.status));
    return fail(idx.code(), text);
  }
  YAML::Node doc;
  doc["test"]["batch"] = b;
  doc["test"]["index"] = *idx;
  return ok(doc);
}

dlc::Response run(const Call& k) {
  Failure bad{0, ""};
  auto timeout = seconds_of(k.req, "timeout", 0, &bad);
  if (bad.code) return fail(bad);
  std::string b = one_name(k.req, "batch");
  return batch_nodes(k.c, b, k.c.run_batch(b, timeout), nullptr);
}

dlc::Response stop(const Call& k) {
  std::string b = one_name(k.req, "batch");
  return batch_nodes(k.c, b, k.c.stop_batch(b, k.req.flag("force")), nullptr);
}

dlc::Response query(const Call& k) {
  Failure bad{0, ""};
  auto timeout = seconds_of(k.req, "timeout", 5, &bad);
  std::uint32_t test = 0;
  if (const std::string* v = k.req.arg("test")) {
    auto n = number(*v, "--test", 1, 1u << 20);
    if (!n) return fail(n.failure());
    test = *n;
  }
  if (bad.code) return fail(bad);
  std::string b = one_name(k.req, "batch");
  return batch_nodes(k.c, b, k.c.query_batch(b, test, k.req.flag("server"), timeout), "active");
}

dlc::Response list_batch(const Call& k) {
  std::vector<std::string> names = values(k.req, "name");
  if (names.empty()) names = k.c.batches();
  YAML::Node list(YAML::NodeType::Sequence);
  const std::string* only = k.req.arg("test");
  for (const auto& b : names) {
    auto tests = k.c.batch_tests(b);
    if (!tests) return fail(tests.failure());
    auto running = k.c.batch_running(b);
    if (!running) return fail(running.failure());
    if (only) {
      auto n = number(*only, "--test", 1, 0xFFFFFFFF);
      if (!n) return fail(n.failure());
      if (*n > tests->size()) return fail(-ENOENT, "batch '" + b + "' has no test " + *only);
    }
    YAML::Node n;
    n["name"] = b;
    n["state"] = *running ? "running" : "idle";
    YAML::Node ts(YAML::NodeType::Sequence);
    for (const auto& t : *tests) ts.push_back(test_yaml(k.c, t));
    n["tests"] = ts;
    list.push_back(n);
  }
  YAML::Node doc;
  doc["batches"] = list;
  return ok(doc);
}

dlc::Response ping(const Call& k) {
  Failure bad{0, ""};
  auto timeout = seconds_of(k.req, "timeout", 5, &bad);
  if (bad.code) return fail(bad);
  auto ids = ping_targets(k);
  if (!ids) return fail(ids.failure());
  return ask_nodes(k, {{"", *ids}}, true, timeout);
}

// stat and show_error: the counters of groups or nodes.
dlc::Response stat(const Call& k) {
  Failure bad{0, ""};
  auto timeout = seconds_of(k.req, "timeout", 5, &bad);
  if (bad.code) return fail(bad);
  auto t = targets(k.c, values(k.req, "args"), k.dflt);
  if (!t) return fail(t.failure());
  return ask_nodes(k, *t, false, timeout);
}

}  // namespace detail

}  // namespace lnet::selftest::lst
