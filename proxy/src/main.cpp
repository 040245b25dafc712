// lnet-proxy: the parallel proxy. Started with mpirun on the server and router nodes, one
// rank per node, each rank attached to its node's lnetd through the bridge; applications
// started with LNET_PROXY reach the nets of those lnetds through it. lnet-proxy(8).
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <lnet/argv.hpp>
#include <lnet/env.hpp>
#include <lnet/log.hpp>
#include <lnet/up/uplnd.hpp>

#include "proxy.hpp"

namespace po = boost::program_options;
using namespace lnet;

namespace {

constexpr const char* kUsage =
    "usage: mpirun [mpirun options] lnet-proxy [options]\n"
    "The parallel proxy: one rank per server or router node, attached to that node's lnetd\n"
    "(its UP LND's bridge). MPI applications started with LNET_PROXY=<port file> or\n"
    "LNET_PROXY=name:<service> connect to it and reach the nets of those lnetds. Open MPI\n"
    "connects separately launched jobs only through ompi-server: start both jobs with\n"
    "`mpirun --ompi-server file:<uri file>`.\n\noptions";

struct Parsed {
  std::optional<proxy::ProxyOptions> opts;
  int exit_code = 0;
};

// The options lnet-proxy takes, into `o` (and the two that need checking, as text).
void describe(po::options_description& desc, proxy::ProxyOptions& o, std::string& log_level, std::string& mode) {
  desc.add_options()("help,h", "print this help and exit")(
      "mode", po::value(&mode)->default_value("shared"),
      "shared: serve every application that knocks (mode 1c); per-app: spawn a dedicated proxy job for "
      "each (mode 1b; Open MPI: start this job with mpirun --enable-recovery)")(
      "dedicated", "internal: set by a per-app job on the proxy jobs it spawns")(
      "bridge,b", po::value(&o.bridge)->default_value(up::kDefaultBridge), "this node's lnetd bridge socket")(
      "port-file,p", po::value(&o.port_file)->default_value("/run/lnet/lnet-proxy.port"),
      "where rank 0 writes the MPI port and the doorbell (\"\" for none)")(
      "publish", po::value(&o.publish), "also publish the port under this service name (MPI_Publish_name)")(
      "doorbell-ip", po::value(&o.doorbell_ip),
      "IPv4 address of rank 0's doorbell (default: the address of its lnetd's mpi NID)")(
      "client-timeout", po::value(&o.client_timeout)->default_value(10),
      "seconds without a heartbeat after which an application is gone (1..3600)")(
      "timeout", po::value(&o.timeout)->default_value(30),
      "seconds for each start-up step and each application's set-up (1..3600)")(
      "log-level", po::value(&log_level), "error | warn | info | debug (default LNET_LOG_LEVEL, else info)")(
      "env", "list the environment variables lnet-proxy reads (the MPI LND's LNET_MPI_*) and exit");
}

// The parsed options checked and completed (mode, log level, the MPI LND's tunables):
// 0, or the exit status after saying why not.
int check(const po::variables_map& vm, proxy::ProxyOptions& o, const std::string& log_level, const std::string& mode) {
  if (mode == "per-app") {
    o.mode = proxy::ProxyOptions::Mode::PerApp;
  } else if (mode != "shared") {
    std::fprintf(stderr, "lnet-proxy: bad --mode '%s' (shared, per-app)\n", mode.c_str());
    return 2;
  }
  o.dedicated = vm.count("dedicated") > 0;
  if (o.dedicated && o.mode == proxy::ProxyOptions::Mode::PerApp) {
    std::fprintf(stderr, "lnet-proxy: --dedicated and --mode per-app exclude each other\n");
    return 2;
  }
  for (auto [name, v] : {std::pair{"client-timeout", o.client_timeout}, std::pair{"timeout", o.timeout}}) {
    if (v < 1 || v > 3600) {
      std::fprintf(stderr, "lnet-proxy: bad --%s %d (1..3600)\n", name, v);
      return 2;
    }
  }
  if (vm.count("log-level")) {
    LogLevel l;
    if (!parse_log_level(log_level, &l)) {
      std::fprintf(stderr, "lnet-proxy: bad --log-level '%s' (error, warn, info, debug)\n", log_level.c_str());
      return 2;
    }
    set_log_level(l);
  } else if (!std::getenv("LNET_LOG_LEVEL")) {
    set_log_level(LogLevel::Info);
  }
  auto lnd = mpi::Options::from_env();
  if (!lnd) {
    std::fprintf(stderr, "lnet-proxy: %s\n", lnd.message().c_str());
    return 2;
  }
  o.lnd = *lnd;
  // The bridge thread drives the MPI LND (uplink.hpp) unless a progress thread is asked for.
  if (o.lnd.progress == mpi::ProgressMode::Auto) o.lnd.progress = mpi::ProgressMode::Poll;
  return 0;
}

Parsed parse(int argc, char** argv) {
  proxy::ProxyOptions o;
  std::string log_level, mode;
  po::options_description desc(kUsage);
  describe(desc, o, log_level, mode);
  po::variables_map vm;
  if (auto e = placeholder_argument(std::vector<std::string_view>(argv, argv + argc), true)) {
    std::fprintf(stderr, "lnet-proxy: %s (try --help)\n", e->c_str());
    return {std::nullopt, 2};
  }
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "lnet-proxy: %s (try --help)\n", e.what());
    return {std::nullopt, 2};
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return {std::nullopt, 0};
  }
  if (vm.count("env")) {
    std::cout << env_help();
    return {std::nullopt, 0};
  }
  if (int rc = check(vm, o, log_level, mode)) return {std::nullopt, rc};
  return {o, 0};
}

// SIGINT/SIGTERM (mpirun forwards them) arrive through the signalfd returned; blocked
// before MPI starts its threads, so every thread inherits the mask.
int block_signals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
  // A peer process that dies mid-write (an application killed, a node rebooted) must
  // cost an EPIPE, not the proxy: Open MPI's TCP transport writes without MSG_NOSIGNAL.
  signal(SIGPIPE, SIG_IGN);
  return sfd;
}

// What this job may not be, given how it was started: 0, or 2 after saying why.
int check_start(const proxy::ProxyOptions& o, MPI_Comm parent) {
  const char* recovery = std::getenv("OMPI_MCA_orte_enable_recovery");
  if (o.dedicated && parent == MPI_COMM_NULL) {
    std::fprintf(stderr, "lnet-proxy: --dedicated is for the proxy jobs a per-app job spawns (--mode per-app)\n");
    return 2;
  }
  if (o.mode == proxy::ProxyOptions::Mode::PerApp && parent != MPI_COMM_NULL) {
    std::fprintf(stderr, "lnet-proxy: --mode per-app is for a standing job, not a spawned one\n");
    return 2;
  }
  if (o.mode == proxy::ProxyOptions::Mode::PerApp && mpi::open_mpi_major() > 0 &&
      !(recovery && std::string(recovery) == "1")) {
    std::fprintf(stderr,
                 "lnet-proxy: --mode per-app: start this job with `mpirun --enable-recovery`: without it, Open "
                 "MPI aborts this job, and every application's dedicated proxy with it, when one dedicated proxy "
                 "dies\n");
    return 2;
  }
  if (!o.lnd.proxy.empty()) {
    std::fprintf(stderr, "lnet-proxy: LNET_PROXY is set: a proxy does not reach another proxy (unset it)\n");
    return 2;
  }
  return 0;
}

// The job's ranks serve until told to stop; the exit status (a rank lost: exits here).
int serve(proxy::ProxyOptions& o, int sfd) {
  // The job's own communicator, with MPI_ERRORS_RETURN (lnet-mpi(7)'s Group).
  auto group = mpi::Group::create(MPI_COMM_WORLD);
  if (!group) {
    std::fprintf(stderr, "lnet-proxy: %s\n", group.message().c_str());
    return 1;
  }
  MPI_Comm parent;
  MPI_Comm_get_parent(&parent);  // mode 2: the application that spawned this job
  if (parent != MPI_COMM_NULL) {
    // Spawned by LNET_PROXY=spawn: (or by a per-app standing job), whose variables
    // this job inherits.
    o.port_file.clear();
    o.publish.clear();
    o.lnd.proxy.clear();
  }
  if (int rc = check_start(o, parent)) return rc;
  int rc = 0;
  bool lost = false;
  {
    proxy::ProxyRank rank(**group, parent, o);
    rc = rank.run(sfd);
    lost = rank.lost_a_rank();
  }
  if (lost) {
    // MPI_Finalize waits for every rank of the job, the dead one too.
    std::fflush(nullptr);
    std::_Exit(rc);
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Parsed p = parse(argc, argv);
  if (!p.opts) return p.exit_code;
  int sfd = block_signals();
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "lnet-proxy: MPI_Init_thread failed\n");
    return 1;
  }
  int rc = 1;
  if (provided != MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "lnet-proxy: this MPI does not provide MPI_THREAD_MULTIPLE\n");
  } else {
    // Calls without a communicator (MPI_Open_port, MPI_Publish_name) report on
    // MPI_COMM_WORLD: their failures are answered, not fatal.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = serve(*p.opts, sfd);
  }
  MPI_Finalize();
  return rc;
}
