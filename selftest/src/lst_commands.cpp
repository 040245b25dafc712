// lst's commands as the console runs them: each handler takes one request, works on the
// Console and answers the YAML document the user's half prints (lst_user.cpp). The
// table that dispatches to them is lst_table.cpp.
#include "lst_commands.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>

#include <yaml-cpp/yaml.h>

#include <lnet/nid_range.hpp>

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

constexpr std::size_t kMaxIds = 4096;  // nodes one argument may name

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

Result<std::vector<Nid>> expand(const NidPattern& p) {
  if (!p.net().is_single()) return Failure{-EINVAL, "a node list names one network per NID: " + p.to_string()};
  const auto& nr = p.net().numbers().ranges();
  NetId net = NetId::make(p.net().type(), nr.empty() ? 0 : nr[0].lo);
  std::vector<std::vector<std::uint32_t>> parts;
  std::size_t total = 1;
  for (const NumberExpr& e : p.address()) {
    if (e.is_any()) return Failure{-EINVAL, "'*' does not name nodes: " + p.to_string()};
    std::vector<std::uint32_t> vs;
    for (const auto& r : e.ranges())
      for (std::uint64_t v = r.lo; v <= r.hi && vs.size() <= kMaxIds; v += r.step ? r.step : 1)
        vs.push_back(static_cast<std::uint32_t>(v));
    total *= vs.size();
    if (total > kMaxIds) return Failure{-E2BIG, "more than 4096 nodes in " + p.to_string()};
    parts.push_back(std::move(vs));
  }
  std::vector<Nid> out;
  std::vector<std::size_t> at(parts.size(), 0);
  for (std::size_t n = 0; n < total; ++n) {  // the first bracket varies slowest
    std::uint32_t addr = 0;
    if (parts.size() == 4)
      for (std::size_t k = 0; k < 4; ++k) addr = (addr << 8) | (parts[k][at[k]] & 0xff);
    else
      addr = parts[0][at[0]];
    out.push_back(Nid::make(net, addr));
    for (std::size_t k = parts.size(); k-- > 0;) {
      if (++at[k] < parts[k].size()) break;
      at[k] = 0;
    }
  }
  return out;
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

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

Result<TestSpec> test_spec(const dlc::Request& r) {
  TestSpec t;
  const auto& args = values(r, "args");
  if (args.empty()) return Failure{-EINVAL, "name the test: ping or brw"};
  std::string test = lower(args[0]);
  if (test == "ping") {
    t.service = Service::Ping;
    if (args.size() > 1) return Failure{-EINVAL, "ping takes no parameter: " + args[1]};
  } else if (test == "brw") {
    t.service = Service::Brw;
    for (std::size_t i = 1; i < args.size(); ++i) {
      // As lst: keywords in any case, each with its short form.
      const std::string& a = args[i];
      std::string low = lower(a);
      auto eq = low.find('=');
      std::string k = low.substr(0, eq), v = eq == std::string::npos ? "" : low.substr(eq + 1);
      if (low == "read" || low == "r") {
        t.op = BrwOp::Read;
      } else if (low == "write" || low == "w") {
        t.op = BrwOp::Write;
      } else if (low == "skip_rx_copy" || low == "skip-rx-copy") {
        t.check = BrwCheck::Discard;
      } else if (eq != std::string::npos && (k == "size" || k == "s")) {
        std::uint64_t mult = 1;
        std::string num = v;
        if (!num.empty() && num.back() == 'k') mult = 1024, num.pop_back();
        if (!num.empty() && num.back() == 'm') mult = 1 << 20, num.pop_back();
        auto n = number(num, "size", 1, kMaxPayload);
        if (!n || *n * mult > kMaxPayload)
          return Failure{-EINVAL, "bad brw size '" + a.substr(eq + 1) + "' (1 to 1M, with k or m)"};
        t.size = static_cast<std::uint32_t>(*n * mult);
      } else if (eq != std::string::npos && (k == "check" || k == "c")) {
        if (v == "simple")
          t.check = BrwCheck::Simple;
        else if (v == "full")
          t.check = BrwCheck::Full;
        else if (v == "discard")
          t.check = BrwCheck::Discard;
        else
          return Failure{-EINVAL, "bad brw check '" + a.substr(eq + 1) + "' (simple, full or discard)"};
      } else if (eq != std::string::npos && k == "off") {
        auto n = number(v, "off", 0, kPageSize - 8);
        if (!n || *n % 8 != 0)
          return Failure{-EINVAL, "bad brw off '" + a.substr(eq + 1) + "' (a multiple of 8 below 4096)"};
        t.offset = *n;
      } else {
        return Failure{-EINVAL, "unknown brw parameter '" + a +
                                    "' (read|r, write|w, size|s=N[k|m], check|c=simple|full|discard, off=N, "
                                    "skip_rx_copy)"};
      }
    }
  } else {
    return Failure{-EINVAL, "unknown test '" + args[0] + "' (ping or brw)"};
  }
  if (const std::string* v = r.arg("loop")) {
    if (*v == "-1") {
      t.loop = kLoopForever;
    } else {
      auto n = number(*v, "--loop", 1, 0xFFFFFFFE);
      if (!n) return n.failure();
      t.loop = *n;
    }
  }
  if (const std::string* v = r.arg("concurrency")) {
    auto n = number(*v, "--concurrency", 1, kMaxConcur);
    if (!n) return n.failure();
    t.concurrency = *n;
  }
  if (const std::string* v = r.arg("distribute")) {
    auto colon = v->find(':');
    auto d = number(v->substr(0, colon), "--distribute", 1, 1u << 20);
    auto s = colon == std::string::npos ? Result<std::uint32_t>(Failure{-EINVAL, ""})
                                        : number(v->substr(colon + 1), "--distribute", 1, 1u << 20);
    if (!d || !s) return Failure{-EINVAL, "bad --distribute '" + *v + "' (DIST:SPAN, two positive numbers)"};
    t.dist = *d;
    t.span = *s;
  }
  if (!r.arg("from") || !r.arg("to")) return Failure{-EINVAL, "add_test needs --from GROUP and --to GROUP"};
  t.from = *r.arg("from");
  t.to = *r.arg("to");
  return t;
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
  for (const auto& b : names) {
    auto tests = k.c.batch_tests(b);
    if (!tests) return fail(tests.failure());
    YAML::Node n;
    n["name"] = b;
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

// lst's ranges are stricter than LNet's NID ranges: in "[lo-hi]" (and "[lo-hi/step]") lo
// must be below hi, so "[5-5]" and "[7-3]" are syntax errors, as lst's own expander has it.
namespace {

Status check_ranges(std::string_view text) {
  for (std::size_t open = text.find('['); open != std::string_view::npos; open = text.find('[', open + 1)) {
    std::size_t close = text.find(']', open);
    if (close == std::string_view::npos) return {};  // NidPattern names this one
    std::string_view inside = text.substr(open + 1, close - open - 1);
    while (!inside.empty()) {
      std::size_t comma = inside.find(',');
      std::string_view tok = inside.substr(0, comma);
      inside = comma == std::string_view::npos ? std::string_view() : inside.substr(comma + 1);
      std::size_t dash = tok.find('-');
      if (dash == std::string_view::npos) continue;
      std::uint64_t lo = 0, hi = 0;
      std::string_view hi_text = tok.substr(dash + 1);
      hi_text = hi_text.substr(0, hi_text.find('/'));
      auto [p1, e1] = std::from_chars(tok.data(), tok.data() + dash, lo);
      auto [p2, e2] = std::from_chars(hi_text.data(), hi_text.data() + hi_text.size(), hi);
      if (e1 != std::errc() || e2 != std::errc()) continue;  // NidPattern names this one
      if (lo >= hi)
        return Failure{-EINVAL, "Syntax error in \"" + std::string(text) + "\" (in range '" + std::string(tok) +
                                    "' the low end must be below the high end)"};
    }
  }
  return {};
}

}  // namespace

Result<std::vector<ProcessId>> parse_ids(std::string_view text, const PidDefault& dflt) {
  if (Status s = check_ranges(text); !s) return s.failure();
  std::optional<Pid> pid;
  std::string_view nid = text;
  // A pid prefix: digits (or U and digits) and a '-' before any '.', '[' or '@'.
  auto dash = text.find('-');
  if (dash != std::string_view::npos && dash > 0) {
    std::string_view head = text.substr(0, dash);
    bool user = head[0] == 'U';
    std::string_view digits = user ? head.substr(1) : head;
    if (!digits.empty() && std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      std::uint32_t v = 0;
      auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (ec != std::errc() || p != digits.data() + digits.size() || v > 0x7fffffff)
        return Failure{-EINVAL, "bad pid in '" + std::string(text) + "'"};
      pid = user ? (v | kPidUserFlag) : v;
      nid = text.substr(dash + 1);
    }
  }
  auto pat = NidPattern::parse(nid);
  if (!pat) return Failure{-EINVAL, "bad node '" + std::string(text) + "': " + pat.message()};
  auto nids = detail::expand(*pat);
  if (!nids) return nids.failure();
  std::vector<ProcessId> out;
  // The job's pid for its ranks (numbers on its net); a dotted address there is a proxy
  // or an lnetd, whose pid is LNet's.
  auto rank_of_job = [&](Nid n) {
    return dflt.job_net && n.net() == *dflt.job_net && !mpi_ip_form(n.net().type(), n.addr());
  };
  for (Nid n : *nids) out.push_back(ProcessId{n, pid ? *pid : rank_of_job(n) ? dflt.job_pid : kPidLustre});
  return out;
}

}  // namespace lnet::selftest::lst
