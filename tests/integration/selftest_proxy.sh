#!/usr/bin/env bash
# LNet self-test from MPI ranks through the parallel proxy to an lnetd server: the
# application (lst-node --script, rank 0 the console) spawns its proxy (mode 2) on the
# router lnetd; the server lnetd on tcp runs the framework (selftest: enable). An lst
# script: brw write 1M, brw read 4k check=full and ping from both ranks to the server,
# no errors, stat; then the server is killed mid-batch: show_error reports the ranks'
# errors, the server is down in list_group --down, and the job ends without a hang.
# Needs root (port 988) and Open MPI (proxy_lib.sh).
. "$(dirname "$0")/proxy_lib.sh"
px_setup selftest_proxy
[ -x "${LST_NODE:-}" ] || fail "missing binary \$LST_NODE"
export LNET_PROXY_BIN

SERVER=127.0.5.1
ROUTER=127.0.5.2
px_router $ROUTER
printf 'net:\n    - net type: tcp\n      local NI(s):\n        - nid: %s@tcp\n          interfaces:\n              0: lo\nroute:\n    - net: mpi\n      gateway: %s@tcp\nselftest:\n    enable: 1\n' \
  $SERVER $ROUTER >"$DIR/server.yaml"
"$LNETD" -f -c "$DIR/server.yaml" -s "$DIR/server.ctl" -p "" --bridge "$DIR/server.bridge" >"$DIR/lnetd-server.log" 2>&1 &
PIDS+=($!)
SERVER_PID=$!
for _ in $(seq 100); do [ -S "$DIR/server.ctl" ] && break; sleep 0.1; done
[ -S "$DIR/server.ctl" ] || fail "the server lnetd did not come up"

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
