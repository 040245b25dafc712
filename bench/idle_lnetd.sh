#!/usr/bin/env bash
# CPU use of idle lnetd daemons: two lnetds on 127.0.0.2 and 127.0.0.3 (one port, their
# own acceptors), connected by a ping, then left alone. Prints, per daemon, the CPU time
# and the wake-ups (context switches summed over its threads) over the sampling window,
# next to a `sleep` process sampled over the same window as the baseline.
#   bench/idle_lnetd.sh [BUILD_DIR] [SECONDS]      (default build/default, 60 s)
set -euo pipefail
BUILD="${1:-build/default}"
SECS="${2:-60}"
LNETD="$BUILD/lnetd/lnetd"
LNETCTL="$BUILD/tools/lnetctl"
PORT="${IDLE_PORT:-20988}"
[ -x "$LNETD" ] || { echo "idle_lnetd: no $LNETD (build first)" >&2; exit 1; }
DIR="$(mktemp -d /tmp/lnet-idle.XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

for n in 2 3; do
  printf 'net:\n    - net type: tcp\n      local NI(s):\n        - nid: 127.0.0.%s@tcp\n' $n >"$DIR/$n.yaml"
  "$LNETD" -f -c "$DIR/$n.yaml" -s "$DIR/$n.sock" -p "" --port "$PORT" --accept all --log-level warn \
    2>"$DIR/$n.log" &
  PIDS+=($!)
done
for n in 2 3; do
  for _ in $(seq 100); do [ -S "$DIR/$n.sock" ] && break; sleep 0.1; done
done
"$LNETCTL" --socket "$DIR/2.sock" ping 127.0.0.3@tcp >/dev/null
sleep $((SECS + 30)) &
PIDS+=($!)
base=${PIDS[2]}

# ticks PID: user+system CPU clock ticks; switches PID: context switches of all threads.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
switches() { cat /proc/"$1"/task/*/status | awk '/ctxt_switches/ {s += $2} END {print s}'; }
hz=$(getconf CLK_TCK)
declare -A t0 s0
for p in "${PIDS[@]}"; do t0[$p]=$(ticks "$p"); s0[$p]=$(switches "$p"); done
echo "sampling ${SECS} s ..."
sleep "$SECS"
printf '%-22s %12s %10s %14s\n' process "CPU time" "CPU %" "wake-ups/s"
for i in 0 1 2; do
  p=${PIDS[$i]}
  name=$([ $i = 2 ] && echo "sleep (baseline)" || echo "lnetd 127.0.0.$((i + 2))")
  dt=$(($(ticks "$p") - t0[$p]))
  ds=$(($(switches "$p") - s0[$p]))
  awk -v n="$name" -v dt="$dt" -v hz="$hz" -v ds="$ds" -v s="$SECS" \
    'BEGIN {printf "%-22s %9.3f s %9.4f%% %14.2f\n", n, dt / hz, 100 * dt / hz / s, ds / s}'
done
