// lst's command table: every command with its options and the handler that runs it
// (lst_commands.cpp), and execute(), which checks a request against the table and
// dispatches it, as lnetctl's table does for its commands.
#include <algorithm>
#include <cerrno>

#include "lst_commands.hpp"

namespace lnet::selftest::lst {

namespace {

using K = dlc::OptionSpec::Kind;

struct Entry {
  dlc::CommandSpec spec;
  detail::Handler handler;
  bool keyless = false;  // runs before the session key is checked (it makes or shows the session)
};

const std::vector<Entry>& table() {
  static const std::vector<Entry> t = {
      {{"new_session",
        "make a session: this console's nodes, groups and batches",
        true,
        {{"timeout", 0, K::Value, "seconds without an lst command before the session ends (default 300)"},
         {"force", 0, K::Flag, "end the current session first, and take nodes from other consoles' sessions"},
         {"name", 0, K::Positional, "session name"}}},
       detail::new_session,
       true},
      {{"end_session", "end the session: its nodes leave it", true, {}}, detail::end_session},
      {{"show_session", "the session's name, id, key, features and nodes", false, {}}, detail::show_session, true},
      {{"add_group",
        "make a group of nodes and the session on them (an id list that cannot be added is reported, the group kept "
        "if one was)",
        true,
        {{"args", 0, K::Positional, "NAME NODES..."}}},
       detail::add_group},
      {{"update_group",
        "refresh a group's nodes, or remove some",
        true,
        {{"refresh", 0, K::Flag, "make the session again on nodes that are not active"},
         {"clean", 0, K::Value,
          "remove the nodes in this state: active, busy, down, unknown, invalid (the last three)"},
         {"remove", 0, K::Value, "remove these nodes"},
         {"name", 0, K::Positional, "group"}}},
       detail::update_group},
      {{"list_group",
        "the groups, or the nodes of some by state",
        false,
        {{"active", 0, K::Flag, "list the active nodes"},
         {"busy", 0, K::Flag, "list the busy nodes"},
         {"down", 0, K::Flag, "list the nodes that are down"},
         {"unknown", 0, K::Flag, "list the nodes in an unknown state"},
         {"all", 0, K::Flag, "list every node"},
         {"name", 0, K::Positional, "groups"}}},
       detail::list_group},
      {{"del_group", "delete a group (not while a test uses it)", true, {{"name", 0, K::Positional, "group"}}},
       detail::del_group},
      {{"add_batch", "add a batch of tests", true, {{"name", 0, K::Positional, "batch"}}}, detail::add_batch},
      {{"add_test",
        "add a test to a batch: ping, or brw [read|write] [size=N[k|m]] [check=simple|full|discard] [off=N]",
        true,
        {{"batch", 0, K::Value, "batch (default: batch)"},
         {"loop", 0, K::Value, "RPCs per unit (default -1: until stopped)"},
         {"concurrency", 0, K::Value, "units per destination, 1..1024 (default 1)"},
         {"distribute", 0, K::Value, "DIST:SPAN: DIST clients share a window of SPAN servers (default 1:1)"},
         {"from", 0, K::Value, "the group of clients"},
         {"to", 0, K::Value, "the group of servers"},
         {"args", 0, K::Positional, "TEST [PARAMS...]"}}},
       detail::add_test},
      {{"run",
        "run a batch",
        true,
        {{"timeout", 0, K::Value, "passed to the nodes (they ignore it)"},
         {"name", 0, K::Positional, "batch (default: batch)"}}},
       detail::run},
      {{"stop",
        "stop a batch",
        true,
        {{"force", 0, K::Flag, "abort the RPCs in flight"}, {"name", 0, K::Positional, "batch (default: batch)"}}},
       detail::stop},
      {{"list_batch",
        "the batches, or a batch's tests and nodes",
        false,
        {{"test", 0, K::Value, "only this test (1-based)"},
         {"server", 0, K::Flag, "list the servers, not the clients"},
         {"active", 0, K::Flag, "list the active nodes"},
         {"invalid", 0, K::Flag, "list the nodes not active (busy, down or unknown)"},
         {"all", 0, K::Flag, "list every node"},
         {"name", 0, K::Positional, "batch"}}},
       detail::list_batch},
      {{"query",
        "which nodes run a batch (or a test of it)",
        false,
        {{"test", 0, K::Value, "only this test (1-based)"},
         {"server", 0, K::Flag, "ask the servers"},
         {"timeout", 0, K::Value, "seconds to wait for the nodes (default 5)"},
         {"loop", 0, K::Value, "ask this many times, or until the batch is idle"},
         {"delay", 0, K::Value, "seconds between two asks (default 5)"},
         {"all", 0, K::Flag, "list every node"},
         {"active", 0, K::Flag, "list the nodes running it"},
         {"idle", 0, K::Flag, "list the nodes not running it"},
         {"error", 0, K::Flag, "list the nodes that did not answer"},
         {"name", 0, K::Positional, "batch (default: batch)"}}},
       detail::query},
      {{"ping",
        "the state of nodes (a session query)",
        false,
        {{"group", 0, K::Value, "the nodes of a group"},
         {"batch", 0, K::Value, "the clients of a batch"},
         {"session", 0, K::Flag, "every node of the session"},
         {"nodes", 0, K::Value, "these nodes"},
         {"timeout", 0, K::Value, "seconds to wait (default 5)"},
         {"server", 0, K::Flag, "with --batch: its servers"},
         {"args", 0, K::Positional, "NODES... (as --nodes)"}}},
       detail::ping},
      {{"stat",
        "LNet rates and bandwidth of groups or nodes, every --delay seconds",
        false,
        {{"bw", 0, K::Flag, "bandwidth only"},
         {"rate", 0, K::Flag, "rates only"},
         {"read", 0, K::Flag, "the [R] row only (what the nodes received)"},
         {"write", 0, K::Flag, "the [W] row only (what the nodes sent)"},
         {"avg", 0, K::Flag, "the average column"},
         {"min", 0, K::Flag, "the minimum column"},
         {"max", 0, K::Flag, "the maximum column"},
         {"mbs", 0, K::Flag, "MB/s (10^6 bytes), not MiB/s"},
         {"timeout", 0, K::Value, "seconds to wait for the nodes (default 5)"},
         {"delay", 0, K::Value, "seconds between two rounds (default 5)"},
         {"count", 0, K::Value, "rounds printed (default: until interrupted)"},
         {"csv", 0, K::Flag, "CSV: one line per group and round, with a header"},
         {"yaml", 0, K::Flag, "YAML: one document per round"},
         {"args", 0, K::Positional, "GROUPS or NODES"}}},
       detail::stat},
      {{"show_error",
        "the test errors of groups or nodes",
        false,
        {{"session", 0, K::Flag, "the tests' errors of this session only (not the RPC layer's)"},
         {"args", 0, K::Positional, "GROUPS or NODES"}}},
       detail::stat}};
  return t;
}

const Entry* find_entry(std::string_view name) {
  for (const Entry& e : table())
    if (name == e.spec.name) return &e;
  return nullptr;
}

}  // namespace

const std::vector<dlc::CommandSpec>& commands() {
  static const std::vector<dlc::CommandSpec> specs = [] {
    std::vector<dlc::CommandSpec> v;
    for (const Entry& e : table()) v.push_back(e.spec);
    return v;
  }();
  return specs;
}

const dlc::CommandSpec* find(std::string_view name) {
  const Entry* e = find_entry(name);
  return e ? &e->spec : nullptr;
}

dlc::Response execute(Console& c, const dlc::Request& req, const PidDefault& dflt) {
  using detail::fail;
  std::string name = req.command.substr(req.command.rfind(' ') + 1);
  const Entry* e = find_entry(name);
  if (!e || req.command.rfind(std::string(kPrefix), 0) != 0) return fail(-EINVAL, "unknown lst command " + name);
  for (const auto& arg : req.args) {
    const std::string& k = arg.first;
    if (k == "key") continue;
    bool known =
        std::any_of(e->spec.options.begin(), e->spec.options.end(), [&](const auto& o) { return k == o.name; });
    if (!known) return fail(-EINVAL, "lst " + name + " has no option --" + k);
  }
  const std::string* key_text = req.arg("key");
  if (!key_text && name != "show_session")  // (as lst: show_session is how a script finds the key)
    return fail(-EINVAL,
                "Can't find env LST_SESSION or value is not valid: export LST_SESSION=$$ (any number names your "
                "session)");
  auto key = detail::number(key_text ? *key_text : "0", "LST_SESSION", 0, 0xFFFFFFFF);
  if (!key) return fail(key.failure());
  if (!e->keyless)
    if (Status s = c.check_key(*key); !s) return fail(s.failure());
  return e->handler(detail::Call{c, req, dflt, *key});
}

}  // namespace lnet::selftest::lst
