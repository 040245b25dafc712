#!/usr/bin/env bash
# Large NIDs (IPv6, LNet 2.15+) with a kernel peer. A kernel node's LNet chooses large
# NIDs only when configured so before any NI exists (`lnetctl lnet configure --large`),
# and the kit's nodes bring LNet up at boot (lnet_selftest's load does), so this case
# boots a kernel node of its own, k6, with nothing loaded (kn.lnet=nomod) on the tcp1
# fabric and configures it as a site would: lnet, `lnet configure --large`, an IPv6
# address (its duplicate-address detection done: busybox ip has no nodad), ksocklnd and `net add --net tcp6 --if eth0` (its NID fd00:97:3::46@tcp6),
# then lnet_selftest. u3 gets fd00:97:3::33 and an NI on tcp6 by that NID. Then: ping
# both ways (HELLO V4 on u3's side), discovery both ways (each sees the other's IPv6 NID
# as its primary), and LNet self-test: lst's wire carries 64-bit NIDs, so neither
# console takes an IPv6 node (docs/interop.md).
. "$(dirname "$0")/lib.sh"
kn_case kernel.large_nid
K6=fd00:97:3::46@tcp6
U36=fd00:97:3::33@tcp6
KIT=${LNET_KERNEL_KIT:-$(cd "$KN_HERE/../../.." && pwd)/shared/kernel-lnet}
k6() { KN_STATE="$T_DIR/kn" "$KIT/kernel-node.sh" "$@"; }

undo "k6 stop k6"
KN_APPEND=kn.lnet=nomod k6 start k6 "lc-$LNET_CLUSTER" tcp1 10.97.3.46/24 >"$T_DIR/boot.log" 2>&1 ||
  fail "k6 did not boot: $(tail -n 5 "$T_DIR/boot.log")"
k6 exec k6 'modprobe sunrpc && modprobe lnet && lnetctl lnet configure --large &&
  ip -6 addr add fd00:97:3::46/64 dev eth0 && sleep 2 && modprobe ksocklnd &&
  lnetctl net add --net tcp6 --if eth0 && modprobe lnet_selftest' >"$T_DIR/k6.out" 2>&1 ||
  fail "k6's large-NID configuration: $(cat "$T_DIR/k6.out")"
k6 exec k6 lnetctl net show --net tcp6 | grep -q "nid: $K6" || fail "k6's NI is not $K6: $(k6 exec k6 lnetctl net show)"

undo "on u3 lnetctl net del --net tcp6; on u3 ip addr del fd00:97:3::33/64 dev tcp1"
on u3 "sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.tcp1.disable_ipv6=0 &&
  ip addr add fd00:97:3::33/64 dev tcp1 nodad" || fail "u3: IPv6 address"
on u3 lnetctl net add --net tcp6 --nid "$U36" >/dev/null || fail "u3: net add --net tcp6 --nid $U36"

k6 exec k6 lnetctl ping "$U36" >"$T_DIR/ping_k.out" 2>&1 || fail "k6 cannot ping $U36: $(cat "$T_DIR/ping_k.out")"
grep -q "primary nid: $U36" "$T_DIR/ping_k.out" || fail "k6's ping of u3: $(cat "$T_DIR/ping_k.out")"
on u3 lnetctl ping "$K6" >"$T_DIR/ping_u.out" 2>&1 || fail "u3 cannot ping $K6: $(cat "$T_DIR/ping_u.out")"
grep -q "connected CONTROL $U36 <-> $K6 (protocol V4)" "$(cl log u3 lnetd)" || fail "u3's connection with k6 is not V4"
log "ping both ways over IPv6: k6 $K6 <-> u3 $U36 (HELLO V4)"

k6 exec k6 lnetctl discover "$U36" >"$T_DIR/disc_k.out" 2>&1 || fail "k6 cannot discover u3: $(cat "$T_DIR/disc_k.out")"
grep -q "nid: $U36" "$T_DIR/disc_k.out" || fail "k6's discovery of u3: $(cat "$T_DIR/disc_k.out")"
on u3 lnetctl discover "$K6" >"$T_DIR/disc_u.out" 2>&1 || fail "u3 cannot discover k6: $(cat "$T_DIR/disc_u.out")"
grep -q "primary nid: $K6" "$T_DIR/disc_u.out" || fail "u3's discovery of k6: $(cat "$T_DIR/disc_u.out")"
log "discovery both ways: u3 lists $(grep -c 'nid:' "$T_DIR/disc_k.out") NIDs to k6, k6 is $K6 to u3"

k6 exec k6 'export LST_SESSION=77; lst new_session v6 >/dev/null; lst add_group g '"$U36"'; lst end_session >/dev/null' \
  >"$T_DIR/lst_k.out" 2>&1 || true
on u3 "export LST_SESSION=78; lst new_session v6 >/dev/null; lst add_group g $K6; rc=\$?; lst end_session >/dev/null; exit \$rc" \
  >"$T_DIR/lst_u.out" 2>&1 && fail "our lst took an IPv6 node: $(cat "$T_DIR/lst_u.out")"
grep -q "Invalid nid" "$T_DIR/lst_k.out" || fail "the kernel's lst took an IPv6 node: $(cat "$T_DIR/lst_k.out")"
log "lst with IPv6 nodes: the kernel's says '$(head -n 1 "$T_DIR/lst_k.out")', ours '$(head -n 1 "$T_DIR/lst_u.out")'"
log PASS
