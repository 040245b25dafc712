#!/usr/bin/env bash
# Fault rules between two hosts, set both ways a site would:
#   - with lnetctl on a running lnetd: B drops every GET that comes to it, so A's pings
#     (GETs of B's ping buffer) fail within their timeout and B's `fault drop show`
#     counts them; B delays them by 2 s instead, so a ping takes at least that long and
#     succeeds; bad rules are refused naming the bad value, nothing added; del removes
#     the rules and pings work again;
#   - with LNET_FAULT on an application process: a server that drops every GET leaves
#     the client's GET to end without a REPLY (its MD unlinked, as LNet does) within its
#     transaction_timeout (3 s), while its PUTs still work.
. "$(dirname "$0")/lib.sh"
setup
[ -x "$LNET_XFER" ] || fail "missing binary $LNET_XFER"
new_ns A a
new_ns B b
link "$A" eth0 10.81.1.1/24 "$B" eth0 10.81.1.2/24
ip -n "$A" addr add 10.81.1.11/24 dev eth0
ip -n "$B" addr add 10.81.1.12/24 dev eth0
lnetd_start "$A" a "$(tcp_cfg eth0)"
lnetd_start "$B" b "$(tcp_cfg eth0)"
ctl a ping --timeout 5 10.81.1.2@tcp >/dev/null || fail "first ping"

log "B drops every GET to it (lnetctl fault drop)"
ctl b fault drop add --dest 10.81.1.2@tcp --message GET --rate 1 || fail "fault drop add"
ctl b fault drop show | tee "$T_DIR/show1.out" | grep -q "rate: 1" || fail "the rule is not shown"
if ctl a ping --timeout 2 10.81.1.2@tcp >"$T_DIR/ping1.out" 2>&1; then fail "a ping got through a rule dropping GETs"; fi
grep -q "errno" "$T_DIR/ping1.out" || fail "no error block: $(cat "$T_DIR/ping1.out")"
ctl b fault drop show | tee "$T_DIR/show2.out" | grep -Eq "dropped: [1-9]" || fail "B counted no drop"
grep -Eq "get: [1-9]" "$T_DIR/show2.out" || fail "the drop is not counted as a GET"

log "bad rules are refused, nothing added"
if ctl b fault drop add --dest 10.81.1.2@tcp --rate 1 --interval 2 >"$T_DIR/bad.out" 2>&1; then
  fail "rate and interval accepted"
fi
grep -q "exactly one of rate and interval" "$T_DIR/bad.out" || fail "no clear error: $(cat "$T_DIR/bad.out")"
if ctl b fault drop add --rate 1 --health_error sometimes >"$T_DIR/bad2.out" 2>&1; then fail "a bad health error accepted"; fi
grep -q "health_error 'sometimes'" "$T_DIR/bad2.out" || fail "no clear error: $(cat "$T_DIR/bad2.out")"
if ctl b fault drop add --dest 10.81.1@tcp --rate 1 >"$T_DIR/bad3.out" 2>&1; then fail "a bad NID accepted"; fi
grep -q "dest '10.81.1@tcp'" "$T_DIR/bad3.out" || fail "no clear error: $(cat "$T_DIR/bad3.out")"
[ "$(ctl b fault drop show | grep -c 'rate:')" = 1 ] || fail "a refused rule was added"
ctl b fault drop del --all || fail "fault drop del"
ctl a ping --timeout 5 10.81.1.2@tcp >/dev/null || fail "ping after the drop rule went"

log "B delays every GET to it by 2 s (lnetctl fault delay)"
ctl b fault delay add --message GET --rate 1 --latency 2 || fail "fault delay add"
start=$(date +%s%N)
ctl a ping --timeout 10 10.81.1.2@tcp >/dev/null || fail "ping with a delay rule"
ms=$((($(date +%s%N) - start) / 1000000))
[ "$ms" -ge 2000 ] || fail "the ping took ${ms} ms: the 2 s delay did not hold the GET"
log "with the delay rule the ping took ${ms} ms"
ctl b fault delay show | grep -Eq "delayed: [1-9]" || fail "B counted no delay"
ctl b fault delay del --all || fail "fault delay del"
ctl b fault delay show | grep -q "delay: \[\]" || fail "the delay rule is still there: $(ctl b fault delay show)"

log "an application server that drops every GET to its portal 40 (LNET_FAULT)"
bg "$B" serve env "LNET_FAULT=drop message=GET portal=40 rate=1" timeout 120 "$LNET_XFER" serve --nid 10.81.1.12@tcp
wait_for_log serve serving
start=$(date +%s)
out=$(ip netns exec "$A" env LNET_TRANSACTION_TIMEOUT=3 LNET_RETRY_COUNT=0 timeout 60 \
  "$LNET_XFER" check --nid 10.81.1.11@tcp --peer 10.81.1.12@tcp --sizes 4096 --timeout 30 2>&1) &&
  fail "the check passed although the server drops its GETs: $out"
secs=$(($(date +%s) - start))
echo "$out"
echo "$out" | grep -q "PUT ok, GET FAILED (no REPLY: timed out)" || fail "the GET did not time out"
[ "$secs" -lt 30 ] || fail "the GET took ${secs} s to fail (transaction_timeout 3 s)"
log "PASS"
