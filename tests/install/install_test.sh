#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, then builds and runs the consumers: one
# with find_package(lnet CONFIG) and one with pkg-config; given an mpiexec, also the two
# consumers of liblnet-mpi (find_package(lnet CONFIG COMPONENTS mpilnd), pkg-config
# lnet-mpi), each under mpiexec -n 2. No LD_LIBRARY_PATH anywhere: the installed
# programs (also after the tree is moved) and the consumers find the libraries by their
# run paths.
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
# No LD_LIBRARY_PATH: installed programs and consumers find the libraries from where
# they are (run paths), as they must for a user who installed under /opt.
unset LD_LIBRARY_PATH
"$work/build/consumer_cmake"
"$work/build/consumer_pkgconfig"
# A consumer built by hand from what pkg-config says, as a Makefile would.
quiet cc -o "$work/by_hand" "$src/consumer/consumer.c" $(pkg-config --cflags --libs lnet)
"$work/by_hand"
programs=(sbin/lnetd sbin/lnetctl bin/lst)
[ -n "$mpiexec" ] && programs+=(sbin/lnet-proxy bin/lst-node)
runs() {  # runs PREFIX: every installed program answers --help from there
  for p in "${programs[@]}"; do
    "$1/$p" --help >"$work/log" 2>&1 || { cat "$work/log" >&2; echo "install_test: $1/$p --help failed" >&2; exit 1; }
  done
}
runs "$work/prefix"
# The man pages, made from docs/man at build time, are where man looks under the prefix.
pages=(8:lnetctl 8:lnetd 8:lst 3:lnet 7:lnet-lnd)
[ -n "$mpiexec" ] && pages+=(8:lnet-proxy 8:lnet-proxy-supervise 1:lst-node 7:lnet-mpi)
for sp in "${pages[@]}"; do
  sec=${sp%%:*} name=${sp#*:}
  man -M "$work/prefix/share/man" -w "$sec" "$name" >/dev/null 2>&1 ||
    { echo "install_test: man -w $sec $name finds no page under $work/prefix/share/man" >&2; exit 1; }
  MANWIDTH=80 man -M "$work/prefix/share/man" "$sec" "$name" 2>/dev/null | grep -q "^NAME" ||
    { echo "install_test: man $sec $name shows no NAME section" >&2; exit 1; }
done
mv "$work/prefix" "$work/moved"  # the run paths are relative: a moved tree runs too
runs "$work/moved"
mv "$work/moved" "$work/prefix"
if [ -n "$mpiexec" ]; then
  # A deadline of its own: a hung MPI job must not outlive the test.
  timeout -k 5 120 "$mpiexec" -n 2 "$work/build/consumer_mpi_cmake"
  timeout -k 5 120 "$mpiexec" -n 2 "$work/build/consumer_mpi_pkgconfig"
fi
echo "install_test: OK"
