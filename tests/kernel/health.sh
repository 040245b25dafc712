#!/usr/bin/env bash
# Health against a kernel peer (LNet's transaction_timeout is 20 s on this cluster, and
# both sides' self-test RPCs are given 20 s here instead of 64):
#  - a kernel node frozen mid-stream: u1's lst streams brw writes to k1, k1 is powered
#    off (its guest stopped, its links down: silence); u1's test RPCs fail and its health
#    of k1's NI falls (its socket LND gives a stalled connection 10 s here); k1 resumes, u1's recovery pings bring that health back to 1000,
#    and a new batch to k1 passes;
#  - lnetd killed under a kernel's stream: k1's lst streams brw writes to u1, u1's lnetd
#    is killed (SIGKILL); k1's test RPCs fail; u1 comes back (its node rebooted) and a
#    new batch from k1 passes.
# The times to the first error and to recovery are printed.
. "$(dirname "$0")/lib.sh"
kn_case kernel.health
LST=(env LST_SESSION=4243 lst)
health_of() {  # NODE PEER-NID: the health value NODE's peer show -v gives that peer NI
  on "$1" lnetctl peer show -v 2 --nid "$2" | awk -v n="$2" '/nid:/ {c = ($NF == n)} c && /health value:/ {print $NF; exit}'
}
# u1's lnetd with a 20 s self-test RPC timeout (its configuration, read at start).
conf=/run/lnet-cluster/$LNET_CLUSTER/nodes/u1/lnet.conf
cp "$conf" "$T_DIR/u1.conf"
undo "cp $T_DIR/u1.conf $conf; cl reboot u1"
sed -i 's/^selftest: enable$/selftest:\n    enable: 1\n    rpc_timeout: 20/' "$conf"
grep -q "rpc_timeout: 20" "$conf" || fail "cannot set u1's self-test rpc_timeout"
cl reboot u1 >/dev/null || fail "cannot restart u1"
# Its socket LND gives a stalled connection 10 s (not 50): the health falls sooner.
on u1 lnetctl net set --net tcp --lnd-timeout 10 || fail "u1: net set --lnd-timeout 10"
on k1 'echo 20 > /sys/module/lnet_selftest/parameters/rpc_timeout' || fail "cannot set k1's rpc_timeout"
undo "on k1 'echo 64 > /sys/module/lnet_selftest/parameters/rpc_timeout'"

# ---- k1 frozen under u1's stream ----
undo "[ \"\$(cl status | awk '\$1 == \"k1\" {print \$3}')\" = off ] && cl resume k1"
on u1 "${LST[@]}" new_session --force --timeout 300 freeze >/dev/null || fail "lst new_session on u1"
undo "on u1 ${LST[*]} end_session"
on u1 "${LST[@]}" add_group from "$U1" >/dev/null && on u1 "${LST[@]}" add_group to "$K1" >/dev/null || fail "add_group"
on u1 "${LST[@]}" add_batch b >/dev/null
on u1 "${LST[@]}" add_test --batch b --loop 100000 --concurrency 2 --from from --to to brw write size=64K >/dev/null ||
  fail "add_test on u1"
on u1 "${LST[@]}" run b >/dev/null
sleep 2
cl poweroff k1 >/dev/null
t0=$SECONDS
errors() { on u1 "${LST[@]}" show_error --session from | grep -q "Total [1-9][0-9]* error nodes in from"; }
wait_until 60 "u1's test RPCs to the frozen k1 fail" errors
t_err=$((SECONDS - t0))
fallen() { [ "$(health_of u1 "$K1")" -lt 1000 ]; }
wait_until 60 "u1's health of $K1 falls (now $(health_of u1 "$K1"))" fallen
h=$(health_of u1 "$K1")
on u1 "${LST[@]}" stop b >/dev/null || true
log "k1 frozen: u1's brw RPCs failed after $t_err s (RPC timeout 20 s), its health of $K1 fell to $h after $((SECONDS - t0)) s"
cl resume k1 >/dev/null
t0=$SECONDS
healthy() { [ "$(health_of u1 "$K1")" = 1000 ]; }
wait_until 90 "u1's health of $K1 back to 1000 after k1 resumed (now $(health_of u1 "$K1"))" healthy
on u1 "${LST[@]}" end_session >/dev/null || true
ubrw u1 "$U1" "$K1" --loop 8 --concurrency 2 brw write size=1M check=full
log "k1 resumed: u1's health of $K1 back to 1000 after $((SECONDS - t0)) s, a new brw write 1M check=full passes"

# ---- u1's lnetd killed under k1's stream ----
undo "lnetd_runs u1 || cl reboot u1"
klst k1 new_session --force --timeout 300 kill >/dev/null || fail "lst new_session on k1"
undo "klst k1 end_session"
klst k1 add_group from "$K1" >/dev/null && klst k1 add_group to "$U1" >/dev/null || fail "add_group on k1"
klst k1 add_batch b >/dev/null
klst k1 add_test --batch b --loop 100000 --concurrency 2 --from from --to to brw write size=64K >/dev/null ||
  fail "add_test on k1"
klst k1 run b >/dev/null
sleep 2
on u1 'kill -KILL $(cat /run/lnet/lnetd.pid)' || fail "cannot kill u1's lnetd"
t0=$SECONDS
kerrors() { klst k1 show_error --session from | grep -q "Total [1-9][0-9]* error nodes in from"; }
wait_until 60 "k1's test RPCs to the killed lnetd fail" kerrors
t_err=$((SECONDS - t0))
klst k1 stop b >/dev/null || true
klst k1 end_session >/dev/null || true
log "u1's lnetd killed: k1's brw RPCs failed after $t_err s (RPC timeout 20 s)"
cl reboot u1 >/dev/null || fail "cannot start u1 again"
kbrw k1 "$K1" "$U1" --loop 8 --concurrency 2 brw write size=1M check=full
log "u1 back: a new brw write 1M check=full from k1 passes"
log PASS
