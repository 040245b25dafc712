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
  // Rank 0: heartbeats to proxy rank 0 from now on.
  void start_heartbeat();

 private:
  ProxyLink() = default;
  void heartbeat_main();
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
};

}  // namespace lnet::mpi
