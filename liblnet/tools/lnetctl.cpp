// lnetctl: configures and inspects a running lnetd (or any liblnet process that serves a
// control socket), with the command tree and YAML of the real lnetctl.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include <lnet/dlc.hpp>

namespace po = boost::program_options;
using namespace lnet;

namespace {

constexpr const char* kDefaultSocket = "/run/lnet/lnetd.sock";

struct Spec {
  std::string name;  // "net add"
  std::function<void(po::options_description&)> options;
  std::vector<std::string> positional;  // names of positional arguments, last one repeats
};

void verbose_opt(po::options_description& o) {
  o.add_options()("verbose,v", po::value<std::string>()->implicit_value("1"), "more detail (level 1 or 2)");
}

const std::vector<Spec>& specs() {
  static const std::vector<Spec> s = {
      {"lnet configure",
       [](po::options_description& o) {
         o.add_options()("all,a", "configure every network of the configuration")("large", "large NIDs (ignored)");
       },
       {}},
      {"lnet unconfigure", [](po::options_description&) {}, {}},
      {"net add",
       [](po::options_description& o) {
         o.add_options()("net", po::value<std::string>(), "network, e.g. tcp1")(
             "if", po::value<std::vector<std::string>>(), "interface(s), e.g. eth0")(
             "nid", po::value<std::string>(), "the NID instead of an interface")("ip2net", po::value<std::string>(),
                                                                                 "ip2nets string (not supported)")(
             "peer-timeout", po::value<std::string>(), "seconds")("peer-credits", po::value<std::string>(), "")(
             "peer-buffer-credits", po::value<std::string>(), "")("credits", po::value<std::string>(), "")(
             "cpt", po::value<std::string>(), "CPT list, e.g. \"[0,1]\"")(
             "conns-per-peer", po::value<std::string>(), "")("tos", po::value<std::string>(), "IP type of service")(
             "skip-mr-route-setup", "ignored")("auth-key", po::value<std::string>(), "ignored")(
             "traffic-class", po::value<std::string>(), "ignored");
       },
       {}},
      {"net del",
       [](po::options_description& o) {
         o.add_options()("net", po::value<std::string>(), "network")("nid", po::value<std::string>(), "one NI")(
             "if", po::value<std::vector<std::string>>(), "the NI on this interface");
       },
       {}},
      {"net show",
       [](po::options_description& o) {
         o.add_options()("net", po::value<std::string>(), "only this network");
         verbose_opt(o);
       },
       {}},
      {"peer add",
       [](po::options_description& o) {
         o.add_options()("prim_nid", po::value<std::string>(), "primary NID")(
             "nid", po::value<std::vector<std::string>>(), "more NIDs (comma separated)")("non_mr", "not multi-rail")(
             "lock_prim", "ignored");
       },
       {}},
      {"peer del",
       [](po::options_description& o) {
         o.add_options()("prim_nid", po::value<std::string>(), "primary NID")(
             "nid", po::value<std::vector<std::string>>(), "only these NIDs")("force", "ignored");
       },
       {}},
      {"peer show",
       [](po::options_description& o) {
         o.add_options()("nid", po::value<std::string>(), "only the peer with this NID");
         verbose_opt(o);
       },
       {}},
      {"peer list", [](po::options_description&) {}, {}},
      {"route add",
       [](po::options_description& o) {
         o.add_options()("net", po::value<std::string>(), "remote network")(
             "gateway", po::value<std::string>(), "gateway NID")("hop", po::value<std::string>(), "hop count 1..255")(
             "hop-count", po::value<std::string>(), "same as --hop")(
             "priority", po::value<std::string>(), "lower is preferred")("health_sensitivity", po::value<std::string>(),
                                                                         "ignored");
       },
       {}},
      {"route del",
       [](po::options_description& o) {
         o.add_options()("net", po::value<std::string>(), "remote network")("gateway", po::value<std::string>(),
                                                                            "gateway NID");
       },
       {}},
      {"route show",
       [](po::options_description& o) {
         o.add_options()("net", po::value<std::string>(), "")("gateway", po::value<std::string>(), "")(
             "hop", po::value<std::string>(), "")("priority", po::value<std::string>(), "");
         verbose_opt(o);
       },
       {}},
      {"routing show", [](po::options_description&) {}, {}},
      {"set", [](po::options_description&) {}, {"name", "value"}},
      {"global show", [](po::options_description&) {}, {}},
      {"stats show", [](po::options_description&) {}, {}},
      {"stats reset", [](po::options_description&) {}, {}},
      {"ping",
       [](po::options_description& o) {
         o.add_options()("timeout", po::value<std::string>(), "seconds (default 1)")("source", po::value<std::string>(),
                                                                                     "local NID to ping from");
       },
       {"nid"}},
      {"discover", [](po::options_description& o) { o.add_options()("force", "discover again"); }, {"nid"}},
      {"import",
       [](po::options_description& o) {
         o.add_options()("add", "add what the file describes (default)")("del", "delete it")(
             "show", "show the current state of it")("exec", "run it as commands (not supported)");
       },
       {"file"}},
      {"export", [](po::options_description& o) { o.add_options()("backup,b", "only what configures"); }, {"file"}},
      {"udsp add",
       [](po::options_description& o) {
         o.add_options()("src", po::value<std::string>(), "local NID or net pattern")(
             "dst", po::value<std::string>(), "peer NID or net pattern")("rte", po::value<std::string>(),
                                                                         "router pattern")(
             "priority", po::value<std::string>(), "0 is the highest")("idx", po::value<std::string>(), "position");
       },
       {}},
      {"udsp del",
       [](po::options_description& o) {
         o.add_options()("idx", po::value<std::string>(), "rule index")("all", "every rule");
       },
       {}},
      {"udsp show",
       [](po::options_description& o) { o.add_options()("idx", po::value<std::string>(), "rule index"); },
       {}},
  };
  return s;
}

void usage() {
  std::printf(
      "usage: lnetctl [--socket PATH] COMMAND [options]\n"
      "       lnetctl COMMAND --help | --list-commands | --help\n\n"
      "Configures and shows a running lnetd over its control socket (--socket, else\n"
      "$LNET_CTL_SOCKET, else %s). Output and errors are YAML; the exit\n"
      "status is 0 on success.\n\ncommands:\n",
      kDefaultSocket);
  for (const auto& [name, what] : dlc::command_list()) std::printf("  %-18s %s\n", name.c_str(), what.c_str());
}

int talk(const std::string& path, const dlc::Request& req, dlc::Response& resp) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) return -ENAMETOOLONG;
  std::strcpy(a.sun_path, path.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    int err = errno;
    ::close(fd);
    return -err;
  }
  int rc = dlc::write_frame(fd, dlc::encode_request(req));
  std::string frame;
  if (rc == 0) rc = dlc::read_frame(fd, frame);
  ::close(fd);
  if (rc) return rc;
  auto r = dlc::decode_response(frame);
  if (!r) return r.code();
  resp = *r;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket_path = std::getenv("LNET_CTL_SOCKET") ? std::getenv("LNET_CTL_SOCKET") : kDefaultSocket;
  std::vector<std::string> args(argv + 1, argv + argc);
  // Global options come first.
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    if (args[i] == "--socket" && i + 1 < args.size()) {
      socket_path = args[++i];
    } else if (args[i].rfind("--socket=", 0) == 0) {
      socket_path = args[i].substr(9);
    } else if (args[i] == "--help" || args[i] == "-h") {
      usage();
      return 0;
    } else if (args[i] == "--list-commands") {
      for (const auto& [name, what] : dlc::command_list()) std::printf("%s\n", name.c_str());
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
  // The command: one or two words.
  const Spec* spec = nullptr;
  std::size_t words = 0;
  for (const Spec& s : specs()) {
    std::string two = i + 1 < args.size() ? args[i] + " " + args[i + 1] : "";
    if (s.name == two) {
      spec = &s;
      words = 2;
      break;
    }
    if (s.name == args[i]) {
      spec = &s;
      words = 1;
    }
  }
  if (!spec) {
    // A command group ("route", "net --help"): list its commands, like lnetctl does.
    std::vector<std::pair<std::string, std::string>> group;
    for (const auto& [name, what] : dlc::command_list())
      if (name.rfind(args[i] + " ", 0) == 0) group.emplace_back(name, what);
    if (!group.empty()) {
      bool help = i + 1 >= args.size() || args[i + 1] == "--help" || args[i + 1] == "-h";
      std::FILE* out = help ? stdout : stderr;
      if (!help) std::fprintf(stderr, "lnetctl: unknown command '%s %s'\n", args[i].c_str(), args[i + 1].c_str());
      std::fprintf(out, "%s commands:\n", args[i].c_str());
      for (const auto& [name, what] : group) std::fprintf(out, "  %-18s %s\n", name.c_str(), what.c_str());
      return help ? 0 : 2;
    }
    std::string what = args[i] + (i + 1 < args.size() && args[i + 1][0] != '-' ? " " + args[i + 1] : "");
    std::fprintf(stderr, "lnetctl: unknown command '%s' (lnetctl --list-commands)\n", what.c_str());
    return 2;
  }
  std::vector<std::string> rest(args.begin() + static_cast<long>(i + words), args.end());
  po::options_description opts("lnetctl " + spec->name + " options");
  spec->options(opts);
  opts.add_options()("help,h", "this help");
  po::options_description hidden;
  po::positional_options_description pos;
  for (std::size_t k = 0; k < spec->positional.size(); ++k) {
    hidden.add_options()(("pos-" + spec->positional[k]).c_str(), po::value<std::vector<std::string>>());
    pos.add(("pos-" + spec->positional[k]).c_str(), k + 1 == spec->positional.size() ? -1 : 1);
  }
  po::options_description all;
  all.add(opts).add(hidden);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(rest).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "lnetctl %s: %s (try lnetctl %s --help)\n", spec->name.c_str(), e.what(), spec->name.c_str());
    return 2;
  }
  if (vm.count("help")) {
    std::string line;
    for (const auto& [name, what] : dlc::command_list())
      if (name == spec->name) line = what;
    std::cout << "lnetctl " << spec->name << ": " << line << "\n\n" << opts << "\n";
    return 0;
  }

  dlc::Request req;
  req.command = spec->name;
  for (const auto& [key, val] : vm) {
    if (key == "help") continue;
    std::vector<std::string> vs;
    if (val.value().type() == typeid(std::string)) {
      vs.push_back(val.as<std::string>());
    } else if (val.value().type() == typeid(std::vector<std::string>)) {
      vs = val.as<std::vector<std::string>>();
    }
    std::string name = key.rfind("pos-", 0) == 0 ? key.substr(4) : key;
    req.args[name] = vs;
  }
  std::string out_file;
  if (spec->name == "set") {
    auto it = req.args.find("name");
    if (it == req.args.end() || it->second.size() != 1 || !req.args.count("value")) {
      std::fprintf(stderr, "lnetctl set: usage: lnetctl set TUNABLE VALUE (lnetctl set --help)\n");
      return 2;
    }
  }
  if (spec->name == "import") {
    if (req.flag("exec")) {
      std::fprintf(stderr, "lnetctl import: not supported: --exec\n");
      return 2;
    }
    std::string file = req.arg("file") ? *req.arg("file") : "-";
    std::stringstream ss;
    if (file == "-") {
      ss << std::cin.rdbuf();
    } else {
      std::ifstream in(file);
      if (!in) {
        std::fprintf(stderr, "lnetctl import: cannot read %s: %s\n", file.c_str(), std::strerror(errno));
        return 1;
      }
      ss << in.rdbuf();
    }
    req.body = ss.str();
    req.args.erase("file");
  }
  if (spec->name == "export" && req.arg("file")) {
    out_file = *req.arg("file");
    req.args.erase("file");
  }
  if ((spec->name == "ping" || spec->name == "discover") && !req.arg("nid")) {
    std::fprintf(stderr, "lnetctl %s: give at least one NID (lnetctl %s --help)\n", spec->name.c_str(),
                 spec->name.c_str());
    return 2;
  }

  dlc::Response resp;
  if (int rc = talk(socket_path, req, resp)) {
    std::fprintf(
        stderr, "lnetctl: cannot reach lnetd at %s: %s%s\n", socket_path.c_str(), std::strerror(-rc),
        rc == -ENOENT || rc == -ECONNREFUSED ? " (is lnetd running? --socket or LNET_CTL_SOCKET name another)" : "");
    return 1;
  }
  if (!out_file.empty() && resp.rc == 0) {
    std::ofstream out(out_file, std::ios::trunc);
    out << resp.text;
    if (!out) {
      std::fprintf(stderr, "lnetctl export: cannot write %s: %s\n", out_file.c_str(), std::strerror(errno));
      return 1;
    }
    return 0;
  }
  std::fputs(resp.text.c_str(), resp.rc == 0 ? stdout : stderr);
  return resp.rc == 0 ? 0 : 1;
}
