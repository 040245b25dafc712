#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, then builds and runs the consumers: one
# with find_package(lnet CONFIG) and one with pkg-config; given an mpiexec, also the two
# consumers of liblnet-mpi (find_package(lnet CONFIG COMPONENTS mpilnd), pkg-config
# lnet-mpi), each under mpiexec -n 2.
#   install_test.sh BUILD_DIR SRC_DIR [MPIEXEC]
set -euo pipefail
build="$1"
src="$2"
mpiexec="${3:-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
quiet() { "$@" >"$work/log" 2>&1 || { cat "$work/log" >&2; echo "install_test: failed: $*" >&2; exit 1; }; }
quiet cmake --install "$build" --prefix "$work/prefix"
expect=(include/lnet/lnet.h include/lnet/lnet.hpp lib/cmake/lnet/lnetConfig.cmake lib/pkgconfig/lnet.pc)
[ -n "$mpiexec" ] && expect+=(include/lnet/mpi.h include/lnet/mpi.hpp lib/pkgconfig/lnet-mpi.pc)
for f in "${expect[@]}"; do
  [ -e "$work/prefix/$f" ] || { echo "install_test: $f was not installed" >&2; exit 1; }
done
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
with_mpi=OFF
[ -n "$mpiexec" ] && with_mpi=ON
quiet cmake -S "$src/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" -DWITH_MPI=$with_mpi
quiet cmake --build "$work/build"
export LD_LIBRARY_PATH="$work/prefix/lib"
"$work/build/consumer_cmake"
"$work/build/consumer_pkgconfig"
if [ -n "$mpiexec" ]; then
  # A deadline of its own: a hung MPI job must not outlive the test.
  timeout -k 5 120 "$mpiexec" -n 2 "$work/build/consumer_mpi_cmake"
  timeout -k 5 120 "$mpiexec" -n 2 "$work/build/consumer_mpi_pkgconfig"
fi
echo "install_test: OK"
