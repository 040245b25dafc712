#!/usr/bin/env bash
# LNet self-test between lnetds in three namespaces: A runs the console (and is a
# client), B and C are servers. An lst script as users write it: a session, two groups,
# a batch with brw write 1M and brw read 4k (check=full) and a ping test, stat, query,
# show_error; then C is killed mid-batch: show_error and list_group --down report it and
# nothing hangs. Checks that the data checks passed and that the counters add up.
. "$(dirname "$0")/lib.sh"
setup
[ -x "${LST:-}" ] || fail "missing binary \$LST"
new_ns A a
new_switch SW sw
new_ns B b
new_ns C c
plug "$A" eth0 10.78.1.1/24 "$SW"
plug "$B" eth0 10.78.1.2/24 "$SW"
plug "$C" eth0 10.78.1.3/24 "$SW"
for n in a b c; do
  ns_var=${n^^}
  # rpc_timeout: test RPCs to a node that died fail after 20 s, not the default 64.
  lnetd_start "${!ns_var}" "$n" "$(tcp_cfg eth0)
selftest:
    enable: 1
    rpc_timeout: 20
"
done

export LST_SESSION=$$ LNET_CTL_SOCKET="$T_DIR/a.sock"
lst() { timeout 90 "$LST" "$@"; }

log "session and groups"
lst new_session --timeout 120 it_session | tee "$T_DIR/lst.out" | grep -q "SESSION: it_session FEATURES: 1" ||
  fail "new_session: $(cat "$T_DIR/lst.out")"
lst add_group clients 10.78.1.1@tcp || fail "add_group clients"
lst add_group servers '10.78.1.[2-3]@tcp' || fail "add_group servers"
lst list_group servers | tee "$T_DIR/lst.out"
grep -qP "^\t2\t0\t0\t0\t2" "$T_DIR/lst.out" || fail "servers not all active"
LST_SESSION=1 lst list_group 2>"$T_DIR/err.out" && fail "another key was let in"
grep -q "LST_SESSION" "$T_DIR/err.out" || fail "key error unclear: $(cat "$T_DIR/err.out")"
lst add_group bad 'nonsense' 2>"$T_DIR/err.out" && fail "a bad node list was taken"
grep -q "nonsense" "$T_DIR/err.out" || fail "bad node list error names nothing: $(cat "$T_DIR/err.out")"

log "batch: brw write 1M, brw read 4k check=full, ping"
lst add_batch bulk || fail "add_batch"
lst add_test --batch bulk --loop 20 --concurrency 4 --distribute 1:2 --from clients --to servers \
  brw write size=1M check=full || fail "add_test write"
lst add_test --batch bulk --loop 50 --concurrency 2 --distribute 1:2 --from clients --to servers \
  brw read size=4k check=full || fail "add_test read"
lst add_test --batch bulk --loop 100 --from clients --to servers ping || fail "add_test ping"
lst add_test --batch bulk --from clients --to servers brw size=3M 2>"$T_DIR/err.out" && fail "3M taken"
grep -q "size" "$T_DIR/err.out" || fail "size error unclear: $(cat "$T_DIR/err.out")"
lst list_batch bulk | grep -q "Test 1(brw)" || fail "list_batch"
lst run bulk | grep -q "bulk is running now" || fail "run"
for _ in $(seq 120); do
  lst query bulk | grep -q "^bulk \[0\] is stopped" && break
  sleep 0.5
done
lst query bulk | grep -q "^bulk \[0\] is stopped" || fail "batch did not end"
lst show_error clients servers | tee "$T_DIR/err.out"
grep -q "Total 0 error nodes in clients" "$T_DIR/err.out" || {
  for n in a b c; do echo "--- $n"; ctl $n stats show; ctl $n peer show -v 2>/dev/null | grep -E "nid|health|dropped|sent|received" | head -20; done
  fail "errors on the client"
}
grep -q "Total 0 error nodes in servers" "$T_DIR/err.out" || fail "errors on the servers"

log "stat: counters consistent"
lst stat --count 1 --delay 1 servers | tee "$T_DIR/stat.out"
grep -q "\[LNet Rates of servers\]" "$T_DIR/stat.out" || fail "no stat block"
grep -q "\[LNet Bandwidth of servers\]" "$T_DIR/stat.out" || fail "no bandwidth block"
# The RPC counters: the client sent every test RPC, the servers received them.
ctl_stat() { "$LST" stat --count 1 --delay 1 --yaml "$1" >/dev/null; }
ctl_stat clients || fail "stat --yaml"
lst stat --count 1 --delay 1 --csv clients servers | tee "$T_DIR/stat.csv"
[ "$(head -1 "$T_DIR/stat.csv" | cut -d, -f1-3)" = "time_s,group,nodes" ] || fail "csv header"
[ "$(wc -l <"$T_DIR/stat.csv")" = 3 ] || fail "csv: one line per group"
ctl b stats show | tee "$T_DIR/stats_b.out" | grep -q "selftest statistics" || fail "no selftest block in stats show"
grep -q "rpcs_rcvd: [1-9]" "$T_DIR/stats_b.out" || fail "B's self-test counted no request"
grep -q "rejected_requests: 0" "$T_DIR/stats_b.out" || fail "B refused requests: $(cat "$T_DIR/stats_b.out")"

log "run again; kill C mid-batch"
lst add_batch endless || fail "add_batch endless"
lst add_test --batch endless --concurrency 2 --distribute 1:2 --from clients --to servers \
  brw write size=64k check=simple || fail "add_test endless"
lst run endless | grep -q "running now" || fail "run endless"
sleep 2
lnetd_kill c
for _ in $(seq 120); do
  lst show_error clients | grep -q "brw errors" && break
  sleep 0.5
done
lst show_error clients | tee "$T_DIR/err.out"
grep -q "Total 1 error nodes in clients" "$T_DIR/err.out" || fail "the client's errors are not shown"
lst ping --group servers | tee "$T_DIR/ping.out"
lst list_group servers --down | tee "$T_DIR/down.out"
grep -q "10.78.1.3@tcp: Down" "$T_DIR/down.out" || fail "C is not down"
grep -q "Total 1 nodes" "$T_DIR/down.out" || fail "B counted as down"
lst stop --force endless || fail "stop"
lst end_session || fail "end_session"
lst show_session 2>/dev/null && fail "the session did not end"
log "PASS"
