#!/usr/bin/env bash
# conns_per_peer of the socket LND between two lnetds on the virtual cluster (veth
# links report 10000 Mb/s):
#   - automatic (0): `net show -v` shows 2 on both, a ping makes CONTROL + 2 BULK_IN +
#     2 BULK_OUT (5 established TCP connections on port 988 each side), and an lst brw
#     write of 1 MiB spreads over the 2 connections that carry bulk data;
#   - 3 (`net set` on s2, the NI made again with `net add --conns-per-peer 3` on s1):
#     the connections up stay as they are, the new ones are 7, the data spreads over 3;
#   - s2 at 1, s1 at 3: s2 takes one of each type, refuses the other 4 with a HELLO of
#     type NONE (counted: conns_refused_excess), and the two still talk over 3.
# Everything it starts is in the cluster, removed on any exit.
. "$(dirname "$0")/lib.sh"
cl_setup conns_per_peer -
D="$T_DIR/cpp.cluster"
cat >"$D" <<'EOF'
fabric tcp0 10.93.1.0/24
node s1 server tcp0=31
node s2 server tcp0=32
EOF
"$CLUSTER_SH" up "$D" --name "$LNET_CLUSTER" >"$T_DIR/up.log" 2>&1 || fail "up: $(tail -n 20 "$T_DIR/up.log")"
S1=10.93.1.31@tcp
S2=10.93.1.32@tcp
on() { timeout 60 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" exec "$@"; }

# shown NODE: conns_per_peer as `net show -v` prints it for tcp.
shown() { on "$1" lnetctl net show -v --net tcp | awk '/conns_per_peer:/ {print $2; exit}'; }
# conns NODE: established TCP connections to or from port 988 on NODE.
conns() { on "$1" ss -Htn state established '( sport = :988 or dport = :988 )' | wc -l; }
# counter NODE NAME: a counter of the socket LND (stats show, lnd statistics).
counter() { on "$1" lnetctl stats show | awk -v k="$2:" '$1 == k {print $2; exit}'; }
# carriers NODE: connections on NODE that sent more than 8 MB (bulk data went on them).
carriers() { on "$1" ss -Htni state established '( sport = :988 or dport = :988 )' |
  grep -o 'bytes_acked:[0-9]*' | awk -F: '$2 > 8000000 {n++} END {print n + 0}'; }
# sent NODE: MB each connection on NODE sent (the test's log shows the spread).
sent() { on "$1" ss -Htni state established '( sport = :988 or dport = :988 )' |
  grep -o 'bytes_acked:[0-9]*' | awk -F: '{printf "%s%.0f", (n++ ? " " : ""), $2 / 1e6}'; }
conns_are() { [ "$(conns s1)" = "$1" ] && [ "$(conns s2)" = "$1" ]; }

# brw: 200 writes of 1 MiB from s1 to s2 with lst, checked; fails on any error.
brw() {
  local lst=(env LST_SESSION=$$ timeout 60 lst)
  on s1 "${lst[@]}" new_session --timeout 100 cpp >/dev/null || fail "lst new_session"
  on s1 "${lst[@]}" add_group a "$S1" >/dev/null || fail "lst add_group a"
  on s1 "${lst[@]}" add_group b "$S2" >/dev/null || fail "lst add_group b"
  on s1 "${lst[@]}" add_batch w >/dev/null || fail "lst add_batch"
  on s1 "${lst[@]}" add_test --batch w --loop 200 --concurrency 8 --from a --to b brw write size=1M check=simple \
    >/dev/null || fail "lst add_test"
  on s1 "${lst[@]}" run w >/dev/null || fail "lst run"
  local i
  for i in $(seq 120); do
    on s1 "${lst[@]}" query w | grep -q "is stopped" && break
    sleep 0.5
  done
  if ! on s1 "${lst[@]}" query w | grep -q "is stopped"; then
    local n
    for n in s1 s2; do echo "----- connections of $n (ss)" && on $n ss -tni '( sport = :988 or dport = :988 )'; done >&2
    fail "the brw batch did not end within 60 s"
  fi
  on s1 "${lst[@]}" show_error a b >"$T_DIR/err.out" || fail "lst show_error"
  grep -q "Total 0 error nodes in a" "$T_DIR/err.out" && grep -q "Total 0 error nodes in b" "$T_DIR/err.out" ||
    fail "brw errors: $(cat "$T_DIR/err.out")"
  on s1 "${lst[@]}" end_session >/dev/null || true
}

# renew NODE N: the tcp NI of NODE made again with conns_per_peer N (its connections go).
renew() {
  on "$1" lnetctl net del --net tcp >/dev/null || fail "net del on $1"
  on "$1" lnetctl net add --net tcp --if tcp0 --conns-per-peer "$2" >/dev/null || fail "net add on $1"
}

# ---- automatic: 2 on a 10000 Mb/s veth --------------------------------------------------
[ "$(on s1 cat /sys/class/net/tcp0/speed)" = 10000 ] || fail "s1's tcp0 does not report 10000 Mb/s"
[ "$(shown s1)" = 2 ] && [ "$(shown s2)" = 2 ] || fail "net show -v: conns_per_peer $(shown s1) / $(shown s2), not 2"
on s1 lnetctl ping "$S2" >/dev/null || fail "s1 cannot ping s2"
wait_until 10 "5 connections each side (s1 $(conns s1), s2 $(conns s2))" conns_are 5
brw
[ "$(carriers s1)" = 2 ] || fail "bulk data went on $(carriers s1) connections, not 2: $(on s1 ss -Htni)"
log "auto: conns_per_peer 2 shown, 1 + 2x2 connections, 1 MiB writes spread over 2 (MB sent: $(sent s1))"

# ---- 3: net set keeps the connections up; new ones follow -------------------------------
on s2 lnetctl net set --net tcp --conns-per-peer 3 >/dev/null || fail "net set --conns-per-peer 3"
[ "$(shown s2)" = 3 ] || fail "s2 shows conns_per_peer $(shown s2) after net set 3"
on s2 lnetctl ping "$S1" >/dev/null || fail "s2 cannot ping s1"
[ "$(conns s2)" = 5 ] || fail "net set changed the connections up: $(conns s2)"
renew s1 3
[ "$(shown s1)" = 3 ] || fail "s1 shows conns_per_peer $(shown s1)"
on s1 lnetctl ping "$S2" >/dev/null || fail "s1 cannot ping s2 with 3"
wait_until 10 "7 connections each side (s1 $(conns s1), s2 $(conns s2))" conns_are 7
brw
[ "$(carriers s1)" = 3 ] || fail "bulk data went on $(carriers s1) connections, not 3: $(on s1 ss -Htni)"
log "3: net set leaves the 5 up; the NI made again dials 1 + 2x3, 1 MiB writes spread over 3 (MB sent: $(sent s1))"

# ---- s2 at 1, s1 at 3: s2 refuses what is over its count ---------------------------------
before=$(counter s2 conns_refused_excess)
[ -n "$before" ] || fail "no conns_refused_excess in s2's stats show: $(on s2 lnetctl stats show)"
on s2 lnetctl net set --net tcp --conns-per-peer 1 >/dev/null || fail "net set --conns-per-peer 1"
renew s1 3
on s1 lnetctl ping "$S2" >/dev/null || fail "s1 cannot ping s2 after the refusals"
wait_until 10 "4 refusals counted on s2 (now $(($(counter s2 conns_refused_excess) - before)))" \
  test "$(($(counter s2 conns_refused_excess) - before))" = 4
wait_until 10 "3 connections each side (s1 $(conns s1), s2 $(conns s2))" conns_are 3
brw
[ "$(carriers s1)" = 1 ] || fail "bulk data went on $(carriers s1) connections, not 1"
log "s2 at 1, s1 at 3: 4 connections refused (counted), s1 and s2 talk over 1 + 2x1"
log "PASS"
