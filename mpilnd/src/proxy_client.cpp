// The application's end of a parallel proxy: see proxy_client.hpp.
#include "proxy_client.hpp"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <lnet/log.hpp>

namespace lnet::mpi {

int open_mpi_major() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(version, &len) != MPI_SUCCESS) return 0;
  std::string_view v(version, static_cast<std::size_t>(len));
  auto at = v.find("Open MPI v");
  if (at == std::string_view::npos) return 0;
  return std::atoi(std::string(v.substr(at + 10, 3)).c_str());
}

namespace {

// MPI_Open_port and MPI_Lookup_name report failures on MPI_COMM_WORLD (fatal by
// default): while one of these lives, they are returned instead.
class ErrorsReturnOnWorld {
 public:
  ErrorsReturnOnWorld() {
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &old_);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ~ErrorsReturnOnWorld() {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, old_);
    MPI_Errhandler_free(&old_);
  }
  ErrorsReturnOnWorld(const ErrorsReturnOnWorld&) = delete;
  ErrorsReturnOnWorld& operator=(const ErrorsReturnOnWorld&) = delete;

 private:
  MPI_Errhandler old_;
};

}  // namespace

std::string describe_mpi() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  std::string lib = "unknown";
  if (MPI_Get_library_version(version, &len) == MPI_SUCCESS) {
    lib.assign(version, static_cast<std::size_t>(len));
    lib = lib.substr(0, lib.find_first_of(",\n"));
  }
  int level = 0;
  MPI_Query_thread(&level);
  const char* levels[] = {"single", "funneled", "serialized", "multiple"};
  std::string out = "MPI: " + lib + "; thread level " +
                    (level >= MPI_THREAD_SINGLE && level <= MPI_THREAD_MULTIPLE ? levels[level] : "unknown");
  bool ports = false;
  {
    ErrorsReturnOnWorld returned;
    char port[MPI_MAX_PORT_NAME + 1] = {};
    ports = MPI_Open_port(MPI_INFO_NULL, port) == MPI_SUCCESS;
    if (ports) MPI_Close_port(port);
  }
  out += std::string("; ports ") + (ports ? "yes" : "no");
  if (open_mpi_major() > 0)
    out +=
        std::getenv("OMPI_MCA_pmix_server_uri") ? "; name server ompi-server" : "; name server none (no ompi-server)";
  else
    out += "; name server the MPI's own";
  int* universe = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &universe, &found);
  out += "; universe size " + (found && universe ? std::to_string(*universe) : std::string("unknown"));
  return out;
}

namespace {

bool is_open_mpi() { return open_mpi_major() > 0; }

using Clock = std::chrono::steady_clock;

Failure mpi_failure(const std::string& what, int rc) {
  return Failure{-EIO, what + " failed: " + mpi_error_string(rc)};
}

// Rank 0's status, on every rank.
Status share(const Status& mine, MPI_Comm comm, int rank) {
  int code = mine.code();
  std::string text = mine.message();
  int len = static_cast<int>(text.size());
  for (int rc : {MPI_Bcast(&code, 1, MPI_INT, 0, comm), MPI_Bcast(&len, 1, MPI_INT, 0, comm)})
    if (rc != MPI_SUCCESS) return mpi_failure("MPI_Bcast", rc);
  if (rank != 0) text.resize(static_cast<std::size_t>(len));
  if (int rc = MPI_Bcast(text.data(), len, MPI_CHAR, 0, comm); rc != MPI_SUCCESS) return mpi_failure("MPI_Bcast", rc);
  if (code == 0) return {};
  return Failure{code, text};
}

// Rank 0's bytes, on every rank.
Status share_bytes(std::vector<std::uint8_t>* bytes, MPI_Comm comm) {
  int len = static_cast<int>(bytes->size());
  if (int rc = MPI_Bcast(&len, 1, MPI_INT, 0, comm); rc != MPI_SUCCESS) return mpi_failure("MPI_Bcast", rc);
  bytes->resize(static_cast<std::size_t>(len));
  if (int rc = MPI_Bcast(bytes->data(), len, MPI_BYTE, 0, comm); rc != MPI_SUCCESS) return mpi_failure("MPI_Bcast", rc);
  return {};
}

// Constant bytes: MPI may still read them after a send is given up.
const std::uint8_t* control_bytes(proxy::Control c) {
  struct Bytes {
    std::uint8_t heartbeat[proxy::kControlSize], bye[proxy::kControlSize], hello[proxy::kControlSize];
    Bytes() {
      proxy::encode(proxy::Control::Heartbeat, heartbeat);
      proxy::encode(proxy::Control::Bye, bye);
      proxy::encode(proxy::Control::Hello, hello);
    }
  };
  static const Bytes kBytes;
  switch (c) {
    case proxy::Control::Bye: return kBytes.bye;
    case proxy::Control::Hello: return kBytes.hello;
    case proxy::Control::Heartbeat: break;
  }
  return kBytes.heartbeat;
}

// MPI bounds none of its dynamic-process calls: MPI_Lookup_name with a name server that
// is gone, MPI_Comm_connect to a port nobody accepts on, MPI_Comm_spawn_multiple that
// cannot place its ranks, MPI_Intercomm_merge with a side that never comes. Every rank
// arms this while it opens the link; a rank still in MPI a second after the deadline
// (the bounded steps report their own failures by then) says where it is and exits
// with kDpmExit, as the application would have hung otherwise; mpirun ends the job.
constexpr int kDpmExit = 75;  // EX_TEMPFAIL: the proxy may be back later
class DpmWatchdog {
 public:
  DpmWatchdog(std::string spec, Clock::time_point deadline, int timeout_s)
      : spec_(std::move(spec)), deadline_(deadline + std::chrono::seconds(1)), timeout_s_(timeout_s) {
    thread_ = std::thread([this] { main(); });
  }
  ~DpmWatchdog() {
    {
      MutexLock g(mu_);
      done_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }
  DpmWatchdog(const DpmWatchdog&) = delete;
  DpmWatchdog& operator=(const DpmWatchdog&) = delete;
  // What this rank is about to wait in (a constant string).
  void step(const char* what) {
    MutexLock g(mu_);
    what_ = what;
  }

 private:
  void main() {
    MutexLock g(mu_);
    while (!done_ && Clock::now() < deadline_) (void)g.wait_until(cv_, deadline_);
    if (done_) return;
    LNET_LOG(Error, kLogLnd,
             "LNET_PROXY=%s: %s did not return within LNET_PROXY_TIMEOUT (%d s); MPI cannot give it up, so this "
             "process exits (status %d) instead of hanging",
             spec_.c_str(), what_, timeout_s_, kDpmExit);
    std::fflush(nullptr);
    std::_Exit(kDpmExit);
  }

  std::string spec_;
  Clock::time_point deadline_;
  int timeout_s_;
  Mutex mu_;
  std::condition_variable cv_;
  bool done_ LNET_GUARDED_BY(mu_) = false;
  const char* what_ LNET_GUARDED_BY(mu_) = "opening the link to the proxy";
  std::thread thread_;
};

Result<std::string> lookup(const std::string& service) {
  char port[MPI_MAX_PORT_NAME + 1] = {};
  int rc = MPI_SUCCESS;
  {
    ErrorsReturnOnWorld returned;
    rc = MPI_Lookup_name(service.c_str(), MPI_INFO_NULL, port);
  }
  if (rc != MPI_SUCCESS)
    return Failure{-ENOENT,
                   "no proxy published the name '" + service + "' (MPI_Lookup_name: " + mpi_error_string(rc) + ")"};
  return std::string(port);
}

// Rank 0: where the proxy is (LNET_PROXY), and the secret its doorbell wants: from the
// port file, or for a name from the port file LNET_PROXY_SECRET names.
Result<proxy::PortInfo> resolve(const Options& opts) {
  const std::string& spec = opts.proxy;
  const std::string var = "LNET_PROXY=" + spec;
  if (spec.starts_with("name:")) {
    std::string service = spec.substr(5);
    if (service.empty()) return Failure{-EINVAL, var + ": no service name after 'name:'"};
    auto port = lookup(service);
    if (!port) return Failure{port.code(), var + ": " + port.message()};
    auto bell = lookup(service + ".doorbell");
    if (!bell) return Failure{bell.code(), var + ": " + bell.message()};
    auto secret = proxy::read_port_file(opts.proxy_secret);
    if (!secret)
      return Failure{secret.code(), var + ": the doorbell's secret (LNET_PROXY_SECRET): " + secret.message()};
    return proxy::PortInfo{*port, *bell, secret->secret};
  }
  auto pi = proxy::read_port_file(spec);
  if (!pi) return Failure{pi.code(), var + ": " + pi.message()};
  return pi;
}

// Rank 0: finds the proxy and knocks; the doorbell connection stays open (in *bell)
// until the connect is done, so the proxy sees an application that dies before it.
Result<std::string> knock(const Options& opts, int app_size, Clock::time_point deadline, int* bell) {
  if (is_open_mpi() && !std::getenv("OMPI_MCA_pmix_server_uri"))
    return Failure{-EINVAL,
                   "LNET_PROXY: Open MPI connects two jobs only through ompi-server, and this job has no "
                   "server URI: run `ompi-server --no-daemonize -r FILE` and start this job with "
                   "`mpirun --ompi-server file:FILE` (or OMPI_MCA_pmix_server_uri=file:FILE)"};
  auto pi = resolve(opts);
  if (!pi) return pi.failure();
  auto fd = proxy::dial_doorbell(pi->doorbell, deadline);
  if (!fd) return Failure{fd.code(), "LNET_PROXY=" + opts.proxy + ": " + fd.message()};
  *bell = *fd;
  if (Status s = proxy::write_line(*fd, proxy::format_knock({proxy::Knock::Client, app_size, pi->secret}), deadline);
      !s)
    return Failure{s.code(), "LNET_PROXY=" + opts.proxy + ": " + s.message()};
  auto line = proxy::read_line(*fd, deadline);
  if (!line) return Failure{line.code(), "LNET_PROXY=" + opts.proxy + ": the proxy: " + line.message()};
  auto answer = proxy::parse_answer(*line);
  if (!answer) return Failure{answer.code(), "LNET_PROXY=" + opts.proxy + ": the proxy: " + answer.message()};
  switch (answer->kind) {
    case proxy::Answer::Ok: return pi->port;
    case proxy::Answer::Port:  // a proxy job of this application's own (mode 1b)
      LNET_LOG(Info, kLogLnd, "LNET_PROXY=%s: a dedicated proxy waits on port %s", opts.proxy.c_str(),
               answer->text.c_str());
      return answer->text;
    case proxy::Answer::Error: break;
  }
  return Failure{-ECONNREFUSED, "LNET_PROXY=" + opts.proxy + ": the proxy refused: " + answer->text};
}

// Rank 0: the TABLE from proxy rank 0, within the deadline.
Result<std::vector<std::uint8_t>> receive_table(MPI_Comm inter, Clock::time_point deadline) {
  std::vector<std::uint8_t> buf(proxy::kMaxTable);
  MPI_Request r;
  if (int rc = MPI_Irecv(buf.data(), static_cast<int>(buf.size()), MPI_BYTE, 0, proxy::kTagTable, inter, &r);
      rc != MPI_SUCCESS)
    return mpi_failure("MPI_Irecv", rc);
  MPI_Status st;
  if (int rc = wait_until(&r, deadline, &st); rc == -ETIMEDOUT) {
    MPI_Cancel(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    return Failure{-ETIMEDOUT, "the proxy sent no table in time (LNET_PROXY_TIMEOUT)"};
  } else if (rc) {
    return Failure{rc, "receiving the proxy's table failed (MPI_Test)"};
  }
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

// Mode 1c: knock on the standing proxy's doorbell and connect to its port (collective).
Result<MPI_Comm> connect_to_proxy(const Options& opts, MPI_Comm comm, int rank, int size, Clock::time_point deadline,
                                  DpmWatchdog& wd) {
  int bell = -1;
  std::string port;
  if (Status s = check_connectable(comm); !s)
    return Failure{s.code(), "LNET_PROXY=" + opts.proxy + ": " + s.message() +
                                 ": start the proxy with the job instead (LNET_PROXY=spawn:HOST:BRIDGE,..., mode 2; "
                                 "lnet-proxy(8))"};
  Status found;
  if (rank == 0) {
    wd.step("finding the proxy (MPI_Lookup_name with LNET_PROXY=name:) and knocking on its doorbell");
    auto p = knock(opts, size, deadline, &bell);
    if (p)
      port = *p;
    else
      found = p.failure();
  } else {
    wd.step("waiting for rank 0 to reach the proxy (MPI_Bcast)");
  }
  if (Status all = share(found, comm, rank); !all) {
    if (bell >= 0) ::close(bell);
    return all.failure();
  }
  std::vector<char> port_buf(port.begin(), port.end());
  port_buf.resize(MPI_MAX_PORT_NAME + 1, '\0');
  if (int rc = MPI_Bcast(port_buf.data(), MPI_MAX_PORT_NAME, MPI_CHAR, 0, comm); rc != MPI_SUCCESS)
    return mpi_failure("MPI_Bcast", rc);
  MPI_Comm inter;
  wd.step("MPI_Comm_connect to the proxy's port");
  int rc = MPI_Comm_connect(port_buf.data(), MPI_INFO_NULL, 0, comm, &inter);
  if (bell >= 0) ::close(bell);
  if (rc != MPI_SUCCESS)
    return Failure{-ECONNREFUSED, "LNET_PROXY=" + opts.proxy + ": MPI_Comm_connect failed: " + mpi_error_string(rc) +
                                      " (this MPI may not connect separately launched jobs: see lnet-proxy(8); " +
                                      describe_mpi() + ")"};
  return inter;
}

// Mode 2: spawn a proxy job of one rank per target (collective). Every rank parses the
// same variable, so every rank fails alike on a bad one.
Result<MPI_Comm> spawn_proxy(const Options& opts, MPI_Comm comm, DpmWatchdog& wd) {
  auto targets = proxy::parse_spawn_list(std::string_view(opts.proxy).substr(6));
  if (!targets) return Failure{targets.code(), "LNET_PROXY=" + opts.proxy + ": " + targets.message()};
  std::vector<std::pair<std::string, std::string>> where;
  for (const proxy::SpawnTarget& t : *targets) where.emplace_back(t.host, t.bridge);
  wd.step("MPI_Comm_spawn_multiple of the proxy job");
  auto inter = spawn_proxies(opts.proxy_bin, where, {"--timeout", std::to_string(opts.proxy_timeout)}, comm);
  if (!inter)
    return Failure{-ECHILD, "LNET_PROXY=" + opts.proxy + ": " + inter.message() +
                                " (this MPI may not spawn: see lnet-proxy(8); " + describe_mpi() + ")"};
  return inter;
}

}  // namespace

Result<MPI_Comm> spawn_proxies(const std::string& program,
                               const std::vector<std::pair<std::string, std::string>>& targets,
                               const std::vector<std::string>& args, MPI_Comm comm) {
  std::size_t n = targets.size();
  std::vector<std::vector<char*>> argvs(n);
  std::vector<char*> commands(n, const_cast<char*>(program.c_str()));
  std::vector<char**> argv_ptrs(n);
  std::vector<int> maxprocs(n, 1), errcodes(n, MPI_SUCCESS);
  std::vector<MPI_Info> infos(n, MPI_INFO_NULL);
  static const std::string kBridge = "--bridge";
  for (std::size_t i = 0; i < n; ++i) {
    argvs[i].push_back(const_cast<char*>(kBridge.c_str()));
    argvs[i].push_back(const_cast<char*>(targets[i].second.c_str()));
    for (const std::string& a : args) argvs[i].push_back(const_cast<char*>(a.c_str()));
    argvs[i].push_back(nullptr);
    argv_ptrs[i] = argvs[i].data();
    MPI_Info_create(&infos[i]);
    if (!targets[i].first.empty()) MPI_Info_set(infos[i], "host", targets[i].first.c_str());
    // Open MPI binds a spawned job as it binds a new one: its rank to core 0, where the
    // application's rank 0 runs too when its own job was bound (an MPI that does not
    // know the key ignores it).
    MPI_Info_set(infos[i], "bind_to", "none");
  }
  MPI_Comm inter = MPI_COMM_NULL;
  int rc = MPI_Comm_spawn_multiple(static_cast<int>(n), commands.data(), argv_ptrs.data(), maxprocs.data(),
                                   infos.data(), 0, comm, &inter, errcodes.data());
  for (MPI_Info& i : infos)
    if (i != MPI_INFO_NULL) MPI_Info_free(&i);
  if (rc != MPI_SUCCESS)
    return Failure{-ECHILD, "MPI_Comm_spawn_multiple of " + program + " failed: " + mpi_error_string(rc)};
  return inter;
}

Status check_connectable(MPI_Comm comm) {
  int major = open_mpi_major();
  if (major == 0 || major > 4) return {};
  // Each rank knows whether its own daemon is its mpirun (the HNP) or one on another node.
  const char* hnp = std::getenv("OMPI_MCA_orte_hnp_uri");
  const char* local = std::getenv("OMPI_MCA_orte_local_daemon_uri");
  int away = hnp && local && std::strcmp(hnp, local) != 0 ? 1 : 0, total = 0, size = 0;
  if (int rc = MPI_Allreduce(&away, &total, 1, MPI_INT, MPI_SUM, comm); rc != MPI_SUCCESS)
    return mpi_failure("MPI_Allreduce", rc);
  MPI_Comm_size(comm, &size);
  if (total == 0) return {};
  return Failure{-EOPNOTSUPP, std::to_string(total) + " of the job's " + std::to_string(size) +
                                  " ranks run on nodes other than its mpirun's, and Open MPI " + std::to_string(major) +
                                  " connects two separately started jobs only when all ranks of each run on the node "
                                  "of their mpirun (beyond it the connect crashes the runtime of both jobs)"};
}

int wait_until(MPI_Request* r, std::chrono::steady_clock::time_point deadline, MPI_Status* status) {
  for (;;) {
    int flag = 0;
    if (MPI_Test(r, &flag, status) != MPI_SUCCESS) return -EIO;
    if (flag) return 0;
    if (Clock::now() >= deadline) return -ETIMEDOUT;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

namespace {
// A proxy that dies mid-write must fail this process's sends, not kill it: Open MPI's
// TCP transport writes without MSG_NOSIGNAL. An application's own SIGPIPE handler stays.
void ignore_default_sigpipe() {
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
    LNET_LOG(Debug, kLogLnd, "SIGPIPE ignored: a proxy that dies fails this process's sends instead of killing it");
  }
}
}  // namespace

Result<std::unique_ptr<ProxyLink>> ProxyLink::open(Group& group, const Options& opts) {
  auto deadline = Clock::now() + std::chrono::seconds(opts.proxy_timeout);
  ignore_default_sigpipe();
  std::unique_ptr<ProxyLink> l(new ProxyLink);
  l->rank_ = group.rank();
  l->group_ = group.comm();
  MPI_Comm comm = group.comm();
  DpmWatchdog wd(opts.proxy, deadline, opts.proxy_timeout);
  auto inter = opts.proxy.starts_with("spawn:") ? spawn_proxy(opts, comm, wd)
                                                : connect_to_proxy(opts, comm, l->rank_, group.size(), deadline, wd);
  if (!inter) return inter.failure();
  l->inter_ = *inter;
  MPI_Comm_set_errhandler(l->inter_, MPI_ERRORS_RETURN);
  // HELLO before the merge: the proxy merges only with an application that said it.
  MPI_Request hello = MPI_REQUEST_NULL;
  if (l->rank_ == 0) {
    if (int rc = MPI_Isend(control_bytes(proxy::Control::Hello), proxy::kControlSize, MPI_BYTE, 0, proxy::kTagControl,
                           l->inter_, &hello);
        rc != MPI_SUCCESS)
      hello = MPI_REQUEST_NULL;  // the merge or the table then fails, saying why
  }
  wd.step("MPI_Intercomm_merge with the proxy's ranks");
  if (int rc = MPI_Intercomm_merge(l->inter_, 0, &l->merged_); rc != MPI_SUCCESS) {
    l->lost_ = true;
    return mpi_failure("MPI_Intercomm_merge", rc);
  }
  MPI_Comm_set_errhandler(l->merged_, MPI_ERRORS_RETURN);
  if (hello != MPI_REQUEST_NULL && wait_until(&hello, deadline) != 0 && hello != MPI_REQUEST_NULL)
    MPI_Request_free(&hello);  // constant bytes: MPI may finish it whenever

  std::vector<std::uint8_t> bytes;
  Status got;
  if (l->rank_ == 0) {
    auto t = receive_table(l->inter_, deadline);
    if (t) {
      bytes = std::move(*t);
    } else {
      got = t.failure();
      l->lost_ = true;  // no goodbye to a proxy that did not answer
    }
  } else {
    wd.step("waiting for rank 0 to get the proxy's table (MPI_Bcast)");
  }
  if (Status all = share(got, comm, l->rank_); !all) return all.failure();
  if (Status s = share_bytes(&bytes, comm); !s) return s.failure();
  auto t = proxy::decode_table(bytes);
  if (!t) return t.failure();
  l->table_ = std::move(*t);
  if (l->table_.status < 0) {
    l->lost_ = true;  // the proxy has let go of this job: no goodbye, no disconnect
    return Failure{l->table_.status,
                   "LNET_PROXY=" + opts.proxy + ": the proxy cannot serve this job: " + l->table_.error};
  }
  return l;
}

std::vector<Nid> ProxyLink::nids(NetId net, int app_size) const {
  std::vector<Nid> out;
  for (int r = 0; r < app_size; ++r) out.push_back(Nid::make(net, static_cast<std::uint32_t>(r)));
  out.insert(out.end(), table_.proxies.begin(), table_.proxies.end());
  return out;
}

namespace {

// An 8-byte send to a live proxy completes at once; three that do not, each within
// half a second: the proxy is gone. One a second.
constexpr auto kBeatPatience = std::chrono::milliseconds(500);
constexpr auto kBeatInterval = std::chrono::seconds(1);
constexpr int kBeatsMissed = 3;

}  // namespace

Status ProxyLink::send_control(proxy::Control c, bool synchronous, std::chrono::milliseconds wait) {
  const std::uint8_t* msg = control_bytes(c);
  MPI_Request r;
  int rc = synchronous ? MPI_Issend(msg, proxy::kControlSize, MPI_BYTE, 0, proxy::kTagControl, inter_, &r)
                       : MPI_Isend(msg, proxy::kControlSize, MPI_BYTE, 0, proxy::kTagControl, inter_, &r);
  if (rc != MPI_SUCCESS) return mpi_failure("MPI_Isend", rc);
  if (rc = wait_until(&r, Clock::now() + wait); rc == -ETIMEDOUT) {
    MPI_Request_free(&r);  // MPI may finish it whenever
    return Failure{-ETIMEDOUT, "the proxy did not take it in time"};
  }
  return rc ? Status(Failure{rc, "sending to the proxy failed (MPI_Test)"}) : Status();
}

void ProxyLink::start_heartbeat() {
  if (rank_ != 0) return;
  int level = 0;
  MPI_Query_thread(&level);
  if (level == MPI_THREAD_MULTIPLE) {
    heartbeat_ = std::thread([this] { heartbeat_main(); });
    return;
  }
  // Only this thread may call MPI (funneled), or no other thread exists (single): the
  // application's waits in LNet, which poll the driver, send the heartbeats.
  owner_ = std::this_thread::get_id();
  next_beat_ = Clock::now();
  polled_.store(true, std::memory_order_release);
  LNET_LOG(Debug, kLogLnd, "proxy heartbeats: from the application's waits in LNet (MPI thread level %d)", level);
}

void ProxyLink::missed_heartbeat(const std::string& why) {
  if (++missed_ == kBeatsMissed && !lost_.exchange(true))
    LNET_LOG(Error, kLogLnd, "proxy heartbeat: %s three times: the proxy is gone", why.c_str());
}

void ProxyLink::heartbeat_main() {
  MutexLock g(mu_);
  while (!stop_) {
    g.unlock();
    Status s = send_control(proxy::Control::Heartbeat, false, kBeatPatience);
    if (s)
      missed_ = 0;
    else
      missed_heartbeat(s.message());
    g.lock();
    if (!stop_) (void)g.wait_for(cv_, kBeatInterval);
  }
}

bool ProxyLink::poll(void* self) {
  auto* l = static_cast<ProxyLink*>(self);
  if (!l->polled_.load(std::memory_order_acquire) || std::this_thread::get_id() != l->owner_) return false;
  // Coarse: a poll is a busy loop's round, and a heartbeat a second needs no better.
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  l->heartbeat_step(Clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
  return false;
}

// One step of the polled heartbeats: the one in flight done (or given up after
// kBeatPatience), the next one started when due. Never blocks.
void ProxyLink::heartbeat_step(Clock::time_point now) {
  if (beat_ != MPI_REQUEST_NULL) {
    int flag = 0;
    if (int rc = MPI_Test(&beat_, &flag, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) {
      if (beat_ != MPI_REQUEST_NULL) MPI_Request_free(&beat_);
      missed_heartbeat("sending to the proxy failed: " + mpi_error_string(rc));
    } else if (flag) {
      missed_ = 0;
    } else if (now - beat_sent_ >= kBeatPatience) {
      MPI_Request_free(&beat_);  // MPI may finish it whenever
      missed_heartbeat("the proxy did not take it in time");
    } else {
      return;
    }
  }
  if (now < next_beat_ || lost_.load(std::memory_order_relaxed)) return;
  next_beat_ = now + kBeatInterval;
  if (int rc = MPI_Isend(control_bytes(proxy::Control::Heartbeat), proxy::kControlSize, MPI_BYTE, 0, proxy::kTagControl,
                         inter_, &beat_);
      rc != MPI_SUCCESS) {
    beat_ = MPI_REQUEST_NULL;
    missed_heartbeat("MPI_Isend failed: " + mpi_error_string(rc));
    return;
  }
  beat_sent_ = now;
}

ProxyLink::~ProxyLink() {
  if (heartbeat_.joinable()) {
    {
      MutexLock g(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    heartbeat_.join();
  }
  if (beat_ != MPI_REQUEST_NULL) {  // a polled heartbeat in flight: done, or left to MPI
    if (wait_until(&beat_, Clock::now() + kBeatPatience) != 0 && beat_ != MPI_REQUEST_NULL) MPI_Request_free(&beat_);
  }
  if (inter_ == MPI_COMM_NULL) return;
  int taken = 1;
  if (rank_ == 0 && lost_.load()) {
    taken = 0;
  } else if (rank_ == 0) {
    if (Status s = send_control(proxy::Control::Bye, true, std::chrono::seconds(10)); !s) {
      LNET_LOG(Warn, kLogLnd, "proxy goodbye: %s; leaving the connection to it", s.message().c_str());
      taken = 0;
    }
  }
  MPI_Bcast(&taken, 1, MPI_INT, 0, group_);
  if (merged_ != MPI_COMM_NULL) MPI_Comm_free(&merged_);
  if (taken)
    MPI_Comm_disconnect(&inter_);  // collective with the proxy's ranks, which have the goodbye
  else
    MPI_Comm_free(&inter_);  // a disconnect would wait for a proxy that is gone
}

}  // namespace lnet::mpi
