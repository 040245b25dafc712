// One rank of lnet-proxy: its uplink to the node's lnetd, and the applications it serves
// with the other ranks. Rank 0 owns the MPI port, the doorbell and the applications'
// heartbeats; it tells the other ranks (one TCP line each, on their doorbell
// connections) when to accept, when an application has ended, and when to quit. Idle
// ranks sleep in poll(): nothing spins while no application knocks.
#pragma once

#include <mpi.h>
#include <poll.h>

#include <chrono>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <lnet/log.hpp>
#include <lnet/mpi.hpp>
#include <lnet/mpi_proxy.hpp>

#include "uplink.hpp"

namespace lnet::proxy {

struct ProxyOptions {
  // shared (mode 1c): the job serves every application that knocks; per-app (mode 1b):
  // it spawns a dedicated proxy job for each (on its own ranks' nodes, with their
  // bridges) and hands the application that job's port.
  enum class Mode { Shared, PerApp } mode = Mode::Shared;
  bool dedicated = false;  // this job was spawned by a per-app standing job, for one application
  std::string bridge;
  std::string port_file;    // where rank 0 writes the port (empty: none)
  std::string publish;      // a service name to publish (empty: none)
  std::string doorbell_ip;  // empty: the IPv4 address of rank 0's lnetd NID
  int client_timeout = 10;  // seconds without a heartbeat before an application is gone
  int timeout = 30;         // seconds for start-up steps and each application's set-up
  mpi::Options lnd;         // the MPI LND's tunables (LNET_MPI_*)
};

class ProxyRank {
 public:
  // Collective over the group (the proxy job's ranks; not owned). `parent`: the
  // application that spawned this job (mode 2: serve it alone, then exit), or
  // MPI_COMM_NULL (mode 1c: accept applications on a port).
  ProxyRank(mpi::Group& group, MPI_Comm parent, ProxyOptions opts);
  ~ProxyRank();
  // Start-up (collective), then serve until told to stop; the process's exit status.
  int run(int signal_fd);
  // A rank of this job died: MPI_Finalize would wait for it forever (Open MPI 4.1 spins
  // in its closing fence), so the process exits without it.
  bool lost_a_rank() const { return lost_a_rank_; }

 private:
  struct App {
    std::uint64_t serial = 0;
    Pid pid = 0;
    int ranks = 0;
    MPI_Comm inter = MPI_COMM_NULL;
    MPI_Comm merged = MPI_COMM_NULL;
    std::shared_ptr<AppLink> link;
    // Rank 0: the posted receive of the application's control messages.
    MPI_Request ctl = MPI_REQUEST_NULL;
    std::uint8_t ctl_buf[mpi::proxy::kControlSize] = {};
    std::chrono::steady_clock::time_point last_heard;
    bool bad_reported = false;  // its refused messages were reported (misbehaves())
  };
  enum class Stop { No, Quit, Failed };

  Status start();
  Status join_ranks();
  Status open_port();
  Status publish();
  Status open_doorbell();
  void close_port();
  Stop serve_root(int signal_fd);
  // Rank 0's serving, event by event: a signal (QUIT rung); rank r's line (No: an
  // application dropped; else the job stops); the knocks polled (`polled`, in order)
  // answered, the others still waiting returned.
  struct Knock {
    int fd;
    std::chrono::steady_clock::time_point deadline;
    std::uint32_t source = 0;  // the knocker's IPv4 address
    std::string line;          // what came so far
  };
  Stop on_signal(int signal_fd);
  Stop on_bell(int r);
  std::vector<Knock> answer_knocks(const std::vector<Knock>& knocks, std::span<const pollfd> polled);
  // Rank 0 (doorbell.cpp): a connection on the doorbell becomes a knock, or is closed at
  // once when too many are open (in all, or from its address); a knock's bytes are read
  // as they come (false: its line is complete, or it ended); the knock answered.
  void take_knock(std::vector<Knock>& knocks);
  bool read_knock(Knock& k);
  void answer_knock(const Knock& k);
  // Rank 0: the port file, written whole (a temporary file renamed over it), mode 0640,
  // in the group of the bridge socket (those who may use lnetd's bridge may use the
  // proxy): it holds the doorbell's secret.
  Status write_port_file();
  Stop serve_other(int signal_fd);
  // Rank 0 heard a knock on `fd` (its line already read).
  void on_client(int fd, int app_ranks);
  // Per-app, rank 0: a dedicated proxy job for the application that knocked; the answer
  // for it (its port, or why not), within --timeout.
  mpi::proxy::Answer spawn_dedicated(std::uint64_t serial);
  // Dedicated: tell the standing job that spawned this one its port (or why not), then
  // serve the one application that connects to it.
  void report_to_spawner(const Status& started);
  Status gather_targets();
  bool accepts() const { return parent_ == MPI_COMM_NULL || opts_.dedicated; }
  // Collective: accept the next application and set it up.
  void accept_app(std::uint64_t serial);
  bool await_hello(const App& a);
  bool misbehaves(App& a, int reported_by);
  void adopt_app(App a);
  void refuse_parent(const Status& why);
  // Rank 0: the table to the application's rank 0; false when it was not taken in time.
  bool send_table(const mpi::proxy::Table& t, MPI_Comm inter);
  Status setup_app(App& a);
  // Collective: the application's pid, new from rank 0's lnetd and registered on the
  // others'; this rank's outcome.
  struct PidTaken {
    std::uint32_t pid = 0;    // the pid rank 0 sent (0: it got none)
    std::int32_t status = 0;  // this rank's
    std::uint64_t nid = 0;    // this rank's NID for the application
    std::string why;          // why not, in this rank's words
  };
  PidTaken take_pid(App& a);
  // Collective: the application's MPI LND started on every rank, or `t` says why not.
  void start_link(App& a, mpi::proxy::Table& t);
  // Local: stop serving the application (`graceful`: it said goodbye, disconnect).
  void end_app(std::uint64_t serial, bool graceful);
  void check_apps();
  // Tells every other rank (ACCEPT, END, QUIT) on its doorbell connection.
  void ring(const mpi::proxy::RankLine& what);
  void end_all();

  mpi::Group& group_;
  MPI_Comm comm_;  // the group's
  MPI_Comm parent_;
  ProxyOptions opts_;
  int rank_ = 0, size_ = 0;
  int wake_fd_ = -1;
  std::unique_ptr<Uplink> up_;
  std::string port_;                                    // rank 0's MPI port
  std::string doorbell_;                                // rank 0's doorbell, "<IPv4>:<port>"
  std::string secret_;                                  // what a knock on it must say (every rank knows it)
  LogLimiter knock_log_{std::chrono::seconds(10), 20};  // refused knocks: 20 lines per 10 s
  LogLimiter flood_log_{std::chrono::seconds(10)};      // knocks over the bounds: one line per 10 s
  bool published_ = false;
  int listen_fd_ = -1;      // rank 0: the doorbell
  std::vector<int> bells_;  // rank 0: the other ranks' connections, by rank
  int bell_ = -1;           // other ranks: the connection to rank 0
  std::map<std::uint64_t, App> apps_;
  std::uint64_t next_serial_ = 1;
  std::vector<std::pair<std::string, std::string>> targets_;  // per-app, rank 0: each rank's (host, bridge)
  bool lost_a_rank_ = false;
  bool one_app_ = false;  // dedicated: ends with its application
};

}  // namespace lnet::proxy
