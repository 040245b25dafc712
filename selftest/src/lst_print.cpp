// lst's output: each command's answer printed as lst prints it, and the console's
// refusals in lst's words (the command line is lst_user.cpp's, stat's rounds
// lst_stat.cpp's).
#include <cerrno>
#include <map>
#include <set>

#include <yaml-cpp/yaml.h>

#include <selftest/lst.hpp>

#include "lst_user.hpp"

namespace lnet::selftest::lst::user {

std::uint32_t number_or(const dlc::Request& r, const char* name, std::uint32_t dflt) {
  const std::string* v = r.arg(name);
  if (!v) return dflt;
  try {
    long n = std::stol(*v);
    return n < 0 ? dflt : static_cast<std::uint32_t>(n);
  } catch (const std::exception&) {
    return dflt;
  }
}

namespace {

// What an lst command's refusals are about, in lst's words ("Can't find group ...").
const char* subject_of(const std::string& cmd, const std::string& why) {
  if (cmd.find("session") != std::string::npos) return "session";
  if (cmd == "add_test" || why.find("' has no test ") != std::string::npos) return "test";
  if (cmd.find("batch") != std::string::npos || cmd == "run" || cmd == "stop" || cmd == "query") return "batch";
  return "group";
}

}  // namespace

// A refusal of the console's: lst's own line for the errors it names (scripts look for
// them), with the console's reason after it; the reason alone for the others. A missing
// argument is a usage, on the standard output as lst prints it. The exit status, lst's.
int print_failure(Io io, const std::string& cmd, const dlc::Response& r) {
  std::string why = r.text;
  while (!why.empty() && why.back() == '\n') why.pop_back();
  if (why.rfind("usage: ", 0) == 0) {
    std::fprintf(io.out, "Usage: %s\n", why.substr(7).c_str());
    return kExitUsage;
  }
  std::string sub = subject_of(cmd, why), words;
  switch (-r.rc) {
    case ESRCH:  // the reason says no more
      std::fprintf(io.err, "No session exists\n");
      return kExitFailed;
    case ESHUTDOWN: words = "Session is shutting down"; break;
    case EACCES: words = "Unmatched session key or not root"; break;
    case ENOENT: words = "Can't find " + sub + " in current session"; break;
    case EEXIST: words = sub + " already exists"; break;
    case EBUSY:
      if (cmd == "del_group") {
        words = "Failed to delete group: Device or resource busy";
        break;
      }
      [[fallthrough]];
    default: std::fprintf(io.err, "lst %s: %s\n", cmd.c_str(), why.c_str()); return kExitFailed;
  }
  std::fprintf(io.err, "%s (%s)\n", words.c_str(), why.c_str());
  return kExitFailed;
}

namespace {

bool active(const YAML::Node& node) { return get<std::string>(node, "state") == "Active"; }

// add_group, as lst reports it: each id list added, ignored (it does not parse) or not
// added (its nodes that did not take the session), and the group deleted when no list
// was added. The status is the last list's, as lst's.
int print_add_group(Io io, const YAML::Node& g) {
  // (lst prints what was added on the standard output, the rest on the standard error.)
  for (const auto& l : g["lists"]) {
    std::string arg = get<std::string>(l, "arg"), result = get<std::string>(l, "result");
    if (result == "added") {
      std::fprintf(io.out, "%s are added to session\n", arg.c_str());
    } else if (result == "invalid") {
      std::fprintf(io.err, "%s\nIgnore invalid id list %s\n", get<std::string>(l, "error").c_str(), arg.c_str());
    } else if (!l["nodes"]) {
      std::fprintf(io.err, "Failed to add nodes %s: %s\n", arg.c_str(), get<std::string>(l, "error").c_str());
    } else {
      for (const auto& n : l["nodes"]) {
        std::string id = get<std::string>(n, "id");
        int rc = get<int>(n, "rc");
        auto status = get<std::uint32_t>(n, "status");
        if (rc)
          std::fprintf(io.err, "create session RPC failed on %s: %s\n", id.c_str(), errno_string(rc).c_str());
        else if (status)
          std::fprintf(io.err, "operation create session failed on %s: %s\n", id.c_str(),
                       errno_string(-static_cast<int>(status)).c_str());
        else
          std::fprintf(io.err, "operation create session failed on %s: %s\n", id.c_str(),
                       get<std::string>(n, "state").c_str());
      }
    }
  }
  std::string name = get<std::string>(g, "name");
  if (g["deleted"]) {
    std::fprintf(io.err, "No nodes added successfully, deleting group %s\n", name.c_str());
    if (get<bool>(g, "deleted"))
      std::fprintf(io.out, "Group is deleted\n");
    else
      std::fprintf(io.err, "Failed to delete group %s.  Group is empty. (%s)\n", name.c_str(),
                   get<std::string>(g, "delete_error").c_str());
    return user::kExitNoneAdded;
  }
  return get<int>(g, "rc") ? user::kExitFailed : 0;
}

int print_group(std::FILE* out, const YAML::Node& g) {
  std::size_t total = 0, bad = 0;
  for (const auto& n : g["nodes"]) {
    ++total;
    if (!active(n)) {
      ++bad;
      std::fprintf(out, "\t%s: %s\n", get<std::string>(n, "id").c_str(), get<std::string>(n, "state").c_str());
    }
  }
  if (bad) {
    std::fprintf(out, "%zu of %zu nodes of %s are not active (lst update_group %s --refresh tries again)\n", bad, total,
                 get<std::string>(g, "name").c_str(), get<std::string>(g, "name").c_str());
    return user::kExitFailed;
  }
  return 0;
}

int print_session(const std::string& cmd, const dlc::Request&, const YAML::Node& doc, Io io) {
  std::FILE* out = io.out;
  const YAML::Node s = doc["session"];
  if (cmd == "new_session")
    std::fprintf(out, "SESSION: %s FEATURES: %x TIMEOUT: %ld FORCE: %s\n", get<std::string>(s, "name").c_str(),
                 get<unsigned>(s, "features"), get<long>(s, "timeout"), get<bool>(s, "force") ? "Yes" : "No");
  else
    std::fprintf(out, "%s ID: %s, KEY: %u FEATURES: %x NODES: %zu\n", get<std::string>(s, "name").c_str(),
                 get<std::string>(s, "id").c_str(), get<unsigned>(s, "key"), get<unsigned>(s, "features"),
                 get<std::size_t>(s, "nodes"));
  return 0;
}

int print_added_group(const std::string&, const dlc::Request&, const YAML::Node& doc, Io io) {
  return print_add_group(io, doc["group"]);
}

int print_updated_group(const std::string&, const dlc::Request&, const YAML::Node& doc, Io io) {
  return print_group(io.out, doc["group"]);
}

int print_end_session(const std::string&, const dlc::Request&, const YAML::Node&, Io) {
  return 0;  // silent, as lst
}

int print_list_group(const std::string&, const dlc::Request& req, const YAML::Node& doc, Io io) {
  std::FILE* out = io.out;
  bool listing = req.flag("active") || req.flag("busy") || req.flag("down") || req.flag("unknown") || req.flag("all");
  bool named = req.args.count("name") > 0;
  if (!listing && !named) {
    int i = 0;
    for (const auto& g : doc["groups"]) std::fprintf(out, "%d) %s\n", ++i, get<std::string>(g, "name").c_str());
    std::fprintf(out, "Total %d groups\n", i);
    return 0;
  }
  // As lst: a table of counts, a row per group; or, with a state, each group's nodes
  // in that state and their number. Nothing for a group that does not exist.
  if (doc["groups"].size() == 0) return 0;
  if (!listing) std::fprintf(out, "\tACTIVE\tBUSY\tDOWN\tUNKNOWN\tTOTAL\n");
  for (const auto& g : doc["groups"]) {
    std::string name = get<std::string>(g, "name");
    std::map<std::string, int> count;
    int total = 0, shown = 0;
    if (listing) std::fprintf(out, "Group [ %s ]\n", name.c_str());
    for (const auto& n : g["nodes"]) {
      std::string st = get<std::string>(n, "state");
      ++count[st];
      ++total;
      std::string flag = st == "Active" ? "active" : st == "Busy" ? "busy" : st == "Down" ? "down" : "unknown";
      if (listing && (req.flag("all") || req.flag(flag))) {
        std::fprintf(out, "\t%s: %s\n", get<std::string>(n, "id").c_str(), st.c_str());
        ++shown;
      }
    }
    if (listing && total == 0)
      std::fprintf(out, "No nodes found [ %s ]\n", name.c_str());
    else if (listing)
      std::fprintf(out, "Total %d nodes [ %s ]\n", shown, name.c_str());
    else
      std::fprintf(out, "\t%d\t%d\t%d\t%d\t%d\t%s\n", count["Active"], count["Busy"], count["Down"], count["Unknown"],
                   total, name.c_str());
  }
  // A group that does not exist ends the list, silently and with status 0, as lst.
  return 0;
}

int print_run_stop(const std::string& cmd, const dlc::Request&, const YAML::Node& doc, Io io) {
  std::FILE* out = io.out;
  const YAML::Node b = doc["batch"];
  int bad = 0;
  for (const auto& n : b["nodes"])
    if (get<int>(n, "rc") != 0 || get<std::uint32_t>(n, "status") != 0) {
      ++bad;
      int rc = get<int>(n, "rc");
      std::fprintf(io.err, "\t%s: %s\n", get<std::string>(n, "id").c_str(),
                   rc ? errno_string(rc).c_str() : errno_string(-get<int>(n, "status")).c_str());
    }
  std::string name = get<std::string>(b, "name");
  if (bad) {
    std::fprintf(io.err, "lst %s: %d nodes did not %s %s\n", cmd.c_str(), bad, cmd == "run" ? "run" : "stop",
                 name.c_str());
    return user::kExitFailed;
  }
  if (cmd == "run") std::fprintf(out, "%s is running now\n", name.c_str());
  return 0;  // stop: said once the batch has stopped (wait_stopped)
}

// As lst: "BATCH [TEST] is running | is stopped | stopped: I , running: R, failed: F",
// with "N of M nodes are unknown, " first when some did not answer; with --all
// (or --active, --idle, --error) a line per node instead.
int print_query(const std::string&, const dlc::Request& req, const YAML::Node& doc, Io io) {
  std::FILE* out = io.out;
  const YAML::Node b = doc["batch"];
  int running = 0, idle = 0, down = 0, total = 0;
  bool verbose = req.flag("all") || req.flag("active") || req.flag("idle") || req.flag("error");
  for (const auto& n : b["nodes"]) {
    ++total;
    int rc = get<int>(n, "rc");
    bool ok = rc == 0 && get<std::uint32_t>(n, "status") == 0;
    bool is_running = ok && get<std::uint32_t>(n, "active") > 0;
    if (!ok)
      ++down;
    else if (is_running)
      ++running;
    else
      ++idle;
    if (!verbose) continue;
    if ((req.flag("active") && !is_running) || (req.flag("idle") && (is_running || !ok)) || (req.flag("error") && ok))
      continue;
    std::fprintf(out, "%s [%s]: %s\n", get<std::string>(n, "id").c_str(), get<std::string>(n, "state").c_str(),
                 rc           ? errno_string(rc).c_str()
                 : !ok        ? "Failed"
                 : is_running ? "Running"
                              : "Idle");
  }
  if (!verbose) {
    std::fprintf(out, "%s [%u] ", get<std::string>(b, "name").c_str(), number_or(req, "test", 0));
    if (down) std::fprintf(out, "%d of %d nodes are unknown, ", down, total);
    if (!down && !running) {
      std::fprintf(out, "is stopped\n");
      return kStopped;
    } else if (!down && !idle)
      std::fprintf(out, "is running\n");
    else
      std::fprintf(out, "stopped: %d , running: %d, failed: %d\n", idle, running, down);
  }
  return 0;
}

// As lst: the counts of a batch's (or a test's) clients and servers by state.
void print_node_table(std::FILE* out, const YAML::Node& clients, const YAML::Node& servers) {
  std::fprintf(out, "\tACTIVE\tBUSY\tDOWN\tUNKNOWN\tTOTAL\n");
  for (auto [label, nodes] : {std::pair{"client", clients}, std::pair{"server", servers}}) {
    std::map<std::string, int> count;
    int total = 0;
    for (const auto& n : nodes) ++count[get<std::string>(n, "state")], ++total;
    std::fprintf(out, "%s\t%d\t%d\t%d\t%d\t%d\n", label, count["Active"], count["Busy"], count["Down"],
                 count["Unknown"], total);
  }
}

// The nodes of a list once each (a batch's tests share them).
YAML::Node once_each(const YAML::Node& tests, const char* which) {
  YAML::Node out(YAML::NodeType::Sequence);
  std::set<std::string> seen;
  for (const auto& t : tests)
    for (const auto& n : t[which])
      if (seen.insert(get<std::string>(n, "id")).second) out.push_back(n);
  return out;
}

// As lst: the batches' names; a batch: its state (lst's numbers: 176 idle, 177
// running) and its nodes by state, then each test and its nodes by state; --test N:
// that test only; --active, --invalid or --all: the nodes themselves (--server: the
// servers, not the clients) and their number.
int print_list_batch(const std::string&, const dlc::Request& req, const YAML::Node& doc, Io io) {
  std::FILE* out = io.out;
  bool named = req.args.count("name") > 0;
  unsigned only = number_or(req, "test", 0);
  if (!named) {
    int i = 0;
    for (const auto& b : doc["batches"]) std::fprintf(out, "%d) %s\n", ++i, get<std::string>(b, "name").c_str());
    std::fprintf(out, "Total %d batches\n", i);
    return 0;
  }
  bool listing = req.flag("active") || req.flag("invalid") || req.flag("all");
  const char* side = req.flag("server") ? "servers" : "clients";
  for (const auto& b : doc["batches"]) {
    YAML::Node tests(YAML::NodeType::Sequence);
    for (const auto& t : b["tests"])
      if (!only || get<unsigned>(t, "index") == only) tests.push_back(t);
    if (listing) {
      int shown = 0;
      for (const auto& n : once_each(tests, side)) {
        bool is_active = active(n);
        if ((req.flag("active") && !is_active) || (req.flag("invalid") && is_active)) continue;
        std::fprintf(out, "\t%s: %s\n", get<std::string>(n, "id").c_str(), get<std::string>(n, "state").c_str());
        ++shown;
      }
      std::fprintf(out, "Total %d nodes\n", shown);
      continue;
    }
    if (!only) {
      std::fprintf(out, "Batch: %s Tests: %zu State: %d\n", get<std::string>(b, "name").c_str(), b["tests"].size(),
                   get<std::string>(b, "state") == "running" ? 177 : 176);
      print_node_table(out, once_each(tests, "clients"), once_each(tests, "servers"));
    }
    for (const auto& t : tests) {
      std::fprintf(out, "\tTest %u(%s) (loop: %ld, concurrency: %u)\n", get<unsigned>(t, "index"),
                   get<std::string>(t, "type").c_str(), get<long>(t, "loop"), get<unsigned>(t, "concurrency"));
      print_node_table(out, t["clients"], t["servers"]);
    }
  }
  return 0;
}

// As lst: each node, its state, and the session it is in (its name and console).
int print_ping(const std::string&, const dlc::Request&, const YAML::Node& doc, Io io) {
  std::FILE* out = io.out;
  for (const auto& g : doc["groups"])
    for (const auto& n : g["nodes"]) {
      std::string st = get<std::string>(n, "state");
      bool in_one = st == "Active" || st == "Busy";
      std::string session = !in_one ? "<NULL>" : get<int>(n, "rc") == 0 ? get<std::string>(n, "session") : "Unknown";
      std::fprintf(out, "\t%s: %s [session: %s id: %s]\n", get<std::string>(n, "id").c_str(), st.c_str(),
                   session.c_str(), get<std::string>(n, "session_nid", "<?>").c_str());
    }
  return 0;
}

// As lst: the name on the standard output, each node with errors on the standard
// error, then the count. A node has errors when its RPC layer or its tests count any
// (--session: its tests only); the RPC layer's dropped and expired are shown with them.
int print_show_error(const std::string&, const dlc::Request& req, const YAML::Node& doc, Io io) {
  std::FILE* out = io.out;
  for (const auto& g : doc["groups"]) {
    int errs = 0;
    std::string name = get<std::string>(g, "name");
    std::fprintf(out, "%s:\n", name.c_str());
    std::fflush(out);
    for (const auto& n : g["nodes"]) {
      std::string id = get<std::string>(n, "id");
      if (get<int>(n, "rc") != 0 || !n["counters"]) {
        ++errs;
        std::fprintf(io.err, "RPC failure, can't show error on %s\n", id.c_str());
        continue;
      }
      if (get<std::uint32_t>(n, "status") != 0) {
        ++errs;
        std::fprintf(io.err, "Framework failure, can't show error on %s\n", id.c_str());
        continue;
      }
      const YAML::Node c = n["counters"];
      auto brw = get<std::uint32_t>(c, "brw_errors"), ping = get<std::uint32_t>(c, "ping_errors"),
           rpc = get<std::uint32_t>(c, "rpc_errors");
      bool session_only = req.flag("session");
      if (brw + ping == 0 && (session_only || rpc == 0)) continue;
      ++errs;
      std::fprintf(io.err, "%s: [Session %u brw errors, %u ping errors]", id.c_str(), brw, ping);
      if (session_only)
        std::fprintf(io.err, "\n");
      else
        std::fprintf(io.err, " [RPC: %u errors, %u dropped, %u expired]\n", rpc, get<std::uint32_t>(c, "rpcs_dropped"),
                     get<std::uint32_t>(c, "rpcs_expired"));
    }
    std::fprintf(out, "Total %d error nodes in %s\n", errs, name.c_str());
  }
  return 0;
}

int print_del_group(const std::string&, const dlc::Request&, const YAML::Node&, Io io) {
  std::fprintf(io.out, "Group is deleted\n");
  return 0;
}

int print_add_test(const std::string&, const dlc::Request&, const YAML::Node&, Io io) {
  std::fprintf(io.out, "Test was added successfully\n");
  return 0;
}

}  // namespace

// Each command's output on success, as lst prints it; the exit status (kStopped: query
// found the batch stopped).
int print(const std::string& cmd, const dlc::Request& req, const YAML::Node& doc, Io io) {
  using Printer = int (*)(const std::string&, const dlc::Request&, const YAML::Node&, Io);
  static const std::map<std::string, Printer> kPrinters = {
      {"new_session", print_session},
      {"show_session", print_session},
      {"add_group", print_added_group},
      {"update_group", print_updated_group},
      {"end_session", print_end_session},
      {"list_group", print_list_group},
      {"run", print_run_stop},
      {"stop", print_run_stop},
      {"query", print_query},
      {"list_batch", print_list_batch},
      {"ping", print_ping},
      {"show_error", print_show_error},
      {"del_group", print_del_group},
      {"add_test", print_add_test},
  };
  auto it = kPrinters.find(cmd);
  return it == kPrinters.end() ? 0 : it->second(cmd, req, doc, io);  // add_batch: silent on success
}

}  // namespace lnet::selftest::lst::user
