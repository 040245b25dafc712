#!/usr/bin/env bash
# LNet self-test against the raw baseline of each path, in the same run (issue 15's
# benchmark): lst brw 1 MiB write and read, and a ping test, on four paths:
#   mpi    two ranks of one MPI job (lst-node --script)      vs raw MPI streaming (bench_mpi)
#   socket two lnetds on loopback (lst via lnetd's console)  vs raw TCP streaming (bench_socket)
#   proxy  one MPI rank -> spawned lnet-proxy -> its lnetd (named by its mpi NID)
#          vs the one hop the payload crosses: MPI between two jobs (bench_proxy); the
#          bridge to lnetd moves payloads through shared memory
#   routed one MPI rank -> spawned lnet-proxy -> router lnetd -> tcp -> server lnetd
#          vs the slowest of its raw hops (bench_proxy: MPI between two jobs, Unix, TCP)
# REPS repetitions; each measures every path's raw baseline just before its lst runs, so
# a ratio compares figures taken within a minute of each other (the host's speed drifts
# by tens of per cent over an hour). The report gives each repetition's ratios and their
# medians.
# Bandwidth is lst stat's: the median over the stat rounds of what the servers received
# (write) or the clients received (read), in MB/s. The ping test's rate (pings/s, one
# unit) is set beside one-at-a-time LNet pings (the GETs of lnetctl ping) from
# bench_socket --discovery. Saves the MPI write run's CSV and its plot (lst-plot).
#   bench/selftest_bench.sh [BUILD_DIR] [ROUNDS] [CONCURRENCY] [PLOT.png]
#     (build/default, 6 stat rounds of 2 s, concurrency 4, no plot)
#   REPS=N bench/selftest_bench.sh ...   (3 repetitions)
# Needs root (port 988), Open MPI and gnuplot for the plot.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build/default}" && pwd)"
ROUNDS="${2:-6}"
CONC="${3:-4}"
PLOT="${4:-}"
REPS="${REPS:-3}"
export LNETD="$BUILD/lnetd/lnetd" LNETCTL="$BUILD/tools/lnetctl" LNET_XFER="$BUILD/tools/lnet-xfer"
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

clean() {  # clean NAME: no errors on either side of the measurement
  grep -q "Total 0 error nodes in clients" "$DIR/$1.log" && grep -q "Total 0 error nodes in servers" "$DIR/$1.log" ||
    fail "$1: errors: $(grep -A1 'error nodes' "$DIR/$1.log" | head -n 6)"
}
declare -A R # R[key]: the figures of the repetitions, space-separated
add() { R[$1]="${R[$1]:-} $2"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
median() { printf '%s\n' $1 | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "nan" }'; }
last() { local a=(${R[$1]}); echo "${a[-1]}"; }
brw_pair() {  # brw_pair PATH RUN RAW: lst brw write and read 1M with RUN, ratios to RAW's latest
  local p=$1 run=$2 raw=$3
  $run "${p}_write" brw write size=1M
  add "${p}_write" "$(median_col "$DIR/${p}_write.csv" servers 11 $MIB)"
  $run "${p}_read" brw read size=1M
  add "${p}_read" "$(median_col "$DIR/${p}_read.csv" clients 11 $MIB)"
  add "r_${p}_write" "$(ratio "$(last "${p}_write")" "$(last "$raw")")"
  add "r_${p}_read" "$(ratio "$(last "${p}_read")" "$(last "$raw")")"
}

# ---------------------------------------------------------------- MPI: two ranks
mpi_run() {  # mpi_run NAME TEST...
  local name=$1
  shift
  script 0@mpi 1@mpi "$@" >"$DIR/$name.lst"
  timeout 300 mpirun --bind-to none -n 2 "$LST_NODE" --script "$DIR/$name.lst" >"$DIR/$name.log" 2>&1 ||
    fail "lst-node $name: $(tail -n 5 "$DIR/$name.log")"
  clean "$name"
  csv_of "$DIR/$name.log" "$DIR/$name.csv"
}
mpi_rep() {
  log "raw MPI (bench_mpi, progress thread)"
  mpirun --bind-to none -n 2 "$BUILD/bench/bench_mpi" --reps 3 --iters 200 --stream 400 --rate 2000 --idle 1 \
    --progress thread >"$DIR/bench_mpi.log" 2>&1 || fail "bench_mpi: $(tail -n 5 "$DIR/bench_mpi.log")"
  add raw_mpi "$(awk '/streaming bandwidth/ { f = 1; next } f && $1 == 1048576 { print $2; exit }' "$DIR/bench_mpi.log")"
  log "lst over the MPI LND: brw write 1M, brw read 1M"
  brw_pair mpi mpi_run raw_mpi
  [ -s "$DIR/plot.csv" ] || cp "$DIR/mpi_write.csv" "$DIR/plot.csv"
}

# ---------------------------------------------------------------- two lnetds on loopback
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
  clean "$name"
  csv_of "$DIR/$name.log" "$DIR/$name.csv"
}
sock_rep() {
  log "raw TCP (bench_socket)"
  "$BUILD/bench/bench_socket" --reps 3 --port 9988 >"$DIR/bench_socket.log" 2>&1 ||
    fail "bench_socket: $(tail -n 5 "$DIR/bench_socket.log")"
  add raw_tcp "$(awk '/1 MiB stream/ { print $(NF-2); exit }' "$DIR/bench_socket.log")"
  log "lst between two lnetds on loopback: brw write 1M, brw read 1M"
  brw_pair sock sock_run raw_tcp
}

# ---------------------------------------------------------------- through the proxy
SERVER=127.0.5.1
ROUTER=127.0.5.2
px_router $ROUTER "selftest: enable"
px_selftest_server $SERVER $ROUTER
px_ompi_server
export LNET_PROXY_BIN
px_run() {  # px_run NAME TEST...: to the server lnetd, routed
  px_job "$1" $SERVER@tcp "${@:2}"
}
px_own_run() {  # px_own_run NAME TEST...: to the proxy's own lnetd
  px_job "$1" $ROUTER@mpi "${@:2}"
}
px_job() {  # px_job NAME SERVER TEST...
  local name=$1 server=$2
  shift 2
  script @ALL@ "$server" "$@" >"$DIR/$name.lst"
  LNET_PROXY="spawn:$DIR/$ROUTER.bridge" timeout 300 mpirun --bind-to none -n 1 "$LST_NODE" \
    --script "$DIR/$name.lst" >"$DIR/$name.log" 2>&1 || fail "lst-node $name: $(tail -n 5 "$DIR/$name.log")"
  clean "$name"
  csv_of "$DIR/$name.log" "$DIR/$name.csv"
}
hop() {  # hop NAME ARGS...: one raw hop of bench_proxy, its bandwidth
  "$BUILD/bench/bench_proxy" "$@" --stream 1024 >"$DIR/$1.log" 2>&1 || fail "bench_proxy $1: $(tail -n 5 "$DIR/$1.log")"
  awk '/^RESULT/ { print $4 }' "$DIR/$1.log"
}
px_rep() {
  log "raw hops of the proxy path: MPI between two jobs, Unix socket, TCP (bench_proxy)"
  rm -f "$DIR/mpi.port"
  mpirun --bind-to none -n 1 "$BUILD/bench/bench_proxy" mpi-accept --stream 1024 --port-file "$DIR/mpi.port" \
    >"$DIR/accept.log" 2>&1 &
  local accept=$!
  PIDS+=("$accept")
  timeout 300 mpirun --bind-to none -n 1 "$BUILD/bench/bench_proxy" mpi-connect --stream 1024 \
    --port-file "$DIR/mpi.port" >"$DIR/mpi-connect.log" 2>&1 || fail "bench_proxy mpi: $(tail -n 5 "$DIR/mpi-connect.log")"
  wait $accept || fail "the accepting job failed: $(tail -n 5 "$DIR/accept.log")"
  add raw_mpi_jobs "$(awk '/^RESULT/ { print $4 }' "$DIR/mpi-connect.log")"
  add raw_unix "$(hop unix)"
  add raw_tcp_hop "$(hop tcp)"
  add slowest "$(printf '%s\n' "$(last raw_mpi_jobs)" "$(last raw_unix)" "$(last raw_tcp_hop)" | sort -g | head -n 1)"
  log "lst from an MPI rank through the proxy to its lnetd: brw write 1M, brw read 1M"
  brw_pair pxo px_own_run raw_mpi_jobs
  log "lst from an MPI rank through the proxy and a router to an lnetd: brw write 1M, brw read 1M"
  brw_pair px px_run slowest
}

for rep in $(seq "$REPS"); do
  log "repetition $rep of $REPS"
  mpi_rep
  sock_rep
  px_rep
done

# ---------------------------------------------------------------- ping tests, once
log "ping tests and one-at-a-time LNet pings (bench_socket --discovery)"
"$BUILD/bench/bench_socket" --reps 3 --discovery --port 9988 >"$DIR/bench_socket.log" 2>&1 ||
  fail "bench_socket: $(tail -n 5 "$DIR/bench_socket.log")"
ping_us=$(awk '/first contact/ { print $(NF-2); exit }' "$DIR/bench_socket.log")
mpi_run mpi_ping ping
sock_run sock_ping ping
mpi_ping=$(median_col "$DIR/mpi_ping.csv" clients 8)
sock_ping=$(median_col "$DIR/sock_ping.csv" clients 8)

if [ -n "$PLOT" ]; then
  cp "$DIR/plot.csv" "${PLOT%.png}.csv"
  "$ROOT/scripts/lst-plot" --title "lst brw write 1M, concurrency $CONC, two MPI ranks" --out "$PLOT" \
    "${PLOT%.png}.csv" >/dev/null
fi

# ---------------------------------------------------------------- report
row() {  # row PATH LST_KEY RAW_KEY RATIO_KEY TARGET
  printf '%-46s %18s %18s %16s  %s\n' "$1" "$(median "${R[$2]}") ($(echo ${R[$2]} | tr ' ' /))" \
    "$(median "${R[$3]}")" "$(median "${R[$4]}") ($(echo ${R[$4]} | tr ' ' /))" "$5"
}
echo
echo "# lst brw 1 MiB (concurrency $CONC, each figure the median of $ROUNDS stat rounds of 2 s) against the raw"
echo "# baseline of its path measured just before it; medians of $REPS repetitions (each repetition's in brackets)"
printf '%-46s %18s %18s %16s  %s\n' "path" "lst MB/s" "raw MB/s" "ratio" "target"
row "MPI LND, 2 ranks, write" mpi_write raw_mpi r_mpi_write ">= 0.90"
row "MPI LND, 2 ranks, read" mpi_read raw_mpi r_mpi_read ">= 0.90"
row "socket LND, 2 lnetds on loopback, write" sock_write raw_tcp r_sock_write ">= 0.80"
row "socket LND, 2 lnetds on loopback, read" sock_read raw_tcp r_sock_read ">= 0.80"
row "rank -> proxy -> its lnetd, write" pxo_write raw_mpi_jobs r_pxo_write ">= 0.50 (MPI between jobs)"
row "rank -> proxy -> its lnetd, read" pxo_read raw_mpi_jobs r_pxo_read ">= 0.50 (MPI between jobs)"
row "rank -> proxy -> lnetd -> tcp -> lnetd, write" px_write slowest r_px_write ">= 0.50 (slowest hop)"
row "rank -> proxy -> lnetd -> tcp -> lnetd, read" px_read slowest r_px_read ">= 0.50 (slowest hop)"
echo "raw MPI (2 ranks, one job):$(printf ' %s' ${R[raw_mpi]}) MB/s; raw TCP (bench_socket):$(printf ' %s' ${R[raw_tcp]})"
echo "raw hops of the proxy path: MPI between two jobs$(printf ' %s' ${R[raw_mpi_jobs]}), Unix socket$(printf ' %s' ${R[raw_unix]}), TCP$(printf ' %s' ${R[raw_tcp_hop]}) MB/s"
echo "# ping test (concurrency $CONC): pings/s against one-at-a-time LNet pings (lnetctl ping's GET)"
awk -v m="$mpi_ping" -v s="$sock_ping" -v us="$ping_us" 'BEGIN {
  printf "lst ping, MPI LND: %.0f pings/s; socket LND: %.0f pings/s; LNet ping GETs one at a time (socket LND): %.0f/s (%.1f us each)\n",
    m, s, 1e6 / us, us }'
