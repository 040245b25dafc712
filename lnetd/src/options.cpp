// lnetd's command line.
#include "options.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <boost/program_options.hpp>

#include <lnet/argv.hpp>
#include <lnet/env.hpp>
#include <lnet/peer_cred.hpp>

namespace lnetd {

namespace po = boost::program_options;
using namespace lnet;

namespace {

const char* kUsage =
    "usage: lnetd [options]\n\n"
    "The host LNet: liblnet with the socket LND (tcp, wire-compatible with ksocklnd),\n"
    "configured from YAML in the schema of `lnetctl export`, serving lnetctl on a\n"
    "control socket; with an mpi net in its configuration, the UP LND serves parallel\n"
    "proxies (lnet-proxy) on the bridge socket. Configuration: the networks of LNET_NETWORKS (as the kernel's\n"
    "networks= module parameter), then --config FILE, else /etc/lnet.conf when present;\n"
    "with neither a file nor LNET_NETWORKS, 0@lo plus tcp on the first interface that\n"
    "is up.\n\noptions";

// Applies --log-level and --log-subsys (else LNET_LOG_LEVEL and LNET_LOG_SUBSYS, else
// info and all). False after reporting a bad value.
bool setup_logging(const po::variables_map& vm, const std::string& level, const std::string& subsys) {
  if (Status s = log_env_status(); !s && !vm.count("log-level") && !vm.count("log-subsys")) {
    LNET_LOG(Error, kLogDaemon, "%s", s.message().c_str());
    return false;
  }
  LogLevel l = LogLevel::Info;
  if (vm.count("log-level") && !parse_log_level(level, &l)) {
    LNET_LOG(Error, kLogDaemon, "bad --log-level '%s' (error, warn, info, debug)", level.c_str());
    return false;
  }
  std::uint32_t mask = kLogAll;
  if (vm.count("log-subsys") && !parse_log_subsystems(subsys, &mask)) {
    LNET_LOG(Error, kLogDaemon, "bad --log-subsys '%s' (core,lnd,router,config,daemon,all)", subsys.c_str());
    return false;
  }
  if (vm.count("log-level") || !std::getenv("LNET_LOG_LEVEL")) set_log_level(l);
  if (vm.count("log-subsys")) set_log_subsystems(mask);
  return true;
}

// --log-target, or where a daemon's lines go by default: stderr in the foreground,
// syslog once daemonised (which has no stderr, so stderr and journal need -f).
bool setup_target(const po::variables_map& vm, const std::string& target, bool foreground, LogTarget* out) {
  *out = foreground ? LogTarget::Stderr : LogTarget::Syslog;
  if (!vm.count("log-target")) return true;
  if (!parse_log_target(target, out)) {
    LNET_LOG(Error, kLogDaemon, "bad --log-target '%s' (stderr, syslog, journal)", target.c_str());
    return false;
  }
  if (!foreground && *out != LogTarget::Syslog) {
    LNET_LOG(Error, kLogDaemon, "--log-target %s needs --foreground (a daemon has no stderr)", target.c_str());
    return false;
  }
  return true;
}

// The socket LND's parameters: the environment, then --port and --accept.
bool setup_socket(const po::variables_map& vm, int port, const std::string& accept, SocketParams& out) {
  auto params = SocketParams::from_env();
  if (!params) {
    LNET_LOG(Error, kLogDaemon, "%s", params.message().c_str());
    return false;
  }
  if (vm.count("port")) {
    if (port < 1 || port > 65535) {
      LNET_LOG(Error, kLogDaemon, "bad --port %d (1..65535)", port);
      return false;
    }
    params->port = port;
  }
  if (vm.count("accept")) {
    if (accept == "secure") {
      params->accept = AcceptMode::Secure;
    } else if (accept == "all") {
      params->accept = AcceptMode::All;
    } else if (accept == "none") {
      params->accept = AcceptMode::None;
    } else {
      LNET_LOG(Error, kLogDaemon, "bad --accept '%s' (secure, all, none)", accept.c_str());
      return false;
    }
  }
  out = *params;
  return true;
}

// --NAME GROUP: a group by name or number; "" is none (a unit's empty setting).
bool take_group(const po::variables_map& vm, const char* name, const std::string& value, std::optional<gid_t>* out) {
  if (!vm.count(name) || value.empty()) return true;
  *out = group_id(value);
  if (!*out) LNET_LOG(Error, kLogDaemon, "no group '%s' (--%s)", value.c_str(), name);
  return out->has_value();
}

}  // namespace

Parsed parse_options(int argc, char** argv, const std::vector<std::unique_ptr<Component>>& components) {
  Options o;
  std::string log_level, log_subsys, log_target, ctl_group, read_group, accept;
  int port = 0;
  po::options_description opts(kUsage);
  opts.add_options()("help,h", "print this help and exit")("config,c", po::value(&o.config_path),
                                                           "YAML configuration (lnetctl export schema)")(
      "foreground,f", "stay in the foreground and log to stderr (else: daemonise, log to syslog)")(
      "ctl-socket,s", po::value(&o.ctl_socket)->default_value(kDefaultSocket), "control socket path")(
      "ctl-group", po::value(&ctl_group), "group whose members may use the control socket besides root")(
      "ctl-read-group", po::value(&read_group),
      "group whose members may run the commands that only show (net/peer/route/stats/global show, export)")(
      "pid-file,p", po::value(&o.pid_file)->default_value(kDefaultPidFile), "pid file (\"\" for none)")(
      "log-level", po::value(&log_level), "error | warn | info | debug (default LNET_LOG_LEVEL, else info)")(
      "log-subsys", po::value(&log_subsys), "core,lnd,router,config,daemon or all (default LNET_LOG_SUBSYS, else all)")(
      "log-target", po::value(&log_target),
      "stderr | syslog | journal (stderr with syslog priorities, for systemd; default: stderr with -f, else syslog)")(
      "port", po::value(&port), "acceptor port (default 988, or LNET_ACCEPT_PORT)")(
      "accept", po::value(&accept), "secure | all | none (default secure, or LNET_ACCEPT)")(
      "large", "large NIDs: a tcp NI given an interface takes its IPv6 address before its IPv4 one")(
      "env", "list the environment variables lnetd reads and exit");
  for (const auto& c : components) c->add_options(opts);
  po::variables_map vm;
  if (auto e = placeholder_argument(std::vector<std::string_view>(argv, argv + argc), true)) {
    LNET_LOG(Error, kLogDaemon, "%s (try --help)", e->c_str());
    return {std::nullopt, 2};
  }
  try {
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    LNET_LOG(Error, kLogDaemon, "%s (try --help)", e.what());
    return {std::nullopt, 2};
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return {std::nullopt, 0};
  }
  if (vm.count("env")) {
    std::cout << env_help();
    return {std::nullopt, 0};
  }
  o.foreground = vm.count("foreground") > 0;
  o.large_nids = vm.count("large") > 0;
  if (!setup_logging(vm, log_level, log_subsys)) return {std::nullopt, 2};
  if (!setup_target(vm, log_target, o.foreground, &o.log_target)) return {std::nullopt, 2};
  if (!setup_socket(vm, port, accept, o.socket)) return {std::nullopt, 2};
  if (!take_group(vm, "ctl-group", ctl_group, &o.ctl_gid) || !take_group(vm, "ctl-read-group", read_group, &o.read_gid))
    return {std::nullopt, 2};
  for (const auto& c : components)
    if (!c->take_options(vm)) return {std::nullopt, 2};
  return {o, 0};
}

}  // namespace lnetd
