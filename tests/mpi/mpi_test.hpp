// Shared by the GoogleTest suites that run under mpirun (mpi_test_main.cpp is their main).
#pragma once

#include <mpi.h>

namespace lnet::test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

}  // namespace lnet::test
