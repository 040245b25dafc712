// lnetd: the host LNet of a server or router node. Runs liblnet with the socket LND and
// lnetd's components (components.hpp: the UP LND, self-test), configured from YAML (the
// lnetctl export schema), and serves lnetctl on a control socket that only root (or a
// configured group) may use.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include <lnet/dlc.hpp>
#include <lnet/lnet.hpp>

#include "components.hpp"
#include "control_server.hpp"
#include "options.hpp"

using namespace lnet;

namespace {

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  int saved = errno;  // the interrupted code may be about to read it
  char c = static_cast<char>(sig);
  (void)!write(g_signal_pipe[1], &c, 1);  // non-blocking: a full pipe has a signal to read already
  errno = saved;
}

[[noreturn]] void die(const std::string& msg) {
  LNET_LOG(Error, kLogDaemon, "%s", msg.c_str());
  std::exit(1);
}

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
      if (pid > 0 && kill(pid, 0) == 0)
        die("another lnetd (pid " + std::to_string(pid) + ") runs with pid file " + path_);
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

// The startup configuration: --config, else /etc/lnet.conf, else (without
// LNET_NETWORKS) tcp on the first interface that is up. *source says which.
Result<dlc::SystemConfig> load_config(const lnetd::Options& o, std::string* yaml, std::string* source) {
  if (!o.config_path.empty()) {
    auto text = read_file(o.config_path);
    if (!text) return text.failure();
    *yaml = *text;
    *source = o.config_path;
  } else if (access(lnetd::kSystemConfig, R_OK) == 0) {
    auto text = read_file(lnetd::kSystemConfig);
    if (!text) return text.failure();
    *yaml = *text;
    *source = lnetd::kSystemConfig;
  } else if (!std::getenv("LNET_NETWORKS")) {
    *yaml = "net:\n    - net type: tcp\n";
    *source = "the built-in default";
  } else {
    *source = "LNET_NETWORKS";
  }
  auto parsed = dlc::parse_config(*yaml);
  if (!parsed) return Failure{parsed.code(), "bad configuration in " + *source + ": " + parsed.message()};
  for (const std::string& w : parsed->warnings) LNET_LOG(Warn, kLogConfig, "%s: %s", source->c_str(), w.c_str());
  return parsed;
}

// What `lnet unconfigure` takes down: every network but 0@lo, routes, peers, fault rules,
// selection rules and routing.
Status unconfigure(Control& c) {
  for (const auto& r : c.route_configs()) (void)c.del_route(r.net, r.gateway);
  // Every peer goes, not only the configured ones, as LNet shutting down frees them all
  // (a gateway's, a discovered one's); so do the fault rules.
  for (const auto& p : c.peer_info()) (void)c.del_peer(p.primary_nid, {}, true);
  c.reset_faults(false);
  c.reset_faults(true);
  (void)c.del_udsp(-1);
  (void)c.set_routing(false);
  for (const NiInfo& i : c.ni_info())
    if (!i.nid.is_lo()) (void)c.del_ni(i.nid);
  return {};
}

// Tells the service manager how lnetd is (systemd's Type=notify: one datagram of
// "KEY=value" lines to the socket $NOTIFY_SOCKET names; '@' there is the abstract
// namespace). Without $NOTIFY_SOCKET, nothing.
void notify(const std::string& state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  sockaddr_un a{};
  if (!path || !*path || std::strlen(path) >= sizeof a.sun_path) return;
  a.sun_family = AF_UNIX;
  std::size_t n = std::strlen(path);
  std::memcpy(a.sun_path, path, n);
  if (a.sun_path[0] == '@') a.sun_path[0] = '\0';
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  if (::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&a),
               static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n)) < 0)
    LNET_LOG(Warn, kLogDaemon, "cannot notify the service manager at %s: %s", path, std::strerror(errno));
  ::close(fd);
}

void catch_signals() {
  if (pipe2(g_signal_pipe, O_NONBLOCK | O_CLOEXEC) != 0) die(std::string("pipe: ") + std::strerror(errno));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

// Serves the control socket until SIGTERM or SIGINT comes (SIGHUP: `reload`). A router
// drains first (routing off: its peers are told and move away while it still forwards),
// serving meanwhile; a second signal stops it at once.
void run(lnetd::ControlServer& server, Control& control, const std::function<void()>& reload) {
  bool draining = false;
  for (;;) {
    pollfd fds[2] = {{server.poll_fd(), POLLIN, 0}, {g_signal_pipe[0], POLLIN, 0}};
    if (draining && !control.routing_draining()) {
      LNET_LOG(Info, kLogDaemon, "routes drained: shutting down");
      return;
    }
    int wait = server.pause_ms();
    if (draining) wait = wait < 0 ? 200 : std::min(wait, 200);
    if (poll(fds, 2, wait) < 0) {
      if (errno == EINTR) continue;
      die(std::string("poll: ") + std::strerror(errno));
    }
    if (fds[1].revents) {
      char sig = 0;
      (void)!read(g_signal_pipe[0], &sig, 1);
      if (sig == SIGHUP) {
        reload();
        continue;
      }
      if (draining || !control.routing()) {
        LNET_LOG(Info, kLogDaemon, "signal %d: shutting down", sig);
        return;
      }
      if (Status s = control.set_routing(false); !s) {
        LNET_LOG(Warn, kLogDaemon, "signal %d: cannot drain the routes (%s): shutting down", sig, s.message().c_str());
        return;
      }
      draining = true;
      LNET_LOG(Info, kLogDaemon,
               "signal %d: draining the routes through this node before shutting down (a second signal stops at once)",
               sig);
      notify("STOPPING=1\nSTATUS=draining the routes through this node");
    }
    if (fds[0].revents & POLLIN) server.accept_ready();
  }
}

// Sockets are descriptors: up to three per socket-LND peer (an lst console of a few
// hundred nodes, a router of many clients). The usual soft limit (1024) is raised to the
// hard one, as the kernel's LNet has no such limit.
void raise_fd_limit() {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0 || l.rlim_cur >= l.rlim_max) return;
  rlim_t was = l.rlim_cur;
  l.rlim_cur = l.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &l) == 0)
    LNET_LOG(Debug, kLogDaemon, "open files: limit raised from %llu to %llu", static_cast<unsigned long long>(was),
             static_cast<unsigned long long>(l.rlim_max));
}

using Components = std::vector<std::unique_ptr<lnetd::Component>>;

// lnetd is up: the log says so, and the service manager hears it is ready (once the
// control socket answers, so lnetctl may use it then).
void announce(Instance& lnet, const std::string& source, const std::string& socket) {
  std::string nids;
  for (Nid n : lnet.nids()) nids += " " + n.to_string();
  LNET_LOG(Info, kLogDaemon, "lnetd up (pid %d): NIDs%s; configuration from %s; control socket %s", getpid(),
           nids.c_str(), source.c_str(), socket.c_str());
  notify("READY=1\nMAINPID=" + std::to_string(getpid()) + "\nSTATUS=NIDs" + nids);
}

// SIGHUP: the configuration file read again and merged into the running instance, as
// `lnetctl import --merge` does (what is new is added, what is configured is left as it
// is); a file that does not parse or apply changes nothing. `yaml` becomes the new text
// (what `lnet configure` applies).
void reload(Instance& lnet, const std::string& path, std::string& yaml) {
  notify("RELOADING=1");
  auto text = read_file(path);
  auto cfg = text ? dlc::parse_config(*text) : Result<dlc::SystemConfig>(text.failure());
  std::string kept;
  Status s = cfg ? Status{} : Status(cfg.failure());
  if (s) {
    cfg->selftest.reset();  // taken when lnetd starts
    s = dlc::apply_config(lnet, *cfg, dlc::ImportMode::Merge, &kept);
  }
  if (s) {
    yaml = *text;
    LNET_LOG(Info, kLogDaemon, "SIGHUP: %s merged into the running configuration", path.c_str());
    if (!kept.empty()) LNET_LOG(Debug, kLogDaemon, "%s", kept.c_str());
  } else {
    LNET_LOG(Error, kLogDaemon, "SIGHUP: %s not applied, the running configuration is kept: %s", path.c_str(),
             s.message().c_str());
  }
  notify(std::string("READY=1\nSTATUS=") + (s ? "reloaded " : "reload failed: ") + path);
}

// LNet up with the components' drivers and the configuration applied, then the
// components started on it (with the keys of the configuration that are lnetd's own).
std::unique_ptr<Instance> start_lnet(const Config& env, dlc::SystemConfig& cfg, const std::string& source,
                                     Components& components) {
  std::vector<std::shared_ptr<Lnd>> drivers;
  for (auto& c : components)
    for (auto& d : c->drivers()) drivers.push_back(std::move(d));
  auto created = Instance::create(env, kPidLustre, std::move(drivers));
  if (!created) die("cannot start LNet: " + created.message());
  std::unique_ptr<Instance> lnet = std::move(*created);
  dlc::SystemConfig daemon_keys;  // the keys of the configuration that are lnetd's own
  daemon_keys.selftest = cfg.selftest;
  cfg.selftest.reset();  // not the instance's
  if (Status s = dlc::apply_config(*lnet, cfg, dlc::ImportMode::Add); !s)
    die("cannot apply the configuration from " + source + ": " + s.message());
  for (auto& c : components)
    if (Status s = c->start(*lnet, daemon_keys); !s) die(s.message());
  return lnet;
}

// What the control socket's `lnet configure`, `lnet unconfigure` and `stats show` need
// of lnetd.
dlc::Hooks hooks_of(std::unique_ptr<Instance>& lnet, const std::string& startup_yaml, Components& components) {
  dlc::Hooks hooks;
  hooks.configure = [&lnet, &startup_yaml]() -> Status {
    auto c = dlc::parse_config(startup_yaml);
    if (!c) return c.failure();
    c->selftest.reset();
    return dlc::apply_config(*lnet, *c, dlc::ImportMode::Add);
  };
  hooks.unconfigure = [&lnet] { return unconfigure(lnet->control()); };
  hooks.service_stats = [&components] {
    std::vector<dlc::DriverCounters> out;
    for (auto& c : components)
      for (auto& d : c->service_stats()) out.push_back(std::move(d));
    return out;
  };
  return hooks;
}

}  // namespace

int main(int argc, char** argv) {
  set_log_program("lnetd");
  Components components = lnetd::make_components();
  lnetd::Parsed parsed = lnetd::parse_options(argc, argv, components);
  if (!parsed.options) return parsed.exit_code;
  const lnetd::Options& o = *parsed.options;
  if (o.foreground) set_log_target(o.log_target);  // a daemon's once it has daemonised
  set_socket_params(o.socket);
  std::string startup_yaml, source;
  auto cfg = load_config(o, &startup_yaml, &source);
  if (!cfg) die(cfg.message());
  auto env = Config::from_env();  // LNET_NETWORKS and the CPT count, like module parameters
  if (!env) die(env.message());
  env->large_nids = o.large_nids;

  if (!o.foreground) {
    if (daemon(0, 0) != 0) die(std::string("cannot daemonise: ") + std::strerror(errno));
    set_log_target(o.log_target);
  }
  PidFile pid(o.pid_file);
  pid.create();
  catch_signals();
  raise_fd_limit();

  std::unique_ptr<Instance> lnet = start_lnet(*env, *cfg, source, components);
  auto changed = [&lnet, &components] {
    for (auto& c : components) c->changed(*lnet);
  };
  changed();
  auto extra = [&components](const dlc::Request& req) -> std::optional<dlc::Response> {
    for (auto& c : components)
      if (auto r = c->handle(req)) return r;
    return std::nullopt;
  };
  dlc::Hooks hooks = hooks_of(lnet, startup_yaml, components);
  lnetd::ControlServer server(*lnet, hooks, o.ctl_gid, changed, extra);
  if (o.read_gid) server.set_read_group(*o.read_gid);
  if (int rc = make_dirs(o.ctl_socket)) die("cannot create the directory of " + o.ctl_socket + ": " + errno_string(rc));
  if (Status s = server.listen(o.ctl_socket); !s) die(s.message());

  announce(*lnet, source, o.ctl_socket);
  auto on_hup = [&] {
    if (source == o.config_path || source == lnetd::kSystemConfig)
      reload(*lnet, source, startup_yaml);
    else
      LNET_LOG(Warn, kLogDaemon, "SIGHUP: no configuration file to read again (configuration from %s)", source.c_str());
  };
  run(server, lnet->control(), on_hup);
  notify("STOPPING=1");
  server.stop();
  // Components stop in reverse order, before the instance they run on.
  for (auto it = components.rbegin(); it != components.rend(); ++it) (*it)->stop();
  lnet.reset();
  LNET_LOG(Info, kLogDaemon, "lnetd stopped");
  return 0;
}
