#!/usr/bin/env bash
# MPI's dynamic process management cannot hang a client or the proxy (loopback addresses
# 127.0.8.x). Each case has its deadline; a client must end within LNET_PROXY_TIMEOUT
# (5 s here) and a margin, with an error naming what it tried:
#   - a name that is not published (LNET_PROXY=name:);
#   - a proxy that answers the knock "OK" and never accepts (a fake one: proxy_rogue);
#   - a spawn that cannot place its ranks (LNET_PROXY=spawn: on a host MPI does not know);
#   - ompi-server gone, then restarted (names and ports it knew are gone with it); the
#     standing proxy, left in an accept nothing can end, says so and exits;
#   - a client that connects and then says nothing (proxy_rogue connect-only): the proxy
#     drops it after its --timeout and serves the next application afterwards;
#   - an application that sends messages the MPI LND cannot decode (proxy_rogue garbage),
#     or one claiming another application's pid (claim-pid), is dropped and its pid
#     released while that other application streams on unharmed.
# Needs root (port 988) and Open MPI (proxy_lib.sh).
. "$(dirname "$0")/proxy_lib.sh"
px_setup proxy_dpm
: "${PROXY_ROGUE:?proxy_rogue (set by CTest)}" "${LNET_MPI_STREAM:?lnet_mpi_stream (set by CTest)}"

SERVER=127.0.8.1
ROUTERS=(127.0.8.2 127.0.8.3)
for ip in "${ROUTERS[@]}"; do px_router "$ip"; done
px_server $SERVER "${ROUTERS[@]}"
px_ompi_server
export LNET_PROXY_TIMEOUT=5
# bounded LOG WHAT PATTERN: the client of LOG failed (it did) within the deadline (the
# helper's `timeout 120` would say 124) with a line matching PATTERN.
bounded() {
  local out=$1 what=$2 pattern=$3 rc=$4 took=$5
  [ "$rc" != 0 ] || fail "$what: the client succeeded"
  [ "$rc" != 124 ] || fail "$what: the client hung (killed by timeout after 120 s): $(tail -n 5 "$DIR/$out.log")"
  [ "$took" -le 60 ] || fail "$what: the client took $took s (LNET_PROXY_TIMEOUT=5)"
  grep -aqE "$pattern" "$DIR/$out.log" || fail "$what: no clear error: $(tail -n 8 "$DIR/$out.log")"
  log "$what: ended after $took s: $(grep -aE -m1 "$pattern" "$DIR/$out.log" | cut -c1-220)"
}
# try LOG [env...]: a client of 2 ranks with LNET_PROXY as given; status in RC, seconds in TOOK
try() {
  local out=$1 start=$SECONDS
  shift
  RC=0
  env "$@" timeout 120 mpirun --bind-to none -n 2 "$PROXY_DEMO" --server "$SERVER@tcp" --count 1 \
    >"$DIR/$out.log" 2>&1 || RC=$?
  TOOK=$((SECONDS - start))
}

log "a name that is not published"
try noname LNET_PROXY=name:nobody-here
bounded noname "an unpublished name" "no proxy published the name 'nobody-here'" $RC $TOOK

log "a proxy that answers the knock and never accepts"
mpirun --bind-to none -n 1 "$PROXY_ROGUE" fake-proxy "$DIR/fake.port" >"$DIR/fake.log" 2>&1 &
PIDS+=($!)
wait_for "$DIR/fake.log" "fake proxy: ready" "the fake proxy did not come up"
try never_accepts LNET_PROXY="$DIR/fake.port"
grep -q "answered a knock" "$DIR/fake.log" || fail "the client did not knock on the fake proxy"
bounded never_accepts "a proxy that never accepts" "MPI_Comm_connect" $RC $TOOK

log "a spawn that cannot place its ranks"
try nohost LNET_PROXY="spawn:no-such-node:$DIR/${ROUTERS[0]}.bridge" LNET_PROXY_BIN="$LNET_PROXY_BIN"
bounded nohost "a spawn on an unknown host" "MPI_Comm_spawn" $RC $TOOK

log "a client that connects and says nothing; the proxy serves others meanwhile"
px_proxy proxy "${ROUTERS[@]}" -- --timeout 5 --publish lnet-dpm
mpirun --bind-to none -n 2 "$PROXY_ROGUE" connect-only "$DIR/proxy.port" >"$DIR/rogue.log" 2>&1 &
ROGUE=$!
PIDS+=($ROGUE)
wait_for "$DIR/rogue.log" "connected: silent" "the rogue client did not connect: $(tail -n 3 "$DIR/rogue.log")"
wait_for "$DIR/proxy.log" "sent no HELLO within 5 s: dropped" "the proxy did not drop the silent client" 30
kill "$ROGUE" 2>/dev/null || true
client after_rogue 2 --count 2 || fail "no application works after the silent client: $(tail -n 5 "$DIR/after_rogue.log")"
try by_name LNET_PROXY=name:lnet-dpm LNET_PROXY_SECRET="$DIR/proxy.port"
[ $RC = 0 ] || fail "a client by name failed: $(tail -n 5 "$DIR/by_name.log")"

log "the doorbell: a knock without the secret is refused; a flood of knocks is bounded"
bell=$(sed -n 's/^doorbell //p' "$DIR/proxy.port")
exec 7<>"/dev/tcp/${bell%:*}/${bell#*:}"
printf 'KNOCK 2 2 0123456789abcdef0123456789abcdef\n' >&7
answer=""
read -r -t 10 answer <&7 || true
exec 7>&-
case "$answer" in "ERROR a knock without this proxy's secret"*) ;; *) fail "a knock with a wrong secret was answered '$answer'" ;; esac
# Four knocks from one address may wait for their line; the fifth is closed at once.
for fd in 10 11 12 13 14; do eval "exec $fd<>/dev/tcp/${bell%:*}/${bell#*:}"; done
extra=""
if read -r -t 10 extra <&14; then fail "a fifth knock from one address was kept open ('$extra')"; fi
wait_for "$DIR/proxy.log" "a knock from .* refused: 4 open" "the proxy did not refuse the fifth knock" 10
for fd in 10 11 12 13 14; do eval "exec $fd>&-"; done
client after_knocks 2 --count 2 || fail "no application works after the knocks: $(tail -n 5 "$DIR/after_knocks.log")"
log "the doorbell refused a wrong secret and a fifth knock from one address"

log "an application that sends garbage is dropped while another streams on"
timeout 300 mpirun --bind-to none -n 2 "$LNET_MPI_STREAM" --server "$SERVER@tcp" --size 262144 \
  --stop-file "$DIR/B.stop" >"$DIR/B.log" 2>&1 &
B_JOB=$!
PIDS+=($B_JOB)
wait_for "$DIR/B.log" "^r1 t=" "B does not stream: $(tail -n 3 "$DIR/B.log")" 60
# lnetd prints a user pid as N(user); on the wire (and in the proxy's lines) it carries
# LNet's user flag, 0x80000000.
user_b=$(grep -o "pid [0-9]*(user) allocated" "$DIR/lnetd-${ROUTERS[0]}.log" | tail -n 1 | sed 's/pid \([0-9]*\).*/\1/')
pid_b=$((user_b | 0x80000000))
# rogue MODE ARGS...: proxy_rogue MODE joins as an application and sends what it must not;
# the proxy drops it alone and releases its pid.
rogue() {
  local mode=$1 n
  shift
  n=$(grep -c "the MPI LND refused: dropped" "$DIR/proxy.log" || true)
  mpirun --bind-to none -n 2 "$PROXY_ROGUE" "$mode" "$@" >"$DIR/$mode.log" 2>&1 &
  local job=$!
  PIDS+=($job)
  wait_for "$DIR/$mode.log" "$mode: sent" "the rogue client ($mode) sent nothing: $(tail -n 3 "$DIR/$mode.log")" 60
  for _ in $(seq 300); do [ "$(grep -c "the MPI LND refused: dropped" "$DIR/proxy.log")" -gt "$n" ] && break; sleep 0.1; done
  [ "$(grep -c "the MPI LND refused: dropped" "$DIR/proxy.log")" -gt "$n" ] ||
    fail "the proxy did not drop the rogue client ($mode): $(tail -n 3 "$DIR/proxy.log")"
  local pid
  pid=$(sed -n 's/.*application pid \([0-9]*\) sent .* refused: dropped.*/\1/p' "$DIR/proxy.log" | tail -n 1)
  [ "$pid" != "$pid_b" ] || fail "the proxy dropped B ($pid_b) for the rogue's messages ($mode)"
  wait_for "$DIR/lnetd-${ROUTERS[0]}.log" "pid $((pid & 0x7fffffff))(user) released" \
    "lnetd did not release the rogue's pid $pid ($mode)" 30
  kill "$job" 2>/dev/null || true
  log "$mode: the rogue (pid $pid) dropped, its pid released"
}
rogue garbage
rogue claim-pid "$pid_b"
b_before=$(grep -c "^r[01] t=" "$DIR/B.log")
for _ in $(seq 100); do [ "$(grep -c "^r[01] t=" "$DIR/B.log")" -gt "$b_before" ] && break; sleep 0.1; done
touch "$DIR/B.stop"
wait "$B_JOB" || fail "B failed: $(tail -n 5 "$DIR/B.log")"
b_failed=$(awk '/^summary/ {for (i = 1; i <= NF; i++) if ($i ~ /^failed=/) s += substr($i, 8)} END {print s + 0}' "$DIR/B.log")
[ "$b_failed" = 0 ] || fail "B lost $b_failed rounds while the rogues were dropped"
stall=$(awk '/^summary/ {for (i = 1; i <= NF; i++) if ($i ~ /^max_ms=/) {v = substr($i, 8); if (v > m) m = v}} END {print m + 0}' "$DIR/B.log")
log "B (pid $pid_b): no failed round; its longest round took $stall ms"

log "ompi-server gone"
stop_all "$OMPI_SERVER_PID" || true  # (its kill -KILL of a process gone fails under set -e)
try gone_name LNET_PROXY=name:lnet-dpm
bounded gone_name "ompi-server gone, a name" "LNET_PROXY|MPI" $RC $TOOK
try gone_port
bounded gone_port "ompi-server gone, a port file" "LNET_PROXY|MPI" $RC $TOOK
# The proxy answered that knock and entered MPI_Comm_accept, which only the name server
# could end: it says so and exits rather than answer no knock again.
wait_for "$DIR/proxy.log" "MPI_Comm_accept cannot be ended" "the proxy did not give up its accept without ompi-server" 60
for _ in $(seq 300); do kill -0 "$PROXY_JOB" 2>/dev/null || break; sleep 0.1; done
kill -0 "$PROXY_JOB" 2>/dev/null && fail "the proxy job still runs after giving up"
log "the standing proxy without its name server: $(grep -o 'MPI_Comm_accept cannot be ended.*' "$DIR/proxy.log" | cut -c1-120)"

log "ompi-server restarted: what it knew is gone"
rm -f "$DIR/ompi.uri"
px_ompi_server
try new_name LNET_PROXY=name:lnet-dpm
bounded new_name "ompi-server restarted, a name" "no proxy published the name 'lnet-dpm'" $RC $TOOK
try new_port
bounded new_port "ompi-server restarted, a port file" "LNET_PROXY|MPI" $RC $TOOK
log "PASS"
