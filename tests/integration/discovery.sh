#!/usr/bin/env bash
# Dynamic discovery between two lnetds (lnet-facts §4.2):
#   - B has two tcp NIs; A, told nothing about B, discovers it through one NID and ends
#     with one multi-rail peer holding both, B's first NI as primary; pings then use both;
#   - B brings up a third NI: it pushes its ping info and A learns the NI without
#     pinging B again;
#   - B turns discovery off: it pushes once more, without the DISCOVERY bit, and A marks
#     the peer NO_DISCOVERY.
. "$(dirname "$0")/lib.sh"
setup
new_ns A a
new_ns B b
link "$A" eth0 10.82.1.1/24 "$B" eth0 10.82.1.2/24
link "$A" eth1 10.82.2.1/24 "$B" eth1 10.82.2.2/24
link "$A" eth2 10.82.3.1/24 "$B" eth2 10.82.3.2/24
two_nis() {
  printf 'net:\n    - net type: tcp\n      local NI(s):\n        - interfaces:\n              0: eth0\n        - interfaces:\n              0: eth1\n'
}
lnetd_start "$A" a "$(two_nis)"
lnetd_start "$B" b "$(two_nis)"

# The GETs A has sent (pings are GETs): summed over its NIs' sent_stats.
gets_sent() {
  ctl a net show -v 2 | awk '/sent_stats:/ {s = 1; next} s && /get:/ {n += $2; s = 0} END {print n + 0}'
}
# The peer state of A's peer of B.
peer_state() { ctl a peer show -v 3 --nid 10.82.1.2@tcp | awk '/peer state:/ {print $3}'; }

log "A discovers B through 10.82.2.2@tcp"
ctl a discover 10.82.2.2@tcp | tee "$T_DIR/discover.out"
grep -q "primary nid: 10.82.1.2@tcp" "$T_DIR/discover.out" || fail "the primary is not B's first NI"
grep -q "Multi-Rail: true" "$T_DIR/discover.out" || fail "B is not multi-rail"
for nid in 10.82.1.2@tcp 10.82.2.2@tcp; do grep -q "nid: $nid" "$T_DIR/discover.out" || fail "discover lacks $nid"; done
ctl a peer show -v | tee "$T_DIR/peers.out"
[ "$(grep -c 'primary nid:' "$T_DIR/peers.out")" = 1 ] || fail "B is not one peer"
state=$(peer_state)
[ $((state & 0x10)) != 0 ] || fail "peer state $state lacks DISCOVERED"
[ $((state & 0x1)) != 0 ] || fail "peer state $state lacks MULTI_RAIL"
# B learned A from A's push, without pinging it.
ctl b peer show | grep -q "nid: 10.82.2.1@tcp" || fail "B did not learn A's second NI from its push"

log "pings of B go over both of its NIs"
for _ in $(seq 8); do ctl a ping 10.82.1.2@tcp >/dev/null || fail "ping"; done
ctl a peer show -v --nid 10.82.1.2@tcp >"$T_DIR/peer2.out"
awk '/-  *nid:/ {nid = $NF} /send_count:/ && nid {print nid, $2; nid = ""}' "$T_DIR/peer2.out" | tee "$T_DIR/sends.out"
[ "$(awk '$2 > 0' "$T_DIR/sends.out" | wc -l)" = 2 ] || fail "not both of B's NIs carried pings"

log "B brings up a third NI: A learns it from B's push, with no new ping"
before=$(gets_sent)
ctl b net add --net tcp --if eth2 || fail "net add on B"
for _ in $(seq 100); do
  ctl a peer show --nid 10.82.1.2@tcp | grep -q "nid: 10.82.3.2@tcp" && break
  sleep 0.1
done
ctl a peer show --nid 10.82.1.2@tcp | grep -q "nid: 10.82.3.2@tcp" || fail "A did not learn 10.82.3.2@tcp"
after=$(gets_sent)
[ "$after" = "$before" ] || fail "A sent $((after - before)) GETs (pings) to learn it"

log "B turns discovery off: it pushes without the DISCOVERY bit, A marks the peer NO_DISCOVERY"
ctl b set discovery 0 || fail "set discovery 0"
for _ in $(seq 100); do
  [ $(($(peer_state) & 0x2)) != 0 ] && break
  sleep 0.1
done
state=$(peer_state)
[ $((state & 0x2)) != 0 ] || fail "peer state $state lacks NO_DISCOVERY"
ctl b global show | grep -q "discovery: 0" || fail "B's discovery tunable"

log "done"
