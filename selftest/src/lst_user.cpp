// lst's user half: the command line, and the output lst users know of each command
// (stat's is lst_stat.cpp's).
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <yaml-cpp/yaml.h>

#include <cli/cli.hpp>
#include <lnet/argv.hpp>
#include <selftest/lst.hpp>

#include "lst_user.hpp"

namespace po = boost::program_options;

namespace lnet::selftest::lst {

namespace user {

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
const char* subject_of(const std::string& cmd) {
  if (cmd.find("session") != std::string::npos) return "session";
  if (cmd == "add_test") return "test";
  if (cmd.find("batch") != std::string::npos || cmd == "run" || cmd == "stop" || cmd == "query") return "batch";
  return "group";
}

}  // namespace

// A refusal of the console's: lst's own line for the errors it names (scripts look for
// them), with the console's reason after it; the reason alone for the others.
void print_failure(Io io, const std::string& cmd, const dlc::Response& r) {
  std::string why = r.text;
  while (!why.empty() && why.back() == '\n') why.pop_back();
  std::string sub = subject_of(cmd), words;
  switch (-r.rc) {
    case ESRCH: words = "No session exists"; break;
    case ESHUTDOWN: words = "Session is shutting down"; break;
    case EACCES: words = "Unmatched session key or not root"; break;
    case ENOENT: words = "Can't find " + sub + " in current session"; break;
    case EEXIST: words = sub + " already exists"; break;
    default: std::fprintf(io.err, "lst %s: %s\n", cmd.c_str(), why.c_str()); return;
  }
  std::fprintf(io.err, "%s (%s)\n", words.c_str(), why.c_str());
}

}  // namespace user

namespace {

using user::get;
using user::number_or;
using user::print_failure;

constexpr int kStopped = -1;  // a printer: a query found the batch stopped on every node

bool active(const YAML::Node& node) { return get<std::string>(node, "state") == "Active"; }

// Names as lst checks them before asking: at most 31 characters; a new session without
// one is named after its user and host (USER@HOST), as lst names it.
int check_names(const std::string& cmd, dlc::Request& req, Io io) {
  constexpr std::size_t kMax = kNameSize - 1;
  if (cmd == "new_session") {
    auto& names = req.args["name"];
    if (names.empty()) {
      char host[kNameSize] = {};
      if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown_host");
      const passwd* pw = getpwuid(getuid());
      std::string user = pw ? pw->pw_name : std::to_string(getuid());
      names.push_back((user + "@" + host).substr(0, kMax));
    } else if (names[0].size() > kMax) {
      std::fprintf(io.err, "Name size is limited to %zu\n", kMax);
      return 1;
    }
  }
  if (cmd == "add_group" || cmd == "add_batch") {
    auto it = req.args.find(cmd == "add_group" ? "args" : "name");
    if (it != req.args.end() && !it->second.empty() && it->second[0].size() > kMax) {
      std::fprintf(io.err, "Name length is limited to %zu\n", kMax);
      return 1;
    }
  }
  return 0;
}

// lst stat's --delay and --timeout: positive numbers of seconds, as lst checks them.
bool positive(const dlc::Request& r, const char* name) {
  const std::string* v = r.arg(name);
  if (!v) return true;
  try {
    std::size_t used = 0;
    long n = std::stol(*v, &used);
    return used == v->size() && n > 0 && n <= 0x7fffffff;
  } catch (const std::exception&) {
    return false;
  }
}

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
    return 1;
  }
  return get<int>(g, "rc") ? 1 : 0;
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
    return 1;
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

int print_end_session(const std::string&, const dlc::Request&, const YAML::Node&, Io io) {
  std::fprintf(io.out, "session is ended\n");
  return 0;
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
  // in that state and their number.
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
    return 1;
  }
  if (cmd == "run")
    std::fprintf(out, "%s is running now\n", name.c_str());
  else
    std::fprintf(out, "Batch is stopped\n");
  return 0;
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

int print_list_batch(const std::string&, const dlc::Request& req, const YAML::Node& doc, Io io) {
  std::FILE* out = io.out;
  bool named = req.args.count("name") > 0;
  unsigned only = number_or(req, "test", 0);
  if (!named) {  // as lst: the batches' names
    int i = 0;
    for (const auto& b : doc["batches"]) std::fprintf(out, "%d) %s\n", ++i, get<std::string>(b, "name").c_str());
    std::fprintf(out, "Total %d batches\n", i);
    return 0;
  }
  for (const auto& b : doc["batches"]) {
    for (const auto& t : b["tests"]) {
      if (only && get<unsigned>(t, "index") != only) continue;
      std::fprintf(out, "\tTest %u(%s) (loop: %ld, concurrency: %u, distribute: %s, from: %s, to: %s)\n",
                   get<unsigned>(t, "index"), get<std::string>(t, "type").c_str(), get<long>(t, "loop"),
                   get<unsigned>(t, "concurrency"), get<std::string>(t, "distribute").c_str(),
                   get<std::string>(t, "from").c_str(), get<std::string>(t, "to").c_str());
      if (get<std::string>(t, "type") == "brw")
        std::fprintf(out, "\t\t%s size=%u check=%s off=%u\n", get<std::string>(t, "op").c_str(),
                     get<unsigned>(t, "size"), get<std::string>(t, "check").c_str(), get<unsigned>(t, "off"));
      if (only || req.flag("server") || req.flag("active") || req.flag("invalid"))
        for (const auto& n : t[req.flag("server") ? "servers" : "clients"]) {
          bool is_active = active(n);
          if ((req.flag("active") && !is_active) || (req.flag("invalid") && is_active)) continue;
          std::fprintf(out, "\t\t%s: %s\n", get<std::string>(n, "id").c_str(), get<std::string>(n, "state").c_str());
        }
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

// The command's options (argv after its name) into `vm`: -1 to go on, else the exit
// status (its --help printed, or why they do not parse).
int parse_options(const dlc::CommandSpec& spec, const std::vector<std::string>& argv, po::variables_map& vm, Io io) {
  po::options_description opts(std::string("lst ") + spec.name + " options");
  po::options_description hidden;
  po::positional_options_description pos;
  cli::describe(spec, opts, hidden, pos);
  opts.add_options()("help", "this help");  // long only: short options are off (--loop -1)
  po::options_description all;
  all.add(opts).add(hidden);
  if (auto e = placeholder_argument(argv, true)) {
    std::fprintf(io.err, "lst %s: %s (lst %s --help)\n", spec.name, e->c_str(), spec.name);
    return 2;
  }
  try {
    std::vector<std::string> rest(argv.begin() + 1, argv.end());
    // Negative numbers (--loop -1) are values, not options.
    po::store(po::command_line_parser(rest)
                  .options(all)
                  .positional(pos)
                  .style(po::command_line_style::unix_style ^ po::command_line_style::allow_short)
                  .run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(io.err, "lst %s: %s (lst %s --help)\n", spec.name, e.what(), spec.name);
    return 2;
  }
  if (vm.count("help")) {
    std::ostringstream ss;
    ss << "lst " << spec.name << ": " << spec.summary << "\n\n" << opts << "\n";
    std::fputs(ss.str().c_str(), io.out);
    return 0;
  }
  return -1;
}

// stat's --delay, --timeout and --count checked as lst checks them, then its rounds.
int checked_stat(const dlc::Request& req, const Exec& exec, Io io) {
  if (!positive(req, "delay") || !positive(req, "timeout")) {
    std::fprintf(io.err, "Invalid timeout or delay value\n");
    return 1;
  }
  if (const std::string* c = req.arg("count"); c && !(positive(req, "count") || *c == "0" || *c == "-1")) {
    std::fprintf(io.err, "Invalid count value\n");
    return 1;
  }
  return user::run_stat(req, exec, io);
}

// Any command but stat: asked and its answer printed (query --loop: again each --delay
// until the batch has stopped).
int ask(const char* name, const dlc::Request& req, const Exec& exec, Io io) {
  unsigned loops = std::string(name) == "query" ? std::max(1u, number_or(req, "loop", 1)) : 1;
  for (unsigned i = 0; i < loops; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::seconds(std::max(1u, number_or(req, "delay", 5))));
    dlc::Response r = exec(req);
    if (r.rc != 0) {
      print_failure(io, name, r);
      return 1;
    }
    YAML::Node doc;
    try {
      doc = YAML::Load(r.text);
    } catch (const YAML::Exception& e) {
      std::fprintf(io.err, "lst %s: unreadable answer: %s\n", name, e.what());
      return 1;
    }
    int rc = print(name, req, doc, io);
    std::fflush(io.out);        // each round of query --loop whole, as it comes (stat flushes its blocks)
    if (rc == kStopped) break;  // query --loop: asked until the batch has stopped
    if (rc != 0) return rc;
  }
  return 0;
}

}  // namespace

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: lst [--socket PATH] COMMAND [options]\n"
               "       lst COMMAND --help | --list-commands | --help\n\n"
               "LNet self-test: a console in lnetd (selftest: enable) drives the test framework of\n"
               "lnetd nodes and lst-node MPI ranks. LST_SESSION must hold a number naming your\n"
               "session (export LST_SESSION=$$). The console is reached on lnetd's control socket:\n"
               "--socket, else $LNET_CTL_SOCKET, else /run/lnet/lnetd.sock.\n\ncommands:\n");
  for (const auto& c : commands()) std::fprintf(out, "  %-14s %s\n", c.name, c.summary);
}

int run(const std::vector<std::string>& argv, const Exec& exec, std::optional<std::uint32_t> key, Io io) {
  if (argv.empty()) {
    usage(io.err);
    return 2;
  }
  const dlc::CommandSpec* spec = find(argv[0]);
  if (!spec) {
    std::fprintf(io.err, "lst: unknown command '%s' (lst --help lists them)\n", argv[0].c_str());
    return 2;
  }
  po::variables_map vm;
  if (int rc = parse_options(*spec, argv, vm, io); rc >= 0) return rc;
  dlc::Request req;
  req.command = std::string(kPrefix) + spec->name;
  cli::to_args(vm, req);
  if (!key && std::string(spec->name) != "show_session") {
    std::fprintf(io.err,
                 "Can't find env LST_SESSION or value is not valid (export LST_SESSION=$$: any number names your "
                 "session)\n");
    return 2;
  }
  if (key) req.args["key"] = {std::to_string(*key)};
  if (int rc = check_names(spec->name, req, io)) return rc;
  if (std::string(spec->name) == "stat") return checked_stat(req, exec, io);
  return ask(spec->name, req, exec, io);
}

}  // namespace lnet::selftest::lst
