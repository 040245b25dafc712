#!/usr/bin/env bash
# LNet self-test from MPI ranks through the parallel proxy to an lnetd server: the
# application (lst-node --script, rank 0 the console) spawns its proxy (mode 2) on the
# router lnetd; the server lnetd on tcp runs the framework (selftest: enable). An lst
# script: brw write 1M, brw read 4k check=full and ping from both ranks to the server,
# no errors, stat; then the server is killed mid-batch: show_error reports the ranks'
# errors, the server is down in list_group --down, and the job ends without a hang.
# Then the other way round: a server lnetd's console (lst) drives ranks that joined its
# session through the proxy (lst-node --join), and they exit when it ends. And the ranks
# test the proxy's own lnetd (self-test on there too), named by its mpi NID: payloads
# of its MDs cross the bridge's bounce buffers.
# Needs root (port 988) and Open MPI (proxy_lib.sh).
. "$(dirname "$0")/proxy_lib.sh"
px_setup selftest_proxy
[ -x "${LST_NODE:-}" ] || fail "missing binary \$LST_NODE"
[ -x "${LST:-}" ] || fail "missing binary \$LST"
export LNET_PROXY_BIN

SERVER=127.0.5.1
ROUTER=127.0.5.2
px_router $ROUTER "selftest: enable"
px_selftest_server $SERVER $ROUTER

cat >"$DIR/script.lst" <<LST
new_session proxy_job
add_group clients @ALL@
add_group servers $SERVER@tcp
add_batch bulk
add_test --batch bulk --loop 10 --concurrency 2 --from clients --to servers brw write size=1M check=full
add_test --batch bulk --loop 20 --from clients --to servers brw read size=4k check=full
add_test --batch bulk --loop 50 --from clients --to servers ping
run bulk
query --loop 60 --delay 1 bulk
show_error clients servers
stat --count 1 --delay 1 clients servers
add_batch endless
add_test --batch endless --concurrency 2 --from clients --to servers brw write size=64k
run endless
# the test kills the server here
query --loop 30 --delay 1 endless
show_error clients
ping --group servers --timeout 5
list_group servers --down
stop --force endless
end_session
LST

log "ranks join an lnetd's console through the proxy"
export LST_SESSION=$$
lst() { timeout 90 "$LST" --socket "$DIR/server.ctl" "$@"; }
lst new_session from_lnetd >/dev/null || fail "new_session on the server's console"
LNET_PROXY="spawn:$DIR/$ROUTER.bridge" timeout 150 mpirun --bind-to none -n 2 "$LST_NODE" --join ranks \
  --console $SERVER@tcp >"$DIR/join.log" 2>&1 &
JOIN=$!
PIDS+=($JOIN)
wait_for "$DIR/join.log" "joined group ranks" "the ranks did not join" 60
for _ in $(seq 100); do
  [ "$(lst list_group ranks --active | grep -c "@mpi: Active")" = 2 ] && break
  sleep 0.2
done
lst list_group ranks --active | tee "$DIR/joined.out" | grep -q "Total 2 nodes" || fail "not two ranks in the group"
lst add_group self $SERVER@tcp >/dev/null || fail "add_group self"
lst add_test --loop 20 --concurrency 2 --from ranks --to self brw write size=1M check=full || fail "add_test"
lst add_test --loop 50 --from self --to ranks brw read size=4k check=full || fail "add_test from the server"
lst run | grep -q "running now" || fail "run"
for _ in $(seq 120); do lst query | grep -q "is stopped" && break; sleep 0.5; done
lst show_error ranks self | tee "$DIR/join_err.out"
grep -q "Total 0 error nodes in ranks" "$DIR/join_err.out" || fail "errors on the ranks"
grep -q "Total 0 error nodes in self" "$DIR/join_err.out" || fail "errors on the server"
lst end_session || fail "end_session"
rc=0
wait $JOIN || rc=$?
[ $rc = 0 ] || fail "the joined ranks did not end cleanly ($rc): $(tail -n 5 "$DIR/join.log")"

log "lst-node through the proxy to the proxy's own lnetd"
cat >"$DIR/own.lst" <<LST
new_session own_lnetd
add_group clients @ALL@
add_group own $ROUTER@mpi
add_test --loop 10 --concurrency 2 --from clients --to own brw write size=1M check=full
add_test --loop 20 --from clients --to own brw read size=1M check=full
add_test --loop 50 --from clients --to own ping
run
query --loop 60 --delay 1
show_error clients own
stat --count 1 --delay 1 clients own
end_session
LST
received() { "$LNETCTL" --socket "$DIR/$ROUTER.ctl" stats show | sed -n 's/^ *recv_length: *//p'; }
before=$(received)
LNET_PROXY="spawn:$DIR/$ROUTER.bridge" timeout 150 mpirun --bind-to none -n 2 "$LST_NODE" \
  --script "$DIR/own.lst" >"$DIR/own.log" 2>&1 || fail "lst-node to the proxy's lnetd: $(tail -n 5 "$DIR/own.log")"
# The brw writes alone bring 2 ranks x 10 x 1 MiB into the proxy's lnetd.
[ $(($(received) - before)) -ge $((20 << 20)) ] || fail "the proxy's lnetd received $(($(received) - before)) bytes"
grep -q "Total 0 error nodes in clients" "$DIR/own.log" || fail "errors on the ranks (own lnetd)"
grep -q "Total 0 error nodes in own" "$DIR/own.log" || fail "errors on the proxy's lnetd"
grep -q "\[LNet Bandwidth of own\]" "$DIR/own.log" || fail "no stat block of the proxy's lnetd"

log "lst-node through the proxy"
LNET_PROXY="spawn:$DIR/$ROUTER.bridge" timeout 150 mpirun --bind-to none -n 2 "$LST_NODE" --rpc-timeout 5 \
  --script "$DIR/script.lst" >"$DIR/run.log" 2>&1 &
JOB=$!
PIDS+=($JOB)
wait_for "$DIR/run.log" "endless is running now" "the endless batch did not start" 120
sleep 1
kill -KILL $SERVER_PID
rc=0
wait $JOB || rc=$?
[ $rc != 124 ] || fail "lst-node hung"
grep -q "(and through the proxy)" "$DIR/run.log" || fail "not through the proxy"
grep -q "bulk is running now" "$DIR/run.log" || fail "the batch did not run"
grep -q "Total 0 error nodes in clients" "$DIR/run.log" || fail "errors on the ranks before the kill"
grep -q "Total 0 error nodes in servers" "$DIR/run.log" || fail "errors on the server before the kill"
grep -q "\[LNet Bandwidth of servers\]" "$DIR/run.log" || fail "no stat block"
grep -q "Total [12] error nodes in clients" "$DIR/run.log" || fail "the server's death left no error on the ranks"
grep -q "$SERVER@tcp: Down" "$DIR/run.log" || fail "the server is not down"
"$LNETCTL" --socket "$DIR/$ROUTER.ctl" stats show | grep -q "route_count: [1-9]" || fail "the router forwarded nothing"
log "PASS"
