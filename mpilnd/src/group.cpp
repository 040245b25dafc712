// lnet::mpi::Group: the collective set-up of LNet over a communicator.
#include <unistd.h>

#include <lnet/log.hpp>
#include <lnet/mpi.hpp>

#include "mpi_ni.hpp"

namespace lnet::mpi {

namespace {

Failure mpi_failure(const char* what, int rc) {
  return Failure{-EIO, std::string(what) + " failed: " + mpi_error_string(rc)};
}

}  // namespace

Result<std::unique_ptr<Group>> Group::create(MPI_Comm comm) {
  int inited = 0, finalized = 0;
  if (int rc = MPI_Initialized(&inited); rc != MPI_SUCCESS) return mpi_failure("MPI_Initialized", rc);
  if (int rc = MPI_Finalized(&finalized); rc != MPI_SUCCESS) return mpi_failure("MPI_Finalized", rc);
  if (!inited || finalized) return Failure{-EINVAL, "MPI is not initialised: call MPI_Init before starting LNet"};
  if (comm == MPI_COMM_NULL) return Failure{-EINVAL, "no communicator (MPI_COMM_NULL)"};
  std::unique_ptr<Group> g(new Group);
  // Our own communicator: never traffic on the application's.
  if (int rc = MPI_Comm_dup(comm, &g->comm_); rc != MPI_SUCCESS) return mpi_failure("MPI_Comm_dup", rc);
  struct Step {
    const char* what;
    int rc;
  };
  // One pid for the whole job: rank 0's, as a userspace client's (LNET_PID_USERFLAG).
  unsigned pid = static_cast<unsigned>(getpid()) | kPidUserFlag;
  for (Step s : {Step{"MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(g->comm_, MPI_ERRORS_RETURN)},
                 Step{"MPI_Comm_rank", MPI_Comm_rank(g->comm_, &g->rank_)},
                 Step{"MPI_Comm_size", MPI_Comm_size(g->comm_, &g->size_)},
                 Step{"MPI_Bcast", MPI_Bcast(&pid, 1, MPI_UNSIGNED, 0, g->comm_)}}) {
    if (s.rc != MPI_SUCCESS) {
      Failure f = mpi_failure(s.what, s.rc);
      (void)MPI_Comm_free(&g->comm_);  // already failing: its own error adds nothing
      g->comm_ = MPI_COMM_NULL;
      return f;
    }
  }
  g->pid_ = pid;
  return g;
}

Group::~Group() {
  if (comm_ == MPI_COMM_NULL) return;
  if (int rc = MPI_Comm_free(&comm_); rc != MPI_SUCCESS)
    LNET_LOG(Warn, kLogLnd, "MPI_Comm_free failed: %s", mpi_error_string(rc).c_str());
}

Status Group::agree(const Status& mine) {
  int ok = mine.ok() ? 1 : 0, all = 0;
  if (int rc = MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm_); rc != MPI_SUCCESS)
    return mine.ok() ? Status(mpi_failure("MPI_Allreduce", rc)) : mine;
  if (all) return {};
  return mine.ok() ? Status(Failure{-EIO, "another rank failed"}) : mine;
}

}  // namespace lnet::mpi
