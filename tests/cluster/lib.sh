# Shared helpers of the virtual cluster's tests: a cluster of their own (a name unique to
# the run), removed on any exit with everything it ran; waits with deadlines; the
# streaming application (lnet_mpi_stream) and what its output says. Source it, then call
# cl_setup NAME [DESCRIPTION]. Needs root; binaries from $LNET_BUILD (set by CTest).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/procs.sh"
CLUSTER_SH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cluster.sh"
TOPOLOGIES="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/topologies"
T_NAME=cluster
T_DIR=""
T_BG=()  # background commands of the test (mpirun jobs), stopped at exit

log() { echo "[$T_NAME] $*"; }
fail() {
  echo "[$T_NAME] FAIL: $*" >&2
  exit 1
}
now() { date +%s.%N | cut -c1-14; }
# secs FROM TO: TO - FROM, to a tenth of a second.
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", b - a}'; }

cl() { "$CLUSTER_SH" --cluster "$LNET_CLUSTER" "$@"; }

cl_cleanup() {
  local rc=$?
  set +e
  stop_all "${T_BG[@]}"
  if [ $rc != 0 ] && [ -n "$LNET_CLUSTER" ] && [ -d "/run/lnet-cluster/$LNET_CLUSTER" ]; then
    cl status
    local f
    for f in /run/lnet-cluster/"$LNET_CLUSTER"/nodes/*/log/*.log /run/lnet-cluster/"$LNET_CLUSTER"/log/*.log "$T_DIR"/*.log; do
      [ -s "$f" ] && { echo "----- ${f#/run/lnet-cluster/}"; tail -n 25 "$f" | cut -c1-300; }
    done
  fi
  [ -n "${LNET_IT_KEEP:-}" ] && [ -d "/run/lnet-cluster/$LNET_CLUSTER" ] && rm -rf "$LNET_IT_KEEP" &&
    cp -r "/run/lnet-cluster/$LNET_CLUSTER" "$LNET_IT_KEEP" && cp -r "$T_DIR" "$LNET_IT_KEEP/test"
  "$CLUSTER_SH" down "$LNET_CLUSTER" >/dev/null
  [ -n "$T_DIR" ] && rm -rf "$T_DIR"
  exit $rc
}

# cl_setup NAME [DESCRIPTION [up options]]: skips without root or namespaces; brings the
# cluster up (named NAME plus this shell's pid) unless DESCRIPTION is "-".
cl_setup() {
  T_NAME=$1
  if [ "$(id -u)" != 0 ]; then log "SKIP: needs root (network namespaces, port 988)"; exit 77; fi
  if ! ip netns add "ltprobe$$" 2>/dev/null; then log "SKIP: cannot create network namespaces here"; exit 77; fi
  ip netns del "ltprobe$$"
  : "${LNET_BUILD:?LNET_BUILD (the build directory) is not set}"
  export LNET_BUILD
  export LNET_CLUSTER="t$$"
  T_DIR="$(mktemp -d /tmp/lnet-it.XXXXXX)"
  trap cl_cleanup EXIT
  trap 'exit 130' INT TERM
  local desc=${2:-}
  [ -n "$desc" ] && [ "$desc" != - ] || return 0
  shift 2
  "$CLUSTER_SH" up "$desc" --name "$LNET_CLUSTER" "$@" >"$T_DIR/up.log" 2>&1 || fail "cluster up: $(tail -n 20 "$T_DIR/up.log")"
}

# wait_until SECONDS WHAT COMMAND...: until COMMAND succeeds (checked every 0.1 s).
wait_until() {
  local secs=$1 what=$2 i
  shift 2
  for i in $(seq $((secs * 10))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "$what (not within $secs s)"
}

# ---- the streaming application ---------------------------------------------------------

# The LNet timers of the cluster's applications: a gateway pinged every second with 2 s
# to answer, a message's deadline 10 s, a transfer given up after 5 s in MPI.
STREAM_ENV=(-x LNET_TRANSACTION_TIMEOUT=10 -x LNET_ROUTER_PING_TIMEOUT=2 -x LNET_ALIVE_ROUTER_CHECK_INTERVAL=1
  -x LNET_MPI_TIMEOUT=5)
# LNET_STREAM_LOG=debug (say) sets the applications' LNET_LOG_LEVEL, for a closer look.
[ -n "${LNET_STREAM_LOG:-}" ] && STREAM_ENV+=(-x "LNET_LOG_LEVEL=$LNET_STREAM_LOG")

# stream_start NAME SERVER MPIRUN-ARGS...: lnet_mpi_stream as job NAME (its log
# $T_DIR/NAME.log, its stop file $T_DIR/NAME.stop) in the background; waits until every
# rank has done rounds.
stream_start() {
  local name=$1 server=$2
  shift 2
  rm -f "$T_DIR/$name.stop"
  (
    set +e
    timeout 600 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" mpirun "${STREAM_ENV[@]}" "$@" lnet_mpi_stream \
      --server "$server" --size "${STREAM_SIZE:-262144}" --offset "${STREAM_OFFSET:-0}" --stop-file "$T_DIR/$name.stop"
    echo "exit $?"
  ) >"$T_DIR/$name.log" 2>&1 &
  T_BG+=($!)
  eval "${name}_PID=$!"
  wait_until 90 "job $name streams: $(tail -n 5 "$T_DIR/$name.log")" stream_going "$name"
}
# stream_going NAME: every rank of the job has printed a line of rounds.
stream_going() {
  local ranks
  ranks=$(grep -ao '^start: [0-9]*' "$T_DIR/$1.log" | awk '{print $2}')
  [ -n "$ranks" ] && [ "$(grep -aoE '^r[0-9]+ t=' "$T_DIR/$1.log" | sort -u | wc -l)" = "$ranks" ]
}
# stream_stop NAME [SECONDS]: asks the job to stop and waits for it to end (its exit
# status in STREAM_EXIT); fails the test if it has not ended in time (a hang).
stream_stop() {
  local name=$1 secs=${2:-60}
  touch "$T_DIR/$name.stop"
  wait_until "$secs" "job $name ended after its stop file: $(tail -n 5 "$T_DIR/$name.log")" \
    grep -aq '^exit [0-9]*$' "$T_DIR/$name.log"
  STREAM_EXIT=$(grep -ao '^exit [0-9]*$' "$T_DIR/$name.log" | tail -n 1 | awk '{print $2}')
}
# stream_ended NAME: the job has ended (its status in STREAM_EXIT).
stream_ended() {
  grep -aq '^exit [0-9]*$' "$T_DIR/$1.log" || return 1
  STREAM_EXIT=$(grep -ao '^exit [0-9]*$' "$T_DIR/$1.log" | tail -n 1 | awk '{print $2}')
}
# ops NAME: the rounds the job's ranks reported so far (the sum of each rank's last line).
ops() {
  { grep -aE '^r[0-9]+ t=' "$T_DIR/$1.log" || true; } |
    awk '{for (i = 2; i <= NF; i++) if ($i ~ /^ops=/) last[$1] = substr($i, 5)} END {s = 0; for (k in last) s += last[k]; print s + 0}'
}
# good NAME: the rounds that succeeded so far (each rank's last line: ops - failed).
good() {
  { grep -aE '^r[0-9]+ t=' "$T_DIR/$1.log" || true; } | awk '{
      for (i = 2; i <= NF; i++) {
        if ($i ~ /^ops=/) o[$1] = substr($i, 5)
        if ($i ~ /^failed=/) f[$1] = substr($i, 8)
      }
    } END {s = 0; for (k in o) s += o[k] - f[k]; print s + 0}'
}
# printed_since NAME EPOCH: every rank of the job has printed a line of rounds stamped
# after EPOCH (its counts include what it did before).
printed_since() {
  local ranks
  ranks=$(grep -ao '^start: [0-9]*' "$T_DIR/$1.log" | awk '{print $2}')
  [ "$(awk -v t="$2" '/^r[0-9]+ t=/ && substr($2, 3) > t {seen[$1] = 1} END {print length(seen)}' "$T_DIR/$1.log")" = "$ranks" ]
}
# (The helpers below read the logs with awk alone: a reader that stops early must not be
# the end of a pipe, whose writer would then die of SIGPIPE under pipefail.)
# failures NAME [SINCE]: failed rounds since epoch SINCE (from each rank's counts).
failures() {
  awk -v since="${2:-0}" '/^r[0-9]+ t=/ {
      t = substr($2, 3); f = 0
      for (i = 3; i <= NF; i++) if ($i ~ /^failed=/) f = substr($i, 8)
      if (t < since) before[$1] = f
      last[$1] = f
    } END {s = 0; for (k in last) s += last[k] - before[k]; print s + 0}' "$T_DIR/$1.log"
}
# first_failure NAME [SINCE]: the epoch of the first failed round at or after SINCE.
first_failure() {
  awk -v since="${2:-0}" '/^r[0-9]+ op [0-9]+: .* failed: .* at [0-9.]+$/ && $NF >= since {print $NF; exit}' \
    "$T_DIR/$1.log"
}
# via NAME NID: rounds' requests the job's ranks sent to gateway NID in their last lines.
via() {
  { grep -aE '^r[0-9]+ t=' "$T_DIR/$1.log" || true; } | awk -v nid="$2" '
    {for (i = 2; i <= NF; i++) if (index($i, nid "=+") == 1) last[$1] = substr($i, length(nid) + 3)}
    END {s = 0; for (k in last) s += last[k]; print s + 0}'
}
# last_failure NAME: the epoch of the last failed round (empty without one).
last_failure() {
  awk '/^r[0-9]+ op [0-9]+: .* failed: .* at [0-9.]+$/ {t = $NF} END {if (t) print t}' "$T_DIR/$1.log"
}
# route_event NAME NET GW STATE [SINCE]: the epoch at which rank 0 saw the route go STATE.
route_event() {
  awk -v p="r0 route $2 via $3: $4 at " -v since="${5:-0}" 'index($0, p) == 1 && $NF >= since {print $NF; exit}' \
    "$T_DIR/$1.log"
}
# no_hang NAME: no rank of the job reported a round without an event past LNet's deadline.
no_hang() { ! grep -aq ' HANG: ' "$T_DIR/$1.log" || fail "job $1: $(grep -a ' HANG: ' "$T_DIR/$1.log" | head -n 1)"; }
# summary NAME: the ranks' summaries.
summary() { grep -a '^summary ' "$T_DIR/$1.log" || true; }
