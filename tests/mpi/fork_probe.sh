#!/usr/bin/env bash
# Mode 1a (a standing proxy forks a proxy per application) decided with evidence: runs
# lnet_mpi_fork_probe (fork_probe.cpp) under this build's MPI, over each transport two
# ranks of one node may use, and prints what a forked child could do with its parent's
# MPI. The decision (docs/design/proxy.md, lnet-proxy(8)) rests on the verdict "cannot
# use"; should an MPI ever let a forked child use it, this test fails to say the decision
# needs revisiting.
# Usage: fork_probe.sh   (environment: MPIEXEC, FORK_PROBE: the launcher and the probe)
set -uo pipefail
: "${MPIEXEC:?the MPI launcher}" "${FORK_PROBE:?lnet_mpi_fork_probe}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
verdicts=()
run() {  # run LABEL [LAUNCHER OPTIONS...]
  local label=$1
  shift
  echo "== $label"
  timeout -k 5 90 "$MPIEXEC" "$@" -n 2 "$FORK_PROBE" >"$out" 2>&1
  local rc=$?
  grep -aE '^(fork probe|child|parent|verdict):' "$out"
  local v
  v=$(grep -ao '^verdict: .*' "$out")
  if [ -z "$v" ]; then
    # The job did not reach the verdict: the child's use of MPI broke another process.
    if grep -aq '^child:' "$out"; then
      v="verdict: a forked child cannot use its parent's MPI (the job died after the child used it: status $rc)"
      grep -aE 'Signal: |exited on signal' "$out" | head -n 2 | sed 's/^/  /'
      echo "$v"
    else
      echo "FAIL: the probe did not run (status $rc):"
      tail -n 20 "$out"
      exit 1
    fi
  fi
  verdicts+=("$label: $v")
}
if "$MPIEXEC" --version 2>&1 | grep -q 'Open MPI'; then
  run "Open MPI, shared memory between the ranks" --bind-to none
  run "Open MPI, TCP between the ranks" --bind-to none --mca btl tcp,self
else
  run "MPICH, its default transports between the ranks"
fi
echo "== summary"
printf '%s\n' "${verdicts[@]}"
for v in "${verdicts[@]}"; do
  case "$v" in
    *"cannot use"*) ;;
    *) echo "FAIL: $v: the decision not to build mode 1a (docs/design/proxy.md) needs revisiting"; exit 1 ;;
  esac
done
echo "mode 1a stays unbuilt: a forked child cannot use its parent's MPI"
