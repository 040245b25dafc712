#!/usr/bin/env bash
# Selection rules and fault rules of lnetd, as a kernel peer sees them:
#  - UDSP: u1 and k1 are multi-rail peers on tcp and tcp2; a rule on u1 preferring its
#    tcp2 NI (udsp add --src tcp2 --priority 0) moves u1's brw writes to k1 onto that
#    rail: k1 receives them from u1's tcp2 NID (its peer show -v counts), and with the
#    rule for tcp instead, from u1's tcp NID;
#  - fault rules: a drop rule on u1 for what k1 sends it (fault drop add -s k1 -d u1
#    -r 1) makes k1's lnetctl ping of u1 fail, its counter counting; a delay rule (-l 2)
#    makes k1's ping take two seconds more; deleted, pings are quick again.
. "$(dirname "$0")/lib.sh"
kn_case kernel.udsp_fault

# received_from NID: the PUTs k1 received from that NID of u1 (k1's peer show -v 2): the
# brw requests u1 sends (its REPLYs and ACKs to k1 leave from the NI k1 chose to send to).
received_from() {
  on k1 lnetctl peer show -v 2 --nid "$U1" |
    awk -v n="$1" '$2 == "nid:" {c = ($3 == n)} c && /received_stats:/ {r = 1} c && r && /put:/ {print $2; exit}'
}
on u1 lnetctl discover "$K1" >/dev/null || fail "u1 cannot discover k1"
on k1 lnetctl discover "$U1" >/dev/null || fail "k1 cannot discover u1"
undo "on u1 lnetctl udsp del --all"
rail() {  # PREFERRED-NET OTHER-NID: u1's writes to k1 go out from u1's NID on PREFERRED-NET
  local net=$1 mine=$2 other=$3
  on u1 lnetctl udsp del --all >/dev/null 2>&1 || true
  on u1 lnetctl udsp add --src "$net" --priority 0 >/dev/null || fail "u1: udsp add --src $net"
  local a b
  a=$(received_from "$mine")
  b=$(received_from "$other")
  ubrw u1 "$U1" "$K1" --loop 20 --concurrency 2 brw write size=64K
  a=$(($(received_from "$mine") - a))
  b=$(($(received_from "$other") - b))
  [ "$a" -ge 40 ] || fail "udsp --src $net: k1 received $a PUTs from $mine (at least the brw's 40 requests)"
  [ "$b" -le 2 ] || fail "udsp --src $net: k1 received $b PUTs from $other besides"
  log "udsp --src $net on u1: k1 received $a PUTs from $mine, $b from $other"
}
rail tcp2 "$U1B" "$U1"
rail tcp "$U1" "$U1B"

# k1 may send to either NID of u1 (they are one multi-rail peer): a rule per rail.
rules() {  # KIND ACTION [OPTIONS]: the rule for what k1 sends u1, on each rail
  local kind=$1 action=$2
  shift 2
  on u1 lnetctl fault "$kind" "$action" -s "$K1" -d "$U1" "$@" >/dev/null &&
    on u1 lnetctl fault "$kind" "$action" -s "$K1B" -d "$U1B" "$@" >/dev/null
}
undo "rules drop del; rules delay del"
rules drop add -r 1 || fail "u1: fault drop add"
on k1 lnetctl ping --timeout 5 "$U1" >"$T_DIR/ping.out" 2>&1 && fail "k1's ping of u1 went through a drop rule: $(cat "$T_DIR/ping.out")"
dropped=$(on u1 lnetctl fault drop show | awk '/dropped:/ {n += $2} END {print n + 0}')
[ "$dropped" -ge 1 ] || fail "u1's drop rules counted nothing: $(on u1 lnetctl fault drop show)"
rules drop del || fail "u1: fault drop del"
on k1 lnetctl ping "$U1" >/dev/null || fail "k1 cannot ping u1 once the drop rules are gone"
log "fault drop on u1: k1's ping of u1 fails ($dropped dropped), and goes through once the rules are deleted"

rules delay add -r 1 -l 2 || fail "u1: fault delay add"
t0=$(date +%s%N)
on k1 lnetctl ping --timeout 20 "$U1" >/dev/null || fail "k1 cannot ping u1 through a delay rule"
ms=$((($(date +%s%N) - t0) / 1000000))
rules delay del || fail "u1: fault delay del"
[ "$ms" -ge 2000 ] || fail "k1's ping through a 2 s delay rule took $ms ms"
log "fault delay -l 2 on u1: k1's ping of u1 took $ms ms"
log PASS
