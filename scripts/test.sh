#!/usr/bin/env bash
# Installs what is missing, builds and runs the test suite: the format check, the plain
# build, the interop suite against the kernel's LNet (the kernel preset: qemu guests
# beside lnetds), the ASan+UBSan build, the TSan build (clang, which also checks the lock
# annotations: its thread-safety analysis fails the build), and the MPI LND against
# MPICH (each its own preset and build directory); then, when the run has taken less than LNET_CLUSTER_BUDGET_MIN minutes
# (default 45, so that .ci/run stays within its hour), the failure test plan on the
# virtual cluster (the cluster preset: label cluster, about 7 minutes). Before that, the
# Debian packages: built, installed on this machine, used and removed (about 5 minutes).
#   scripts/test.sh              all of them
#   scripts/test.sh default      just one preset (default | kernel | asan | tsan | mpich | cluster | tsa:
#                                the analysis alone, a build without tests),
#                                or package (the packages' step alone)
#   scripts/test.sh fuzz         long libFuzzer runs (clang), not part of the default run
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
presets=("$@")
all=0
not_run=()  # what did not run, said at the end (a green run that skipped something says so)
logs=$(mktemp -d /tmp/lnet-test-logs.XXXXXX)
trap 'rm -rf "$logs"' EXIT
# ctest PRESET: runs it, its output also kept to list the tests that did not run.
run_ctest() {
  ctest --preset "$1" 2>&1 | tee "$logs/$1.log"
  local t
  while read -r t; do not_run+=("$1: $t"); done < <(sed -n '/The following tests did not run:/,/^$/p' "$logs/$1.log" |
    sed -n 's/^[[:space:]]*[0-9]* - //p')
}
if ((${#presets[@]} == 0)); then
  presets=(default kernel asan tsan mpich)
  all=1
  echo "=== format check"
  scripts/format.sh --check
fi
for p in "${presets[@]}"; do
  [ "$p" = package ] && continue  # below
  echo "=== build: $p"
  if [ "$p" = cluster ] || [ "$p" = kernel ]; then scripts/build.sh default; else scripts/build.sh "$p"; fi
  [ "$p" = tsa ] && continue  # the analysis runs in the compiler; its build has no tests
  echo "=== test: $p"
  run_ctest "$p"
done
if [ $all = 1 ] || [[ " ${presets[*]} " == *" package "* ]]; then
  # The Debian packages as a site meets them: built (a build of their own, prefix /usr),
  # installed on this machine, lnetd.service's command lines run, removed and purged.
  echo "=== package: build the .deb files, install, use, remove"
  scripts/package.sh --no-setup
  tests/install/package_test.sh build/package
fi
if [ $all = 1 ]; then
  budget=${LNET_CLUSTER_BUDGET_MIN:-45}
  if ((SECONDS < budget * 60)); then
    echo "=== test: cluster (the failure test plan; $((SECONDS / 60)) min so far, under $budget)"
    run_ctest cluster
    presets+=(cluster)
  else
    echo "=== test: cluster skipped: the run took $((SECONDS / 60)) min, more than LNET_CLUSTER_BUDGET_MIN=$budget"
    not_run+=("cluster: the whole failure test plan (the run took $((SECONDS / 60)) min, more than LNET_CLUSTER_BUDGET_MIN=$budget)")
  fi
fi
echo "=== all tests passed: ${presets[*]} ($((SECONDS / 60)) min)"
if ((${#not_run[@]})); then
  echo "=== NOT RUN (${#not_run[@]}):"
  printf '    %s\n' "${not_run[@]}"
fi
