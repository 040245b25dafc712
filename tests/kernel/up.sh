#!/usr/bin/env bash
# The interop suite's fixture (kernel.up): its cluster (interop.cluster: three kernel
# nodes, four lnetds, an MPI compute node), left up for the cases; down.sh removes it.
# What an earlier run left under the same name is removed first.
. "$(dirname "$0")/lib.sh"
T_NAME=kernel.up
kn_skip_unless_kit
"$CLUSTER_SH" down "$LNET_CLUSTER" >/dev/null 2>&1 || true
t0=$SECONDS
out=$(mktemp /tmp/lnet-it.XXXXXX)
trap 'rm -f "$out"' EXIT
if ! "$CLUSTER_SH" up "$KN_DESC" --name "$LNET_CLUSTER" >"$out" 2>&1; then
  cat "$out" >&2
  fail "the suite's cluster did not come up"
fi
grep -E "kernel node .* is up|is up:" "$out"
# The kernel routes through lnetd routers (and ours through the kernel router) are up
# before any case uses them.
wait_until 60 "k1's route to tcp1 through u2 up" route_is k1 tcp1 "$U2" up
wait_until 60 "u1's route to tcp1 through kr up" route_is u1 tcp1 "$KR" up
log "up in $((SECONDS - t0)) s"
