#!/usr/bin/env bash
# A local NI's status follows its interface's link and its health (LNet 2.17), as the
# node shows it (net show), as its peers hear it (ping) and as routes through it follow:
#   - the interface set down, then up: the NI is down, then up (no restart);
#   - its carrier lost (the switch's port down: `cluster.sh partition`), then back: the same;
#   - a router's far-side link cut: the router's peers see that NI down in its ping data
#     and their route through it goes down; healed, it comes back;
#   - `net set --health 0` on the router's far-side NI while health is on (its sends
#     failed by a fault rule, so health stays 0): down, and the route through it
#     too; `--health 1000`: up; with health off, health 0 is not down.
. "$(dirname "$0")/lib.sh"
cl_setup ni_status -
D="$T_DIR/ni.cluster"
cat >"$D" <<'EOF'
fabric tcp0 10.95.1.0/24
fabric tcp1 10.95.2.0/24
node a server        tcp0=11
node r server,router tcp0=21 tcp1=21
node b server        tcp1=31
route a tcp1 r
route b tcp r
global alive_router_check_interval 1
global router_ping_timeout 2
EOF
"$CLUSTER_SH" up "$D" --name "$LNET_CLUSTER" >"$T_DIR/up.log" 2>&1 || fail "cluster up: $(tail -n 20 "$T_DIR/up.log")"

A=10.95.1.11@tcp
R0=10.95.1.21@tcp
R1=10.95.2.21@tcp1
# ni_is NODE NID up|down: NODE's net show gives its NI NID that status.
ni_is() { cl exec "$1" lnetctl net show | grep -A1 "nid: $2\$" | grep -q "status: $3"; }
# route_is NODE NET GW up|down
route_is() { cl exec "$1" lnetctl route show -v | grep -A6 "net: $2\$" | grep -A5 "gateway: $3\$" | grep -q "state: $4"; }

wait_until 20 "a's NI up at start" ni_is a "$A" up
wait_until 20 "a's route to tcp1 up at start" route_is a tcp1 "$R0" up
log "up: a, r (routing tcp <-> tcp1), b"

# ---- the interface down and up ------------------------------------------------------
cl exec a ip link set tcp0 down
wait_until 10 "a's NI down with its interface" ni_is a "$A" down
cl exec a lnetctl net show -v 2 | grep -q "fatal_error: 1" || fail "net show -v 2: no fatal_error 1 on a link that is down"
cl exec a ip link set tcp0 up
wait_until 10 "a's NI up with its interface" ni_is a "$A" up
cl exec a lnetctl ping "$R0" >/dev/null || fail "a cannot ping r once its interface is back"
log "interface down: NI down (fatal_error 1); up: NI up, traffic again"

# ---- the carrier lost and back -------------------------------------------------------
cl partition a tcp0 >/dev/null
wait_until 10 "a's NI down without carrier" ni_is a "$A" down
cl heal a tcp0 >/dev/null
wait_until 10 "a's NI up with its carrier" ni_is a "$A" up
log "carrier lost: NI down; back: NI up"

# ---- a router's far side cut: its peers' routes follow ----------------------------------
cl partition r tcp1 >/dev/null
wait_until 10 "r's tcp1 NI down" ni_is r "$R1" down
wait_until 20 "a's route to tcp1 through r down" route_is a tcp1 "$R0" down
cl heal r tcp1 >/dev/null
wait_until 10 "r's tcp1 NI up" ni_is r "$R1" up
wait_until 20 "a's route to tcp1 through r up" route_is a tcp1 "$R0" up
cl exec a lnetctl ping 10.95.2.31@tcp1 >/dev/null || fail "a cannot ping b through r after the heal"
log "r cut from tcp1: r's NI down, a told (r's ping data) and its route down; healed: up, routed ping works"

# ---- health 0 is down while health is on --------------------------------------------------
# r's tcp1 NI at health 0, every send from it failing (a drop rule with a health error:
# nothing raises its health again): down, and a's route through r goes down as for a
# cut; back to 1000: up.
cl exec r lnetctl fault drop add --source '*' --dest '*' --local_nid "$R1" --rate 1 -e local_error >/dev/null ||
  fail "fault drop add"
cl exec r lnetctl net set --nid "$R1" --health 0 || fail "net set --health 0"
ni_is r "$R1" down || fail "health 0 with health on: NI not down: $(cl exec r lnetctl net show -v)"
wait_until 20 "a's route to tcp1 through r down (r's tcp1 NI at health 0)" route_is a tcp1 "$R0" down
cl exec r lnetctl fault drop del --all >/dev/null || fail "fault drop del"
cl exec r lnetctl net set --nid "$R1" --health 1000 || fail "net set --health 1000"
ni_is r "$R1" up || fail "health 1000: NI not up"
wait_until 20 "a's route to tcp1 through r up (health 1000)" route_is a tcp1 "$R0" up
cl exec r lnetctl set health_sensitivity 0 || fail "set health_sensitivity 0"
cl exec r lnetctl net set --nid "$R1" --health 0 || fail "net set --health 0 (health off)"
cl exec r lnetctl net show -v 2 | grep -A40 "nid: $R1\$" | grep -q "health value: 0" || fail "health off: health is not 0"
ni_is r "$R1" up || fail "health 0 with health off: NI down"
log "net set --health 0 (health on): NI down, the route through it down; 1000: up; health off: health 0 stays up"
