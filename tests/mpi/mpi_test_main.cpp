// main() of the GoogleTest suites under mpirun: MPI initialised at the thread level the
// run is named after (MPI_THREAD_MULTIPLE, or MPI_THREAD_FUNNELED when
// LNET_TEST_THREAD_LEVEL=funneled), rank 0 printing the results and the other ranks
// only their failures, and the job failing when any rank failed.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "mpi_test.hpp"

namespace {

class FailurePrinter : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", lnet::test::world_rank(), r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }
};

}  // namespace

int main(int argc, char** argv) {
  // An application that did not ask for MPI_THREAD_MULTIPLE: the driver then never
  // calls MPI from other threads.
  const char* level = std::getenv("LNET_TEST_THREAD_LEVEL");
  bool funneled = level && std::string(level) == "funneled";
  int wanted = funneled ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, wanted, &provided);
  if (provided != wanted) {
    // Another level would run other code paths than the ones this run is named after.
    std::fprintf(stderr, "MPI provided thread level %d, not the %d this run tests\n", provided, wanted);
    MPI_Finalize();
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  if (lnet::test::world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter);
  }
  int rc = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (lnet::test::world_rank() == 0 && worst != rc) std::fprintf(stderr, "another rank failed\n");
  MPI_Finalize();
  return worst;
}
