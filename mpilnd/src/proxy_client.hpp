// The application's end of a parallel proxy (LNET_PROXY): finding the proxy (port file
// or published name), knocking on its doorbell, connecting, merging, receiving its
// TABLE; then heartbeats from rank 0 while the session lasts, and the goodbye. The
// protocol: lnet/mpi_proxy.hpp and docs/design/proxy.md.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <string>
#include <thread>

#include <lnet/mpi.hpp>
#include <lnet/mpi_proxy.hpp>
#include <lnet/mutex.hpp>

namespace lnet::mpi {

class ProxyLink {
 public:
  // Collective over the group's communicator: every rank gets the same answer, within
  // opts.proxy_timeout seconds unless MPI itself blocks (it does not once the proxy has
  // answered the knock).
  static Result<std::unique_ptr<ProxyLink>> open(Group& group, const Options& opts);
  // Says goodbye (rank 0) and disconnects (collective with the proxy's ranks); when the
  // proxy did not take the goodbye (it is gone), the connection is abandoned instead.
  ~ProxyLink();
  ProxyLink(const ProxyLink&) = delete;
  ProxyLink& operator=(const ProxyLink&) = delete;

  // The communicator the MPI LND runs on: the application's ranks first, then the
  // proxy's.
  MPI_Comm merged() const { return merged_; }
  const proxy::Table& table() const { return table_; }
  // Rank r's NID on the merged communicator: r@mpi<net> for the application's ranks,
  // then the proxies'.
  std::vector<Nid> nids(NetId net, int app_size) const;
  // Rank 0: heartbeats to proxy rank 0 from now on: from a thread of their own with
  // MPI_THREAD_MULTIPLE, else from poll() (the session hands it to its driver's
  // MpiLnd::on_poll, so the application's waits in LNet send them).
  void start_heartbeat();
  // The driver's poll hook (`self`: this link): a heartbeat due or in flight is seen to,
  // on the thread that opened the link only (the one MPI lets call it), without
  // blocking. Returns false (no work for the caller to report).
  static bool poll(void* self);

 private:
  using Clock = std::chrono::steady_clock;
  ProxyLink() = default;
  void heartbeat_main();
  void heartbeat_step(Clock::time_point now);
  void missed_heartbeat(const std::string& why);
  Status send_control(proxy::Control c, bool synchronous, std::chrono::milliseconds wait);

  int rank_ = 0;
  MPI_Comm group_ = MPI_COMM_NULL;  // the job's own (the Group's; outlives this)
  MPI_Comm inter_ = MPI_COMM_NULL;
  MPI_Comm merged_ = MPI_COMM_NULL;
  proxy::Table table_;
  std::thread heartbeat_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ LNET_GUARDED_BY(mu_) = false;
  // Rank 0: heartbeats that MPI did not send for seconds: the proxy is gone.
  std::atomic<bool> lost_{false};
  // Heartbeats driven by poll() (no MPI_THREAD_MULTIPLE): its thread's state only.
  std::atomic<bool> polled_{false};
  std::thread::id owner_;
  MPI_Request beat_ = MPI_REQUEST_NULL;
  Clock::time_point beat_sent_{}, next_beat_{};
  int missed_ = 0;
};

}  // namespace lnet::mpi
