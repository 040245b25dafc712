#!/usr/bin/env bash
# lnetd against the kernel's LNet, each on a guest of the same size (qemu, the kernel
# LNet kit ../shared/kernel-lnet), in the same run: the kernel's lst on ka drives brw
# write and read of 1 MiB (concurrency 4, check=none) over four paths, interleaved,
# REPS times, and reads the server's LNet bandwidth with lst stat:
#   - routed to kb on tcp1 through the kernel router kr  (the baseline)
#   - routed to kb on tcp1 through lnetd on ur           (our router)
#   - to kr itself, a kernel node on tcp                 (the baseline)
#   - to lnetd on ur itself, on tcp                      (our endpoint, lst's server side)
# ur runs lnetd from this build in a guest of its own (the kit's host-root mode: the
# host's files, the guest's kernel and network), so that both sides of each ratio run
# on an emulated CPU alike (a host process against a guest is no fair race).
#   kernel_bench.sh [BUILD_DIR] [REPS]      (root; qemu-system-x86; SECS=4 per sample)
# Prints each sample, the medians and the ratios ours / the kernel's.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build/default}" && pwd)"
REPS="${2:-3}"
SECS="${SECS:-4}"
KIT="${LNET_KERNEL_KIT:-$(cd "$ROOT/.." && pwd)/shared/kernel-lnet}"
[ -x "$BUILD/lnetd/lnetd" ] || { echo "kernel_bench: build first ($BUILD)" >&2; exit 1; }
[ -x "$KIT/kernel-node.sh" ] || { echo "kernel_bench: no kernel LNet kit at $KIT (LNET_KERNEL_KIT)" >&2; exit 1; }
command -v qemu-system-x86_64 >/dev/null || { echo "kernel_bench: no qemu (scripts/setup.sh installs it)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "kernel_bench: needs root" >&2; exit 1; }

NS=lkb$$
export KN_STATE
KN_STATE="$(mktemp -d /tmp/lnet-kbench.XXXXXX)"
export KN_TAP_PREFIX=kb
NODES=()
kn() { "$KIT/kernel-node.sh" "$@"; }
cleanup() {
  [ -n "${KEEP:-}" ] && { echo "kept: KN_STATE=$KN_STATE NS=$NS" >&2; return; }
  set +e
  local n
  for n in "${NODES[@]}"; do kn stop "$n" >/dev/null 2>&1; done
  ip netns del "$NS" 2>/dev/null
  rm -rf "$KN_STATE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "[kernel_bench] $*" >&2; }

ip netns add "$NS"
ip -n "$NS" link set lo up
for b in kba kbb; do
  ip -n "$NS" link add "$b" type bridge
  ip -n "$NS" link set "$b" up
done

KA=10.98.1.11@tcp KB=10.98.2.12@tcp1 KR=10.98.1.20@tcp KR1=10.98.2.20@tcp1 UR=10.98.1.30@tcp UR1=10.98.2.30@tcp1
yaml() {  # yaml NET IF [NET IF] -- ROUTE_NET GATEWAY | routing
  printf 'net:\n'
  while [ "$1" != -- ]; do
    printf '    - net type: %s\n      local NI(s):\n        - interfaces:\n              0: %s\n' "$1" "$2"
    shift 2
  done
  shift
  if [ "$1" = routing ]; then printf 'routing:\n    enable: 1\n'; else printf 'route:\n    - net: %s\n      gateway: %s\n' "$1" "$2"; fi
}
yaml tcp eth0 -- tcp1 "$KR" >"$KN_STATE/ka.yaml"
yaml tcp1 eth0 -- tcp "$KR1" >"$KN_STATE/kb.yaml"
yaml tcp eth0 tcp1 eth1 -- routing >"$KN_STATE/kr.yaml"
yaml tcp eth0 tcp1 eth1 -- routing >"$KN_STATE/ur.yaml"
# Router checks every 2 s (the default 60 s would leave a route down for a minute after
# a router's first answer came before its routing was on).
echo "options lnet alive_router_check_interval=2 router_ping_timeout=2" >"$KN_STATE/node.conf"
{
  cat "$KN_STATE/node.conf"
  echo "options lnet large_router_buffers=256 small_router_buffers=4096 tiny_router_buffers=512"
} >"$KN_STATE/router.conf"
printf 'alive_router_check_interval: 2\nrouter_ping_timeout: 2\n' >>"$KN_STATE/ur.yaml"

log "booting ka, kb, kr (kernel LNet) and ur (lnetd in a host-root guest)"
KN_NET=tcp KN_MODPROBE="$KN_STATE/node.conf" kn start ka "$NS" kba 10.98.1.11/24 "$KN_STATE/ka.yaml" >"$KN_STATE/ka.boot" 2>&1 &
KN_NET=tcp1 KN_MODPROBE="$KN_STATE/node.conf" kn start kb "$NS" kbb 10.98.2.12/24 "$KN_STATE/kb.yaml" >"$KN_STATE/kb.boot" 2>&1 &
KN_NET=tcp,tcp1 KN_MEM=768 KN_MODPROBE="$KN_STATE/router.conf" \
  kn start kr "$NS" kba,kbb 10.98.1.20/24,10.98.2.20/24 "$KN_STATE/kr.yaml" >"$KN_STATE/kr.boot" 2>&1 &
KN_HOSTROOT=1 KN_MEM=512 KN_APPEND=kn.lnet=nomod \
  kn start ur "$NS" kba,kbb 10.98.1.30/24,10.98.2.30/24 >"$KN_STATE/ur.boot" 2>&1 &
NODES=(ka kb kr ur)
wait
for n in "${NODES[@]}"; do grep -q "KN READY" "$KN_STATE/$n.boot" || { cat "$KN_STATE/$n.boot" >&2; exit 1; }; done
cp "$KN_STATE/ur.yaml" "$(kn dir ur)/lnetd.yaml"
kn exec ur --host "nohup $BUILD/lnetd/lnetd --foreground --selftest --config /tmp/kn/lnetd.yaml \
  --ctl-socket /tmp/lnetd.sock >/tmp/kn/lnetd.log 2>&1 &" >/dev/null
for i in $(seq 60); do
  kn exec ka lnetctl ping "$UR" >/dev/null 2>&1 && break
  sleep 1
done
kn exec ka lnetctl ping "$UR" >/dev/null || { cat "$(kn dir ur)/lnetd.log" >&2; exit 1; }

# reaches: ka's ping of kb gets through (its routes up), within 60 s.
reaches() {
  local i
  for i in $(seq 30); do
    kn exec ka lnetctl ping "$KB" >/dev/null 2>&1 && return 0
    sleep 2
  done
  log "ka cannot reach kb through $1: $(kn exec ka lnetctl route show -v)"
  exit 1
}
reaches kr
# via GATEWAY_ON_TCP GATEWAY_ON_TCP1: ka's and kb's routes through that router.
via() {
  kn exec ka "lnetctl route del --net tcp1 --gateway $GW_A 2>/dev/null; lnetctl route add --net tcp1 --gateway $1" >/dev/null
  kn exec kb "lnetctl route del --net tcp --gateway $GW_B 2>/dev/null; lnetctl route add --net tcp --gateway $2" >/dev/null
  GW_A=$1 GW_B=$2
  reaches "$1"
}
GW_A=$KR GW_B=$KR1

# sample PATH OP TO: brw OP 1M from ka to TO for SECS seconds after a warm-up; prints
# "PATH OP MiB/s", the server's received (write) or sent (read) bandwidth by lst stat.
sample() {
  local path=$1 op=$2 to=$3 row
  row=$([ "$op" = write ] && echo "\[R\]" || echo "\[W\]")
  kn exec ka "export LST_SESSION=77; lst new_session --force --timeout 300 bench >/dev/null &&
    lst add_group c $KA >/dev/null && lst add_group s $to >/dev/null && lst add_batch b >/dev/null &&
    lst add_test --batch b --concurrency 4 --from c --to s brw $op size=1M >/dev/null && lst run b >/dev/null &&
    sleep 2 && lst stat --count 1 --delay $SECS --bw --avg s; lst stop b >/dev/null; lst end_session >/dev/null" \
    >"$KN_STATE/stat.out" 2>&1 || true
  local mibs
  mibs=$(awk -v r="^$row" '$0 ~ r {print $3}' "$KN_STATE/stat.out" | tail -n 1)
  [ -n "$mibs" ] || { log "no figure for $path $op: $(cat "$KN_STATE/stat.out")"; exit 1; }
  echo "$path $op $mibs"
}

RESULTS="$KN_STATE/results"
: >"$RESULTS"
for r in $(seq "$REPS"); do
  log "repetition $r of $REPS"
  via "$KR" "$KR1"
  for op in write read; do sample kernel-router $op "$KB" | tee -a "$RESULTS"; done
  via "$UR" "$UR1"
  for op in write read; do sample lnetd-router $op "$KB" | tee -a "$RESULTS"; done
  for op in write read; do sample kernel-endpoint $op "$KR" | tee -a "$RESULTS"; done
  for op in write read; do sample lnetd-endpoint $op "$UR" | tee -a "$RESULTS"; done
done

median() { awk -v p="$1" -v o="$2" '$1 == p && $2 == o {print $3}' "$RESULTS" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
echo
echo "# lst brw 1M, concurrency 4, the kernel's console on ka; MiB/s at the server, medians of $REPS"
printf '%-10s %-6s %10s %10s %7s\n' path op kernel lnetd ratio
for what in router endpoint; do
  for op in write read; do
    k=$(median "kernel-$what" $op)
    u=$(median "lnetd-$what" $op)
    printf '%-10s %-6s %10s %10s %7s\n' "$what" $op "$k" "$u" "$(awk -v a="$u" -v b="$k" 'BEGIN {printf "%.2f", a / b}')"
  done
done
