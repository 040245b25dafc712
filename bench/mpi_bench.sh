#!/usr/bin/env bash
# The MPI LND against raw MPI in the same run (bench_mpi, bench/mpi_bench.cpp): two ranks
# of one job on this host, or, with --cluster, on two nodes of a virtual cluster
# (bench/cluster_bench.sh mpi: Open MPI's TCP BTL between them).
#   bench/mpi_bench.sh [BUILD_DIR] [REPS]              (build/default, 5)
#   bench/mpi_bench.sh --cluster [BUILD_DIR] [REPS]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [ "${1:-}" = --cluster ]; then
  shift
  exec "$ROOT/bench/cluster_bench.sh" mpi "$@"
fi
BUILD="$(cd "${1:-$ROOT/build/default}" && pwd)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
exec mpirun --bind-to none -n 2 "$BUILD/bench/bench_mpi" --reps "${2:-5}"
