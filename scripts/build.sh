#!/usr/bin/env bash
# Configures and builds one CMake preset (default: "default"):
#   scripts/build.sh [preset] [target...]
# The mpich preset builds only what its tests need (the MPI LND, its tests, the example,
# lnet-proxy: it must say that this MPI cannot accept applications; lst-node for the
# daemon-free self-test; lnet-cluster-plan for the MPI LND across the virtual cluster;
# lnet_mpi_fork_probe for the mode 1a probe).
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
shift || true
targets=("$@")
if ((${#targets[@]} == 0)) && [ "$preset" = mpich ]; then targets=(lnet_mpi_test lnet_mpi_host_test lnet_mpi_capi_test lnet_mpi_stall_test mpi_ping lnet_proxy lst-node lnet-cluster-plan lnet_mpi_fork_probe); fi
cmake --preset "$preset" >/dev/null
if ((${#targets[@]})); then
  cmake --build --preset "$preset" --target "${targets[@]}"
else
  cmake --build --preset "$preset"
fi
