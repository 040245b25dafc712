// The C API of the MPI LND (lnet/mpi.h) over one process-wide Session.
#include <lnet/mpi.h>

#include <cstdio>

#include <lnet/capi.hpp>
#include <lnet/log.hpp>
#include <lnet/mpi.hpp>
#include <lnet/mutex.hpp>

namespace {
lnet::Mutex g_mutex;
std::unique_ptr<lnet::mpi::Session> g_session LNET_GUARDED_BY(g_mutex);
}  // namespace

extern "C" {

int lnet_mpi_init(MPI_Comm comm) {
  try {
    lnet::MutexLock g(g_mutex);
    if (g_session) return -EALREADY;
    auto s = lnet::mpi::Session::start(comm);
    if (!s) {
      LNET_LOG(Error, lnet::kLogLnd, "lnet_mpi_init: %s", s.message().c_str());
      return s.code();
    }
    if (int rc = lnet::capi::attach(&(*s)->lnet())) {
      LNET_LOG(Error, lnet::kLogLnd, "lnet_mpi_init: LNet is already up in this process (LNetNIInit)");
      return rc;  // the session ends (collectively) as `s` goes
    }
    g_session = std::move(*s);
    return 0;
  } catch (const std::exception& e) {
    LNET_LOG(Error, lnet::kLogLnd, "lnet_mpi_init: %s", e.what());
    return -ENOMEM;
  }
}

int lnet_mpi_fini(void) {
  try {
    lnet::MutexLock g(g_mutex);
    if (!g_session) return -ENETDOWN;
    lnet::capi::detach();
    g_session.reset();
    return 0;
  } catch (const std::exception& e) {
    LNET_LOG(Error, lnet::kLogLnd, "lnet_mpi_fini: %s", e.what());
    return -EIO;
  }
}

struct lnet_process_id lnet_mpi_id(int rank) {
  lnet::MutexLock g(g_mutex);
  // LNET_NID_ANY and LNET_PID_ANY, without the C casts of their macros.
  if (!g_session || rank < 0 || rank >= g_session->size())
    return lnet_process_id{static_cast<lnet_nid_t>(-1), static_cast<lnet_pid_t>(-1)};
  auto id = g_session->id(rank);
  return lnet_process_id{id.nid.value(), id.pid};
}

}  // extern "C"
