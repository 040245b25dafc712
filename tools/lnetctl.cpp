// lnetctl: configures and inspects a running lnetd (or any liblnet process that serves a
// control socket), with the command tree and YAML of the real lnetctl. The commands and
// their options come from liblnet's command table (<lnet/dlc.hpp>), which the daemon
// checks requests against too.
#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include <lnet/argv.hpp>
#include <lnet/dlc.hpp>
#include <lnet/log.hpp>

#include "cli/cli.hpp"

namespace po = boost::program_options;
using namespace lnet;

namespace {

constexpr const char* kDefaultSocket = "/run/lnet/lnetd.sock";

void usage() {
  std::printf(
      "usage: lnetctl [--socket PATH] COMMAND [options]\n"
      "       lnetctl COMMAND --help | --list-commands | --help\n\n"
      "Configures and shows a running lnetd over its control socket (--socket, else\n"
      "$LNET_CTL_SOCKET, else %s). Output and errors are YAML; the exit\n"
      "status is 0 on success.\n\ncommands:\n",
      kDefaultSocket);
  for (const dlc::CommandSpec& c : dlc::commands()) std::printf("  %-18s %s\n", c.name, c.summary);
}

// The commands, as lnetctl lists them: the first word of each, four to a line.
void list_commands() {
  std::vector<std::string> words;
  for (const dlc::CommandSpec& c : dlc::commands()) {
    std::string w = std::string(c.name).substr(0, std::string(c.name).find(' '));
    if (std::find(words.begin(), words.end(), w) == words.end()) words.push_back(w);
  }
  words.insert(words.end(), {"help", "--help", "--version", "--list-commands"});
  for (std::size_t k = 0; k < words.size(); ++k)
    std::printf("%-19s%s", words[k].c_str(), (k % 4 == 3 || k + 1 == words.size()) ? "\n" : " ");
}

// The command named by args[i] (and the words after it: "fault drop add" has three);
// *words gets how many it took.
const dlc::CommandSpec* find(const std::vector<std::string>& args, std::size_t i, std::size_t* words) {
  if (i + 2 < args.size())
    if (const dlc::CommandSpec* c = dlc::find_command(args[i] + " " + args[i + 1] + " " + args[i + 2])) {
      *words = 3;
      return c;
    }
  if (i + 1 < args.size())
    if (const dlc::CommandSpec* c = dlc::find_command(args[i] + " " + args[i + 1])) {
      *words = 2;
      return c;
    }
  *words = 1;
  return dlc::find_command(args[i]);
}

// A command group ("route", "net --help"): lists its commands, as lnetctl does.
int group_help(const std::vector<std::string>& args, std::size_t i) {
  std::vector<const dlc::CommandSpec*> group;
  for (const dlc::CommandSpec& c : dlc::commands())
    if (std::string(c.name).rfind(args[i] + " ", 0) == 0) group.push_back(&c);
  // An unknown word: lnetctl's words for it, and its status.
  auto not_valid = [](const std::string& word) {
    std::fprintf(stderr, "lnetctl: '%s' is not a valid command. See 'lnetctl --list-commands'.\n", word.c_str());
    return 255;
  };
  if (group.empty()) return not_valid(args[i]);
  bool help = i + 1 >= args.size() || args[i + 1] == "--help" || args[i + 1] == "-h";
  if (!help && args[i + 1][0] != '-') return not_valid(args[i + 1]);
  if (!help) LNET_LOG(Error, kLogConfig, "unknown command '%s %s'", args[i].c_str(), args[i + 1].c_str());
  std::FILE* out = help ? stdout : stderr;
  std::fprintf(out, "%s commands:\n", args[i].c_str());
  for (const dlc::CommandSpec* c : group) std::fprintf(out, "  %-18s %s\n", c->name, c->summary);
  return help ? 0 : 2;
}

// A command's help as lnetctl prints it, one "--name: what" line per option (scripts
// read it to see what the tool offers: `lnetctl net set -h | grep -- --lnd-timeout:`).
void command_help(const dlc::CommandSpec& spec) {
  using K = dlc::OptionSpec::Kind;
  std::printf("%s: %s\n", spec.name, spec.summary);
  std::string words;
  for (const dlc::OptionSpec& o : spec.options) {
    if (o.kind == K::Positional) {
      words += std::string(" ") + o.name;
      continue;
    }
    std::string line = std::string("\t--") + o.name + ": " + o.help;
    if (o.short_name) line += std::string(" (-") + o.short_name + ")";
    if (o.unsupported) line += std::string(" (not supported yet: ") + o.unsupported + ")";
    std::printf("%s\n", line.c_str());
  }
  if (!words.empty()) std::printf("\targuments:%s\n", words.c_str());
  std::printf("\t--help: this help (-h)\n");
}

// A host name before the @ of an IP network's NID (`lnetctl ping myhost@tcp`) becomes
// its IPv4 address, as lnetctl resolves it; "" and the error when it does not resolve.
// Anything else is left for lnetd to judge.
std::string resolve_host_nid(const std::string& text, std::string* error) {
  std::size_t at = text.rfind('@');
  if (at == std::string::npos || at == 0) return text;
  std::string host = text.substr(0, at), net = text.substr(at + 1), pid;
  if (std::size_t dash = host.find('-'); dash != std::string::npos && dash > 0 &&
                                         std::all_of(host.begin(), host.begin() + static_cast<long>(dash), ::isdigit)) {
    pid = host.substr(0, dash + 1);  // 12345-myhost@tcp
    host = host.substr(dash + 1);
  }
  bool ip_net = net.rfind("tcp", 0) == 0 || net.rfind("o2ib", 0) == 0;
  bool name = std::any_of(host.begin(), host.end(), [](unsigned char c) { return std::isalpha(c); }) &&
              host.find_first_of("[]*,:") == std::string::npos && host.rfind("0x", 0) != 0;
  if (!ip_net || !name) return text;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0 || !res) {
    *error = "cannot resolve '" + host + "' in '" + text + "': " + gai_strerror(rc);
    return "";
  }
  char ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, ip, sizeof ip);
  freeaddrinfo(res);
  return pid + ip + "@" + net;
}

// Turns the parsed options into a request; reads the file of `import`. 0 or an exit code.
int build_request(const dlc::CommandSpec& spec, const po::variables_map& vm, dlc::Request& req, std::string& out_file) {
  req.command = spec.name;
  cli::to_args(vm, req);
  std::string name = spec.name;
  if (name == "set") {
    auto it = req.args.find("name");
    if (it == req.args.end() || it->second.size() != 1 || !req.args.count("value")) {
      LNET_LOG(Error, kLogConfig, "usage: lnetctl set TUNABLE VALUE (lnetctl set --help)");
      return 2;
    }
  }
  if ((name == "ping" || name == "discover" || name == "cpt-of-nid") && !req.arg("nid")) {
    LNET_LOG(Error, kLogConfig, "%s: give at least one NID (lnetctl %s --help)", name.c_str(), name.c_str());
    return 2;
  }
  if (name == "ping" || name == "discover") {
    for (std::string& nid : req.args["nid"]) {
      std::string error;
      nid = resolve_host_nid(nid, &error);
      if (!error.empty()) {
        LNET_LOG(Error, kLogConfig, "%s: %s", name.c_str(), error.c_str());
        return 1;
      }
    }
  }
  if (name == "import") {
    std::string file = req.arg("file") ? *req.arg("file") : "-";
    std::stringstream ss;
    if (file == "-") {
      ss << std::cin.rdbuf();
    } else {
      std::ifstream in(file);
      if (!in) {
        LNET_LOG(Error, kLogConfig, "import: cannot read %s: %s", file.c_str(), std::strerror(errno));
        return 1;
      }
      ss << in.rdbuf();
    }
    req.body = ss.str();
    req.args.erase("file");
    if (req.body.size() + 4096 > dlc::kMaxFrame) {
      LNET_LOG(Error, kLogConfig, "import: %s is %zu bytes, more than a request may carry (%zu MiB)", file.c_str(),
               req.body.size(), dlc::kMaxFrame >> 20);
      return 1;
    }
  }
  if (name == "export" && req.arg("file")) {
    out_file = *req.arg("file");
    req.args.erase("file");
  }
  return 0;
}

// The global options before the command (args from `i` on; `i` left at the command):
// -1 to go on, else the exit status.
int global_options(const std::vector<std::string>& args, std::size_t& i, std::string& socket_path) {
  for (; i < args.size(); ++i) {  // global options come first
    if (args[i] == "--socket" && i + 1 < args.size()) {
      socket_path = args[++i];
    } else if (args[i].rfind("--socket=", 0) == 0) {
      socket_path = args[i].substr(9);
    } else if (args[i] == "--help" || args[i] == "-h" || args[i] == "help") {
      usage();
      return 0;
    } else if (args[i] == "--list-commands") {
      list_commands();
      return 0;
    } else if (args[i] == "--version") {
      std::printf("lnetctl (lnet-mpi) 0.1.0\n");
      return 0;
    } else {
      break;
    }
  }
  if (i >= args.size()) {
    usage();
    return 2;
  }
  return -1;
}

// The command's options (`rest`, after its words) into `vm`: -1 to go on, else the exit
// status (its help printed, or why they do not parse).
int command_options(const dlc::CommandSpec& spec, const std::vector<std::string>& rest, po::variables_map& vm) {
  po::options_description opts(std::string("lnetctl ") + spec.name + " options");
  po::options_description hidden;
  po::positional_options_description pos;
  cli::describe(spec, opts, hidden, pos);
  opts.add_options()("help,h", "this help");
  po::options_description all;
  all.add(opts).add(hidden);
  if (auto e = placeholder_argument(rest, false)) {
    LNET_LOG(Error, kLogConfig, "%s: %s (try lnetctl %s --help)", spec.name, e->c_str(), spec.name);
    return 2;
  }
  try {
    po::store(po::command_line_parser(rest).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    LNET_LOG(Error, kLogConfig, "%s: %s (try lnetctl %s --help)", spec.name, e.what(), spec.name);
    return 2;
  }
  if (vm.count("help")) {
    command_help(spec);
    return 0;
  }
  return -1;
}

// Sends the request to lnetd and prints its answer (or writes it to `out_file`); the
// exit status.
int ask_lnetd(const std::string& socket_path, const dlc::Request& req, const std::string& out_file) {
  dlc::Response resp;
  if (int rc = cli::talk(socket_path, req, resp)) {
    // With LNet not running, export has nothing to say and says it with status 0, as
    // lnetctl does (scripts call it unconditionally).
    if (req.command == "export" && (rc == -ENOENT || rc == -ECONNREFUSED)) return 0;
    LNET_LOG(
        Error, kLogConfig, "cannot reach lnetd at %s: %s%s", socket_path.c_str(), std::strerror(-rc),
        rc == -ENOENT || rc == -ECONNREFUSED ? " (is lnetd running? --socket or LNET_CTL_SOCKET name another)" : "");
    return 1;
  }
  for (const std::string& w : resp.warnings) std::fprintf(stderr, "lnetctl: warning: %s\n", w.c_str());
  if (!out_file.empty() && resp.rc == 0) {
    std::ofstream out(out_file, std::ios::trunc);
    out << resp.text;
    if (!out) {
      LNET_LOG(Error, kLogConfig, "export: cannot write %s: %s", out_file.c_str(), std::strerror(errno));
      return 1;
    }
    return 0;
  }
  // As lnetctl 2.17: ping and discover write what failed with what answered (stdout) and
  // exit 255; another command's failure goes to stderr with status 234.
  bool probe = req.command == "ping" || req.command == "discover";
  std::fputs(resp.text.c_str(), resp.rc == 0 || probe ? stdout : stderr);
  if (resp.rc == 0) return 0;
  return probe ? 255 : 234;
}

}  // namespace

int main(int argc, char** argv) {
  set_log_program("lnetctl");
  set_log_sink([](LogLevel, std::string_view line) {
    std::fprintf(stderr, "lnetctl: %.*s\n", static_cast<int>(line.size()), line.data());
  });
  std::string socket_path = std::getenv("LNET_CTL_SOCKET") ? std::getenv("LNET_CTL_SOCKET") : kDefaultSocket;
  std::vector<std::string> args(argv + 1, argv + argc);
  std::size_t i = 0;
  if (int rc = global_options(args, i, socket_path); rc >= 0) return rc;
  std::size_t words = 0;
  const dlc::CommandSpec* spec = find(args, i, &words);
  if (!spec) return group_help(args, i);
  std::vector<std::string> rest(args.begin() + static_cast<long>(i + words), args.end());
  po::variables_map vm;
  if (int rc = command_options(*spec, rest, vm); rc >= 0) return rc;
  dlc::Request req;
  std::string out_file;
  if (int rc = build_request(*spec, vm, req, out_file)) return rc;
  return ask_lnetd(socket_path, req, out_file);
}
