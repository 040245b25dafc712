#!/usr/bin/env bash
# The kernel and lnetd meet: HELLO both ways (the kernel connects to lnetd on one rail,
# lnetd to the kernel on the other, both from privileged ports, protocol V3), ping and
# discover both ways, and multi-rail discovery: k1 and u1 each have an NI on tcp and one
# on tcp2, and each side's discovery of the other merges both NIDs into one multi-rail
# peer whose primary NID is the one the other side gives first.
. "$(dirname "$0")/lib.sh"
kn_case kernel.discovery

forget() {  # the peers each side has of the other, and their connections
  on k1 "lnetctl peer del --prim_nid $U1 >/dev/null 2>&1; lnetctl peer del --prim_nid $U1B >/dev/null 2>&1; true"
  on u1 "lnetctl peer del --prim_nid $K1 >/dev/null 2>&1; lnetctl peer del --prim_nid $K1B >/dev/null 2>&1; true"
}
forget
undo forget

# HELLO both ways: the kernel dials lnetd on tcp2, lnetd dials the kernel on tcp.
on k1 lnetctl ping "$U1B" >"$T_DIR/ping_k.out" || fail "k1 cannot ping u1 on tcp2: $(cat "$T_DIR/ping_k.out")"
on u1 lnetctl ping "$K1" >"$T_DIR/ping_u.out" || fail "u1 cannot ping k1 on tcp: $(cat "$T_DIR/ping_u.out")"
grep -q "primary nid: $U1B" "$T_DIR/ping_k.out" || fail "k1's ping of u1: $(cat "$T_DIR/ping_k.out")"
grep -q "primary nid: $K1" "$T_DIR/ping_u.out" || fail "u1's ping of k1: $(cat "$T_DIR/ping_u.out")"
# On u1: the kernel's connections come to port 988 from a port below 1024, ours go out
# from one; every connection is up with protocol V3.
on u1 "ss -Htn state established '( sport = :988 or dport = :988 )'" >"$T_DIR/ss.out"
grep -q "10.97.2.31:988 *10.97.2.41:10[0-2][0-9]\b" "$T_DIR/ss.out" || fail "no connection from k1's privileged port to u1's 988 on tcp2: $(cat "$T_DIR/ss.out")"
grep -qE "10.97.1.31:(10[0-2][0-9]|[5-9][0-9]{2}) *10.97.1.41:988" "$T_DIR/ss.out" || fail "no connection from u1's privileged port to k1's 988 on tcp: $(cat "$T_DIR/ss.out")"
grep -q "connected CONTROL 10.97.2.31@tcp2 <-> 10.97.2.41@tcp2 (protocol V3)" "$(cl log u1 lnetd)" || fail "u1 logged no V3 CONTROL connection with k1 on tcp2"
log "HELLO both ways: k1 -> u1 on tcp2, u1 -> k1 on tcp, privileged ports, protocol V3"

# Discovery both ways: one multi-rail peer with both NIDs on each side.
on k1 lnetctl discover "$U1" >"$T_DIR/disc_k.out" || fail "k1 cannot discover u1: $(cat "$T_DIR/disc_k.out")"
on k1 lnetctl peer show --nid "$U1" >"$T_DIR/peer_k.out"
for n in "$U1" "$U1B"; do grep -q "nid: $n" "$T_DIR/peer_k.out" || fail "k1's peer u1 lacks $n: $(cat "$T_DIR/peer_k.out")"; done
grep -q "Multi-Rail: true" "$T_DIR/peer_k.out" || fail "k1 does not see u1 as multi-rail: $(cat "$T_DIR/peer_k.out")"
on u1 lnetctl discover "$K1" >"$T_DIR/disc_u.out" || fail "u1 cannot discover k1: $(cat "$T_DIR/disc_u.out")"
on u1 lnetctl peer show --nid "$K1" >"$T_DIR/peer_u.out"
for n in "$K1" "$K1B"; do grep -q "nid: $n" "$T_DIR/peer_u.out" || fail "u1's peer k1 lacks $n: $(cat "$T_DIR/peer_u.out")"; done
grep -qi "Multi-Rail: true" "$T_DIR/peer_u.out" || fail "u1 does not see k1 as multi-rail: $(cat "$T_DIR/peer_u.out")"
# A peer NI on each rail carries traffic: a ping of each NID of the other.
for n in "$U1" "$U1B"; do on k1 lnetctl ping "$n" >/dev/null || fail "k1 cannot ping $n after discovery"; done
for n in "$K1" "$K1B"; do on u1 lnetctl ping "$n" >/dev/null || fail "u1 cannot ping $n after discovery"; done
log "discovery both ways: one multi-rail peer of two NIDs (tcp, tcp2) on each side; every NID answers"
log PASS
