// lst's user half: the command line, each command asked of the console, stop's wait,
// help, interactive mode (the output of each command is lst_print.cpp's, stat's
// rounds lst_stat.cpp's).
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <sstream>
#include <thread>

#include <yaml-cpp/yaml.h>

#include <cli/cli.hpp>
#include <lnet/argv.hpp>
#include <selftest/lst.hpp>

#include "lst_user.hpp"

namespace po = boost::program_options;

namespace lnet::selftest::lst {

namespace {

using user::get;
using user::kStopped;
using user::number_or;
using user::print;
using user::print_failure;

constexpr const char* kVersion = LNET_VERSION;  // the project's (CMakeLists.txt)

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
      return user::kExitFailed;
    }
  }
  if (cmd == "add_group" || cmd == "add_batch") {
    auto it = req.args.find(cmd == "add_group" ? "args" : "name");
    if (it != req.args.end() && !it->second.empty() && it->second[0].size() > kMax) {
      std::fprintf(io.err, "Name length is limited to %zu\n", kMax);
      return user::kExitFailed;
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

// A command's usage line, as lst prints it ("lst stat [--bw] ... GROUP [GROUP]").
std::string synopsis(const dlc::CommandSpec& spec) {
  std::string line = std::string("lst ") + spec.name;
  std::string name(spec.name);
  for (const auto& o : spec.options) {
    if (o.kind == dlc::OptionSpec::Kind::Flag) {
      line += std::string(" [--") + o.name + "]";
    } else if (o.kind == dlc::OptionSpec::Kind::Value) {
      line += std::string(" [--") + o.name + " #]";
    } else {  // the positional: its words, in capitals; optional where it has a default
      std::string meta = o.help;
      meta = meta.substr(0, meta.find(" ("));
      bool lower =
          std::none_of(meta.begin(), meta.end(), [](char c) { return std::isupper(static_cast<unsigned char>(c)); });
      if (lower)
        for (char& c : meta) c = c == ' ' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      bool optional = std::string(o.help).find("default") != std::string::npos || name == "new_session" ||
                      name == "list_group" || name == "list_batch" || name == "ping";
      line += optional ? " [" + meta + "]" : " " + meta;
    }
  }
  return line;
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
    return user::kExitUsage;
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
  } catch (const po::error& e) {  // as lst: the usage, and what was wrong
    std::fprintf(io.out, "Usage: %s\n", synopsis(spec).c_str());
    std::fprintf(io.err, "%s: %s (lst %s --help)\n", spec.name, e.what(), spec.name);
    return user::kExitUsage;
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
    return user::kExitFailed;
  }
  if (const std::string* c = req.arg("count"); c && !(positive(req, "count") || *c == "0" || *c == "-1")) {
    std::fprintf(io.err, "Invalid count value\n");
    return user::kExitFailed;
  }
  return user::run_stat(req, exec, io);
}

// After stop, as lst: the batch's clients asked each second until none runs it, "N
// batch in stopping" printed while some do (N: how many), then "Batch is stopped".
int wait_stopped(const dlc::Request& stop, const Exec& exec, Io io) {
  constexpr int kRounds = 120;  // a node that keeps running it this long is reported
  dlc::Request q;
  q.command = std::string(kPrefix) + "query";
  for (const char* k : {"name", "key"})
    if (auto it = stop.args.find(k); it != stop.args.end()) q.args[k] = it->second;
  int running = 0;
  for (int round = 0; round < kRounds; ++round) {
    if (round > 0) std::this_thread::sleep_for(std::chrono::seconds(1));
    dlc::Response r = exec(q);
    if (r.rc != 0) return print_failure(io, "stop", r);
    running = 0;
    try {
      for (const auto& n : YAML::Load(r.text)["batch"]["nodes"])
        if (get<int>(n, "rc") == 0 && get<std::uint32_t>(n, "status") == 0 && get<std::uint32_t>(n, "active") > 0)
          ++running;
    } catch (const YAML::Exception& e) {
      std::fprintf(io.err, "lst stop: unreadable answer: %s\n", e.what());
      return user::kExitFailed;
    }
    if (running == 0) {
      std::fprintf(io.out, "Batch is stopped\n");
      return 0;
    }
    std::fprintf(io.out, "%d batch in stopping\n", running);
    std::fflush(io.out);
  }
  std::fprintf(io.err, "lst stop: %d nodes still run the batch after %d s\n", running, kRounds);
  return user::kExitFailed;
}

// Any command but stat: asked and its answer printed (query --loop: again each --delay
// until the batch has stopped).
int ask(const char* name, const dlc::Request& req, const Exec& exec, Io io) {
  unsigned loops = std::string(name) == "query" ? std::max(1u, number_or(req, "loop", 1)) : 1;
  for (unsigned i = 0; i < loops; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::seconds(std::max(1u, number_or(req, "delay", 5))));
    dlc::Response r = exec(req);
    if (r.rc == -ESRCH && std::string(name) == "end_session") return 0;  // as lst: nothing to end is no error
    if (r.rc != 0) return print_failure(io, name, r);
    YAML::Node doc;
    try {
      doc = YAML::Load(r.text);
    } catch (const YAML::Exception& e) {
      std::fprintf(io.err, "lst %s: unreadable answer: %s\n", name, e.what());
      return user::kExitFailed;
    }
    int rc = print(name, req, doc, io);
    std::fflush(io.out);        // each round of query --loop whole, as it comes (stat flushes its blocks)
    if (rc == kStopped) break;  // query --loop: asked until the batch has stopped
    if (rc != 0) return rc;
  }
  if (std::string(name) == "stop") return wait_stopped(req, exec, io);
  return 0;
}

}  // namespace

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: lst [--socket PATH] [COMMAND [OPTIONS]... [ARGS]]\n"
               "       lst COMMAND --help | help [COMMAND] | --list-commands | --version\n\n"
               "LNet self-test: a console in lnetd (selftest: enable) drives the test framework of\n"
               "lnetd nodes, kernel LNet nodes and lst-node MPI ranks. Without a command, lst reads\n"
               "commands from its input, one a line, until quit or exit. LST_SESSION must hold a\n"
               "number naming your session (export LST_SESSION=$$). The console is reached on lnetd's\n"
               "control socket: --socket, else $LNET_CTL_SOCKET, else /run/lnet/lnetd.sock.\n\ncommands:\n");
  for (const auto& c : commands()) std::fprintf(out, "  %-14s %s\n", c.name, c.summary);
}

void list_commands(std::FILE* out) {
  // As lst: four columns of twenty, its own words first.
  std::vector<std::string> words = {"quit",    "exit",      "help",          "--help",
                                    "version", "--version", "list-commands", "--list-commands"};
  for (const auto& c : commands()) words.emplace_back(c.name);
  for (std::size_t i = 0; i < words.size(); ++i)
    std::fprintf(out, "%-20s%s", words[i].c_str(), i % 4 == 3 || i + 1 == words.size() ? "\n" : "");
}

int run(const std::vector<std::string>& argv, const Exec& exec, std::optional<std::uint32_t> key, Io io) {
  if (argv.empty()) {
    usage(io.err);
    return user::kExitUsage;
  }
  const std::string& word = argv[0];
  if (word == "help" || word == "--help" || word == "-h") {
    if (argv.size() > 1) {  // help COMMAND: its usage line, as lst; --help has the options
      const dlc::CommandSpec* c = find(argv[1]);
      if (!c) {
        std::fprintf(io.err, "lst: '%s' is not a valid command. See 'lst --list-commands'.\n", argv[1].c_str());
        return user::kExitFailed;
      }
      std::fprintf(io.err, "%s: Usage: %s\n", c->name, synopsis(*c).c_str());
      return 0;
    }
    usage(io.out);
    return 0;
  }
  if (word == "version" || word == "--version") {
    std::fprintf(io.out, "lst %s (lnet-mpi)\n", kVersion);
    return 0;
  }
  if (word == "list-commands" || word == "--list-commands") {
    list_commands(io.out);
    return 0;
  }
  if (word == "quit" || word == "exit") return 0;
  const dlc::CommandSpec* spec = find(word);
  if (!spec) {
    std::fprintf(io.err, "lst: '%s' is not a valid command. See 'lst --list-commands'.\n", word.c_str());
    return user::kExitFailed;
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
    return user::kExitFailed;
  }
  if (key) req.args["key"] = {std::to_string(*key)};
  if (int rc = check_names(spec->name, req, io)) return rc;
  std::string name = spec->name;
  if ((name == "stat" || name == "show_error") && !req.args.count("args")) {
    std::fprintf(io.out, "Usage: %s\n", synopsis(*spec).c_str());
    return user::kExitUsage;
  }
  if (name == "stat") return checked_stat(req, exec, io);
  return ask(spec->name, req, exec, io);
}

}  // namespace lnet::selftest::lst
