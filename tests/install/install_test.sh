#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, then builds and runs two consumers:
# one with find_package(lnet CONFIG) and one with pkg-config. Usage: install_test.sh BUILD_DIR SRC_DIR
set -euo pipefail
build="$1"
src="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
for f in include/lnet/lnet.h include/lnet/lnet.hpp lib/cmake/lnet/lnetConfig.cmake lib/pkgconfig/lnet.pc; do
  [ -e "$work/prefix/$f" ] || { echo "install_test: $f was not installed" >&2; exit 1; }
done
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
cmake -S "$src/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
export LD_LIBRARY_PATH="$work/prefix/lib"
"$work/build/consumer_cmake"
"$work/build/consumer_pkgconfig"
echo "install_test: OK"
