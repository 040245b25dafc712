// lnetd: the host LNet of a server or router node. Runs liblnet with the socket LND,
// configured from YAML (the lnetctl export schema), and serves lnetctl on a control
// socket that only root (or a configured group) may use.
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <boost/program_options.hpp>

#include <lnet/dlc.hpp>
#include <lnet/lnet.hpp>

#include "core/core.hpp"

namespace po = boost::program_options;
using namespace lnet;

namespace {

constexpr const char* kDefaultSocket = "/run/lnet/lnetd.sock";
constexpr int kMaxClients = 64;        // control connections served at once
constexpr int kClientTimeoutSec = 10;  // to send a request or take the answer
constexpr const char* kDefaultPidFile = "/run/lnet/lnetd.pid";
constexpr const char* kSystemConfig = "/etc/lnet.conf";

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  char c = static_cast<char>(sig);
  (void)!write(g_signal_pipe[1], &c, 1);
}

[[noreturn]] void die(const std::string& msg) {
  LNET_LOG(Error, kLogDaemon, "%s", msg.c_str());
  std::fprintf(stderr, "lnetd: %s\n", msg.c_str());
  std::exit(1);
}

// The built-in configuration: 0@lo and tcp on the first interface that is up.
std::string default_config() { return "net:\n    - net type: tcp\n"; }

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Failure{-errno, "cannot read " + path + ": " + std::strerror(errno)};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int make_dirs(const std::string& path) {
  std::string dir = path.substr(0, path.rfind('/'));
  if (dir.empty()) return 0;
  std::string cur;
  std::stringstream ss(dir);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty()) {
      cur = "/";
      continue;
    }
    cur += (cur.empty() || cur.back() == '/' ? "" : "/") + part;
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return -errno;
  }
  return 0;
}

class PidFile {
 public:
  explicit PidFile(std::string path) : path_(std::move(path)) {}
  ~PidFile() {
    if (owned_) ::unlink(path_.c_str());
  }
  void create() {
    if (path_.empty()) return;
    if (auto old = read_file(path_); old) {
      pid_t pid = static_cast<pid_t>(std::atol(old->c_str()));
      if (pid > 0 && kill(pid, 0) == 0) {
        die("another lnetd (pid " + std::to_string(pid) + ") runs with pid file " + path_);
      }
    }
    if (int rc = make_dirs(path_)) die("cannot create the directory of " + path_ + ": " + errno_string(rc));
    std::ofstream out(path_, std::ios::trunc);
    out << getpid() << "\n";
    if (!out) die("cannot write pid file " + path_ + ": " + std::strerror(errno));
    owned_ = true;
  }

 private:
  std::string path_;
  bool owned_ = false;
};

struct Daemon {
  std::unique_ptr<Instance> lnet;
  std::string startup_yaml;
  std::mutex cmd_mutex;  // configuration commands run one at a time
  gid_t ctl_gid = static_cast<gid_t>(-1);
  std::atomic<int> clients{0};
  std::mutex fds_mutex;
  std::set<int> client_fds;  // open control connections (shut down when lnetd stops)

  Status configure() {
    auto cfg = dlc::parse_config(startup_yaml);
    if (!cfg) return cfg.failure();
    return dlc::apply_config(*lnet, *cfg, dlc::ImportMode::Add);
  }

  Status unconfigure() {
    core::Core& c = lnet->core();
    for (const auto& r : c.route_configs()) (void)c.del_route(r.net, r.gateway);
    for (const auto& p : c.configured_peers()) (void)c.del_peer(p.primary, {});
    (void)c.del_udsp(-1);
    (void)c.set_routing(false);
    for (const NiInfo& i : c.ni_info())
      if (!i.nid.is_lo()) (void)c.del_ni(i.nid);
    return {};
  }

  bool allowed(int fd, std::string* who) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
    *who = "uid " + std::to_string(cred.uid) + " pid " + std::to_string(cred.pid);
    if (cred.uid == 0) return true;
    if (ctl_gid == static_cast<gid_t>(-1)) return false;
    if (cred.gid == ctl_gid) return true;
    // Supplementary groups of the caller.
    if (passwd* pw = getpwuid(cred.uid)) {
      int n = 64;
      std::vector<gid_t> groups(64);
      if (getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) >= 0) {
        for (int i = 0; i < n; ++i)
          if (groups[static_cast<std::size_t>(i)] == ctl_gid) return true;
      }
    }
    return false;
  }

  void serve(int fd) {
    std::string who;
    if (!allowed(fd, &who)) {
      LNET_LOG(Warn, kLogDaemon, "refused a control connection from %s: not root nor in the control group",
               who.c_str());
      dlc::Response r{-EACCES,
                      "manage:\n    - command:\n          errno: -13\n          descr: \"permission denied: "
                      "the control socket is for root (or the --ctl-group)\"\n"};
      (void)dlc::write_frame(fd, dlc::encode_response(r));
      return;
    }
    std::string frame;
    int rc = dlc::read_frame(fd, frame);
    if (rc == 0) {
      auto req = dlc::decode_request(frame);
      dlc::Response resp;
      if (!req) {
        resp = dlc::Response{req.code(), "manage:\n    - command:\n          errno: " + std::to_string(req.code()) +
                                             "\n          descr: \"" + req.message() + "\"\n"};
      } else {
        LNET_LOG(Info, kLogDaemon, "%s: %s", who.c_str(), req->command.c_str());
        dlc::Hooks hooks{[this] { return configure(); }, [this] { return unconfigure(); }};
        bool mutating = req->command.find("show") == std::string::npos && req->command != "ping" &&
                        req->command != "export" && req->command != "peer list";
        std::unique_lock lk(cmd_mutex, std::defer_lock);
        if (mutating) lk.lock();
        resp = dlc::execute(*lnet, *req, hooks);
      }
      (void)dlc::write_frame(fd, dlc::encode_response(resp));
    } else {
      LNET_LOG(Warn, kLogDaemon, "bad control request from %s: %s", who.c_str(), errno_string(rc).c_str());
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, ctl_socket, pid_file, log_level, log_subsys, ctl_group, accept;
  int port = 0;
  po::options_description opts(
      "usage: lnetd [options]\n\n"
      "The host LNet: liblnet with the socket LND (tcp, wire-compatible with ksocklnd),\n"
      "configured from YAML in the schema of `lnetctl export`, serving lnetctl on a\n"
      "control socket. Configuration: --config FILE, else /etc/lnet.conf when present,\n"
      "else 0@lo plus tcp on the first interface that is up.\n\noptions");
  opts.add_options()("help,h", "print this help and exit")("config,c", po::value(&config_path),
                                                           "YAML configuration (lnetctl export schema)")(
      "foreground,f", "stay in the foreground and log to stderr (else: daemonise, log to syslog)")(
      "ctl-socket,s", po::value(&ctl_socket)->default_value(kDefaultSocket), "control socket path")(
      "ctl-group", po::value(&ctl_group), "group whose members may use the control socket besides root")(
      "pid-file,p", po::value(&pid_file)->default_value(kDefaultPidFile), "pid file (\"\" for none)")(
      "log-level", po::value(&log_level)->default_value("info"), "error | warn | info | debug")(
      "log-subsys", po::value(&log_subsys)->default_value("all"), "core,lnd,router,config,daemon or all")(
      "port", po::value(&port), "acceptor port (default 988, or LNET_ACCEPT_PORT)")(
      "accept", po::value(&accept), "secure | all | none (default secure, or LNET_ACCEPT)")(
      "env", "list the environment variables liblnet reads and exit");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "lnetd: %s (try --help)\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (vm.count("env")) {
    std::cout << env_help();
    return 0;
  }
  bool foreground = vm.count("foreground") > 0;
  LogLevel level;
  std::uint32_t mask;
  if (!parse_log_level(log_level, &level)) {
    std::fprintf(stderr, "lnetd: bad --log-level '%s' (error, warn, info, debug)\n", log_level.c_str());
    return 2;
  }
  if (!parse_log_subsystems(log_subsys, &mask)) {
    std::fprintf(stderr, "lnetd: bad --log-subsys '%s' (core,lnd,router,config,daemon,all)\n", log_subsys.c_str());
    return 2;
  }
  set_log_level(level);
  set_log_subsystems(mask);

  auto params = SocketParams::from_env();
  if (!params) {
    std::fprintf(stderr, "lnetd: %s\n", params.message().c_str());
    return 2;
  }
  if (vm.count("port")) {
    if (port < 1 || port > 65535) {
      std::fprintf(stderr, "lnetd: bad --port %d (1..65535)\n", port);
      return 2;
    }
    params->port = port;
  }
  if (vm.count("accept")) {
    if (accept == "secure")
      params->accept = AcceptMode::Secure;
    else if (accept == "all")
      params->accept = AcceptMode::All;
    else if (accept == "none")
      params->accept = AcceptMode::None;
    else {
      std::fprintf(stderr, "lnetd: bad --accept '%s' (secure, all, none)\n", accept.c_str());
      return 2;
    }
  }
  set_socket_params(*params);

  Daemon d;
  if (vm.count("ctl-group")) {
    group* g = getgrnam(ctl_group.c_str());
    if (!g) {
      std::fprintf(stderr, "lnetd: no group '%s'\n", ctl_group.c_str());
      return 2;
    }
    d.ctl_gid = g->gr_gid;
  }
  std::string source = "the built-in default";
  if (!config_path.empty()) {
    auto text = read_file(config_path);
    if (!text) {
      std::fprintf(stderr, "lnetd: %s\n", text.message().c_str());
      return 1;
    }
    d.startup_yaml = *text;
    source = config_path;
  } else if (access(kSystemConfig, R_OK) == 0) {
    d.startup_yaml = *read_file(kSystemConfig);
    source = kSystemConfig;
  } else {
    d.startup_yaml = default_config();
  }
  auto parsed = dlc::parse_config(d.startup_yaml);
  if (!parsed) {
    std::fprintf(stderr, "lnetd: bad configuration in %s: %s\n", source.c_str(), parsed.message().c_str());
    return 1;
  }

  if (!foreground) {
    if (daemon(0, 0) != 0) {
      std::fprintf(stderr, "lnetd: cannot daemonise: %s\n", std::strerror(errno));
      return 1;
    }
    openlog("lnetd", LOG_PID, LOG_DAEMON);
    set_log_sink([](LogLevel l, std::string_view line) {
      int pri = l == LogLevel::Error  ? LOG_ERR
                : l == LogLevel::Warn ? LOG_WARNING
                : l == LogLevel::Info ? LOG_INFO
                                      : LOG_DEBUG;
      syslog(pri, "%.*s", static_cast<int>(line.size()), line.data());
    });
  }

  PidFile pid(pid_file);
  pid.create();
  if (pipe(g_signal_pipe) != 0) die(std::string("pipe: ") + std::strerror(errno));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto created = Instance::create(Config{}, kPidLustre);
  if (!created) die("cannot start LNet: " + created.message());
  d.lnet = std::move(*created);
  if (auto r = dlc::apply_config(*d.lnet, *parsed, dlc::ImportMode::Add); !r) {
    die("cannot apply the configuration from " + source + ": " + r.message());
  }

  if (int rc = make_dirs(ctl_socket)) die("cannot create the directory of " + ctl_socket + ": " + errno_string(rc));
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (ctl_socket.size() >= sizeof addr.sun_path) die("control socket path too long: " + ctl_socket);
  std::strcpy(addr.sun_path, ctl_socket.c_str());
  ::unlink(ctl_socket.c_str());
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(lfd, 16) != 0) {
    die("cannot listen on " + ctl_socket + ": " + std::strerror(errno));
  }
  chmod(ctl_socket.c_str(), d.ctl_gid == static_cast<gid_t>(-1) ? 0600 : 0660);
  if (d.ctl_gid != static_cast<gid_t>(-1)) (void)!chown(ctl_socket.c_str(), 0, d.ctl_gid);

  std::string nids;
  for (Nid n : d.lnet->nids()) nids += " " + n.to_string();
  LNET_LOG(Info, kLogDaemon, "lnetd up (pid %d): NIDs%s; configuration from %s; control socket %s", getpid(),
           nids.c_str(), source.c_str(), ctl_socket.c_str());

  for (;;) {
    pollfd fds[2] = {{lfd, POLLIN, 0}, {g_signal_pipe[0], POLLIN, 0}};
    int n = poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      die(std::string("poll: ") + std::strerror(errno));
    }
    if (fds[1].revents) {
      char sig = 0;
      (void)!read(g_signal_pipe[0], &sig, 1);
      LNET_LOG(Info, kLogDaemon, "signal %d: shutting down", sig);
      break;
    }
    if (fds[0].revents & POLLIN) {
      int cfd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (cfd < 0) continue;
      if (d.clients.load() >= kMaxClients) {
        LNET_LOG(Warn, kLogDaemon, "refused a control connection: %d commands already running", kMaxClients);
        ::close(cfd);
        continue;
      }
      // A client that stops sending or reading is dropped, so shutdown never waits on it.
      timeval tv{kClientTimeoutSec, 0};
      setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      // A command (a ping, say) may take seconds: each client gets its own thread.
      d.clients.fetch_add(1);
      {
        std::lock_guard g(d.fds_mutex);
        d.client_fds.insert(cfd);
      }
      std::thread([&d, cfd] {
        d.serve(cfd);
        {
          std::lock_guard g(d.fds_mutex);
          d.client_fds.erase(cfd);
        }
        ::close(cfd);
        d.clients.fetch_sub(1);
      }).detach();
    }
  }
  ::close(lfd);
  ::unlink(ctl_socket.c_str());
  {
    // Wakes clients waiting to send a request; a command already running (a ping) ends
    // within its own timeout.
    std::lock_guard g(d.fds_mutex);
    for (int fd : d.client_fds) ::shutdown(fd, SHUT_RDWR);
  }
  while (d.clients.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  d.lnet.reset();
  LNET_LOG(Info, kLogDaemon, "lnetd stopped");
  return 0;
}
