# Helpers of the interop suite (tests/kernel/, label kernel): one virtual cluster of
# kernel LNet nodes and lnetds (interop.cluster) that up.sh brings up before the cases
# and down.sh removes after them (a CTest fixture), and what every case needs: running
# commands on nodes with deadlines, the kernel's lst, waits, and putting back what a
# case changed, also when it fails. A case: `. lib.sh; kn_case NAME`, then its checks.
set -euo pipefail
KN_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$KN_HERE/../../scripts/lib/procs.sh"
CLUSTER_SH="$KN_HERE/../cluster/cluster.sh"
KN_DESC="$KN_HERE/interop.cluster"
export LNET_CLUSTER=${LNET_KERNEL_CLUSTER:-kint}
T_NAME=kernel
T_DIR=""
T_BG=()     # background commands of the case, stopped at exit
T_UNDO=()   # commands that put back what the case changed, run at exit (last first)

# The nodes' NIDs (interop.cluster).
K1=10.97.1.41@tcp K1B=10.97.2.41@tcp2 K2=10.97.3.42@tcp1 KR=10.97.1.43@tcp KR1=10.97.3.43@tcp1
U1=10.97.1.31@tcp U1B=10.97.2.31@tcp2 U2=10.97.1.32@tcp U21=10.97.3.32@tcp1 U3=10.97.3.33@tcp1 R1=10.97.1.21@tcp

log() { echo "[$T_NAME] $*"; }
fail() {
  echo "[$T_NAME] FAIL: $*" >&2
  exit 1
}

# on NODE COMMAND...: COMMAND on NODE (one word: a script for its shell), 90 s at most
# (a command that takes longer says so: a guest starved of CPU, a hang).
on() {
  local rc=0
  timeout 90 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" exec "$@" || rc=$?
  [ $rc = 124 ] && echo "[$T_NAME] '$*' took more than 90 s" >&2
  return $rc
}
cl() { "$CLUSTER_SH" --cluster "$LNET_CLUSTER" "$@"; }
# lnetd_runs NODE: NODE's lnetd is running (cl pids prints "PID STATE /path/to/lnetd ARGS").
lnetd_runs() { cl pids "$1" | awk '$3 ~ /(^|\/)lnetd$/ {f = 1} END {exit !f}'; }
# klst NODE ARGS...: the kernel's lst on NODE, in the case's session.
klst() {
  local node=$1
  shift
  on "$node" env LST_SESSION=4242 lst "$@"
}

# kn_skip_unless_kit: exits 77 (CTest's skip) where the kernel LNet kit is not there at
# all; a kit without qemu is a failure (scripts/setup.sh installs qemu-system-x86).
kn_skip_unless_kit() {
  if [ "$(id -u)" != 0 ]; then log "SKIP: needs root (network namespaces, port 988)"; exit 77; fi
  local kit=${LNET_KERNEL_KIT:-$(cd "$KN_HERE/../../.." && pwd)/shared/kernel-lnet}
  if [ ! -x "$kit/kernel-node.sh" ]; then log "SKIP: no kernel LNet kit at $kit (LNET_KERNEL_KIT)"; exit 77; fi
  command -v qemu-system-x86_64 >/dev/null || fail "no qemu-system-x86_64: scripts/setup.sh installs qemu-system-x86"
  : "${LNET_BUILD:?LNET_BUILD (the build directory) is not set}"
  export LNET_BUILD
}

kn_cleanup() {
  local rc=$?
  set +e
  stop_all "${T_BG[@]}"
  local i
  for ((i = ${#T_UNDO[@]} - 1; i >= 0; i--)); do eval "${T_UNDO[i]}" >/dev/null 2>&1; done
  if [ $rc != 0 ] && [ $rc != 77 ] && [ -d "/run/lnet-cluster/$LNET_CLUSTER" ]; then
    cl status
    local f
    for f in /run/lnet-cluster/"$LNET_CLUSTER"/nodes/*/log/*.log "$T_DIR"/*.log; do
      [ -s "$f" ] && { echo "----- ${f#/run/lnet-cluster/}"; tail -n 15 "$f" | cut -c1-300; }
    done
    for f in /run/lnet-cluster/"$LNET_CLUSTER"/kn/*/console.log; do
      grep -aE "LNet|Lustre" "$f" | tail -n 8 | sed "s|^|----- ${f#/run/lnet-cluster/}: |"
    done
  fi
  [ -n "$T_DIR" ] && rm -rf "$T_DIR"
  exit $rc
}

# kn_case NAME: a case of the suite on the cluster up.sh brought up.
kn_case() {
  T_NAME=$1
  kn_skip_unless_kit
  [ -f "/run/lnet-cluster/$LNET_CLUSTER/up.done" ] || fail "the suite's cluster $LNET_CLUSTER is not up (kernel.up)"
  T_DIR="$(mktemp -d /tmp/lnet-it.XXXXXX)"
  trap kn_cleanup EXIT
  trap 'exit 130' INT TERM
}

# undo COMMAND: run COMMAND (a string for eval) when the case ends, however it ends.
undo() { T_UNDO+=("$1"); }

# wait_until SECONDS WHAT COMMAND...: until COMMAND succeeds (checked every 0.2 s).
wait_until() {
  local secs=$1 what=$2 i
  shift 2
  for i in $(seq $((secs * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  fail "$what (not within $secs s)"
}

# route_state NODE NET GATEWAY: "up" or "down", as NODE's lnetctl route show -v says.
route_state() {
  on "$1" lnetctl route show -v | awk -v net="$2" -v gw="$3" '
    /net:/ {n = $NF} /gateway:/ {g = $NF} /state:/ && n == net && g == gw {print $NF; exit}'
}
route_is() { [ "$(route_state "$1" "$2" "$3")" = "$4" ]; }

# kbrw CONSOLE FROM TO ARGS...: an lst batch on the kernel CONSOLE from group FROM (NIDs)
# to group TO with the brw/ping test ARGS; waits for its end and fails on any error node.
# The console's output is in $T_DIR/kbrw.out.
kbrw() {
  local node=$1 from=$2 to=$3
  shift 3
  klst "$node" new_session --force --timeout 120 interop >/dev/null || fail "lst new_session on $node"
  klst "$node" add_group from "$from" >"$T_DIR/kbrw.out" || fail "lst add_group from $from: $(cat "$T_DIR/kbrw.out")"
  klst "$node" add_group to "$to" >"$T_DIR/kbrw.out" || fail "lst add_group to $to: $(cat "$T_DIR/kbrw.out")"
  klst "$node" add_batch b >/dev/null
  klst "$node" add_test --batch b --from from --to to "$@" >"$T_DIR/kbrw.out" || fail "lst add_test: $(cat "$T_DIR/kbrw.out")"
  klst "$node" run b >/dev/null
  local i
  for i in $(seq 120); do
    klst "$node" query b | grep -q "stopped" && break
    sleep 1
  done
  klst "$node" query b | grep -q "stopped" || fail "the batch on $node did not end within 120 s"
  klst "$node" show_error --session from to | tee "$T_DIR/kbrw.out" >/dev/null
  klst "$node" end_session >/dev/null || true
  grep -q "Total 0 error nodes in from" "$T_DIR/kbrw.out" && grep -q "Total 0 error nodes in to" "$T_DIR/kbrw.out" ||
    fail "lst on $node, $* from $from to $to: $(cat "$T_DIR/kbrw.out")"
}

# ubrw CONSOLE FROM TO ARGS...: the same with our lst on an lnetd node.
ubrw() {
  local node=$1 from=$2 to=$3
  shift 3
  local lst=(env LST_SESSION=4243 lst)
  on "$node" "${lst[@]}" new_session --force --timeout 120 interop >/dev/null || fail "lst new_session on $node"
  on "$node" "${lst[@]}" add_group from "$from" >"$T_DIR/ubrw.out" || fail "lst add_group from $from: $(cat "$T_DIR/ubrw.out")"
  on "$node" "${lst[@]}" add_group to "$to" >"$T_DIR/ubrw.out" || fail "lst add_group to $to: $(cat "$T_DIR/ubrw.out")"
  on "$node" "${lst[@]}" add_batch b >/dev/null
  on "$node" "${lst[@]}" add_test --batch b --from from --to to "$@" >"$T_DIR/ubrw.out" ||
    fail "lst add_test: $(cat "$T_DIR/ubrw.out")"
  on "$node" "${lst[@]}" run b >/dev/null
  local i
  for i in $(seq 120); do
    on "$node" "${lst[@]}" query b | grep -q "stopped" && break
    sleep 1
  done
  on "$node" "${lst[@]}" show_error --session from to >"$T_DIR/ubrw.out"
  on "$node" "${lst[@]}" end_session >/dev/null || true
  grep -q "Total 0 error nodes in from" "$T_DIR/ubrw.out" && grep -q "Total 0 error nodes in to" "$T_DIR/ubrw.out" ||
    fail "lst on $node, $* from $from to $to: $(cat "$T_DIR/ubrw.out")"
}

# stat_of NODE KEY: a counter of NODE's lnetctl stats show (kernel or lnetd).
stat_of() { on "$1" lnetctl stats show | awk -v k="$2:" '$1 == k {print $2; exit}'; }
