/* Pings the next rank over MPI through the installed C API of liblnet-mpi, found with
 * pkg-config (lnet-mpi). Run with mpirun -n 2. */
#include <lnet/mpi.h>

#include <stdio.h>

int main(int argc, char** argv) {
  struct lnet_process_id ids[4];
  int rank, size, n, ok, all;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (lnet_mpi_init(MPI_COMM_WORLD) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  n = lnet_ping(lnet_mpi_id((rank + 1) % size), 30000, ids, 4);
  printf("C MPI consumer: rank %d pings %s: %d NID(s)\n", rank, libcfs_nid2str(lnet_mpi_id((rank + 1) % size).nid), n);
  lnet_mpi_fini();
  ok = n >= 1;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Finalize();
  return all ? 0 : 1;
}
