#!/usr/bin/env bash
# Routed failover: A on tcp (10.81.1.0/24), B on tcp1 (10.81.2.0/24), two routers R1 and
# R2 (lnetd, routing on) on both nets; each net is a bridge. A streams PUT+ACK and GET
# rounds (data checked) to B through both gateways while R1's link on tcp1 is cut and
# comes back:
#   - both gateways carry traffic;
#   - after the cut, R1 reports its tcp1 NI down (it hears nothing there), A's next
#     ping of R1 sees it and takes the route down (avoid_asym_router_failure), and
#     traffic goes through R2 alone; B's pings of R1 fail, so B's route is down too;
#   - once the link is back, R1 hears B again, A's route comes back up and both gateways
#     carry traffic again;
#   - every round completes or fails within LNet's deadline (transaction_timeout 10 s);
#     only rounds caught on R1 during the cut may fail.
# Printed: the failover time (cut -> A's route down) and the recovery time (link back ->
# route up), recorded in docs/perf.md. Router pings every second, 2 s to answer, on all
# four nodes.
. "$(dirname "$0")/lib.sh"
setup
[ -x "$LNET_XFER" ] || fail "missing binary $LNET_XFER"
new_switch S1 s1
new_switch S2 s2
new_ns A a
new_ns R1 r1
new_ns R2 r2
new_ns B b
plug "$A" eth0 10.81.1.1/24 "$S1"
plug "$R1" eth0 10.81.1.2/24 "$S1"
plug "$R2" eth0 10.81.1.3/24 "$S1"
plug "$R1" eth1 10.81.2.2/24 "$S2"
plug "$R2" eth1 10.81.2.3/24 "$S2"
plug "$B" eth0 10.81.2.1/24 "$S2"

router_cfg() {
  printf 'net:\n    - net type: tcp\n      local NI(s):\n        - interfaces:\n              0: eth0\n'
  printf '    - net type: tcp1\n      local NI(s):\n        - interfaces:\n              0: eth1\n'
  printf 'routing:\n    enable: 1\nglobal:\n    alive_router_check_interval: 1\n    router_ping_timeout: 2\n'
}
lnetd_start "$R1" r1 "$(router_cfg)"
lnetd_start "$R2" r2 "$(router_cfg)"
export LNET_SOCK_TIMEOUT=4 LNET_TRANSACTION_TIMEOUT=10 LNET_ALIVE_ROUTER_CHECK_INTERVAL=1 LNET_ROUTER_PING_TIMEOUT=2
bg "$B" server timeout 300 "$LNET_XFER" serve --nid 10.81.2.1@tcp1 \
  --route tcp@10.81.2.2@tcp1 --route tcp@10.81.2.3@tcp1
wait_for_log server serving
bg "$A" stream timeout 300 "$LNET_XFER" stream --nid 10.81.1.1@tcp --peer 10.81.2.1@tcp1 \
  --route tcp1@10.81.1.2@tcp --route tcp1@10.81.1.3@tcp --size 65536 --seconds 240 --stop-file "$T_DIR/stop"
S="$T_DIR/stream.log"

# until_line PATTERN SECONDS [FROM_LINE]: until a line of the stream's matches.
until_line() {
  local pattern="$1" secs="$2" from="${3:-1}"
  for _ in $(seq $((secs * 10))); do
    tail -n +"$from" "$S" 2>/dev/null | grep -Eq "$pattern" && return 0
    sleep 0.1
  done
  return 1
}
lines() { echo $(($(wc -l <"$S") + 1)); }
# What A sent to each gateway in a second (PUTs and GETs): the router pings are one or
# two a second, traffic is hundreds.
both='via: 10\.81\.1\.2@tcp=\+[1-9][0-9]{2,} 10\.81\.1\.3@tcp=\+[1-9][0-9]{2,} '
r2_only='window_ops=[1-9][0-9]{2,} .* via: 10\.81\.1\.2@tcp=\+[0-9] 10\.81\.1\.3@tcp=\+[1-9][0-9]{2,} '
r1_route='route tcp1 via 10\.81\.1\.2@tcp'

until_line "$both" 60 || fail "the two gateways were not both used: $(grep '^t=' "$S" | tail -n 3)"
log "both gateways carry traffic: $(grep -E "$both" "$S" | tail -n 1 | grep -o 'via: [^h]*')"
fwd() { ctl "$1" stats show | sed -nE 's/^ *route_count: ([0-9]+)$/\1/p'; }
r2_before=$(fwd r2)

log "cut: R1's eth1 (tcp1) down"
mark=$(lines)
cut=$(date +%s.%N)
ip -n "$R1" link set eth1 down
until_line "$r1_route: down at" 60 "$mark" || fail "A's route through R1 stayed up: $(tail -n 3 "$S")"
down_at=$(tail -n +"$mark" "$S" | grep -E "$r1_route: down at" | head -n 1 | sed -E 's/.* at ([0-9.]+)$/\1/')
failover=$(awk "BEGIN { printf \"%.2f\", $down_at - $cut }")
log "A's route through R1 went down $failover s after the cut"
ctl r1 net show | grep -A3 '10.81.2.2@tcp1' | grep -q 'status: down' || fail "R1 does not report its tcp1 NI down"
mark2=$(lines)
until_line "$r2_only" 60 "$mark2" || fail "traffic did not move to R2: $(grep '^t=' "$S" | tail -n 3)"
log "after the cut: $(tail -n +"$mark2" "$S" | grep -E "$r2_only" | head -n 1 | grep -o 'via: [^h]*')"
[ "$(fwd r2)" -gt "$r2_before" ] || fail "R2 forwarded nothing"

log "link back: R1's eth1 up"
mark3=$(lines)
back=$(date +%s.%N)
ip -n "$R1" link set eth1 up
until_line "$r1_route: up at" 60 "$mark3" || fail "A's route through R1 stayed down: $(tail -n 3 "$S")"
up_at=$(tail -n +"$mark3" "$S" | grep -E "$r1_route: up at" | head -n 1 | sed -E 's/.* at ([0-9.]+)$/\1/')
recovery=$(awk "BEGIN { printf \"%.2f\", $up_at - $back }")
log "A's route through R1 came back up $recovery s after the link"
mark4=$(lines)
until_line "$both" 120 "$mark4" || fail "R1 carries no traffic again: $(grep '^t=' "$S" | tail -n 3)"
log "both gateways carry traffic again"

touch "$T_DIR/stop"
for _ in $(seq 600); do grep -q '^summary:' "$S" && break; sleep 0.1; done
summary=$(grep '^summary:' "$S") || fail "no summary from the stream"
log "$summary"
grep '^op ' "$S" || true
failed=$(echo "$summary" | sed -E 's/.* failed=([0-9]+).*/\1/')
max_ms=$(echo "$summary" | sed -E 's/.* max_ms=([0-9]+).*/\1/')
ops=$(echo "$summary" | sed -E 's/summary: ops=([0-9]+).*/\1/')
[ "$ops" -gt 100 ] || fail "only $ops rounds"
# A round waits at most transaction_timeout for its ACK or REPLY (the monitor checks
# deadlines every second): never longer, whatever the cut did.
[ "$max_ms" -le 12000 ] || fail "a round took $max_ms ms: LNet's deadline (10 s) did not hold"
grep -E '^op [0-9]+: .* failed: -(110|5|113) ' "$S" >/dev/null || [ "$failed" = 0 ] ||
  fail "a round failed with an unexpected status: $(grep '^op ' "$S")"
# Rounds fail only while A or B still sent through R1: each such round costs 10 s, the
# routes go down within a few seconds, so a handful at most.
[ "$failed" -le 4 ] || fail "$failed rounds failed"
log "failover: route down ${failover} s after the cut, up ${recovery} s after the link came back;" \
  "$failed of $ops rounds failed, longest ${max_ms} ms"
log "PASS"
