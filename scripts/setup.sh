#!/usr/bin/env bash
# Installs the Debian packages this project needs, only those that are missing.
# Safe to run again and again. Needs root (or sudo) when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config linux-libc-dev   # toolchain
  ccache                                                         # one compile per file for the builds that share flags
  googletest libgtest-dev libgmock-dev                           # unit tests
  libbenchmark-dev                                               # benchmarks
  libyaml-cpp-dev libboost-program-options-dev                   # lnetd, lnetctl
  iproute2 tshark python3-yaml                                   # multi-host and wire tests (YAML compared as Lustre's tests compare it)
  clang libclang-rt-14-dev clang-format                          # libFuzzer, thread-safety analysis, format check
  openmpi-bin libopenmpi-dev                                     # MPI LND (default MPI)
  mpich libmpich-dev                                             # MPI LND built against MPICH too
  gnuplot-nox                                                    # lst-plot (self-test plots)
  lowdown man-db                                                 # man pages from docs/man/*.md, and man to read them
  libibverbs-dev librdmacm-dev                                   # o2ib LND (rdma-core)
  qemu-system-x86                                                # kernel LNet nodes (../shared/kernel-lnet) in the interop suite and the cluster
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer no, without a prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
