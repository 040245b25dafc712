#!/usr/bin/env bash
# LNet self-test against the raw baseline of each path, in the same run (issue 15's
# benchmark): lst brw 1 MiB write and read, and a ping test, on three paths:
#   mpi    two ranks of one MPI job (lst-node --script)      vs raw MPI streaming (bench_mpi)
#   socket two lnetds on loopback (lst via lnetd's console)  vs raw TCP streaming (bench_socket)
#   proxy  one MPI rank -> spawned lnet-proxy -> router lnetd -> tcp -> server lnetd
#                                                            vs the raw hops (bench_proxy unix, tcp; raw MPI)
# Bandwidth is lst stat's: the median over the stat rounds of what the servers received
# (write) or the clients received (read), in MB/s. The ping test's rate (pings/s, one
# unit) is set beside one-at-a-time LNet pings (the GETs of lnetctl ping) from
# bench_socket --discovery. Saves the MPI write run's CSV and its plot (lst-plot).
#   bench/selftest_bench.sh [BUILD_DIR] [ROUNDS] [CONCURRENCY] [PLOT.png]
#     (build/default, 6 stat rounds of 2 s, concurrency 4, no plot)
# Needs root (port 988), Open MPI and gnuplot for the plot.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build/default}" && pwd)"
ROUNDS="${2:-6}"
CONC="${3:-4}"
PLOT="${4:-}"
export LNETD="$BUILD/liblnet/lnetd" LNETCTL="$BUILD/liblnet/lnetctl" LNET_XFER="$BUILD/tests/lnet_xfer"
export LNET_PROXY_BIN="$BUILD/proxy/lnet-proxy" PROXY_DEMO="$BUILD/examples/proxy_demo"
LST="$BUILD/selftest/lst" LST_NODE="$BUILD/selftest/lst-node"
for b in "$LST" "$LST_NODE" "$BUILD/bench/bench_mpi" "$BUILD/bench/bench_socket" "$BUILD/bench/bench_proxy"; do
  [ -x "$b" ] || { echo "selftest_bench: no $b (build first)" >&2; exit 1; }
done
. "$ROOT/tests/integration/proxy_lib.sh"
px_setup selftest_bench
export OMPI_MCA_hwloc_base_binding_policy=none

# median_bw CSV GROUP COLUMN: the median of a CSV column over the group's rounds, MiB/s -> MB/s
median_col() {
  awk -F, -v g="$2" -v c="$3" '$2 == g { print $c }' "$1" | sort -g |
    awk -v s="${4:-1}" '{ v[NR] = $1 } END { if (NR) printf "%.1f", v[int((NR + 1) / 2)] * s; else print "nan" }'
}
MIB=1.048576
csv_of() { grep -E '^(time_s,|[0-9.]+,)' "$1" >"$2" || true; }

# The lst script of one measurement: a test running until stopped, ROUNDS stat rounds.
# A plain stop lets the RPCs in flight finish: --force aborts them, and a server that was
# moving an aborted RPC's bulk then counts it among its RPC errors (seen once in ~10
# runs), which this script would report as a failed measurement.
script() {  # script CLIENTS SERVERS TEST... > file
  local c=$1 s=$2
  shift 2
  cat <<LST
new_session --timeout 300 bench
add_group clients $c
add_group servers $s
add_test --concurrency $CONC --from clients --to servers $*
run
stat --csv --delay 2 --count $ROUNDS clients servers
stop
query --loop 30 --delay 1
show_error clients servers
end_session
LST
}

declare -A R
# ---------------------------------------------------------------- raw baselines
log "raw MPI (bench_mpi, progress thread)"
mpirun --bind-to none -n 2 "$BUILD/bench/bench_mpi" --reps 3 --iters 200 --stream 400 --rate 2000 --idle 1 \
  --progress thread >"$DIR/bench_mpi.log" 2>&1 || fail "bench_mpi: $(tail -n 5 "$DIR/bench_mpi.log")"
R[raw_mpi]=$(awk '/streaming bandwidth/ { f = 1; next } f && $1 == 1048576 { print $2; exit }' "$DIR/bench_mpi.log")
log "raw TCP and LNet pings (bench_socket --discovery)"
"$BUILD/bench/bench_socket" --reps 3 --discovery --port 9988 >"$DIR/bench_socket.log" 2>&1 ||
  fail "bench_socket: $(tail -n 5 "$DIR/bench_socket.log")"
R[raw_tcp]=$(awk '/1 MiB stream/ { print $(NF-2); exit }' "$DIR/bench_socket.log")
R[ping_us]=$(awk '/first contact/ { print $(NF-2); exit }' "$DIR/bench_socket.log")
log "raw Unix socket and TCP hops (bench_proxy)"
"$BUILD/bench/bench_proxy" unix --stream 1024 >"$DIR/unix.log" 2>&1 || fail "bench_proxy unix"
"$BUILD/bench/bench_proxy" tcp --stream 1024 >"$DIR/tcp.log" 2>&1 || fail "bench_proxy tcp"
R[raw_unix]=$(awk '/^RESULT/ { print $4 }' "$DIR/unix.log")
R[raw_tcp_hop]=$(awk '/^RESULT/ { print $4 }' "$DIR/tcp.log")

# ---------------------------------------------------------------- MPI: two ranks
mpi_run() {  # mpi_run NAME TEST...
  local name=$1
  shift
  script 0@mpi 1@mpi "$@" >"$DIR/$name.lst"
  timeout 300 mpirun --bind-to none -n 2 "$LST_NODE" --script "$DIR/$name.lst" >"$DIR/$name.log" 2>&1 ||
    fail "lst-node $name: $(tail -n 5 "$DIR/$name.log")"
  grep -q "Total 0 error nodes in servers" "$DIR/$name.log" || fail "$name: errors"
  csv_of "$DIR/$name.log" "$DIR/$name.csv"
}
log "lst over the MPI LND: brw write 1M, brw read 1M, ping"
mpi_run mpi_write brw write size=1M
mpi_run mpi_read brw read size=1M
mpi_run mpi_ping ping
R[mpi_write]=$(median_col "$DIR/mpi_write.csv" servers 11 $MIB)
R[mpi_read]=$(median_col "$DIR/mpi_read.csv" clients 11 $MIB)
R[mpi_ping]=$(median_col "$DIR/mpi_ping.csv" clients 8)

# ---------------------------------------------------------------- two lnetds on loopback
log "lst between two lnetds on loopback"
for ip in 127.0.6.1 127.0.6.2; do
  printf 'net:\n    - net type: tcp\n      local NI(s):\n        - nid: %s@tcp\n          interfaces:\n              0: lo\nselftest: enable\n' \
    $ip >"$DIR/$ip.yaml"
  "$LNETD" -f -c "$DIR/$ip.yaml" -s "$DIR/$ip.ctl" -p "" --bridge "$DIR/$ip.bridge" >"$DIR/lnetd-$ip.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do [ -S "$DIR/$ip.ctl" ] && break; sleep 0.1; done
done
sock_run() {  # sock_run NAME TEST...
  local name=$1 line
  shift
  script 127.0.6.1@tcp 127.0.6.2@tcp "$@" >"$DIR/$name.lst"
  : >"$DIR/$name.log"
  while read -r line; do
    # shellcheck disable=SC2086
    LST_SESSION=77 timeout 300 "$LST" --socket "$DIR/127.0.6.1.ctl" $line >>"$DIR/$name.log" 2>&1 ||
      fail "lst $line: $(tail -n 5 "$DIR/$name.log")"
  done <"$DIR/$name.lst"
  grep -q "Total 0 error nodes in servers" "$DIR/$name.log" || fail "$name: errors"
  csv_of "$DIR/$name.log" "$DIR/$name.csv"
}
sock_run sock_write brw write size=1M
sock_run sock_read brw read size=1M
sock_run sock_ping ping
R[sock_write]=$(median_col "$DIR/sock_write.csv" servers 11 $MIB)
R[sock_read]=$(median_col "$DIR/sock_read.csv" clients 11 $MIB)
R[sock_ping]=$(median_col "$DIR/sock_ping.csv" clients 8)

# ---------------------------------------------------------------- through the proxy
log "lst from an MPI rank through the proxy to an lnetd"
SERVER=127.0.5.1
ROUTER=127.0.5.2
px_router $ROUTER
px_selftest_server $SERVER $ROUTER
px_run() {  # px_run NAME TEST...
  local name=$1
  shift
  script @ALL@ $SERVER@tcp "$@" >"$DIR/$name.lst"
  LNET_PROXY="spawn:$DIR/$ROUTER.bridge" timeout 300 mpirun --bind-to none -n 1 "$LST_NODE" \
    --script "$DIR/$name.lst" >"$DIR/$name.log" 2>&1 || fail "lst-node $name: $(tail -n 5 "$DIR/$name.log")"
  grep -q "Total 0 error nodes in servers" "$DIR/$name.log" || fail "$name: errors"
  csv_of "$DIR/$name.log" "$DIR/$name.csv"
}
export LNET_PROXY_BIN
px_run px_write brw write size=1M
px_run px_read brw read size=1M
R[px_write]=$(median_col "$DIR/px_write.csv" servers 11 $MIB)
R[px_read]=$(median_col "$DIR/px_read.csv" clients 11 $MIB)

if [ -n "$PLOT" ]; then
  cp "$DIR/mpi_write.csv" "${PLOT%.png}.csv"
  "$ROOT/scripts/lst-plot" --title "lst brw write 1M, concurrency $CONC, two MPI ranks" --out "$PLOT" \
    "${PLOT%.png}.csv" >/dev/null
fi

# ---------------------------------------------------------------- report
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
slow=$(printf '%s\n' "${R[raw_mpi]}" "${R[raw_unix]}" "${R[raw_tcp_hop]}" | sort -g | head -n 1)
echo
echo "# lst brw 1 MiB (concurrency $CONC, medians of $ROUNDS stat rounds of 2 s) against the raw baseline of its path"
printf '%-44s %12s %12s %8s %s\n' "path" "lst MB/s" "raw MB/s" "ratio" "target"
printf '%-44s %12s %12s %8s %s\n' \
  "MPI LND, 2 ranks, write" "${R[mpi_write]}" "${R[raw_mpi]}" "$(ratio "${R[mpi_write]}" "${R[raw_mpi]}")" ">= 0.90" \
  "MPI LND, 2 ranks, read" "${R[mpi_read]}" "${R[raw_mpi]}" "$(ratio "${R[mpi_read]}" "${R[raw_mpi]}")" ">= 0.90" \
  "socket LND, 2 lnetds on loopback, write" "${R[sock_write]}" "${R[raw_tcp]}" "$(ratio "${R[sock_write]}" "${R[raw_tcp]}")" ">= 0.80" \
  "socket LND, 2 lnetds on loopback, read" "${R[sock_read]}" "${R[raw_tcp]}" "$(ratio "${R[sock_read]}" "${R[raw_tcp]}")" ">= 0.80" \
  "rank -> proxy -> lnetd -> tcp -> lnetd, write" "${R[px_write]}" "$slow" "$(ratio "${R[px_write]}" "$slow")" ">= 0.50 (slowest hop)" \
  "rank -> proxy -> lnetd -> tcp -> lnetd, read" "${R[px_read]}" "$slow" "$(ratio "${R[px_read]}" "$slow")" ">= 0.50 (slowest hop)"
echo "raw hops: MPI ${R[raw_mpi]} MB/s, Unix socket ${R[raw_unix]} MB/s, TCP ${R[raw_tcp_hop]} MB/s"
echo "# ping test (concurrency $CONC): pings/s against one-at-a-time LNet pings (lnetctl ping's GET)"
awk -v m="${R[mpi_ping]}" -v s="${R[sock_ping]}" -v us="${R[ping_us]}" 'BEGIN {
  printf "lst ping, MPI LND: %.0f pings/s; socket LND: %.0f pings/s; LNet ping GETs one at a time (socket LND): %.0f/s (%.1f us each)\n",
    m, s, 1e6 / us, us }'
