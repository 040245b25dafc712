#!/usr/bin/env bash
# Router drain (LNet 2.17) seen by kernel peers: k1 reaches tcp1, and k2 tcp, through
# our router u2 and the kernel router kr; while k1's lst streams brw writes (check=full) to k2, u2 is
# told `lnetctl set routing 0`: it announces RTE_DISABLED and goes on forwarding what
# comes; k1 and k2 take their routes through u2 down and move to kr; the batch ends
# without an error. Then `set routing 1`: k1's route through u2 comes back.
. "$(dirname "$0")/lib.sh"
kn_case kernel.drain

on k1 lnetctl route add --net tcp1 --gateway "$KR" >/dev/null || fail "k1: route add through kr"
undo "on k1 lnetctl route del --net tcp1 --gateway $KR"
on k2 lnetctl route add --net tcp --gateway "$KR1" >/dev/null || fail "k2: route add through kr"
undo "on k2 lnetctl route del --net tcp --gateway $KR1"
undo "on u2 lnetctl set routing 1"
wait_until 30 "k1's route to tcp1 through kr up" route_is k1 tcp1 "$KR" up
wait_until 30 "k1's route to tcp1 through u2 up" route_is k1 tcp1 "$U2" up
wait_until 30 "k2's route to tcp through kr up" route_is k2 tcp "$KR1" up

klst k1 new_session --force --timeout 120 drain >/dev/null || fail "lst new_session on k1"
undo "klst k1 end_session"
klst k1 add_group from "$K1" >/dev/null && klst k1 add_group to "$K2" >/dev/null || fail "lst add_group on k1"
klst k1 add_batch b >/dev/null
klst k1 add_test --batch b --loop 100 --concurrency 4 --from from --to to brw write size=1M check=full >/dev/null ||
  fail "lst add_test on k1"
kr_before=$(stat_of kr route_count)
klst k1 run b >/dev/null
sleep 2
u2_before=$(stat_of u2 route_count)
[ "$u2_before" -gt 0 ] || fail "nothing went through u2 before the drain"
on u2 lnetctl set routing 0 || fail "u2: set routing 0"
wait_until 30 "k1 takes its route through u2 down" route_is k1 tcp1 "$U2" down
wait_until 30 "k2 takes its route through u2 down" route_is k2 tcp "$U21" down
t_down=$(stat_of u2 route_count)
stopped() { klst k1 query b | grep -q stopped; }
wait_until 180 "k1's batch ends" stopped
klst k1 show_error --session from to >"$T_DIR/err.out" 2>&1 || fail "lst show_error on k1: $(cat "$T_DIR/err.out")"
grep -q "Total 0 error nodes in from" "$T_DIR/err.out" && grep -q "Total 0 error nodes in to" "$T_DIR/err.out" ||
  fail "errors during the drain: $(cat "$T_DIR/err.out")"
after_down=$(($(stat_of u2 route_count) - t_down))
kr_got=$(($(stat_of kr route_count) - kr_before))
[ "$kr_got" -gt 100 ] || fail "kr forwarded $kr_got messages: the stream did not move there"
[ "$after_down" -lt 50 ] || fail "u2 forwarded $after_down messages after k1 took its route down"
log "drain: u2 forwarded $((t_down - u2_before)) messages after routing 0 until k1 took its route down, $after_down after; kr took the stream ($kr_got messages); no error node"
on u2 lnetctl set routing 1 || fail "u2: set routing 1"
wait_until 30 "k1's route through u2 up again" route_is k1 tcp1 "$U2" up
log "routing 1: k1's route through u2 up again"
log PASS
