// Pings the next rank over MPI through the installed C++ API of liblnet-mpi
// (find_package(lnet CONFIG COMPONENTS mpilnd) -> lnet::mpilnd). Run with mpirun -n 2.
#include <mpi.h>

#include <cstdio>

#include <lnet/lnet.hpp>
#include <lnet/mpi.hpp>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  auto session = lnet::mpi::Session::start(MPI_COMM_WORLD);
  if (!session) {
    std::fprintf(stderr, "C++ MPI consumer: %s\n", session.message().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int rank = (*session)->rank(), n = (*session)->size();
  auto r = (*session)->lnet().ping((*session)->id((rank + 1) % n), std::chrono::seconds(30));
  std::printf("C++ MPI consumer: rank %d pings %s: %s\n", rank, (*session)->nid((rank + 1) % n).to_string().c_str(),
              r ? "ok" : r.message().c_str());
  session->reset();  // collective: serves the other ranks until every one is done
  int ok = r ? 1 : 0, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Finalize();
  return all ? 0 : 1;
}
