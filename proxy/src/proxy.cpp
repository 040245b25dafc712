// One rank of lnet-proxy: start-up, the serving loops of rank 0 and of the others, and
// the applications' lives (accept, set-up, end). See proxy.hpp and lnet-proxy(8).
#include "proxy.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <lnet/log.hpp>

namespace lnet::proxy {

namespace mp = lnet::mpi::proxy;
using Clock = std::chrono::steady_clock;

namespace {

Failure mpi_failure(const std::string& what, int rc) {
  return Failure{-EIO, what + " failed: " + mpi::mpi_error_string(rc)};
}

}  // namespace

ProxyRank::ProxyRank(mpi::Group& group, MPI_Comm parent, ProxyOptions opts)
    : group_(group),
      comm_(group.comm()),
      parent_(parent),
      opts_(std::move(opts)),
      rank_(group.rank()),
      size_(group.size()) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

ProxyRank::~ProxyRank() {
  end_all();
  up_.reset();
  close_port();
  for (int fd : bells_)
    if (fd >= 0) ::close(fd);
  if (bell_ >= 0) ::close(bell_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

// ---- start-up -------------------------------------------------------------------------

Status ProxyRank::start() {
  // What this MPI cannot do is said first, before anything else can fail.
  Status mine;
  if (accepts()) {
    if (Status s = mpi::check_connectable(comm_); !s)
      mine = Failure{s.code(), s.message() +
                                   ": no application could connect to this job; start one proxy job per node, each "
                                   "from its node, or let applications spawn theirs (LNET_PROXY=spawn:, mode 2): "
                                   "lnet-proxy(8)"};
  }
  if (mine && rank_ == 0 && accepts()) mine = open_port();
  if (mine && wake_fd_ < 0) mine = Failure{-errno, std::string("eventfd: ") + std::strerror(errno)};
  if (mine) {
    auto u = Uplink::connect(opts_.bridge, static_cast<std::uint32_t>(rank_), std::chrono::seconds(opts_.timeout),
                             wake_fd_, opts_.lnd.idle_us);
    if (u)
      up_ = std::move(*u);
    else
      mine = u.failure();
  }
  if (mine && rank_ == 0) mine = open_doorbell();
  if (!mine) LNET_LOG(Error, kLogDaemon, "proxy rank %d: %s", rank_, mine.message().c_str());
  if (Status all = group_.agree(mine); !all) return all;
  mine = join_ranks();
  if (mine && opts_.mode == ProxyOptions::Mode::PerApp) mine = gather_targets();
  if (!mine) LNET_LOG(Error, kLogDaemon, "proxy rank %d: %s", rank_, mine.message().c_str());
  if (Status all = group_.agree(mine); !all) return all;
  if (rank_ == 0 && parent_ == MPI_COMM_NULL) {
    if (!opts_.port_file.empty()) mine = write_port_file();
    if (mine && !opts_.publish.empty()) mine = publish();
    if (!mine) LNET_LOG(Error, kLogDaemon, "proxy rank 0: %s", mine.message().c_str());
  }
  return group_.agree(mine);
}

// The port under the service name, and the doorbell under NAME.doorbell. The name is
// looked up first (ompi-server takes a second publication of a name without a word): a
// name whose doorbell answers belongs to a live proxy and is refused; one left by a
// proxy that died (its doorbell does not answer) is taken over.
Status ProxyRank::publish() {
  const std::string& name = opts_.publish;
  const std::string bell_name = name + ".doorbell";
  char old_bell[MPI_MAX_PORT_NAME + 1] = {}, old_port[MPI_MAX_PORT_NAME + 1] = {};
  if (MPI_Lookup_name(bell_name.c_str(), MPI_INFO_NULL, old_bell) == MPI_SUCCESS) {
    auto fd = mp::dial_doorbell(old_bell, Clock::now() + std::chrono::seconds(2));
    if (fd) {
      ::close(*fd);
      return Failure{-EADDRINUSE, "the name '" + name + "' belongs to a running proxy (its doorbell " +
                                      std::string(old_bell) + " answers): choose another --publish"};
    }
    LNET_LOG(Warn, kLogDaemon, "proxy: the name '%s' was left by a proxy that is gone (doorbell %s: %s): taken over",
             name.c_str(), old_bell, fd.message().c_str());
    MPI_Unpublish_name(bell_name.c_str(), MPI_INFO_NULL, old_bell);
    if (MPI_Lookup_name(name.c_str(), MPI_INFO_NULL, old_port) == MPI_SUCCESS)
      MPI_Unpublish_name(name.c_str(), MPI_INFO_NULL, old_port);
  }
  int rc = MPI_Publish_name(name.c_str(), MPI_INFO_NULL, port_.c_str());
  if (rc == MPI_SUCCESS) {
    rc = MPI_Publish_name(bell_name.c_str(), MPI_INFO_NULL, doorbell_.c_str());
    if (rc != MPI_SUCCESS) MPI_Unpublish_name(name.c_str(), MPI_INFO_NULL, port_.c_str());
  }
  if (rc != MPI_SUCCESS)
    return Failure{-EIO, "cannot publish the name '" + name + "': " + mpi::mpi_error_string(rc) +
                             " (Open MPI publishes through ompi-server: start the job with --ompi-server)"};
  published_ = true;
  return {};
}

Status ProxyRank::open_port() {
  char port[MPI_MAX_PORT_NAME + 1] = {};
  if (int rc = MPI_Open_port(MPI_INFO_NULL, port); rc != MPI_SUCCESS)
    return Failure{-EOPNOTSUPP, "MPI_Open_port failed: " + mpi::mpi_error_string(rc) +
                                    ": this MPI cannot accept applications (Debian's MPICH cannot open ports; its "
                                    "jobs reach servers with the socket LND instead: see lnet-proxy(8); " +
                                    mpi::describe_mpi() + ")"};
  port_ = port;
  return {};
}

void ProxyRank::close_port() {
  if (published_) {
    MPI_Unpublish_name(opts_.publish.c_str(), MPI_INFO_NULL, port_.c_str());
    MPI_Unpublish_name((opts_.publish + ".doorbell").c_str(), MPI_INFO_NULL, doorbell_.c_str());
    published_ = false;
  }
  if (!port_.empty()) {
    if (!opts_.port_file.empty()) (void)::unlink(opts_.port_file.c_str());
    MPI_Close_port(port_.c_str());
    port_.clear();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

// Every other rank dials rank 0's doorbell and says which rank it is; rank 0 keeps
// those connections to ring them.
Status ProxyRank::join_ranks() {
  auto deadline = Clock::now() + std::chrono::seconds(opts_.timeout);
  // The doorbell's address and its secret, which a rank's knock says too.
  std::vector<char> addr(64 + mp::kSecretSize + 1, '\0');
  if (rank_ == 0) {
    std::copy_n(doorbell_.begin(), std::min<std::size_t>(doorbell_.size(), 63), addr.begin());
    std::copy_n(secret_.begin(), std::min(secret_.size(), mp::kSecretSize), addr.begin() + 64);
  }
  if (int rc = MPI_Bcast(addr.data(), static_cast<int>(addr.size()), MPI_CHAR, 0, comm_); rc != MPI_SUCCESS)
    return mpi_failure("MPI_Bcast", rc);
  if (rank_ != 0) {
    secret_ = addr.data() + 64;
    auto fd = mp::dial_doorbell(addr.data(), deadline);
    if (!fd) return fd.failure();
    bell_ = *fd;
    return mp::write_line(bell_, mp::format_knock({mp::Knock::Rank, rank_, secret_}), deadline);
  }
  bells_.assign(static_cast<std::size_t>(size_), -1);
  for (int joined = 1; joined < size_;) {
    pollfd p{listen_fd_, POLLIN, 0};
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0 || ::poll(&p, 1, left) <= 0)
      return Failure{-ETIMEDOUT, std::to_string(size_ - joined) + " proxy ranks did not ring the doorbell"};
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    auto line = mp::read_line(fd, Clock::now() + std::chrono::seconds(5));
    auto k = line ? mp::parse_knock(*line) : Result<mp::Knock>(line.failure());
    if (!k || k->kind != mp::Knock::Rank || k->value >= size_ || bells_[static_cast<std::size_t>(k->value)] >= 0 ||
        !mp::same_secret(k->secret, secret_)) {
      LNET_LOG(Warn, kLogDaemon, "proxy: doorbell during start-up: %s",
               !k                                    ? k.message().c_str()
               : mp::same_secret(k->secret, secret_) ? "not a new proxy rank"
                                                     : "a bad secret");
      ::close(fd);
      continue;
    }
    bells_[static_cast<std::size_t>(k->value)] = fd;
    ++joined;
  }
  return {};
}

int ProxyRank::run(int signal_fd) {
  if (opts_.dedicated) {
    Status s = start();
    report_to_spawner(s);  // the parent is let go: this job's life is its application's
    if (!s) return 0;
    one_app_ = true;
    if (rank_ == 0) {
      LNET_LOG(Info, kLogDaemon, "proxy: dedicated to one application: %d rank(s), rank 0 is %s", size_,
               up_->welcome().nid.to_string().c_str());
      ring({mp::RankLine::Accept, 1});
      accept_app(next_serial_++);
    }
    Stop why = rank_ == 0 ? serve_root(signal_fd) : serve_other(signal_fd);
    end_all();
    return why == Stop::Failed ? 1 : 0;
  }
  if (Status s = start(); !s) {
    if (parent_ == MPI_COMM_NULL) return 1;
    // Mode 2: the application says why and fails; a spawned job that exits with an
    // error would make mpirun abort the application before it can.
    refuse_parent(s);
    return 0;
  }
  if (parent_ != MPI_COMM_NULL) {
    App a;
    a.serial = next_serial_++;
    a.inter = parent_;
    adopt_app(std::move(a));
    // Mode 2: this job serves its parent and ends with it.
    if (apps_.empty()) return 1;
    LNET_LOG(Info, kLogDaemon, "proxy: spawned by an application of %d rank(s)", apps_.begin()->second.ranks);
  }
  if (rank_ == 0) {
    std::printf("lnet-proxy: ready: %d rank(s), rank 0 is %s", size_, up_->welcome().nid.to_string().c_str());
    if (!opts_.port_file.empty()) std::printf(", port file %s", opts_.port_file.c_str());
    if (published_) std::printf(", published as '%s'", opts_.publish.c_str());
    if (opts_.mode == ProxyOptions::Mode::PerApp) std::printf(", a dedicated proxy job per application");
    std::printf("\n");
    std::fflush(stdout);
  }
  Stop why = rank_ == 0 ? serve_root(signal_fd) : serve_other(signal_fd);
  end_all();
  return why == Stop::Failed ? 1 : 0;
}

// ---- serving ----------------------------------------------------------------------------

void ProxyRank::ring(const mp::RankLine& what) {
  std::string line = mp::format_rank_line(what);
  auto deadline = Clock::now() + std::chrono::seconds(opts_.timeout);
  for (int r = 1; r < size_; ++r) {
    int& fd = bells_[static_cast<std::size_t>(r)];
    if (fd < 0) continue;
    if (Status s = mp::write_line(fd, line, deadline); !s) {
      LNET_LOG(Error, kLogDaemon, "proxy: cannot ring rank %d: %s", r, s.message().c_str());
      ::close(fd);
      fd = -1;
    }
  }
}

ProxyRank::Stop ProxyRank::on_signal(int signal_fd) {
  signalfd_siginfo si;
  (void)!::read(signal_fd, &si, sizeof si);
  LNET_LOG(Info, kLogDaemon, "proxy: signal %u: stopping", si.ssi_signo);
  ring({mp::RankLine::Quit});
  return Stop::Quit;
}

ProxyRank::Stop ProxyRank::on_bell(int r) {
  auto read = mp::read_line(bells_[static_cast<std::size_t>(r)], Clock::now() + std::chrono::seconds(1));
  auto line = read ? mp::parse_rank_line(*read) : Result<mp::RankLine>(read.failure());
  if (line && line->kind == mp::RankLine::Bad) {
    // Rank r's driver refused messages of an application: it is dropped everywhere.
    std::uint64_t serial = line->serial;
    if (auto it = apps_.find(serial); it != apps_.end()) {
      LNET_LOG(Warn, kLogDaemon, "proxy: application pid %u sent messages rank %d's MPI LND refused: dropped",
               it->second.pid, r);
      ring({mp::RankLine::End, serial, false});
      end_app(serial, false);
    }
    return Stop::No;
  }
  if (line && line->kind == mp::RankLine::Gone)
    LNET_LOG(Error, kLogDaemon, "proxy: rank %d's lnetd went away: stopping", r);
  else {
    LNET_LOG(Error, kLogDaemon, "proxy: rank %d is gone (%s): stopping", r,
             line ? "it said something else" : line.message().c_str());
    lost_a_rank_ = true;
  }
  ring({mp::RankLine::Quit});
  return Stop::Failed;
}

ProxyRank::Stop ProxyRank::serve_root(int signal_fd) {
  std::vector<Knock> knocks;
  for (;;) {
    std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    for (int r = 1; r < size_; ++r) fds.push_back({bells_[static_cast<std::size_t>(r)], POLLIN, 0});
    std::size_t first_knock = fds.size();
    for (const Knock& k : knocks) fds.push_back({k.fd, POLLIN, 0});
    // Heartbeats are checked a few times a second while applications are attached;
    // with none, the rank sleeps until something happens.
    int timeout = apps_.empty() && knocks.empty() ? -1 : 200;
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) return Stop::Failed;
    if (fds[2].revents) return on_signal(signal_fd);
    if (fds[1].revents) {
      LNET_LOG(Error, kLogDaemon, "proxy rank 0: lnetd (%s) went away: stopping", opts_.bridge.c_str());
      ring({mp::RankLine::Quit});
      return Stop::Failed;
    }
    for (int r = 1; r < size_; ++r) {
      if (!fds[static_cast<std::size_t>(2 + r)].revents) continue;
      if (Stop s = on_bell(r); s != Stop::No) return s;
    }
    // Knocks whose line arrived (or that waited too long).
    knocks = answer_knocks(knocks, std::span<const pollfd>(fds).subspan(first_knock));
    if (fds[0].revents) take_knock(knocks);
    check_apps();
    if ((parent_ != MPI_COMM_NULL || one_app_) && apps_.empty()) {
      ring({mp::RankLine::Quit});  // mode 2, or a dedicated job: its application has ended
      return Stop::Quit;
    }
  }
}

// Mode 2 (collective): the parent merges and waits for a table; it gets the reason this
// job cannot serve it instead.
void ProxyRank::refuse_parent(const Status& why) {
  MPI_Comm_set_errhandler(parent_, MPI_ERRORS_RETURN);
  MPI_Comm merged;
  if (MPI_Intercomm_merge(parent_, 1, &merged) != MPI_SUCCESS) return;
  mp::Table t{why.code() ? why.code() : -EIO, 0, {}, {}, "the spawned lnet-proxy could not start: " + why.message()};
  if (rank_ == 0) (void)send_table(t, parent_);
  MPI_Comm_free(&merged);
  MPI_Comm_free(&parent_);
}

ProxyRank::Stop ProxyRank::serve_other(int signal_fd) {
  bool lnetd_gone = false;
  for (;;) {
    pollfd fds[3] = {{bell_, POLLIN, 0}, {wake_fd_, lnetd_gone ? short{0} : short{POLLIN}, 0}, {signal_fd, POLLIN, 0}};
    // With applications attached, their refused messages are looked at twice a second.
    if (::poll(fds, 3, apps_.empty() ? -1 : 500) < 0 && errno != EINTR) return Stop::Failed;
    for (auto& [serial, a] : apps_)
      if (misbehaves(a, rank_))
        (void)mp::write_line(bell_, mp::format_rank_line({mp::RankLine::Bad, serial}),
                             Clock::now() + std::chrono::seconds(5));
    if (fds[2].revents) return Stop::Quit;
    if (fds[1].revents) {
      LNET_LOG(Error, kLogDaemon, "proxy rank %d: lnetd (%s) went away", rank_, opts_.bridge.c_str());
      lnetd_gone = true;
      (void)mp::write_line(bell_, mp::format_rank_line({mp::RankLine::Gone}), Clock::now() + std::chrono::seconds(5));
    }
    if (!fds[0].revents) continue;
    auto line = mp::read_line(bell_, Clock::now() + std::chrono::seconds(5));
    if (!line) {
      LNET_LOG(Error, kLogDaemon, "proxy rank %d: rank 0 is gone (%s)", rank_, line.message().c_str());
      lost_a_rank_ = true;
      return Stop::Failed;
    }
    auto said = mp::parse_rank_line(*line);
    if (said && said->kind == mp::RankLine::Quit) return lnetd_gone ? Stop::Failed : Stop::Quit;
    if (said && said->kind == mp::RankLine::Accept) {
      accept_app(said->serial);
    } else if (said && said->kind == mp::RankLine::End) {
      end_app(said->serial, said->goodbye);
    } else {
      LNET_LOG(Error, kLogDaemon, "proxy rank %d: rank 0 said '%s' (%s)", rank_, line->c_str(),
               said ? "not a line for a rank" : said.message().c_str());
      return Stop::Failed;
    }
  }
}

void ProxyRank::on_client(int fd, int app_ranks) {
  auto deadline = Clock::now() + std::chrono::seconds(opts_.timeout);
  if (one_app_) {
    LNET_LOG(Warn, kLogDaemon, "proxy: a knock on a dedicated proxy: refused");
    (void)mp::write_line(fd, mp::format_answer({mp::Answer::Error, "this proxy job is dedicated to one application"}),
                         deadline);
    return;
  }
  std::uint64_t serial = next_serial_++;
  LNET_LOG(Info, kLogDaemon, "proxy: an application of %d rank(s) knocks (serial %llu)", app_ranks,
           static_cast<unsigned long long>(serial));
  if (opts_.mode == ProxyOptions::Mode::PerApp) {
    mp::Answer a = spawn_dedicated(serial);
    if (a.kind == mp::Answer::Error)
      LNET_LOG(Error, kLogDaemon, "proxy: application %llu: %s", static_cast<unsigned long long>(serial),
               a.text.c_str());
    (void)mp::write_line(fd, mp::format_answer(a), deadline);
    return;
  }
  ring({mp::RankLine::Accept, serial});
  (void)mp::write_line(fd, "OK\n", deadline);
  accept_app(serial);
}

// ---- mode 1b: a dedicated proxy job per application --------------------------------------

// Every rank's node and bridge, to rank 0: where the dedicated jobs' ranks go.
Status ProxyRank::gather_targets() {
  constexpr int kRecord = 512;
  std::vector<char> mine(kRecord, '\0'), all;
  char host[MPI_MAX_PROCESSOR_NAME + 1] = {};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  std::error_code ec;
  std::string bridge = std::filesystem::absolute(opts_.bridge, ec).string();
  if (std::strlen(host) + bridge.size() + 2 > kRecord)
    return Failure{-ENAMETOOLONG, "host name and bridge path too long: " + bridge};
  std::memcpy(mine.data(), host, std::strlen(host));
  std::memcpy(mine.data() + std::strlen(host) + 1, bridge.data(), bridge.size());
  if (rank_ == 0) all.resize(static_cast<std::size_t>(kRecord) * static_cast<std::size_t>(size_));
  if (int rc = MPI_Gather(mine.data(), kRecord, MPI_CHAR, all.data(), kRecord, MPI_CHAR, 0, comm_); rc != MPI_SUCCESS)
    return mpi_failure("MPI_Gather", rc);
  for (int r = 0; rank_ == 0 && r < size_; ++r) {
    const char* rec = all.data() + static_cast<std::size_t>(r) * kRecord;
    std::string h(rec);
    targets_.emplace_back(h, std::string(rec + h.size() + 1));
  }
  return {};
}

mp::Answer ProxyRank::spawn_dedicated(std::uint64_t serial) {
  auto t0 = Clock::now();
  auto deadline = t0 + std::chrono::seconds(opts_.timeout);
  std::error_code ec;
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return {mp::Answer::Error, "cannot find this program (/proc/self/exe): " + ec.message()};
  auto child = mpi::spawn_proxies(self, targets_,
                                  {"--dedicated", "--timeout", std::to_string(opts_.timeout), "--client-timeout",
                                   std::to_string(opts_.client_timeout)},
                                  MPI_COMM_SELF);
  if (!child) return {mp::Answer::Error, "cannot start a dedicated proxy: " + child.message()};
  MPI_Comm c = *child;
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  char buf[mp::kMaxLine + 1] = {};
  MPI_Request r;
  MPI_Status st;
  mp::Answer a{mp::Answer::Error, "the dedicated proxy sent no port within --timeout"};
  if (int rc = MPI_Irecv(buf, mp::kMaxLine, MPI_CHAR, 0, mp::kTagPort, c, &r); rc != MPI_SUCCESS) {
    a.text = "MPI_Irecv from the dedicated proxy failed: " + mpi::mpi_error_string(rc);
  } else {
    int flag = 0;
    while (MPI_Test(&r, &flag, &st) == MPI_SUCCESS && !flag && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (flag) {
      int n = 0;
      MPI_Get_count(&st, MPI_CHAR, &n);
      auto got = mp::parse_answer(std::string_view(buf, static_cast<std::size_t>(n)));
      a = got && got->kind != mp::Answer::Ok
              ? *got
              : mp::Answer{mp::Answer::Error, "the dedicated proxy answered: " + (got ? "OK" : got.message())};
    } else {
      // `buf` is this frame's: MPI must be done with it before the frame goes. A receive
      // marked for cancellation completes locally (cancelled, or received if it matched:
      // a line, sent eagerly), so the wait does not hang on the other job.
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
  }
  // Let go of it: its life is the application's, and it may die without this job noticing.
  MPI_Comm_free(&c);
  if (a.kind == mp::Answer::Port)
    LNET_LOG(Info, kLogDaemon, "proxy: application %llu: a dedicated proxy job of %zu rank(s) in %.1f s, port %s",
             static_cast<unsigned long long>(serial), targets_.size(),
             std::chrono::duration<double>(Clock::now() - t0).count(), a.text.c_str());
  return a;
}

void ProxyRank::report_to_spawner(const Status& started) {
  if (rank_ == 0) {
    mp::Answer a =
        started ? mp::Answer{mp::Answer::Port, port_}
                : mp::Answer{mp::Answer::Error, "the dedicated lnet-proxy could not start: " + started.message()};
    std::string line = mp::format_answer(a);
    MPI_Comm_set_errhandler(parent_, MPI_ERRORS_RETURN);
    if (int rc = MPI_Send(line.data(), static_cast<int>(line.size()), MPI_CHAR, 0, mp::kTagPort, parent_);
        rc != MPI_SUCCESS)
      LNET_LOG(Error, kLogDaemon, "proxy: cannot tell the standing job the port: %s",
               mpi::mpi_error_string(rc).c_str());
  }
  MPI_Comm_free(&parent_);
}

}  // namespace lnet::proxy
