#!/usr/bin/env bash
# A kernel peer configured inconsistently gives a clear line on our side naming the
# cause, and nothing else breaks. A kernel node of the case's own, k7 on tcp1, is
# misconfigured at will:
#  - it asks for a net lnetd does not have (an NI on tcp9, a ping of u3 on tcp9): u3
#    refuses, naming the NID asked for and its own on that address;
#  - lnetd asks it for a net it does not have (u3 gets an NI on tcp8 and pings k7 there):
#    k7 closes the connection without a word; u3 says what that means;
#  - accept=secure (the kernel's default) against an unprivileged source: an LNet process
#    of nobody's on u3 pings k7, which refuses its port; that process says why;
#  - a route to a net the other side cannot name: k7 routes kfi9 through our router u2,
#    which reaches no kfi9: u2 says whose messages it dropped and why; and u3 routes mpi
#    (a type of ours) through the kernel router kr, which cannot name it: u3 says so;
# and then u3 and u2 still serve (k1 reaches k2 through u2, u3 pings k7).
. "$(dirname "$0")/lib.sh"
kn_case kernel.bad_config
K7=10.97.3.47@tcp1
KIT=${LNET_KERNEL_KIT:-$(cd "$KN_HERE/../../.." && pwd)/shared/kernel-lnet}
k7() { KN_STATE="$T_DIR/kn" "$KIT/kernel-node.sh" "$@"; }
undo "k7 stop k7"
KN_NET=tcp1 k7 start k7 "lc-$LNET_CLUSTER" tcp1 10.97.3.47/24 >"$T_DIR/boot.log" 2>&1 || fail "k7 did not boot: $(tail -n 5 "$T_DIR/boot.log")"
# logged NODE PATTERN: the node's lnetd logged a line with PATTERN since the case began.
u3_log=$(cl log u3 lnetd)
u2_log=$(cl log u2 lnetd)
u3_from=$(($(wc -l <"$u3_log") + 1))
u2_from=$(($(wc -l <"$u2_log") + 1))
logged() { tail -n +"$2" "$1" | grep -F -- "$3"; }

# The kernel asks for a net we do not have.
k7 exec k7 'lnetctl net add --net tcp9 --if eth0 && lnetctl ping --timeout 5 10.97.3.33@tcp9' >"$T_DIR/k7.out" 2>&1 &&
  fail "k7 reached 10.97.3.33@tcp9: $(cat "$T_DIR/k7.out")"
line=$(logged "$u3_log" "$u3_from" "which asked for 10.97.3.33@tcp9: no NI of ours is 10.97.3.33@tcp9 (this address is 10.97.3.33@tcp1") ||
  fail "u3 logged no refusal naming 10.97.3.33@tcp9: $(tail -n +"$u3_from" "$u3_log" | tail -n 5)"
log "k7 on tcp9 asks for u3@tcp9; u3: ${line#* warn: }"

# We ask the kernel for a net it does not have.
undo "on u3 lnetctl net del --net tcp8"
on u3 lnetctl net add --net tcp8 --if tcp1 >/dev/null || fail "u3: net add --net tcp8"
on u3 lnetctl ping --timeout 5 10.97.3.47@tcp8 >/dev/null 2>&1 && fail "u3 reached 10.97.3.47@tcp8"
line=$(logged "$u3_log" "$u3_from" "10.97.3.47@tcp8 closed the connection without answering our HELLO: it has no NI 10.97.3.47@tcp8") ||
  fail "u3 logged no line naming k7's silence: $(tail -n +"$u3_from" "$u3_log" | tail -n 5)"
log "u3 asks k7 for tcp8; u3: ${line#* warn: }"
on u3 lnetctl net del --net tcp8 >/dev/null

# An unprivileged source against the kernel's accept=secure.
on u3 "setpriv --reuid=65534 --regid=65534 --clear-groups env LNET_ACCEPT=none lnet-xfer ping --nid 10.97.3.33@tcp1 \
  --peer $K7 --count 1 --timeout 5" >"$T_DIR/xfer.out" 2>&1 && fail "an unprivileged process reached k7: $(cat "$T_DIR/xfer.out")"
line=$(grep -F "closed the connection without answering our HELLO: it refuses our source port" "$T_DIR/xfer.out" | head -n 1) ||
  fail "the unprivileged process said nothing of its port: $(tail -n 5 "$T_DIR/xfer.out")"
grep -F "accept=secure, the kernel's default" <<<"$line" >/dev/null || fail "no word of accept=secure: $line"
k7 exec k7 dmesg | grep -q "insecure port" || fail "k7 did not refuse an insecure port"
log "nobody's lnet-xfer pings k7: ${line#* warn: }"

# Routes to nets the other side cannot name.
k7 exec k7 lnetctl route add --net kfi9 --gateway "$U21" >/dev/null || fail "k7: route add --net kfi9"
k7_route_up() { k7 exec k7 lnetctl route show -v | grep -A4 "net: kfi9" | grep -q "state: up"; }
wait_until 30 "k7's route to kfi9 through u2 up" k7_route_up
k7 exec k7 lnetctl ping --timeout 5 5@kfi9 >"$T_DIR/k7.out" 2>&1 && fail "k7 reached 5@kfi9: $(cat "$T_DIR/k7.out")"
line=$(logged "$u2_log" "$u2_from" "for 12345-5@kfi9: this router reaches no kfi9 (no NI there, no route), yet") ||
  fail "u2 logged no drop of what k7 routed through it: $(tail -n +"$u2_from" "$u2_log" | tail -n 5)"
log "k7 routes kfi9 through u2; u2: ${line#* warn: }"
undo "on u3 lnetctl route del --net mpi --gateway $KR1"
on u3 lnetctl route add --net mpi --gateway "$KR1" >/dev/null || fail "u3: route add --net mpi"
told() { logged "$u3_log" "$u3_from" "route to mpi via $KR1: the gateway has no NI on mpi"; }
wait_until 20 "u3 says kr cannot route mpi" told
log "u3 routes mpi through kr; u3: $(told | head -n 1 | sed 's/^.* warn: //')"
on u3 lnetctl route del --net mpi --gateway "$KR1" >/dev/null

# Nothing else broke.
on k1 lnetctl ping "$K2" >/dev/null || fail "k1 cannot reach k2 through u2 any more"
on u3 lnetctl ping "$K7" >/dev/null || fail "u3 cannot ping k7 on tcp1 any more"
log "afterwards k1 reaches k2 through u2, u3 pings k7"
log PASS
