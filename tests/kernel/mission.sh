#!/usr/bin/env bash
# The mission's path to a Lustre node's LNet: MPI ranks on c1 -> their lnet-proxy rank on
# r1 (spawned, mode 2) -> r1's lnetd, routing between the MPI network (gni, a type the
# kernel names) and tcp -> the kernel node k1, which routes to gni through r1. The
# kernel pings r1's NID on gni; the ranks run lst brw write and read 1M check=full and
# ping against k1 (lst-node, rank 0 the console): no error; then k1's own lst console
# drives the ranks, which join its session: brw write 1M check=full from them to k1.
. "$(dirname "$0")/lib.sh"
kn_case kernel.mission

R1GNI=$(on r1 lnetctl net show --net gni | awk '$2 == "nid:" {print $3; exit}')
[ "$R1GNI" = 174129173@gni ] || fail "r1's NID on gni is '$R1GNI', not 174129173@gni (10.97.0.21 as the kernel writes it)"
on k1 lnetctl ping "$R1GNI" >"$T_DIR/ping.out" || fail "k1 cannot ping $R1GNI: $(cat "$T_DIR/ping.out")"
SPAWN=LNET_PROXY=spawn:r1:/run/lnet/bridge.sock
shared=/run/lnet-cluster/$LNET_CLUSTER/shared
job() { timeout 150 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" mpirun --host c1:2,r1:1 -n 2 -x LNET_LOG_LEVEL=warn -x "$SPAWN" "$@"; }

cat >"$shared/mission.lst" <<LST
new_session mission
add_group ranks @ALL@
add_group lustre $K1
add_batch bulk
add_test --batch bulk --loop 8 --concurrency 2 --from ranks --to lustre brw write size=1M check=full
add_test --batch bulk --loop 8 --concurrency 2 --from ranks --to lustre brw read size=1M check=full
add_test --batch bulk --loop 20 --from ranks --to lustre ping
run bulk
query --loop 120 --delay 1 bulk
show_error --session ranks lustre
end_session
LST
before=$(stat_of k1 recv_length)
job lst-node --script "$shared/mission.lst" >"$T_DIR/script.log" 2>&1 || fail "lst-node: $(tail -n 15 "$T_DIR/script.log")"
grep -q "(and through the proxy)" "$T_DIR/script.log" || fail "the ranks did not go through the proxy: $(head -n 5 "$T_DIR/script.log")"
grep -q "Total 0 error nodes in ranks" "$T_DIR/script.log" && grep -q "Total 0 error nodes in lustre" "$T_DIR/script.log" ||
  fail "self-test errors between the ranks and k1: $(grep -A3 show_error "$T_DIR/script.log")"
got=$(($(stat_of k1 recv_length) - before))
[ "$got" -ge $((16 << 20)) ] || fail "k1 received $got bytes of the ranks' 2 x 8 MiB brw writes"
log "ranks -> proxy -> r1 -> k1: lst-node brw write and read 1M check=full and ping, no error; k1 received $((got >> 20)) MiB"

# k1's console drives the ranks: they join its session.
klst k1 new_session --force --timeout 120 kconsole >/dev/null || fail "lst new_session on k1"
undo "klst k1 end_session"
klst k1 add_group lustre "$K1" >/dev/null || fail "lst add_group on k1"
job lst-node --join ranks --console "$K1" >"$T_DIR/join.log" 2>&1 &
T_BG+=($!)
joined=$!
active() { [ "$(klst k1 list_group ranks 2>/dev/null | awk 'NF >= 5 && $1 ~ /^[0-9]+$/ {print $1; exit}')" = 2 ]; }
wait_until 60 "the 2 ranks join k1's session: $(tail -n 3 "$T_DIR/join.log")" active
before=$(stat_of k1 recv_length)
klst k1 add_batch b >/dev/null
klst k1 add_test --batch b --loop 8 --concurrency 2 --from ranks --to lustre brw write size=1M check=full >"$T_DIR/add.out" ||
  fail "lst add_test on k1: $(cat "$T_DIR/add.out")"
klst k1 run b >/dev/null
stopped() { klst k1 query b | grep -q stopped; }
wait_until 120 "k1's batch ends" stopped
klst k1 show_error --session ranks lustre >"$T_DIR/kerr.out"
grep -q "Total 0 error nodes in ranks" "$T_DIR/kerr.out" || fail "errors on the ranks (k1's console): $(cat "$T_DIR/kerr.out")"
klst k1 end_session >/dev/null
wait $joined || fail "the joined ranks did not end with k1's session: $(tail -n 5 "$T_DIR/join.log")"
got=$(($(stat_of k1 recv_length) - before))
[ "$got" -ge $((16 << 20)) ] || fail "k1 received $got bytes of the joined ranks' brw writes"
log "k1's lst console drives the joined ranks: brw write 1M check=full, no error; k1 received $((got >> 20)) MiB"
log PASS
