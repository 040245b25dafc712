// The MPI LND: LNet between the processes of an MPI job, over a duplicate of the
// job's communicator (never the application's own). NIDs are `<rank>@mpi<N>` and every
// rank of the job has the same LNet pid.
//
//   MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
//   auto s = lnet::mpi::Session::start(MPI_COMM_WORLD).value();   // collective
//   lnet::Instance& lnet = s->lnet();
//   ... lnet.put(...) to lnet::ProcessId{s->nid(peer_rank), s->pid()} ...
//   s.reset();                                                      // collective
//   MPI_Finalize();
//
// Session is the two pieces below put together, which other hosts use on their own:
// Group, the collective set-up of a communicator (a duplicate, one pid for every rank,
// an all-or-nothing agreement), and MpiLnd, the driver for one communicator, which any host
// of the driver SPI runs (liblnet's Instance, or the proxy's bridge).
//
// Progress: with MPI_THREAD_MULTIPLE a progress thread of the LND completes MPI
// requests and delivers events; otherwise (or with LNET_MPI_PROGRESS=poll) the host
// polls the driver: in liblnet, EventQueue::poll, LNetEQPoll, Instance::progress() and
// Instance::ping. Without MPI_THREAD_MULTIPLE, only the thread that started the driver
// may drive progress; sends from other threads wait for it.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <lnet/api.hpp>
#include <lnet/config.hpp>
#include <lnet/lnd/lnd.hpp>
#include <lnet/mutex.hpp>
#include <lnet/progress.hpp>
#include <lnet/result.hpp>

namespace lnet::mpi {

enum class ProgressMode { Auto, Thread, Poll };
enum class OnError { Return, Abort };

// Tunables of the MPI LND; from_env() reads LNET_MPI_* over these defaults.
struct Options {
  NetId net = NetId::make(kMpiLnd, 0);         // LNET_MPI_NET: the MPI network (mpi<N>, or gni<N>, kfi<N>...)
  bool net_given = false;                      // LNET_MPI_NET is set (else a proxy's network is taken)
  std::uint32_t short_max = 8192;              // LNET_MPI_SHORT_MAX: largest payload sent inline
  unsigned pool_depth = 64;                    // LNET_MPI_POOL: persistent short-message receives
  int credits = 32;                            // LNET_MPI_CREDITS: short messages a peer may have in flight to us
  ProgressMode progress = ProgressMode::Auto;  // LNET_MPI_PROGRESS: auto | thread | poll
  OnError on_error = OnError::Return;          // LNET_MPI_ON_ERROR: return | abort
  int timeout = 50;                            // LNET_MPI_TIMEOUT: seconds for a handshake, a credit, a transfer
  std::uint32_t chunk = INT_MAX;               // LNET_MPI_CHUNK: largest MPI message of a bulk transfer
  int idle_us = 1000;                          // LNET_MPI_IDLE_US: longest nap of the idle progress thread
  bool pack = true;                            // LNET_MPI_PACK: sends that waited for a credit go out together
  bool mute = false;                           // LNET_MPI_FAULT=mute: ignore handshakes (testing only)
  bool fail_isend = false;                     // LNET_MPI_FAULT=isend: MPI_Isend of LNet messages fails (testing only)
  // Session only: reach the nets of the lnetds behind a parallel proxy (lnet-proxy(8)).
  std::string proxy;                     // LNET_PROXY: a port file, name:<service>, spawn:<targets>, or empty
  std::string proxy_bin = "lnet-proxy";  // LNET_PROXY_BIN: what spawn: starts
  // LNET_PROXY_SECRET: with name:, the port file whose secret the knock says.
  std::string proxy_secret = "/run/lnet/lnet-proxy.port";
  int proxy_timeout = 30;  // LNET_PROXY_TIMEOUT: seconds to reach the proxy and get its table

  static Result<Options> from_env();
};

// What the LND counted (all since its NI started).
struct Stats {
  std::uint64_t handshakes = 0;    // peers whose handshake completed
  std::uint64_t immediate = 0;     // messages sent inline (packed ones included)
  std::uint64_t packed = 0;        // PACKED messages sent (each carries several inline ones)
  std::uint64_t bulk = 0;          // payloads sent as tagged bulk transfers
  std::uint64_t chunks = 0;        // MPI operations posted for bulk transfers, both ways
  std::uint64_t rdma_gets = 0;     // optimised GETs (sink posted, source ready-sent)
  std::uint64_t noops = 0;         // credit returns sent on their own
  std::uint64_t credit_waits = 0;  // sends that waited for a credit
  std::uint64_t bad_messages = 0;  // malformed messages dropped
  std::uint64_t timeouts = 0;      // sends failed for want of a handshake or credit, transfers given up
  std::uint64_t held = 0;          // buffers of timed-out sends kept now until MPI lets them go
  std::uint64_t abandoned = 0;     // cancelled receives MPI did not complete in 4 more timeouts
  std::uint64_t left_kept = 0;     // receives left to MPI at shutdown: their memory never given back
  std::uint64_t mpi_errors = 0;    // MPI calls that returned an error
};

class MpiNi;
class ProxyLink;

// MPI's text for an error code ("MPI_ERR_TRUNCATE: message truncated"), or "MPI error N".
std::string mpi_error_string(int rc);
// Tests `r` (napping a millisecond between tests) until it completes: 0; -ETIMEDOUT once
// `deadline` has passed (the request still runs: the caller cancels or frees it); -EIO
// when MPI_Test fails. For the few requests of a set-up, never on a data path.
int wait_until(MPI_Request* r, std::chrono::steady_clock::time_point deadline, MPI_Status* status = MPI_STATUS_IGNORE);

// Whether a job may connect to another started separately (MPI_Comm_connect/accept,
// mode 1c of the parallel proxy). Open MPI 4 connects two such jobs only when every rank
// of each runs on the node of its own mpirun: the contact of a daemon on another node is
// not published (left null), and the first connect crashes the runtimes of both jobs
// (docs/design/cluster.md). Collective over `comm`: a failure saying how many ranks run
// away from their mpirun's node when this MPI has that limit and the job such ranks;
// ok otherwise (other MPIs, a job on its mpirun's node).
Status check_connectable(MPI_Comm comm);

// Open MPI's major version (from "Open MPI v4.1.4, ..."), 0 for another MPI.
int open_mpi_major();

// What this MPI offers the parallel proxy's modes, probed, in one line for the message
// that says a mode is unavailable: "MPI: <library>; thread level <l>; ports yes|no;
// name server <how>; universe size <n>|unknown". Local to the calling process; opens and
// closes a port (MPI_Open_port) to see whether it can.
std::string describe_mpi();

// One process of `program` per target, spawned by root 0 of `comm` (collective over it;
// MPI_Comm_spawn_multiple): `--bridge BRIDGE` then `args`, on the target's HOST when it
// names one (MPI's "host" key), not bound to cores (a proxy serves every rank of its node
// and must not time-slice one of them). Targets are (HOST or "", BRIDGE). The
// intercommunicator with the spawned job, or the MPI's error.
Result<MPI_Comm> spawn_proxies(const std::string& program,
                               const std::vector<std::pair<std::string, std::string>>& targets,
                               const std::vector<std::string>& args, MPI_Comm comm);

// The driver for the mpi<N> network over one communicator, for any host. It does not
// own the communicator, which must stay valid until its NI is shut down. Rank r of the
// communicator is r@<opts.net>, or, with a NID table, nids[r] (a proxy's <IPv4>@mpi
// among the ranks of an application, say); the NI's NID is its own rank's.
// One NI per driver object.
class MpiLnd final : public Lnd {
 public:
  MpiLnd(MPI_Comm comm, const Options& opts);
  // `nids`: one NID per rank of `comm`, all on the net, none twice (checked at startup).
  MpiLnd(MPI_Comm comm, std::vector<Nid> nids, const Options& opts);
  ~MpiLnd() override;

  std::uint32_t net_type() const override { return opts_.net.type(); }
  // Takes the LND tunable `timeout` (seconds for a handshake or a credit); nothing else.
  Status check_config(const NetConfig& config) const override;
  // Sets the NID, and peer_credits (when left at 0) to the credits the driver grants.
  int startup(NetInterface& ni) override;
  // Lets sends and cancellations finish for up to two seconds, then leaves what is still
  // running to MPI (its messages fail); at once after peers_gone().
  void shutdown(NetInterface& ni) override;
  // The processes at the other end are dead (a proxy dropping a crashed application):
  // nothing running will finish, so shutdown() waits for none of it.
  void peers_gone() { peers_gone_.store(true); }
  int send(NetInterface& ni, LndMessage& msg) override;
  int recv(NetInterface& ni, void* lnd_private, LndMessage* msg, bool delayed, const iovec* iov, unsigned niov,
           std::uint32_t offset, std::uint32_t mlen, std::uint32_t rlen) override;
  int timeout(const NetInterface& ni) const override;
  std::vector<std::pair<std::string, std::uint64_t>> counters() const override;
  std::string counters_name() const override { return "mpi"; }

  // What its NI counted (zeros while it is down).
  Stats stats() const;
  // Whether its NI runs a progress thread (else the host polls it).
  bool progress_thread() const;
  // No transfer or queued send left (true while down).
  bool idle() const;
  // MPI_Ibarrier over the communicator, driving progress meanwhile: 0, or -ETIMEDOUT
  // past `deadline` (or -EIO). Collective.
  // `comm`: another communicator (the job's own, when the driver's spans a proxy too).
  int barrier(std::chrono::steady_clock::time_point deadline, MPI_Comm comm = MPI_COMM_NULL);
  // Work of the driver's owner done where the host polls the driver (application
  // progress only: without a progress thread): `fn(ctx)` after each round, on the
  // polling thread, never two at once. The session's heartbeats to a proxy when MPI
  // allows no thread of their own. Set before startup.
  void on_poll(bool (*fn)(void*), void* ctx) {
    on_poll_ = fn;
    on_poll_ctx_ = ctx;
  }

 private:
  static bool poll_with_hook(void* self);
  Status check_nids(NetId net, int size) const;
  MPI_Comm comm_;
  std::vector<Nid> nids_;  // by rank; empty: rank r is r@mpi<N>
  Options opts_;
  std::atomic<bool> peers_gone_{false};
  bool (*on_poll_)(void*) = nullptr;
  void* on_poll_ctx_ = nullptr;
  PollFn ni_poll_ = nullptr;  // the NI's own poll, under the hook
  void* ni_poll_ctx_ = nullptr;
  mutable Mutex mutex_;  // ni_ against the queries
  MpiNi* ni_ LNET_GUARDED_BY(mutex_) = nullptr;
};

// The collective set-up of LNet over a communicator, without LNet: a duplicate of it
// with MPI_ERRORS_RETURN, one LNet pid for every rank, and an all-or-nothing agreement
// (a rank that failed must not leave the others waiting in a later collective).
class Group {
 public:
  // Collective over `comm`, after MPI_Init[_thread].
  static Result<std::unique_ptr<Group>> create(MPI_Comm comm);
  // Frees the duplicate (collective, as MPI_Comm_free is).
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Rank 0's process id with LNET_PID_USERFLAG (a userspace client's pid).
  Pid pid() const { return pid_; }
  // Collective: ok when every rank's `mine` is; else this rank's failure or, when only
  // another rank failed, -EIO "another rank failed".
  Status agree(const Status& mine);

 private:
  Group() = default;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 0;
  Pid pid_ = 0;
};

class Session {
 public:
  // Collective over `comm`, after MPI_Init[_thread]: a Group, an MpiLnd for its communicator,
  // and LNet brought up with `cfg` plus the NI <rank>@<opts.net>. Fails (on every rank
  // alike) with a message naming the problem.
  // With opts.proxy (LNET_PROXY) the job also connects to that parallel proxy: the
  // MPI LND runs over the job's ranks and the proxy's (the proxies' NIDs are their
  // lnetds' <IPv4>@mpi), on the proxies' network unless opts.net_given names another
  // (which fails), the pid is the one the proxy's lnetds gave the job, and every net
  // those lnetds reach is routed through each proxy rank (lnet-proxy(8)).
  static Result<std::unique_ptr<Session>> start(MPI_Comm comm, Config cfg, Options opts);
  // The same with the LNET_* and LNET_MPI_* environment variables.
  static Result<std::unique_ptr<Session>> start(MPI_Comm comm = MPI_COMM_WORLD);

  // Collective: drives progress until this rank's transfers are done and every rank
  // has arrived, then shuts LNet down and frees the communicator.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Instance& lnet() { return *lnet_; }
  int rank() const { return group_->rank(); }
  int size() const { return group_->size(); }
  Pid pid() const { return pid_; }
  Nid nid(int rank) const;  // <rank>@<the job's net>
  // The proxy ranks' NIDs (empty without LNET_PROXY).
  std::vector<Nid> proxies() const;
  ProcessId id(int rank) const { return ProcessId{nid(rank), pid()}; }
  // Whether a progress thread runs (else the application drives progress).
  bool progress_thread() const { return lnd_->progress_thread(); }
  // The LND's duplicate communicator: for tools and tests that need to reach the LND's
  // peers directly (the bad-input tests); LNet traffic uses tag 0 and the bulk tags.
  MPI_Comm communicator() const { return group_->comm(); }
  Stats stats() const { return lnd_->stats(); }

 private:
  Session() = default;
  std::unique_ptr<Group> group_;
  std::shared_ptr<MpiLnd> lnd_;
  std::unique_ptr<Instance> lnet_;
  std::unique_ptr<ProxyLink> link_;  // with LNET_PROXY
  NetId net_;
  Pid pid_ = 0;
};

}  // namespace lnet::mpi
