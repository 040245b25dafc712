#!/usr/bin/env bash
# Bad input on lnetd's bridge while a proxy serves an application (loopback addresses
# 127.0.4.x): a hostile client (bridge_probe) sends garbage before HELLO (ERRORs, then
# the connection closed), well-formed messages for pids it did not register,
# descriptors out of range or stale, lengths over the limit, frames that lie about
# their length (each refused with an ERROR, logged and counted), and connects as a uid
# that may not (closed without a WELCOME). lnetd, the proxy and the application running
# through it are unaffected; the next application works.
# Needs root (port 988, another uid) and Open MPI (proxy_lib.sh).
. "$(dirname "$0")/proxy_lib.sh"
px_setup bridge_bad_input
[ -x "$BRIDGE_PROBE" ] || fail "missing binary $BRIDGE_PROBE"

SERVER=127.0.4.1
ROUTER=127.0.4.2
px_router $ROUTER
LNETD=$LNETD_PID
px_server $SERVER $ROUTER
px_ompi_server
px_proxy proxy $ROUTER
BRIDGE="$DIR/$ROUTER.bridge"

log "an application running through the proxy meanwhile"
client during 2 --count 300 &
APP=$!
wait_for "$DIR/lnetd-$ROUTER.log" "allocated" "the application did not reach lnetd"

log "garbage before HELLO"
"$BRIDGE_PROBE" garbage "$BRIDGE" >"$DIR/garbage.out" 2>&1 || fail "garbage: $(cat "$DIR/garbage.out")"
log "forged messages"
"$BRIDGE_PROBE" forged "$BRIDGE" >"$DIR/forged.out" 2>&1 || fail "forged: $(cat "$DIR/forged.out")"
log "a uid that may not connect"
# The directory's and the socket's modes let it in: lnetd's SO_PEERCRED check must not.
chmod 755 "$DIR"
chmod 666 "$BRIDGE"
"$BRIDGE_PROBE" uid "$BRIDGE" 65534 >"$DIR/uid.out" 2>&1 || fail "uid: $(cat "$DIR/uid.out")"
cat "$DIR"/garbage.out "$DIR"/forged.out "$DIR"/uid.out

wait $APP || fail "the application running meanwhile failed"
grep -q "all ranks ok" "$DIR/during.log" || fail "the application running meanwhile: no 'all ranks ok'"
kill -0 "$LNETD" || fail "lnetd died"
for p in "${PROXY_PIDS[@]}"; do kill -0 "$p" || fail "proxy rank $p died"; done

# Logged and counted.
grep -q "too many bad messages" "$DIR/lnetd-$ROUTER.log" || fail "lnetd did not log closing the garbage connection"
grep -q "PARSE for pid 424242(user), which this proxy did not register" "$DIR/lnetd-$ROUTER.log" ||
  fail "lnetd did not log the forged PARSE"
grep -q "bridge connection refused" "$DIR/lnetd-$ROUTER.log" || fail "lnetd did not log the refused uid"
"$LNETCTL" --socket "$DIR/$ROUTER.ctl" stats show >"$DIR/stats.yaml"
bad=$(sed -n 's/^ *bad_messages: //p' "$DIR/stats.yaml")
refused=$(sed -n 's/^ *refused_connections: //p' "$DIR/stats.yaml")
[ "${bad:-0}" -ge 26 ] || fail "bad_messages $bad, expected 16 (garbage) + 10 (forged): $(cat "$DIR/stats.yaml")"
[ "${refused:-0}" = 1 ] || fail "refused_connections '$refused', expected 1"

log "the next application"
client after 2 --count 2 || fail "the application after the bad input failed"
log "PASS"
