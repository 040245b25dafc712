#!/usr/bin/env bash
# Routed failover: A on tcp (10.81.1.0/24), B on tcp1 (10.81.2.0/24), two routers R1 and
# R2 (lnetd, routing on) with two NIs on tcp and one on tcp1; each net is a bridge. A
# streams PUT+ACK and GET rounds (data checked) to B through both gateways while R1's
# link on tcp1 is cut and comes back, then steers them with a selection rule:
#   - both gateways carry traffic, over both of each one's NIs on tcp (A names one NID
#     of each gateway; discovery brings the other);
#   - after the cut, R1 reports its tcp1 NI down (it hears nothing there), A's next
#     ping of R1 sees it and takes the route down (avoid_asym_router_failure), and
#     traffic goes through R2 alone; B's pings of R1 fail, so B's route is down too;
#   - once the link is back, R1 hears B again, A's route comes back up and both gateways
#     carry traffic again;
#   - a router rule (udsp --dst B --rte R2) sends every round through R2, and its
#     removal spreads them again, with no round failing;
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
plug "$R1" eth2 10.81.1.12/24 "$S1"
plug "$R2" eth2 10.81.1.13/24 "$S1"
plug "$R1" eth1 10.81.2.2/24 "$S2"
plug "$R2" eth1 10.81.2.3/24 "$S2"
plug "$B" eth0 10.81.2.1/24 "$S2"

router_cfg() {
  printf 'net:\n    - net type: tcp\n      local NI(s):\n        - interfaces:\n              0: eth0\n'
  printf '        - interfaces:\n              0: eth2\n'
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
  --route tcp1@10.81.1.2@tcp --route tcp1@10.81.1.3@tcp --size 65536 --seconds 240 --stop-file "$T_DIR/stop" \
  --rule-file "$T_DIR/rules"
S="$T_DIR/stream.log"

# What A sent to each gateway in a second (PUTs and GETs): the router pings are one or
# two a second, traffic is hundreds.
both='via: 10\.81\.1\.2@tcp=\+[1-9][0-9]{2,} 10\.81\.1\.3@tcp=\+[1-9][0-9]{2,} '
r2_only='window_ops=[1-9][0-9]{2,} .* via: 10\.81\.1\.2@tcp=\+[0-9] 10\.81\.1\.3@tcp=\+[1-9][0-9]{2,} '
r1_route='route tcp1 via 10\.81\.1\.2@tcp'

until_line "$both" 60 || fail "the two gateways were not both used: $(grep '^t=' "$S" | tail -n 3)"
log "both gateways carry traffic: $(grep -E "$both" "$S" | tail -n 1 | grep -o 'via: [^h]*')"
fwd() { ctl "$1" stats show | sed -nE 's/^ *route_count: ([0-9]+)$/\1/p'; }
# recv NAME NID: what the router NAME's NI NID has received (net show -v statistics).
recv() { ctl "$1" net show -v | awk -v nid="$2" '/nid:/ {n = $NF} /recv_count:/ && n == nid {print $2; exit}'; }
# received NAME NID: true once the NI has received more than a few hundred messages.
received() { [ "$(recv "$1" "$2")" -gt 200 ] 2>/dev/null; }
for r in r1:10.81.1.2 r1:10.81.1.12 r2:10.81.1.3 r2:10.81.1.13; do
  for _ in $(seq 100); do received "${r%%:*}" "${r#*:}@tcp" && break; sleep 0.3; done
  received "${r%%:*}" "${r#*:}@tcp" ||
    fail "${r#*:}@tcp of ${r%%:*} received $(recv "${r%%:*}" "${r#*:}@tcp"): traffic does not use both of its NIs"
done
log "both NIs of each gateway on tcp receive traffic"
r2_before=$(fwd r2)

# route_goes STATE SINCE FROM_LINE: waits for A's route through R1 to go STATE (a line
# of the stream's from FROM_LINE on) and prints how long after SINCE (epoch seconds).
route_goes() {
  until_line "$r1_route: $1 at" 60 "$3" || fail "A's route through R1 did not go $1: $(tail -n 3 "$S")"
  local at
  at=$(tail -n +"$3" "$S" | grep -E "$r1_route: $1 at" | head -n 1 | sed -E 's/.* at ([0-9.]+)$/\1/')
  awk "BEGIN { printf \"%.2f\", $at - $2 }"
}

log "cut: R1's eth1 (tcp1) down"
mark=$(next_line)
cut=$(date +%s.%N)
ip -n "$R1" link set eth1 down
failover=$(route_goes down "$cut" "$mark")
log "A's route through R1 went down $failover s after the cut"
ctl r1 net show | grep -A3 '10.81.2.2@tcp1' | grep -q 'status: down' || fail "R1 does not report its tcp1 NI down"
mark2=$(next_line)
until_line "$r2_only" 60 "$mark2" || fail "traffic did not move to R2: $(grep '^t=' "$S" | tail -n 3)"
log "after the cut: $(tail -n +"$mark2" "$S" | grep -E "$r2_only" | head -n 1 | grep -o 'via: [^h]*')"
[ "$(fwd r2)" -gt "$r2_before" ] || fail "R2 forwarded nothing"

# (Coming back can take longer than the router pings: R1 refuses B's new connections as
# duplicates of the ones it still believes up, until those time out.)
log "link back: R1's eth1 up"
mark3=$(next_line)
back=$(date +%s.%N)
ip -n "$R1" link set eth1 up
recovery=$(route_goes up "$back" "$mark3")
log "A's route through R1 came back up $recovery s after the link"
mark4=$(next_line)
until_line "$both" 120 "$mark4" || fail "R1 carries no traffic again: $(grep '^t=' "$S" | tail -n 3)"
log "both gateways carry traffic again"

last_failed() { grep '^t=' "$S" | tail -n 1 | sed -E 's/.* failed=([0-9]+) .*/\1/'; }
failed_before=$(last_failed)
log "router rule: B through R2 only"
mark5=$(next_line)
# rules TEXT: hands the stream a rule file (renamed into place whole: the stream reads
# it as soon as it exists, and removes it).
rules() {
  echo "$1" >"$T_DIR/rules.tmp"
  mv "$T_DIR/rules.tmp" "$T_DIR/rules"
}
rules "dst=10.81.2.1@tcp1 rte=10.81.1.3@tcp"
until_line "^rule .*: applied" 10 "$mark5" || fail "the rule was not applied: $(tail -n 2 "$S")"
mark6=$(($(next_line) + 1))  # from the second full line after it
until_line "$r2_only" 30 "$mark6" || fail "the rule did not steer traffic to R2: $(grep '^t=' "$S" | tail -n 3)"
log "with the rule: $(tail -n +"$mark6" "$S" | grep -E "$r2_only" | head -n 1 | grep -o 'via: [^h]*')"
[ "$(last_failed)" = "$failed_before" ] || fail "rounds failed while the rule steered traffic"
mark7=$(next_line)
rules del
until_line "^rule 'del': applied" 10 "$mark7" || fail "the rule was not removed: $(tail -n 2 "$S")"
mark8=$(($(next_line) + 1))
until_line "$both" 60 "$mark8" || fail "traffic did not spread again without the rule: $(grep '^t=' "$S" | tail -n 3)"
log "rule removed: both gateways carry traffic"

stream_end
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
