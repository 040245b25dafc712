#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main demo (a single host, built-in
# configuration):
#   1. lnet-demo: LNet on 0@lo pings itself and does PUT/GET round trips with checks
#      (extra arguments go to it; see --help);
#   2. mpi_ping under mpirun with 4 ranks: LNet over the MPI LND, every rank pings its
#      neighbour and does PUT+ACK and GET rounds with data checks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh default
build/default/examples/lnet-demo "$@"
echo
# Open MPI refuses root without these, and 2-core machines need oversubscription.
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export OMPI_MCA_hwloc_base_binding_policy=${OMPI_MCA_hwloc_base_binding_policy:-none}
exec mpirun -n 4 build/default/examples/mpi_ping --count 100
