#!/usr/bin/env bash
# The node's own NIDs are peers like any other (LNet makes a peer for any destination),
# driven the way Lustre's LNet test suite drives them:
#   - a ping of a local NID makes a peer that peer show and debug peer see;
#   - discover of a local NID merges the node's NIDs into one peer (the first NID
#     primary), also through import --exec; discover 0@lo works;
#   - peer add --prim_nid LOCAL --lock_prim, peer set --state, and a discovery that
#     then consolidates the NIDs under the locked primary;
#   - a UDSP rule on the destination net shows on the self-peer's NIs.
. "$(dirname "$0")/lib.sh"
setup
new_ns A a
new_ns B b
link "$A" eth0 10.83.1.1/24 "$B" eth0 10.83.1.2/24
link "$A" eth1 10.83.2.1/24 "$B" eth1 10.83.2.2/24
lnetd_start "$A" a "$(printf 'net:\n    - net type: tcp\n      local NI(s):\n        - interfaces:\n              0: eth0\n    - net type: tcp1\n      local NI(s):\n        - interfaces:\n              0: eth1\n')"
nid1=10.83.1.1@tcp
nid2=10.83.2.1@tcp1

log "ping of a local NID makes its peer"
ctl a peer show | grep -q "nid: $nid1" && fail "a peer of $nid1 before any ping"
ctl a ping "$nid1" >/dev/null || fail "ping of $nid1"
ctl a peer show | tee "$T_DIR/p1.out" | grep -q "primary nid: $nid1" || fail "no peer of $nid1 after pinging it"
ctl a debug peer --nid "$nid1" || fail "debug peer --nid $nid1"

log "discover of a local NID: one peer with the node's NIDs, the first one primary"
ctl a ping "$nid2" >/dev/null || fail "ping of $nid2"
ctl a discover "$nid2" | tee "$T_DIR/d1.out"
grep -q "primary nid: $nid1" "$T_DIR/d1.out" || fail "discover of $nid2 does not name $nid1 primary"
ctl a peer show --nid "$nid1" | grep -q "nid: $nid2" || fail "$nid2 is not listed under $nid1"
[ "$(ctl a peer show | grep -c 'primary nid: 10.83')" = 1 ] || fail "the node's NIDs are not one peer"

log "discover 0@lo"
ctl a discover 0@lo | tee "$T_DIR/lo.out" || fail "discover 0@lo"
grep -q "0@lo" "$T_DIR/lo.out" || fail "discover 0@lo does not report 0@lo"

log "import --exec discovers a local NID"
ctl a peer del --prim_nid "$nid1" || fail "peer del"
printf 'discover:\n    - nid: %s\n' "$nid1" >"$T_DIR/exec.yaml"
ctl a import --exec "$T_DIR/exec.yaml" || fail "import --exec discover $nid1"
ctl a peer show --nid "$nid1" | grep -q "nid: $nid2" || fail "import --exec did not discover $nid1"

log "a locked primary of our own, its state set by hand, consolidation under it"
ctl a peer del --prim_nid "$nid1" || fail "peer del"
ctl a peer add --prim_nid "$nid2" --lock_prim || fail "peer add --prim_nid $nid2 --lock_prim"
state=$(ctl a peer show -v 4 --nid "$nid2" | awk '/peer state/ {print $NF}')
[ "$state" = 1048585 ] || fail "peer state $state, expected 1048585 (MULTI_RAIL|CONFIGURED|LOCK_PRIMARY)"
ctl a peer set --nid "$nid2" --state 1048577 || fail "peer set --state 1048577"
state=$(ctl a peer show -v 4 --nid "$nid2" | awk '/peer state/ {print $NF}')
[ "$state" = 1048577 ] || fail "peer state $state after peer set --state 1048577"
ctl a discover "$nid1" >/dev/null || fail "discover $nid1"
ctl a peer show | tee "$T_DIR/p2.out"
[ "$(grep -c "primary nid: 10.83" "$T_DIR/p2.out")" = 1 ] || fail "not consolidated into one peer"
grep -q "primary nid: $nid2" "$T_DIR/p2.out" || fail "$nid2 did not stay primary"
grep -q "nid: $nid1" "$T_DIR/p2.out" || fail "$nid1 did not join $nid2"
state=$(ctl a peer show -v 4 --nid "$nid2" | awk '/peer state/ {print $NF}')
[ "$state" = 1048849 ] || fail "peer state $state, expected 1048849 (+DISCOVERED|NIDS_UPTODATE)"

log "a UDSP rule on the destination net shows on the self-peer"
ctl a peer del --prim_nid "$nid2" --force || fail "peer del --force"
ctl a udsp add --dst tcp --prio 1 || fail "udsp add"
ctl a discover "$nid1" >/dev/null || fail "discover $nid1"
ctl a peer show -v 5 | tee "$T_DIR/u.out" >/dev/null
awk '/-  *nid:/ {nid = $NF} /net priority:/ {print nid, $NF}' "$T_DIR/u.out" | tee "$T_DIR/prio.out"
grep -q "^$nid1 1$" "$T_DIR/prio.out" || fail "$nid1 lacks net priority 1"
grep -q "^$nid2 -1$" "$T_DIR/prio.out" || fail "$nid2 (net tcp1) has a net priority"
log "ok"
