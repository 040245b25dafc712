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
// Progress: with MPI_THREAD_MULTIPLE a progress thread of the LND completes MPI
// requests and delivers events; otherwise (or with LNET_MPI_PROGRESS=poll) the
// application drives it: EventQueue::poll, LNetEQPoll, Instance::progress() and
// Instance::ping run MPI_Testsome (see lnet/progress.hpp). Without MPI_THREAD_MULTIPLE,
// only the thread that started the session may drive progress; sends from other
// threads wait for it.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <lnet/api.hpp>
#include <lnet/config.hpp>
#include <lnet/result.hpp>

namespace lnet::mpi {

enum class ProgressMode { Auto, Thread, Poll };
enum class OnError { Return, Abort };

// Tunables of the MPI LND; from_env() reads LNET_MPI_* over these defaults.
struct Options {
  unsigned net_number = 0;                     // LNET_MPI_NET: the network is mpi<N>
  std::uint32_t short_max = 8192;              // LNET_MPI_SHORT_MAX: largest payload sent inline
  unsigned pool_depth = 64;                    // LNET_MPI_POOL: persistent short-message receives
  int credits = 32;                            // LNET_MPI_CREDITS: short messages a peer may have in flight to us
  ProgressMode progress = ProgressMode::Auto;  // LNET_MPI_PROGRESS: auto | thread | poll
  OnError on_error = OnError::Return;          // LNET_MPI_ON_ERROR: return | abort
  int timeout = 50;                            // LNET_MPI_TIMEOUT: seconds for a handshake or a credit
  std::uint32_t chunk = INT_MAX;               // LNET_MPI_CHUNK: largest MPI message of a bulk transfer
  int idle_us = 1000;                          // LNET_MPI_IDLE_US: longest nap of the idle progress thread
  bool pack = true;                            // LNET_MPI_PACK: sends that waited for a credit go out together
  bool mute = false;                           // LNET_MPI_FAULT=mute: ignore handshakes (testing only)
  bool fail_isend = false;                     // LNET_MPI_FAULT=isend: MPI_Isend of LNet messages fails (testing only)

  static Result<Options> from_env();
};

// The LNET_MPI_* variables (name, default, meaning) and a printable table of them.
std::span<const EnvVar> env_vars();
std::string env_help();

// What the LND counted (all since start).
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
  std::uint64_t timeouts = 0;      // sends failed for want of a handshake or credit
  std::uint64_t mpi_errors = 0;    // MPI calls that returned an error
};

class Session {
 public:
  // Collective over `comm`, after MPI_Init[_thread]: duplicates the communicator, agrees
  // on one pid for every rank, and brings LNet up with `cfg` plus an mpi NI
  // <rank>@mpi<net_number>. Fails (on this rank) with a message naming the problem.
  static Result<std::unique_ptr<Session>> start(MPI_Comm comm, Config cfg, Options opts);
  // The same with the LNET_* and LNET_MPI_* environment variables.
  static Result<std::unique_ptr<Session>> start(MPI_Comm comm = MPI_COMM_WORLD);

  // Collective: drives progress until this rank's transfers are done and every rank
  // has arrived, then shuts LNet down and frees the communicator.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Instance& lnet() { return *lnet_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  Pid pid() const { return pid_; }
  Nid nid(int rank) const;  // <rank>@mpi<N>
  ProcessId id(int rank) const { return ProcessId{nid(rank), pid_}; }
  // Whether a progress thread runs (else the application drives progress).
  bool progress_thread() const;
  // The LND's duplicate communicator: for tools and tests that need to reach the LND's
  // peers directly (the bad-input tests); LNet traffic uses tag 0 and the bulk tags.
  MPI_Comm communicator() const { return comm_; }
  Stats stats() const;

 private:
  Session() = default;
  std::unique_ptr<Instance> lnet_;
  MPI_Comm comm_ = MPI_COMM_NULL;  // the LND's duplicate
  int rank_ = 0;
  int size_ = 0;
  Pid pid_ = 0;
  unsigned net_ = 0;
};

}  // namespace lnet::mpi
