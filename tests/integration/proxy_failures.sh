#!/usr/bin/env bash
# The parallel proxy when a side dies (loopback addresses 127.0.2.x):
#   - kill -9 of an application rank in the middle of 1 MiB transfers: the proxy and the
#     lnetds keep running, the application is dropped and its pid released (its
#     messages failed) within the client timeout, and the next application works;
#   - kill -9 of a proxy rank: the application ends with an error, not a hang, and the
#     lnetds release that proxy's pids; a restarted proxy serves new applications;
#   - lnetd stopped under a running proxy: the proxy reports it and exits; lnetd and the
#     proxy restarted, applications work again.
# Needs root (port 988) and Open MPI (proxy_lib.sh).
. "$(dirname "$0")/proxy_lib.sh"
px_setup proxy_failures

SERVER=127.0.2.1
ROUTERS=(127.0.2.2 127.0.2.3)
declare -A LNETD
for ip in "${ROUTERS[@]}"; do
  px_router "$ip"
  LNETD[$ip]=$LNETD_PID
done
px_server $SERVER "${ROUTERS[@]}"
px_ompi_server
px_proxy proxy "${ROUTERS[@]}" -- --client-timeout 3
[ ${#PROXY_PIDS[@]} = 2 ] || fail "expected 2 proxy ranks, found ${#PROXY_PIDS[@]}"
# The applications give up on a silent peer after 5 s (the MPI LND's timeout).
export LNET_MPI_TIMEOUT=5

log "kill -9 of an application rank during 1 MiB transfers"
client long 2 --count 1000000 &
LONG=$!
wait_for "$DIR/lnetd-${ROUTERS[1]}.log" "registered by" "the application never reached the second lnetd"
# Transfers under way: the routers forward.
for _ in $(seq 100); do
  "$LNETCTL" --socket "$DIR/${ROUTERS[0]}.ctl" stats show | grep -q "route_count: [1-9][0-9]" && break
  sleep 0.1
done
kill -9 "$(pgrep -f "^$PROXY_DEMO" | head -n 1)"
wait $LONG && fail "the killed application reported success"
wait_for "$DIR/proxy.log" "dropped" "the proxy did not drop the dead application" 20
for ip in "${ROUTERS[@]}"; do
  wait_for "$DIR/lnetd-$ip.log" "released by" "lnetd $ip did not release the dead application's pid" 10
  kill -0 "${LNETD[$ip]}" || fail "lnetd $ip died"
done
for p in "${PROXY_PIDS[@]}"; do kill -0 "$p" || fail "proxy rank $p died"; done
client after_app_kill 2 --count 2 || fail "no application works after one was killed"

log "kill -9 of a proxy rank"
client orphan 2 --count 1000000 --timeout 10 &
ORPHAN=$!
wait_for "$DIR/proxy.log" "application 3:" "the third application was not set up"
sleep 1
kill -9 "${PROXY_PIDS[1]}"
# The application fails (not a hang): within the MPI LND's timeout and a margin.
deadline=$((SECONDS + 90))
while kill -0 $ORPHAN 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
kill -0 $ORPHAN 2>/dev/null && fail "the application hangs after its proxy died"
wait $ORPHAN && fail "the application reported success without its proxy"
for ip in "${ROUTERS[@]}"; do
  wait_for "$DIR/lnetd-$ip.log" "left the bridge" "lnetd $ip did not notice the proxy leave" 30
  kill -0 "${LNETD[$ip]}" || fail "lnetd $ip died"
done
wait "$PROXY_JOB" 2>/dev/null || true

log "a restarted proxy serves new applications"
px_proxy proxy2 "${ROUTERS[@]}" -- --client-timeout 3
client after_restart 2 --count 2 || fail "no application works with the restarted proxy"

# Without MPI_THREAD_MULTIPLE the heartbeats come from the application's waits in LNet:
# idle in LNet longer than the proxy's client timeout (3 s), it is not taken for dead.
for level in single funneled; do
  log "an application at MPI_THREAD_${level^^}, idle in LNet for 5 s, through the proxy"
  client "level_$level" 2 --count 2 --idle 5 --thread-level "$level" ||
    fail "the $level-threaded application failed: $(tail -n 5 "$DIR/level_$level.log")"
  grep -q "MPI thread level $level" "$DIR/level_$level.log" || fail "MPI did not give $level: $(head -n 1 "$DIR/level_$level.log")"
  pid=$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' "$DIR/level_$level.log")
  wait_for "$DIR/proxy2.log" "pid $pid said goodbye" "the $level-threaded application did not say goodbye" 10
  ! grep -q "pid $pid silent" "$DIR/proxy2.log" || fail "the proxy took the $level-threaded application for dead"
done

log "lnetd stopped under a running proxy"
kill -TERM "${LNETD[${ROUTERS[1]}]}"  # twice: it routes, and would drain its routes first
sleep 0.2
kill -TERM "${LNETD[${ROUTERS[1]}]}" 2>/dev/null
wait "${LNETD[${ROUTERS[1]}]}" || fail "lnetd ${ROUTERS[1]} did not stop cleanly"
wait_for "$DIR/proxy2.log" "went away" "the proxy did not report its lnetd gone" 20
deadline=$((SECONDS + 30))
while kill -0 "$PROXY_JOB" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
kill -0 "$PROXY_JOB" 2>/dev/null && fail "the proxy did not exit after its lnetd went away"
[ ! -e "$DIR/proxy.port" ] || fail "the proxy left its port file"
px_router "${ROUTERS[1]}"
px_proxy proxy3 "${ROUTERS[@]}"
client after_lnetd_restart 2 --count 2 || fail "no application works after lnetd and the proxy restarted"
log "PASS"
