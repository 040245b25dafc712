#!/usr/bin/env bash
# The parallel proxy against the raw hops on its path, in the same run (issue 12's
# benchmark). The chain, on loopback addresses 127.0.5.x: an MPI application (1 rank,
# LNET_PROXY) -> lnet-proxy (1 rank, mode 1c) -> bridge -> router lnetd (UP LND + tcp)
# -> tcp -> a server (lnet-xfer serve). Each repetition measures, in turn: raw MPI
# between two separately launched jobs (connect/accept through ompi-server, as the
# application and the proxy are), the same two jobs with the accepting one relaying to a
# TCP echo (the chain's path without LNet), a raw Unix-domain socket, raw TCP on
# loopback, and
# LNet through the chain (bench_proxy, bench/proxy_bench.cpp). Prints the medians, the
# ratios against the targets, the bridge's payload counters (copies must be 0) and the
# CPU of the idle proxy rank and lnetd afterwards. Bandwidth streams STREAM messages of
# 1 MiB on every path (1024: a second or so; 256, the program's default, lasted a tenth
# of a second and single repetitions swung with the moment).
#   bench/proxy_bench.sh [BUILD_DIR] [REPS] [IDLE_SECONDS]    (build/default, 5, 20)
#   STREAM=N bench/proxy_bench.sh ...                          (1024)
#   bench/proxy_bench.sh --cluster [BUILD_DIR] [REPS]          the same chain across the
#       nodes of a virtual cluster (lnet-cluster(8)): the application on c1, the proxy and
#       the router lnetd on r1, the server on s1; raw MPI between the same two jobs on c1
#       and r1 (the TCP BTL), raw TCP between r1 and s1, the Unix socket on r1.
# Needs root (port 988) and Open MPI with ompi-server.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [ "${1:-}" = --cluster ]; then
  shift
  exec "$ROOT/bench/cluster_bench.sh" proxy "$@"
fi
BUILD="$(cd "${1:-$ROOT/build/default}" && pwd)"
REPS="${2:-5}"
IDLE="${3:-20}"
STREAM="${STREAM:-1024}"
export LNETD="$BUILD/lnetd/lnetd" LNETCTL="$BUILD/tools/lnetctl" LNET_XFER="$BUILD/tools/lnet-xfer"
export LNET_PROXY_BIN="$BUILD/proxy/lnet-proxy" PROXY_DEMO="$BUILD/examples/proxy_demo"
BENCH="$BUILD/bench/bench_proxy"
[ -x "$BENCH" ] || { echo "proxy_bench: no $BENCH (build first)" >&2; exit 1; }
. "$ROOT/tests/integration/proxy_lib.sh"
px_setup proxy_bench

SERVER=127.0.5.1
ROUTER=127.0.5.2
px_router $ROUTER
ROUTER_PID=$LNETD_PID
px_server $SERVER $ROUTER
px_ompi_server
px_proxy proxy $ROUTER
RESULTS="$DIR/results"
: >"$RESULTS"

up_counter() {  # up_counter NAME: the router's UP LND counter NAME
  "$LNETCTL" --socket "$DIR/$ROUTER.ctl" stats show | sed -n "s/^ *$1: //p"
}
run() {  # run NAME CMD...
  local name=$1
  shift
  if ! timeout 600 "$@" >"$DIR/$name.log" 2>&1; then fail "$name: $(tail -n 5 "$DIR/$name.log")"; fi
  grep '^RESULT' "$DIR/$name.log" >>"$RESULTS" || fail "$name printed no result: $(tail -n 5 "$DIR/$name.log")"
}

in_place0=$(up_counter payloads_in_place)
copied0=$(up_counter payloads_copied)
inline0=$(up_counter payloads_inline)
for r in $(seq "$REPS"); do
  log "repetition $r of $REPS"
  rm -f "$DIR/mpi.port"
  mpirun --bind-to none -n 1 "$BENCH" mpi-accept --stream "$STREAM" --port-file "$DIR/mpi.port" >"$DIR/accept.log" 2>&1 &
  ACCEPT=$!
  PIDS+=($ACCEPT)
  run mpi mpirun --bind-to none -n 1 "$BENCH" mpi-connect --stream "$STREAM" --port-file "$DIR/mpi.port"
  wait $ACCEPT || fail "the accepting job failed: $(tail -n 5 "$DIR/accept.log")"
  rm -f "$DIR/relay.port"
  mpirun --bind-to none -n 1 "$BENCH" relay-accept --stream "$STREAM" --port-file "$DIR/relay.port" >"$DIR/relay-accept.log" 2>&1 &
  ACCEPT=$!
  PIDS+=($ACCEPT)
  run relay mpirun --bind-to none -n 1 "$BENCH" relay-connect --stream "$STREAM" --port-file "$DIR/relay.port"
  wait $ACCEPT || fail "the relaying job failed: $(tail -n 5 "$DIR/relay-accept.log")"
  run unix "$BENCH" unix --stream "$STREAM"
  run tcp "$BENCH" tcp --stream "$STREAM"
  LNET_PROXY="$DIR/proxy.port" run lnet mpirun --bind-to none -n 1 "$BENCH" lnet --stream "$STREAM" --server $SERVER@tcp
done
in_place=$(($(up_counter payloads_in_place) - in_place0))
copied=$(($(up_counter payloads_copied) - copied0))
inlined=$(($(up_counter payloads_inline) - inline0))

log "idle for $IDLE s"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
p0=$(ticks "${PROXY_PIDS[0]}")
l0=$(ticks "$ROUTER_PID")
sleep "$IDLE"
proxy_cpu=$(awk -v t=$(($(ticks "${PROXY_PIDS[0]}") - p0)) -v hz="$hz" -v s="$IDLE" 'BEGIN { printf "%.1f", 100 * t / hz / s }')
lnetd_cpu=$(awk -v t=$(($(ticks "$ROUTER_PID") - l0)) -v hz="$hz" -v s="$IDLE" 'BEGIN { printf "%.1f", 100 * t / hz / s }')

median() {  # median KIND FIELD
  awk -v k="$1" -v f="$2" '$2 == k { print $f }' "$RESULTS" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
declare -A lat bw
for k in mpi unix tcp relay lnet; do
  lat[$k]=$(median $k 3)
  bw[$k]=$(median $k 4)
done
echo
echo "# lnet-proxy against the raw hops on its path: medians of $REPS repetitions"
echo "# (latency: half the round trip of 8 bytes; LNet: an 8-byte PUT and its ACK)"
printf '%-52s %14s %18s\n' "path" "8 B latency" "1 MiB bandwidth"
printf '%-52s %11s us %13s MB/s\n' "raw MPI, two jobs (connect/accept)" "${lat[mpi]}" "${bw[mpi]}" \
  "raw Unix-domain socket (SOCK_SEQPACKET)" "${lat[unix]}" "${bw[unix]}" \
  "raw TCP, loopback" "${lat[tcp]}" "${bw[tcp]}" \
  "raw relay: MPI, then TCP (the chain without LNet)" "${lat[relay]}" "${bw[relay]}" \
  "LNet: application -> proxy -> lnetd -> tcp server" "${lat[lnet]}" "${bw[lnet]}"
awk -v l="${lat[lnet]}" -v m="${lat[mpi]}" -v u="${lat[unix]}" -v t="${lat[tcp]}" \
  'BEGIN { printf "latency: LNet / (MPI + Unix + TCP) = %.2f (target <= 2)\n", l / (m + u + t) }'
awk -v b="${bw[lnet]}" -v m="${bw[mpi]}" -v t="${bw[tcp]}" \
  'BEGIN { lo = m < t ? m : t; printf "bandwidth: LNet / min(MPI, TCP) = %.2f (target >= 0.5)\n", b / lo }'
awk -v l="${lat[lnet]}" -v r="${lat[relay]}" -v b="${bw[lnet]}" -v rb="${bw[relay]}" \
  'BEGIN { printf "against the raw relay: latency %.2f, bandwidth %.2f\n", l / r, b / rb }'
echo "bridge payloads during the runs: $in_place in place, $copied copied (target: 0 copied), $inlined inline in their PARSE (<= 256 bytes)"
echo "idle for $IDLE s afterwards: proxy rank ${proxy_cpu} % of a core, lnetd ${lnetd_cpu} % (target < 5 %)"
