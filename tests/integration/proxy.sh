#!/usr/bin/env bash
# The parallel proxy on one host (loopback addresses 127.0.1.x, so it shares nothing with
# the demo): a tcp server, two router lnetds with the UP LND, ompi-server, lnet-proxy of
# two ranks (mode 1c: port file), and MPI applications with LNET_PROXY.
#   - an application of 4 ranks pings both proxies and the server and PUTs/GETs 1 MiB
#     per rank with data checks, through both gateways;
#   - two applications at once: distinct pids, their data checked;
#   - applications one after another: no file descriptor or memory growth in the proxy
#     ranks and the lnetds;
#   - garbage on the doorbell is refused and the proxy keeps serving;
#   - a missing ompi-server URI, a missing port file: clear errors, no hang.
# Needs root (port 988) and Open MPI. Binaries from $LNETD, $LNETCTL, $LNET_XFER,
# $LNET_PROXY_BIN, $PROXY_DEMO (set by CTest).
set -euo pipefail
T_NAME=proxy
log() { echo "[$T_NAME] $*"; }
fail() {
  echo "[$T_NAME] FAIL: $*" >&2
  exit 1
}
if [ "$(id -u)" != 0 ]; then log "SKIP: needs root (port 988)"; exit 77; fi
command -v ompi-server >/dev/null || { log "SKIP: no ompi-server (Open MPI)"; exit 77; }
for b in "$LNETD" "$LNETCTL" "$LNET_XFER" "$LNET_PROXY_BIN" "$PROXY_DEMO"; do [ -x "$b" ] || fail "missing binary $b"; done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset LNET_PROXY OMPI_MCA_pmix_server_uri

DIR="$(mktemp -d /tmp/lnet-proxy-test.XXXXXX)"
PIDS=()
cleanup() {
  local rc=$?
  set +e
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    local p=${PIDS[i]}
    kill -TERM "$p" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  if [ $rc != 0 ]; then
    for f in "$DIR"/*.log; do [ -s "$f" ] && { echo "----- $(basename "$f")"; tail -n 30 "$f"; }; done
  fi
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT INT TERM

wait_for() {  # wait_for FILE PATTERN WHAT
  for _ in $(seq 300); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "$3"
}
fds() { ls "/proc/$1/fd" | wc -l; }
rss_kib() { sed -n 's/^VmRSS: *\([0-9]*\) kB/\1/p' "/proc/$1/status"; }

SERVER=127.0.1.1
ROUTERS=(127.0.1.2 127.0.1.3)
LNETD_PIDS=()
for ip in "${ROUTERS[@]}"; do
  printf 'net:\n    - net type: tcp\n      local NI(s):\n        - nid: %s@tcp\n          interfaces:\n              0: lo\n    - net type: mpi\n      local NI(s):\n        - nid: %s@mpi\nrouting:\n    enable: 1\n' \
    "$ip" "$ip" >"$DIR/$ip.yaml"
  "$LNETD" -f -c "$DIR/$ip.yaml" -s "$DIR/$ip.ctl" -p "" --bridge "$DIR/$ip.bridge" --bridge-size 256 \
    >"$DIR/lnetd-$ip.log" 2>&1 &
  PIDS+=($!)
  LNETD_PIDS+=($!)
done
for ip in "${ROUTERS[@]}"; do
  for _ in $(seq 100); do [ -S "$DIR/$ip.bridge" ] && break; sleep 0.1; done
  [ -S "$DIR/$ip.bridge" ] || fail "lnetd $ip did not come up"
done
"$LNET_XFER" serve --nid $SERVER@tcp --route mpi@${ROUTERS[0]}@tcp --route mpi@${ROUTERS[1]}@tcp \
  --buffer $((8 << 20)) >"$DIR/server.log" 2>&1 &
PIDS+=($!)
wait_for "$DIR/server.log" serving "the server did not come up"

# Without a server URI the client says what is missing, promptly.
log "a client without ompi-server's URI"
printf 'lnet-proxy 1\nport 1.0:1\ndoorbell 127.0.1.2:9\n' >"$DIR/fake.port"
if LNET_PROXY="$DIR/fake.port" timeout 60 mpirun --bind-to none -n 1 "$PROXY_DEMO" --server $SERVER@tcp \
  >"$DIR/nouri.log" 2>&1; then fail "a client without a server URI started"; fi
grep -q "ompi-server" "$DIR/nouri.log" || fail "no word of ompi-server: $(tail -n 3 "$DIR/nouri.log")"

ompi-server --no-daemonize -r "$DIR/ompi.uri" >"$DIR/ompi-server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$DIR/ompi.uri" ] && break; sleep 0.1; done
[ -s "$DIR/ompi.uri" ] || fail "ompi-server did not start"
export OMPI_MCA_pmix_server_uri="file:$DIR/ompi.uri"

log "a client with no proxy behind its port file"
if LNET_PROXY="$DIR/none.port" timeout 60 mpirun --bind-to none -n 1 "$PROXY_DEMO" --server $SERVER@tcp \
  >"$DIR/noport.log" 2>&1; then fail "a client without a proxy started"; fi
grep -q "cannot read the port file" "$DIR/noport.log" || fail "unclear error: $(tail -n 3 "$DIR/noport.log")"

mpirun --bind-to none -n 1 "$LNET_PROXY_BIN" --bridge "$DIR/${ROUTERS[0]}.bridge" --port-file "$DIR/proxy.port" \
  : -n 1 "$LNET_PROXY_BIN" --bridge "$DIR/${ROUTERS[1]}.bridge" >"$DIR/proxy.log" 2>&1 &
PIDS+=($!)
wait_for "$DIR/proxy.log" "lnet-proxy: ready" "the proxy did not come up"
mapfile -t PROXY_PIDS < <(pgrep -f "^$LNET_PROXY_BIN --bridge $DIR/")
[ ${#PROXY_PIDS[@]} = 2 ] || fail "expected 2 proxy ranks, found ${#PROXY_PIDS[@]}"
export LNET_PROXY="$DIR/proxy.port"

client() {  # client LOG RANKS [proxy_demo args...]
  local out="$1" n="$2"
  shift 2
  timeout 120 mpirun --bind-to none -n "$n" "$PROXY_DEMO" --server $SERVER@tcp "$@" >"$DIR/$out.log" 2>&1
}

log "an application of 4 ranks through both proxies"
client e2e 4 --count 3 || fail "the 4-rank application failed"
grep -q "all ranks ok" "$DIR/e2e.log" || fail "no 'all ranks ok'"
# Every rank sent messages to each gateway (the last two columns before the result).
awk '/@mpi .* ok$/ { if ($(NF-1) < 1 || $(NF-2) < 1) bad = 1; n++ } END { exit bad || n != 4 }' "$DIR/e2e.log" ||
  fail "not every rank used both gateways: $(cat "$DIR/e2e.log")"
for ip in "${ROUTERS[@]}"; do
  "$LNETCTL" --socket "$DIR/$ip.ctl" stats show | grep -q "route_count: [1-9]" || fail "router $ip forwarded nothing"
done

log "two applications at once"
client two_a 2 --count 5 --offset 0 &
A=$!
client two_b 2 --count 5 --offset $((4 << 20)) &
B=$!
wait $A || fail "application A of two failed"
wait $B || fail "application B of two failed"
pid_a=$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' "$DIR/two_a.log")
pid_b=$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' "$DIR/two_b.log")
[ -n "$pid_a" ] && [ "$pid_a" != "$pid_b" ] || fail "the two applications share pid '$pid_a'"

log "garbage on the doorbell"
bell=$(sed -n 's/^doorbell //p' "$DIR/proxy.port")
exec 3<>"/dev/tcp/${bell%:*}/${bell#*:}"
printf 'GET / HTTP/1.0\n' >&3
read -r -t 10 answer <&3 || true
exec 3>&-
[[ "$answer" == ERROR* ]] || fail "the doorbell answered garbage with '$answer'"

log "applications one after another: no growth"
client seq0 1 --count 1 --size 65536 || fail "sequential application 0 failed"
declare -A fd0 rss0
for p in "${PROXY_PIDS[@]}" "${LNETD_PIDS[@]}"; do fd0[$p]=$(fds "$p"); rss0[$p]=$(rss_kib "$p"); done
for i in $(seq 1 12); do client "seq$i" 1 --count 1 --size 65536 || fail "sequential application $i failed"; done
for p in "${PROXY_PIDS[@]}" "${LNETD_PIDS[@]}"; do
  [ "$(fds "$p")" -le "${fd0[$p]}" ] || fail "process $p: ${fd0[$p]} -> $(fds "$p") file descriptors"
  grow=$(($(rss_kib "$p") - ${rss0[$p]}))
  [ $grow -lt 8192 ] || fail "process $p grew by $grow KiB over 12 applications"
done
grep -c "said goodbye" "$DIR/proxy.log" | grep -qx 16 || fail "not every application said goodbye"
log "PASS"
