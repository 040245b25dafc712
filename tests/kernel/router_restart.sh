#!/usr/bin/env bash
# A router is a router from its first ping reply. Our router u2 (k1's gateway to tcp1) is
# stopped as an operator stops it (SIGTERM: it drains, announcing RTE_DISABLED, which k1
# reports as "is being used as a gateway but routing feature is not turned on" and
# takes the route down, as 2.17's peers of a draining router do) and started again: from
# then on k1 logs no such line (the new lnetd enables routing before its NIs answer
# anything), k1's route through u2 comes up at k1's next router check, and k1 reaches
# k2 through it.
. "$(dirname "$0")/lib.sh"
kn_case kernel.router_restart

notice() { on k1 'dmesg | grep -c "10.97.1.32@tcp is being used as a gateway but routing feature is not turned on"' || true; }
undo "lnetd_runs u2 || cl reboot u2"
wait_until 30 "k1's route to tcp1 through u2 up" route_is k1 tcp1 "$U2" up

on u2 'kill -TERM $(cat /run/lnet/lnetd.pid)' || fail "cannot signal u2's lnetd"
wait_until 30 "u2's lnetd ends its drain and exits" eval '! lnetd_runs u2'
wait_until 30 "k1 takes its route through u2 down" route_is k1 tcp1 "$U2" down
drained=$(notice)
log "u2 drained and stopped: k1 took the route down ($drained RTE_DISABLED notices)"

cl reboot u2 >/dev/null || fail "cannot start u2 again"
t0=$SECONDS
wait_until 30 "k1's route through u2 up again" route_is k1 tcp1 "$U2" up
on k1 lnetctl ping "$K2" >/dev/null || fail "k1 cannot reach k2 through the new u2"
sleep 3 # a few more of k1's router checks (every 2 s here)
[ "$(notice)" = "$drained" ] || fail "k1 logged $(($(notice) - drained)) 'routing feature is not turned on' after u2 started again"
log "u2 started again: k1's route up after $((SECONDS - t0 - 3)) s, k2 reached through it, no RTE_DISABLED notice from the new lnetd"
log PASS
