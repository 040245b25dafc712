#!/usr/bin/env bash
# A supervised standing proxy (lnet-proxy-supervise; loopback addresses 127.0.7.x):
#   - an application reaches the proxy by its published name;
#   - kill -9 of the proxy rank: the supervisor removes the dead job's port file and
#     restarts the job, which publishes the name again (taking it over if the dead one
#     left it: its doorbell no longer answers); the next application works, by name and
#     by port file;
#   - a second proxy asking for the same name while the first runs is refused;
#   - SIGTERM to the supervisor stops the job cleanly: port file removed, nothing left.
# Needs root (port 988) and Open MPI (proxy_lib.sh).
. "$(dirname "$0")/proxy_lib.sh"
px_setup proxy_supervise
: "${LNET_PROXY_SUPERVISE:?lnet-proxy-supervise (set by CTest)}"

SERVER=127.0.7.1
ROUTER=127.0.7.2
px_router $ROUTER
px_server $SERVER $ROUTER
px_ompi_server
NAME="lnet-supervised-$$"

log "the supervisor starts the standing job"
"$LNET_PROXY_SUPERVISE" --backoff 1 -- env -u LNET_PROXY mpirun --bind-to none -n 1 "$LNET_PROXY_BIN" \
  --bridge "$DIR/$ROUTER.bridge" --port-file "$DIR/proxy.port" --publish "$NAME" --client-timeout 3 \
  >"$DIR/supervisor.log" 2>&1 &
SUP=$!
PIDS+=($SUP)
wait_for "$DIR/supervisor.log" "lnet-proxy: ready" "the supervised proxy did not come up"
LNET_PROXY="name:$NAME" LNET_PROXY_SECRET="$DIR/proxy.port" client first 1 --count 2 || fail "an application by name: $(tail -n 5 "$DIR/first.log")"
port1=$(sed -n 's/^port //p' "$DIR/proxy.port")

log "kill -9 of the proxy rank: restarted under the same name"
proxy=$(pgrep -f "^$LNET_PROXY_BIN --bridge $DIR/")
[ -n "$proxy" ] || fail "no proxy rank running"
kill -9 "$proxy"
wait_for "$DIR/supervisor.log" "restarting in" "the supervisor did not notice the job end" 30
for _ in $(seq 300); do [ "$(grep -c 'lnet-proxy: ready' "$DIR/supervisor.log")" -ge 2 ] && break; sleep 0.1; done
[ "$(grep -c 'lnet-proxy: ready' "$DIR/supervisor.log")" -ge 2 ] || fail "no restart: $(tail -n 8 "$DIR/supervisor.log")"
# (ompi-server may have dropped the dead job's names itself; if not, the new job took
# them over: either way the name leads to the new job.)
port2=$(sed -n 's/^port //p' "$DIR/proxy.port")
[ -n "$port2" ] && [ "$port2" != "$port1" ] || fail "the port file was not replaced ('$port1' -> '$port2')"
LNET_PROXY="name:$NAME" LNET_PROXY_SECRET="$DIR/proxy.port" client by_name 1 --count 2 || fail "by name after the restart: $(tail -n 5 "$DIR/by_name.log")"
LNET_PROXY="$DIR/proxy.port" client by_file 1 --count 2 || fail "by port file after the restart: $(tail -n 5 "$DIR/by_file.log")"

log "a second proxy cannot take a live proxy's name"
if env -u LNET_PROXY timeout 60 mpirun --bind-to none -n 1 "$LNET_PROXY_BIN" --bridge "$DIR/$ROUTER.bridge" \
  --port-file "" --publish "$NAME" >"$DIR/second.log" 2>&1; then
  fail "a second proxy published the name of a running one"
fi
grep -q "belongs to a running proxy" "$DIR/second.log" || fail "no reason given: $(tail -n 5 "$DIR/second.log")"

log "SIGTERM to the supervisor stops everything"
kill -TERM "$SUP"
for _ in $(seq 400); do kill -0 "$SUP" 2>/dev/null || break; sleep 0.1; done
kill -0 "$SUP" 2>/dev/null && fail "the supervisor did not stop in 40 s"
wait "$SUP" || fail "the supervisor ended with status $?"
[ -z "$(pgrep -f "^$LNET_PROXY_BIN --bridge $DIR/")" ] || fail "a proxy rank outlived its supervisor"
[ ! -e "$DIR/proxy.port" ] || fail "the port file outlived the proxy"
log "PASS"
