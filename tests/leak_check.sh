#!/usr/bin/env bash
# Checks that the test suite leaves nothing behind: network namespaces, veth links,
# daemons (lnetd), MPI jobs (mpirun, orted, hydra, ompi-server and the test programs
# they run), packet captures, temporary directories with control sockets, MPI
# shared-memory segments, and the virtual cluster's nodes and state (tests/cluster/; its
# kernel nodes are qemu guests).
# CTest runs "snapshot" before every other test and "check"
# after all of them (a fixture); what appeared in between and is still there fails the
# check, is listed, and is then removed so the next run starts clean. Only what the
# suite made is looked at: processes with LNET_TEST_SUITE in their environment (CTest
# gives it to every test, and what a test starts inherits it), namespaces and links of
# the names the suite gives (lt*, lc-*; v<pid>a/b<n>), its scratch directories. A
# site's lnetd, MPI jobs or namespaces on the same machine are neither reported nor
# killed.
#   leak_check.sh snapshot FILE | check FILE
set -uo pipefail
mode="${1:-}"
file="${2:-}"
[ -n "$mode" ] && [ -n "$file" ] || { echo "usage: $0 snapshot|check FILE" >&2; exit 2; }

# Whether process $1 is this script or one of its own (its ancestors include it).
mine() {
  local p=$1 stat
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do
    [ "$p" = "$$" ] && return 0
    stat=$(cat "/proc/$p/stat" 2>/dev/null) || return 1
    stat=${stat##*) }  # after the command name (which may hold spaces)
    p=$(cut -d' ' -f2 <<<"$stat")
  done
  return 1
}

# One line per thing a test could leave behind: "<kind> <name> [detail]".
state() {
  ip netns list 2>/dev/null | awk '$1 ~ /^(lt|lc-)/ {print "netns " $1}'
  ip -o link show type veth 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); if ($2 ~ /^v[0-9]+[ab][0-9]+$/) print "veth " $2}'
  # Processes the suite started (this script's own excepted); comm is cut to 15
  # characters by the kernel.
  local p
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    grep -qaz '^LNET_TEST_SUITE=' "/proc/$p/environ" 2>/dev/null || continue
    mine "$p" && continue
    echo "process $p $(cat "/proc/$p/comm" 2>/dev/null)"
  done
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
