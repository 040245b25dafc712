#!/usr/bin/env bash
# Builds the Debian packages from this tree: lnet-utils, liblnet0, liblnet-up0,
# liblnet-mpi0 and liblnet-dev (cmake/LnetCPack.cmake), into build/package/.
#   scripts/package.sh [--no-setup]
# A build of its own (prefix /usr, no tests, benchmarks or examples: what a site
# installs); scripts/setup.sh first installs what is missing, unless --no-setup.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --no-setup) ;;
  "") scripts/setup.sh ;;
  -h | --help)
    sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "package.sh: unknown argument '$1' (--no-setup, --help)" >&2
    exit 2
    ;;
esac
out=build/package
cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
  -DLNET_BUILD_TESTS=OFF -DLNET_BUILD_BENCH=OFF -DLNET_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$out" -j"$(nproc)"
rm -f "$out"/*.deb
(cd "$out" && cpack -G DEB >cpack.log 2>&1) || {
  cat "$out/cpack.log" >&2
  exit 1
}
ls -1 "$out"/*.deb
