#!/usr/bin/env bash
# A cluster on one machine (lnet-cluster(8)): nodes as network namespaces, fabrics as
# Linux bridges, MPI jobs across them, nodes powered off, rebooted and partitioned.
#   scripts/cluster.sh up tests/cluster/topologies/demo.cluster
#   scripts/cluster.sh status | exec NODE CMD... | mpirun ARGS... | poweroff NODE | down
# Uses the build in build/default (LNET_BUILD=DIR or `up --build DIR` for another);
# scripts/build.sh makes it. Needs root.
exec "$(dirname "$0")/../tests/cluster/cluster.sh" "$@"
