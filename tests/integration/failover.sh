#!/usr/bin/env bash
# Health and failover between two hosts joined by two links (A: 10.80.1.1@tcp on eth0 and
# 10.80.2.1@tcp1 on eth1; B the same with .2), each a multi-rail peer of the other, a
# liblnet process on each. A streams PUT+ACK and GET rounds (data checked) to B while
# B's end of the second link goes silent (a blackhole route: what B sends to A's second
# address never leaves, and neither side sees its link change) and comes back:
#   - both links carry traffic before the cut;
#   - after it, every round goes over the first link and succeeds; a round that was on
#     the cut link when it went fails with an error within LNet's deadline, never hangs
#     (its message or its response is lost with the link: LNet resends neither a timed
#     out message nor a response); the longest single round is reported;
#   - the cut NI and peer NI lose health and go into recovery;
#   - once the link is back, recovery pings bring them to 1000 and both links carry
#     traffic again;
# then B's end of the second link is set down (both sides' socket LNDs see it: A's end
# loses its carrier): the NIs of that link are down at once (LNet 2.17), traffic goes on
# over the first link, and comes back when it is up.
# The socket LND's timeout is 4 s here (LNET_SOCK_TIMEOUT), transaction_timeout 10 s.
. "$(dirname "$0")/lib.sh"
setup
[ -x "$LNET_XFER" ] || fail "missing binary $LNET_XFER"
new_ns A a
new_ns B b
link "$A" eth0 10.80.1.1/24 "$B" eth0 10.80.1.2/24
link "$A" eth1 10.80.2.1/24 "$B" eth1 10.80.2.2/24
export LNET_SOCK_TIMEOUT=4 LNET_TRANSACTION_TIMEOUT=10 LNET_RETRY_COUNT=2

bg "$B" server timeout 300 "$LNET_XFER" serve --nid 10.80.1.2@tcp --nid 10.80.2.2@tcp1 \
  --peer 10.80.1.1@tcp --peer-nid 10.80.2.1@tcp1
wait_for_log server serving
bg "$A" stream timeout 300 "$LNET_XFER" stream --nid 10.80.1.1@tcp --nid 10.80.2.1@tcp1 \
  --peer 10.80.1.2@tcp --peer-nid 10.80.2.2@tcp1 --size 65536 --seconds 240 --stop-file "$T_DIR/stop"
S="$T_DIR/stream.log"

both='10\.80\.1\.1@tcp=\+[1-9][0-9]* 10\.80\.2\.1@tcp1=\+[1-9]'

until_line "$both" 30 || fail "the two links were not both used: $(grep '^t=' "$S" | tail -n 3)"
log "both links carry traffic: $(grep -E "$both" "$S" | tail -n 1 | cut -c1-60)"

log "cut: B's replies on the second link dropped (blackhole route)"
ip -n "$B" route add blackhole 10.80.2.1/32
mark=$(next_line)
until_line '10\.80\.2\.2@tcp1=[0-9]{1,3} ' 60 "$mark" || fail "the cut peer NI kept its health: $(grep '^t=' "$S" | tail -n 2)"
until_line 'recovery: local=[0-9]+ peer=[1-9]' 30 "$mark" || fail "nothing in recovery after the cut"
# Then rounds go on over the first link alone.
sleep 3
mark2=$(next_line)
until_line '10\.80\.1\.1@tcp=\+[1-9][0-9]* 10\.80\.2\.1@tcp1=\+0 ' 30 "$mark2" ||
  fail "traffic did not go on over the first link: $(grep '^t=' "$S" | tail -n 3)"
log "after the cut: $(grep '^t=' "$S" | tail -n 1 | cut -c1-250)"

log "link back: the blackhole route removed"
ip -n "$B" route del blackhole 10.80.2.1/32
mark3=$(next_line)
healthy='health: 10\.80\.1\.1@tcp=1000 10\.80\.2\.1@tcp1=1000 10\.80\.1\.2@tcp=1000 10\.80\.2\.2@tcp1=1000 recovery: local=0 peer=0'
until_line "$healthy" 120 "$mark3" || fail "recovery did not bring health back: $(grep '^t=' "$S" | tail -n 2)"
log "recovered: $(grep -E "$healthy" "$S" | tail -n 1 | cut -c1-60)"
mark4=$(next_line)
until_line "$both" 30 "$mark4" || fail "the second link carries no traffic again: $(grep '^t=' "$S" | tail -n 3)"
log "both links carry traffic again"

# ---- the link set down: its NIs down at once, traffic on the other link ---------------------
log "link down: B's eth1 down"
ip -n "$B" link set eth1 down
mark5=$(next_line)
until_line '10\.80\.1\.1@tcp=\+[1-9][0-9]* 10\.80\.2\.1@tcp1=\+0 ' 30 "$mark5" ||
  fail "traffic did not move to the first link: $(grep '^t=' "$S" | tail -n 3)"
grep -q "10.80.2.2@tcp1: link down: NI down" "$T_DIR/server.log" || fail "B's NI on the downed link is not down"
grep -q "10.80.2.1@tcp1: link down: NI down" "$S" || fail "A's NI on the link without carrier is not down"
log "link down: both NIs of the link down, traffic on the first link"
ip -n "$B" link set eth1 up
mark6=$(next_line)
until_line "$both" 60 "$mark6" || fail "the second link carries no traffic once up: $(grep '^t=' "$S" | tail -n 3)"
log "link up: both links carry traffic again"

stream_end
# Only what was on the link when it was cut or went down may fail: a round each time.
[ "$failed" -le 2 ] || fail "$failed rounds failed (at most the one in flight at each cut may)"
grep -E '^op [0-9]+: .* failed: -(110|5) ' "$S" >/dev/null || [ "$failed" = 0 ] ||
  fail "a round failed with an unexpected status: $(grep '^op ' "$S")"
log "longest round: ${max_ms} ms (socket LND timeout 4 s, transaction_timeout 10 s)"
log "PASS"
