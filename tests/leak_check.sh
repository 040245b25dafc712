#!/usr/bin/env bash
# Checks that the test suite leaves nothing behind: network namespaces, veth links,
# daemons (lnetd), MPI jobs (mpirun, orted, hydra, ompi-server and the test programs
# they run), packet captures, temporary directories with control sockets, MPI
# shared-memory segments, and the virtual cluster's nodes and state (tests/cluster/; its
# kernel nodes are qemu guests).
# CTest runs "snapshot" before every other test and "check"
# after all of them (a fixture); what appeared in between and is still there fails the
# check, is listed, and is then removed so the next run starts clean.
#   leak_check.sh snapshot FILE | check FILE
set -uo pipefail
mode="${1:-}"
file="${2:-}"
[ -n "$mode" ] && [ -n "$file" ] || { echo "usage: $0 snapshot|check FILE" >&2; exit 2; }

# One line per thing a test could leave behind: "<kind> <name> [detail]".
state() {
  ip netns list 2>/dev/null | awk '{print "netns " $1}'
  ip -o link show type veth 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print "veth " $2}'
  # comm is cut to 15 characters by the kernel.
  ps -eo pid=,comm= | awk '$2 ~ /^(lnetd|lnetctl|lnet-xfer|mpirun|orterun|orted|mpiexec.*|hydra_pmi_proxy|ompi-server|lnet_mpi_test|lnet_mpi_capi_t|lnet_mpi_host_t|mpi_ping|bench_mpi|tshark|dumpcap|lnet-proxy|proxy_demo|lnet_mpi_stream|qemu-system-x86)$/ {print "process " $1 " " $2}'
  # Anything still running with an integration test's scratch directory in its arguments.
  pgrep -f 'lnet-it\.' 2>/dev/null | while read -r p; do
    [ "$p" = "$$" ] || echo "process $p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-60)"
  done
  # The virtual cluster's node holders (they keep a node's namespaces) and its state.
  pgrep -f '^lnet-node-' 2>/dev/null | while read -r p; do echo "process $p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-60)"; done
  for d in /tmp/lnet-it.* /tmp/lnet-proxy* /tmp/lnet-cluster-plan.* /run/lnet-cluster/*; do [ -e "$d" ] && echo "dir $d"; done
  for f in /dev/shm/vader_segment.* /dev/shm/sm_segment.*; do [ -e "$f" ] && echo "shm $f"; done
  return 0
}

case "$mode" in
  snapshot)
    state | sort -u >"$file"
    echo "leak_check: $(wc -l <"$file") things exist before the suite"
    ;;
  check)
    [ -f "$file" ] || { echo "leak_check: no snapshot $file (run the suite through ctest)" >&2; exit 1; }
    # Give what is exiting a moment (a daemon's last test ends just before this one).
    for _ in $(seq 50); do
      left=$(state | sort -u | comm -13 "$file" -)
      [ -z "$left" ] && break
      sleep 0.1
    done
    if [ -z "$left" ]; then
      echo "leak_check: the suite left nothing behind"
      exit 0
    fi
    echo "leak_check: FAIL: the suite left these behind:" >&2
    echo "$left" | sed 's/^/    /' >&2
    echo "$left" | while read -r kind name _; do
      case "$kind" in
        netns) ip netns pids "$name" 2>/dev/null | xargs -r kill -KILL; ip netns del "$name" 2>/dev/null ;;
        veth) ip link del "$name" 2>/dev/null ;;
        process) kill -KILL "$name" 2>/dev/null ;;
        dir)
          # A virtual cluster left up: its own down removes all of it.
          case "$name" in /run/lnet-cluster/*) "$(dirname "$0")/cluster/cluster.sh" down "${name##*/}" >/dev/null 2>&1 ;; esac
          rm -rf "$name"
          ;;
        shm) rm -rf "$name" ;;
      esac
    done
    exit 1
    ;;
  *)
    echo "usage: $0 snapshot|check FILE" >&2
    exit 2
    ;;
esac
