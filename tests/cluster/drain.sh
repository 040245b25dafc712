#!/usr/bin/env bash
# Router drain (LNet 2.17) on the virtual cluster: a streams PUT+ACK and GET rounds (every
# byte checked) to b on tcp1 through two routers, r1 and r2 (lnetd, routing on):
#   - both routers forward a's rounds;
#   - `lnetctl set routing 0` on r1 under the stream: `routing show` shows no routing at once, a's
#     route through r1 goes down (r1's ping data says RTE_DISABLED: pushed, or seen at the
#     next router check), the rounds move to r2, and r1 still forwards what arrives until
#     it has been quiet ("routing drained" in its log), then drops; no round fails;
#   - `set routing 1`: r1 carries rounds again;
#   - r1's lnetd stopped (SIGTERM): it drains the same way, then exits 0; no round fails.
# LNet's timers are short: a gateway pinged every second with 2 s to answer.
. "$(dirname "$0")/lib.sh"
cl_setup drain -
D="$T_DIR/drain.cluster"
cat >"$D" <<'EOF'
fabric tcp0 10.96.1.0/24
fabric tcp1 10.96.2.0/24
node a  server        tcp0=11 lnetd=no
node r1 server,router tcp0=21 tcp1=21
node r2 server,router tcp0=22 tcp1=22
node b  server        tcp1=31 lnetd=no
global alive_router_check_interval 1
global router_ping_timeout 2
daemon b env LNET_ROUTER_PING_TIMEOUT=2 LNET_ALIVE_ROUTER_CHECK_INTERVAL=1 LNET_TRANSACTION_TIMEOUT=10 lnet-xfer serve --nid {b.tcp1}@tcp1 --route tcp@{r1.tcp1}@tcp1 --route tcp@{r2.tcp1}@tcp1
EOF
"$CLUSTER_SH" up "$D" --name "$LNET_CLUSTER" >"$T_DIR/up.log" 2>&1 || fail "cluster up: $(tail -n 20 "$T_DIR/up.log")"
R1=10.96.1.21@tcp
R2=10.96.1.22@tcp
B=10.96.2.31@tcp1
S="$T_DIR/stream.log"

on() { timeout 60 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" exec "$@"; }
(
  set +e
  timeout 400 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" exec a env LNET_ROUTER_PING_TIMEOUT=2 \
    LNET_ALIVE_ROUTER_CHECK_INTERVAL=1 LNET_TRANSACTION_TIMEOUT=10 lnet-xfer stream --nid 10.96.1.11@tcp \
    --peer "$B" --route "tcp1@$R1" --route "tcp1@$R2" --size 65536 --seconds 300 --stop-file "$T_DIR/stop"
  echo "exit $?"
) >"$S" 2>&1 &
T_BG+=($!)

# via NID: what a sent to gateway NID in the stream's last line (PUTs and GETs; its
# router pings are one or two a second).
via() { awk -v nid="$1" '/^t=/ {for (i = 1; i <= NF; i++) if (index($i, nid "=+") == 1) v = substr($i, length(nid) + 3)} END {print v + 0}' "$S"; }
failed() { awk '/^t=/ {for (i = 1; i <= NF; i++) if ($i ~ /^failed=/) v = substr($i, 8)} END {print v + 0}' "$S"; }
lines() { grep -c '^t=' "$S" || true; }
# carries NID: the last two lines of the stream sent over a hundred requests to NID.
carries() { [ "$(tail_via "$1" | awk '$1 > 100' | wc -l)" = 2 ]; }
idle() { [ "$(tail_via "$1" | awk '$1 <= 3' | wc -l)" = 2 ]; }
tail_via() { grep '^t=' "$S" | tail -n 2 | awk -v nid="$1" '{for (i = 1; i <= NF; i++) if (index($i, nid "=+") == 1) print substr($i, length(nid) + 3)}'; }
fwd() { on "$1" lnetctl stats show | awk '/^ *route_count:/ {print $2}'; }
routing_shows() { on "$1" lnetctl routing show | grep -q "enable: $2"; }
r1_log() { cl log r1 lnetd; }
drained_count() { grep -c "routing drained" "$(r1_log)" || true; }

wait_until 60 "a streams through r1 and r2: $(tail -n 3 "$S")" carries "$R1"
wait_until 30 "a streams through r2: $(tail -n 3 "$S")" carries "$R2"
log "both routers forward a's rounds: $(grep '^t=' "$S" | tail -n 1 | grep -o 'via:.*')"
[ "$(failed)" = 0 ] || fail "rounds failed before the drain: $(grep '^op ' "$S" | head -n 3)"

# ---- set routing 0 under the stream ------------------------------------------------------
t0=$(now)
on r1 lnetctl set routing 0 || fail "lnetctl set routing 0"
# (Routing off, lnetctl routing show prints nothing, as the kernel's.)
[ -z "$(on r1 lnetctl routing show)" ] || fail "routing show still shows routing after set routing 0: $(on r1 lnetctl routing show)"
wait_until 30 "r1 drained: $(tail -n 3 "$(r1_log)")" grep -q "routing drained" "$(r1_log)"
t1=$(now)
log "r1: $(grep -o 'routing drained.*' "$(r1_log)" | tail -n 1) ($(secs "$t0" "$t1") s after set routing 0)"
wait_until 30 "rounds move to r2 alone: $(tail -n 3 "$S")" idle "$R1"
carries "$R2" || fail "r2 does not carry the rounds: $(tail -n 2 "$S")"
before=$(fwd r1)
sleep 2
[ "$(fwd r1)" = "$before" ] || fail "r1 still forwards after the drain ($before -> $(fwd r1))"
[ "$(failed)" = 0 ] || fail "rounds failed during the drain: $(grep '^op ' "$S" | head -n 3)"
log "set routing 0: r1 announced it, a moved to r2, r1 stopped once quiet; no round failed"

# ---- back on -------------------------------------------------------------------------------
on r1 lnetctl set routing 1 || fail "lnetctl set routing 1"
routing_shows r1 1 || fail "routing show does not say 1"
wait_until 60 "r1 carries rounds again: $(tail -n 3 "$S")" carries "$R1"
log "set routing 1: r1 carries rounds again"

# ---- lnetd stopped: drains, then exits -------------------------------------------------------
pid=$(cat "/run/lnet-cluster/$LNET_CLUSTER/nodes/r1/pids/lnetd")
drains=$(drained_count)
kill -TERM "$pid"
wait_until 60 "r1's lnetd drained and exited: $(tail -n 3 "$(r1_log)")" eval '! kill -0 '"$pid"
grep -q "draining the routes through this node before shutting down" "$(r1_log)" || fail "lnetd did not drain on SIGTERM"
[ "$(drained_count)" -gt "$drains" ] || fail "lnetd exited before its routes drained: $(tail -n 5 "$(r1_log)")"
grep -q "lnetd stopped" "$(r1_log)" || fail "lnetd did not stop cleanly: $(tail -n 5 "$(r1_log)")"
wait_until 30 "rounds go through r2 alone: $(tail -n 3 "$S")" idle "$R1"
mark=$(lines)
wait_until 30 "rounds go on after r1 stopped" eval '[ "$(lines)" -gt $((mark + 2)) ]'
[ "$(failed)" = 0 ] || fail "rounds failed while r1's lnetd stopped: $(grep '^op ' "$S" | head -n 3)"
log "lnetd on r1 stopped: drained first, exited; no round failed"

touch "$T_DIR/stop"
wait_until 60 "the stream ended: $(tail -n 3 "$S")" grep -q '^summary:' "$S"
summary=$(grep '^summary:' "$S")
log "$summary"
echo "$summary" | grep -q ' failed=0 ' || fail "rounds failed: $(grep '^op ' "$S" | head -n 5)"
log "PASS"
