#!/usr/bin/env bash
# Multi-node figures on a virtual cluster (lnet-cluster(8)), each path and its raw
# baseline measured between the same nodes in the same run, medians of REPS repetitions:
#   cluster_bench.sh proxy [BUILD_DIR] [REPS]   (bench/proxy_bench.sh --cluster) the parallel
#       proxy's chain across nodes: an application (1 rank, mode 1c) on c1 -> lnet-proxy
#       on r1 -> bridge -> r1's lnetd -> tcp -> a server (lnet-xfer serve) on s1; against
#       raw MPI between two jobs on c1 and r1 (connect/accept through ompi-server, over the
#       TCP BTL, as the application and the proxy are), the Unix socket on r1 and raw TCP
#       between r1 and s1.
#   cluster_bench.sh mpi [BUILD_DIR] [REPS]     (bench/mpi_bench.sh --cluster) the MPI LND
#       between two ranks on c1 and c2 (bench_mpi: raw MPI and LNet in the same run).
# One machine's two cores run every node: the figures say what the path costs against
# the raw hops on the same cores, not what nodes of their own would reach.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
what=${1:?usage: cluster_bench.sh proxy|mpi [BUILD_DIR] [REPS]}
BUILD="$(cd "${2:-$ROOT/build/default}" && pwd)"
REPS="${3:-5}"
STREAM="${STREAM:-1024}"
[ -x "$BUILD/bench/bench_proxy" ] && [ -x "$BUILD/bench/bench_mpi" ] || { echo "cluster_bench: build first ($BUILD)" >&2; exit 1; }
export LNET_BUILD="$BUILD"
. "$ROOT/tests/cluster/lib.sh"
cl_setup "cluster_bench" -
cat >"$T_DIR/bench.cluster" <<'DESC'
fabric mpi   10.95.0.0/24
fabric tcp0  10.95.1.0/24
node login   login          mpi=10
node c1      compute        mpi=11
node c2      compute        mpi=12
node r1      server,router  mpi=21 tcp0=21
node s1      server         tcp0=31 lnetd=no
daemon s1 lnet-xfer serve --nid {s1.tcp0}@tcp --route mpi@{r1.tcp0}@tcp --buffer 16777216
proxy r1
DESC
"$CLUSTER_SH" up "$T_DIR/bench.cluster" --name "$LNET_CLUSTER" >"$T_DIR/up.log" 2>&1 || fail "cluster up: $(tail "$T_DIR/up.log")"
RESULTS="$T_DIR/results"
: >"$RESULTS"
run() {  # run NAME COMMAND...: one measurement, its RESULT line kept
  local name=$1
  shift
  timeout 600 "$@" >"$T_DIR/$name.log" 2>&1 || fail "$name: $(tail -n 5 "$T_DIR/$name.log")"
  grep '^RESULT' "$T_DIR/$name.log" >>"$RESULTS" || fail "$name printed no result: $(tail -n 5 "$T_DIR/$name.log")"
}
median() {  # median KIND FIELD
  awk -v k="$1" -v f="$2" '$2 == k { print $f }' "$RESULTS" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

if [ "$what" = mpi ]; then
  log "bench_mpi with its two ranks on c1 and c2 ($REPS repetitions inside)"
  timeout 1200 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" mpirun --host c1:1,c2:1 -n 2 bench_mpi --reps "$REPS" \
    >"$T_DIR/mpi.log" 2>&1 || fail "bench_mpi: $(tail -n 20 "$T_DIR/mpi.log")"
  echo "# the MPI LND between c1 and c2 (two nodes of the virtual cluster, Open MPI's TCP BTL)"
  grep -v '^\[' "$T_DIR/mpi.log"
  exit 0
fi

S1=$(cl addr s1 tcp0)
echo_listens() { [ -n "$(cl exec s1 ss -Hltn 'sport = :5988')" ]; }
PORT=$(cl proxy port r1)
for r in $(seq "$REPS"); do
  log "repetition $r of $REPS"
  rm -f "$T_DIR/mpi.port"
  cl mpirun --host r1 -n 1 bench_proxy mpi-accept --stream "$STREAM" --port-file "$T_DIR/mpi.port" >"$T_DIR/accept.log" 2>&1 &
  accept=$!
  T_BG+=($accept)
  run mpi "$CLUSTER_SH" --cluster "$LNET_CLUSTER" mpirun --host c1 -n 1 bench_proxy mpi-connect --stream "$STREAM" --port-file "$T_DIR/mpi.port"
  wait $accept || fail "the accepting job failed: $(tail -n 5 "$T_DIR/accept.log")"
  run unix "$CLUSTER_SH" --cluster "$LNET_CLUSTER" exec r1 bench_proxy unix --stream "$STREAM"
  cl exec s1 bench_proxy tcp-echo --listen "$S1:5988" --stream "$STREAM" >"$T_DIR/echo.log" 2>&1 &
  echo_pid=$!
  T_BG+=($echo_pid)
  wait_until 10 "the TCP echo on s1 listens" echo_listens
  run tcp "$CLUSTER_SH" --cluster "$LNET_CLUSTER" exec r1 bench_proxy tcp --peer "$S1:5988" --stream "$STREAM"
  wait $echo_pid || true
  run lnet "$CLUSTER_SH" --cluster "$LNET_CLUSTER" mpirun --host c1 -n 1 -x "LNET_PROXY=$PORT" bench_proxy lnet --stream "$STREAM" --server "$S1@tcp"
done
declare -A lat bw
for k in mpi unix tcp lnet; do
  lat[$k]=$(median $k 3)
  bw[$k]=$(median $k 4)
done
echo
echo "# lnet-proxy across nodes of the virtual cluster against the raw hops between the same nodes:"
echo "# medians of $REPS repetitions (latency: half the round trip of 8 bytes; LNet: an 8-byte PUT and its ACK)"
printf '%-56s %14s %18s\n' "path" "8 B latency" "1 MiB bandwidth"
printf '%-56s %11s us %13s MB/s\n' "raw MPI, two jobs on c1 and r1 (connect/accept, TCP BTL)" "${lat[mpi]}" "${bw[mpi]}" \
  "raw Unix-domain socket on r1 (SOCK_SEQPACKET)" "${lat[unix]}" "${bw[unix]}" \
  "raw TCP, r1 -> s1" "${lat[tcp]}" "${bw[tcp]}" \
  "LNet: c1 -> proxy on r1 -> lnetd on r1 -> tcp -> s1" "${lat[lnet]}" "${bw[lnet]}"
awk -v l="${lat[lnet]}" -v m="${lat[mpi]}" -v u="${lat[unix]}" -v t="${lat[tcp]}" \
  'BEGIN { printf "latency: LNet / (MPI + Unix + TCP) = %.2f\n", l / (m + u + t) }'
awk -v b="${bw[lnet]}" -v m="${bw[mpi]}" -v t="${bw[tcp]}" \
  'BEGIN { lo = m < t ? m : t; printf "bandwidth: LNet / min(MPI, TCP) = %.2f\n", b / lo }'
