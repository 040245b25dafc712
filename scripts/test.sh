#!/usr/bin/env bash
# Installs what is missing, builds and runs the test suite: the format check, clang's
# thread-safety analysis (a build: the tsa preset), the plain build, the ASan+UBSan
# build, the TSan build, and the MPI LND against MPICH (each its own preset and build
# directory).
#   scripts/test.sh              all of them
#   scripts/test.sh default      just one preset (tsa | default | asan | tsan | mpich)
#   scripts/test.sh fuzz         long libFuzzer runs (clang), not part of the default run
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
presets=("$@")
if ((${#presets[@]} == 0)); then
  presets=(tsa default asan tsan mpich)
  echo "=== format check"
  scripts/format.sh --check
fi
for p in "${presets[@]}"; do
  echo "=== build: $p"
  scripts/build.sh "$p"
  [ "$p" = tsa ] && continue  # the analysis runs in the compiler; its build has no tests
  echo "=== test: $p"
  ctest --preset "$p"
done
echo "=== all tests passed: ${presets[*]}"
