#!/usr/bin/env bash
# The o2ib LND against perftest on the same RDMA port(s), in the same run (issue 37's
# targets: 1 MiB PUT bandwidth >= 90 % of ib_write_bw; 8-byte round trip <= 2 x ib_send_lat's):
#   bandwidth   lnet-xfer put --sizes 1M --depth 8 (PUTs with their ACKs, RDMA writes)
#               vs ib_write_bw -R -s 1M (RC RDMA writes, connected through RDMA CM)
#   round trip  lnet-xfer put --sizes 8 --depth 1 (an IMMEDIATE PUT and its ACK): its
#               median, and its mean from the operations per second
#               vs ib_send_lat -R -s 8's round trip: twice its t_typical (perftest's
#               latency tests report half a round trip); the ratio is ours over that
# SERVER_IP and CLIENT_IP are two IPv4 addresses on RDMA ports of this machine (two ports,
# or a second address on one port's interface): the NIs of lnet-xfer's server and client.
# Each of REPS repetitions (3) takes the raw figure just before ours; the report gives
# every ratio and their medians. Bandwidth in Gb/s (10^9 bits), times in microseconds.
#   bench/o2ib_bench.sh SERVER_IP CLIENT_IP [BUILD_DIR]     (build/default)
# Without an RDMA device it says "SKIP: no RDMA device" and exits 77. perftest is
# installed when missing (Debian's package; root). Not yet run: no machine of the
# project has an RDMA device (docs/perf.md).
set -euo pipefail
if [ "${1:-}" = --help ] || [ $# -lt 2 ]; then
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  [ "${1:-}" = --help ] && exit 0 || exit 2
fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SERVER_IP="$1"
CLIENT_IP="$2"
BUILD="$(cd "${3:-$ROOT/build/default}" && pwd)"
REPS="${REPS:-3}"
XFER="$BUILD/tools/lnet-xfer"
[ -x "$XFER" ] || { echo "o2ib_bench: no $XFER (build first)" >&2; exit 1; }
if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
  echo "SKIP: no RDMA device"
  exit 77
fi
if ! command -v ib_write_bw >/dev/null || ! command -v ib_send_lat >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q perftest >/dev/null
fi

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# perftest TOOL ARGS...: the tool's server, then its client against it; the client's output.
perftest() {
  local tool=$1
  shift
  timeout 60 "$tool" "$@" >/dev/null 2>&1 &
  PIDS+=($!)
  sleep 1
  timeout 60 "$tool" "$@" "$SERVER_IP" || { echo "o2ib_bench: $tool $* $SERVER_IP failed" >&2; exit 1; }
}

# lnet-xfer put ARGS...: its result line; the whole output and exit when an operation failed.
xfer_put() {
  local out
  out=$("$XFER" put --nid "$CLIENT_IP@o2ib" --peer "$SERVER_IP@o2ib" "$@" 2>&1) ||
    { echo "o2ib_bench: lnet-xfer put $* failed:" >&2; echo "$out" >&2; exit 1; }
  echo "$out"
}

# NAME VALUE: VALUE, or exit saying that NAME could not be read.
need() { [ -n "$2" ] && echo "$2" || { echo "o2ib_bench: no $1 in the tool's output" >&2; exit 1; }; }

# The value of the last numeric row's column COL in perftest's table.
perftest_col() { awk -v c="$1" '$1 ~ /^[0-9]+$/ && NF >= c { v = $c } END { print v }'; }

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

"$XFER" serve --nid "$SERVER_IP@o2ib" --buffer 16M >/dev/null &
PIDS+=($!)
sleep 2
timeout 60 "$XFER" ping --nid "$CLIENT_IP@o2ib" --peer "$SERVER_IP@o2ib" >/dev/null ||
  { echo "o2ib_bench: no ping between $CLIENT_IP@o2ib and $SERVER_IP@o2ib" >&2; exit 1; }

bw_ratios=() rtt_ratios=()
printf '%-4s %12s %12s %7s | %12s %12s %12s %7s\n' rep "raw Gb/s" "LNet Gb/s" ratio "raw RTT us" "LNet med us" "LNet mean us" ratio
for ((r = 1; r <= REPS; ++r)); do
  raw_bw=$(need "ib_write_bw's bandwidth" "$(perftest ib_write_bw -R -F -s 1048576 -D 5 --report_gbits | perftest_col 4)")
  put=$(xfer_put --sizes 1M --count 5000 --depth 8)
  mib=$(need "lnet-xfer's MiB/s" "$(echo "$put" | grep -oP '[0-9.]+(?= MiB/s)' || true)")
  lnet_bw=$(awk -v m="$mib" 'BEGIN { printf "%.2f", m * 1048576 * 8 / 1e9 }')
  half=$(need "ib_send_lat's t_typical" "$(perftest ib_send_lat -R -F -s 8 -n 10000 | perftest_col 5)")
  raw_rtt=$(awk -v h="$half" 'BEGIN { printf "%.2f", 2 * h }')
  small=$(xfer_put --sizes 8 --count 20000 --depth 1)
  med=$(echo "$small" | grep -oP '(?<=latency median )[0-9.]+' | awk '{ printf "%.0f", $1 * 1000 }' || true)
  ops=$(need "lnet-xfer's ops/s" "$(echo "$small" | grep -oP '[0-9.]+(?= ops/s)' || true)")
  mean=$(awk -v o="$ops" 'BEGIN { printf "%.2f", 1e6 / o }')
  bw_ratios+=("$(awk -v a="$lnet_bw" -v b="$raw_bw" 'BEGIN { printf "%.3f", a / b }')")
  rtt_ratios+=("$(awk -v a="$mean" -v b="$raw_rtt" 'BEGIN { printf "%.3f", a / b }')")
  printf '%-4s %12s %12s %7s | %12s %12s %12s %7s\n' "$r" "$raw_bw" "$lnet_bw" "${bw_ratios[-1]}" "$raw_rtt" "$med" "$mean" \
    "${rtt_ratios[-1]}"
done
echo "device: $(ls /sys/class/infiniband | tr '\n' ' ')"
echo "median bandwidth ratio (LNet / ib_write_bw): $(printf '%s\n' "${bw_ratios[@]}" | median)   target >= 0.90"
echo "median round-trip ratio (LNet mean / ib_send_lat's round trip): $(printf '%s\n' "${rtt_ratios[@]}" | median)   target <= 2"
