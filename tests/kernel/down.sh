#!/usr/bin/env bash
# The interop suite's fixture cleanup (kernel.down): removes its cluster, kernel nodes
# and all (whatever state the cases left it in).
. "$(dirname "$0")/lib.sh"
T_NAME=kernel.down
"$CLUSTER_SH" down "$LNET_CLUSTER"
