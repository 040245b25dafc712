#!/usr/bin/env bash
# IPv6 NIDs (large NIDs, LNet 2.15+) end to end between hosts in namespaces: A and R share
# 2001:db8:1::/64 (net tcp), R and B 2001:db8:2::/64 (net tcp1), R routes. The socket LND
# speaks HELLO V4 with the version-2 acceptor request and the 96-byte header there:
#   - lnetctl ping both ways and discover (R's two NIDs reach A in the ping data's
#     LARGE_ADDR entries, the primary under PRIMARY_LARGE);
#   - PUT/GET of 0 B .. 1 MiB with data checks between liblnet processes, direct and
#     through R;
#   - a routed lnetctl ping;
#   - ip2nets with an IPv6 prefix (the NI on the interface, IPv4 without --large);
#   - a selection rule on an IPv6 prefix and a drop rule on IPv6 NIDs (which takes effect);
#   - lnetd --large on an interface (no NID given) takes its IPv6 address;
#   - an IPv4 NI next to them still speaks V3, and a V3 HELLO offered to the IPv6
#     acceptor is refused (answered in V4 with no connection) and counted;
#   - lst between the dual-stack nodes by their IPv4 NIDs (an IPv6 one is refused).
. "$(dirname "$0")/lib.sh"
setup
[ -x "$LNET_XFER" ] || fail "missing binary $LNET_XFER"
new_ns A a
new_ns R r
new_ns B b
link "$A" eth0 10.81.1.1/24 "$R" eth0 10.81.1.2/24
link "$R" eth1 10.81.2.2/24 "$B" eth1 10.81.2.3/24
v6 "$A" eth0 2001:db8:1::1/64
v6 "$A" eth0 2001:db8:1::11/64
v6 "$R" eth0 2001:db8:1::2/64
v6 "$R" eth0 2001:db8:1::12/64
v6 "$R" eth1 2001:db8:2::2/64
v6 "$B" eth1 2001:db8:2::3/64
ip -n "$A" -6 route add 2001:db8:2::/64 via 2001:db8:1::2
ip -n "$B" -6 route add 2001:db8:1::/64 via 2001:db8:2::2

lnetd_start "$A" a "$(printf 'net:\n'; ni tcp 2001:db8:1::1@tcp; ni tcp2 10.81.1.1@tcp2
  printf 'route:\n    - net: tcp1\n      gateway: 2001:db8:1::2@tcp\n'; printf 'selftest:\n    enable: 1\n')" --log-level=debug
lnetd_start "$R" r "$(printf 'net:\n'; ni tcp 2001:db8:1::2@tcp; ni tcp1 2001:db8:2::2@tcp1; ni tcp2 10.81.1.2@tcp2
  printf 'routing:\n    enable: 1\nselftest:\n    enable: 1\n')" --accept all
# B is given its interface, not a NID: with --large it takes eth1's IPv6 address.
lnetd_start "$B" b "$(tcp_cfg eth1 tcp1; printf 'route:\n    - net: tcp\n      gateway: 2001:db8:2::2@tcp1\n')" --large
ctl b net show | grep -q "nid: 2001:db8:2::3@tcp1" || fail "lnetd --large did not take eth1's IPv6 address: $(ctl b net show)"
ip -n "$B" addr add 2001:db8:2::13/64 dev eth1 nodad  # for the liblnet process, once B's NI is up

out=$(ctl a net show)
echo "$out" | grep -q "nid: 2001:db8:1::1@tcp" || fail "net show on A: $out"
log "A pings R over IPv6"
out=$(ctl a ping --timeout 5 2001:db8:1::2@tcp) || fail "ping A->R: $out"
echo "$out" | grep -q "primary nid: 2001:db8:1::2@tcp" || fail "ping A->R: $out"
ctl r ping --timeout 5 2001:db8:1::1@tcp | grep -q "primary nid: 2001:db8:1::1@tcp" || fail "ping R->A"
grep -q "connected CONTROL 2001:db8:1::1@tcp <-> 2001:db8:1::2@tcp (protocol V4)" "$T_DIR/a.log" ||
  fail "A's connection to R is not protocol V4: $(grep connected "$T_DIR/a.log" | head -n 3)"

log "A discovers R: its three NIDs, the primary first"
out=$(ctl a discover 2001:db8:1::2@tcp) || fail "discover R: $out"
for n in 2001:db8:1::2@tcp 2001:db8:2::2@tcp1 10.81.1.2@tcp2; do
  echo "$out" | grep -q "nid: $n" || fail "discover R lists no $n: $out"
done
out=$(ctl a peer show --nid 2001:db8:1::2@tcp)
echo "$out" | grep -q "primary nid: 2001:db8:1::2@tcp" || fail "peer show: $out"
echo "$out" | grep -q "Multi-Rail: true" || fail "R is not multi-rail to A: $out"

log "the IPv4 net beside them speaks V3"
ctl a ping --timeout 5 10.81.1.2@tcp2 >/dev/null || fail "ping over IPv4"
grep -q "10.81.1.1@tcp2 <-> 10.81.1.2@tcp2 (protocol V3)" "$T_DIR/a.log" || fail "the IPv4 connection is not V3"

log "routed ping A -> B through R"
ctl a ping --timeout 10 2001:db8:2::3@tcp1 | grep -q "primary nid: 2001:db8:2::3@tcp1" || fail "routed ping A->B"

bg "$B" serve_b timeout 120 "$LNET_XFER" serve --nid 2001:db8:2::13@tcp1 --route tcp@2001:db8:2::2@tcp1
wait_for_log serve_b serving
bg "$R" serve_r timeout 120 "$LNET_XFER" serve --nid 2001:db8:1::12@tcp
wait_for_log serve_r serving
log "PUT/GET A -> R"
ip netns exec "$A" timeout 60 "$LNET_XFER" check --nid 2001:db8:1::11@tcp --peer 2001:db8:1::12@tcp ||
  fail "PUT/GET A->R"
log "PUT/GET A -> B, routed through R"
ip netns exec "$A" timeout 60 "$LNET_XFER" check --nid 2001:db8:1::11@tcp --peer 2001:db8:2::13@tcp1 \
  --route tcp1@2001:db8:1::2@tcp || fail "routed PUT/GET A->B"

log "ip2nets with IPv6 ranges"
ctl a net add --ip2net "tcp3(eth0) 2001:db8:1::/64" >/dev/null || fail "net add --ip2net with an IPv6 range"
ctl a net show --net tcp3 | grep -q "nid: 10.81.1.1@tcp3" || fail "ip2nets: $(ctl a net show --net tcp3)"
ctl a net add --ip2net "tcp4(eth0) 2001:db8:9::/64" >/dev/null 2>&1 && fail "a range holding no address of A matched"

log "selection and fault rules naming IPv6 NIDs"
ctl a udsp add --dst 2001:db8:1::/64@tcp --priority 0 >/dev/null || fail "udsp add with an IPv6 prefix"
ctl a udsp show | grep -q "2001:db8:1::/64@tcp" || fail "udsp show: $(ctl a udsp show)"
ctl a udsp add --dst 2001:db8::[1-2]@tcp --priority 0 >/dev/null 2>&1 && fail "an IPv6 range in brackets was taken"
ctl a fault drop add --source 2001:db8:1::2@tcp --dest 2001:db8:1::1@tcp --rate 1 >/dev/null ||
  fail "fault drop add with IPv6 NIDs"
# From A's IPv6 NI: the reply comes back to it (R is multi-rail: a ping left to selection
# might go over tcp2).
ctl a ping --timeout 2 --source 2001:db8:1::1@tcp 2001:db8:1::2@tcp >/dev/null 2>&1 &&
  fail "R's reply came through a drop rule"
ctl a fault drop show | grep -q "2001:db8:1::2@tcp" || fail "fault drop show: $(ctl a fault drop show)"
ctl a fault drop del --all >/dev/null || fail "fault drop del"
ctl a ping --timeout 5 2001:db8:1::2@tcp >/dev/null || fail "ping after the drop rule went"

log "a V3 HELLO offered to the IPv6 acceptor is refused and counted"
before=$(ctl r stats show | awk '/conns_refused_protocol:/ {print $2}')
le32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)); }
# version-2 request for R's NID (struct lnet_nid: size 12, type 2, net 0, the address).
req="$(le32 0xacce7100)$(le32 2)\\x0c\\x02\\x00\\x00\\x20\\x01\\x0d\\xb8\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02"
hello3="$(le32 0x45726963)$(le32 3)$(printf '\\x00%.0s' $(seq 48))"
ip netns exec "$A" timeout 15 bash -c "exec 3<>/dev/tcp/2001:db8:1::2/988; printf '$req$hello3' >&3; timeout 10 cat <&3 >/dev/null" \
  2>/dev/null || true
grep -q "protocol V3 offered, we speak V4 on IPv6" "$T_DIR/r.log" || fail "R did not log the refusal"
after=$(ctl r stats show | awk '/conns_refused_protocol:/ {print $2}')
[ "${after:-0}" -gt "${before:-0}" ] || fail "the refusal was not counted ($before -> $after)"
ctl a ping --timeout 5 2001:db8:1::2@tcp >/dev/null || fail "ping after the bad HELLO"

# The self-test wire carries 64-bit NIDs only (lnet-facts §9.3, the kernel's too): A's
# console names its session by its first classic NID though its IPv6 NI comes first,
# tests the dual-stack nodes by their IPv4 NIDs, and refuses an IPv6 NID with a reason.
log "lst between dual-stack nodes by their IPv4 NIDs; an IPv6 NID refused"
export LST_SESSION=$$ LNET_CTL_SOCKET="$T_DIR/a.sock"
lst() { timeout 60 "$LST" "$@"; }
lst new_session --timeout 60 v6 >"$T_DIR/lst.out" || fail "new_session on A: $(cat "$T_DIR/lst.out")"
lst add_group c 10.81.1.1@tcp2 >/dev/null || fail "add_group c"
lst add_group s 10.81.1.2@tcp2 >/dev/null || fail "add_group s"
lst add_group v6 2001:db8:1::2@tcp 2>"$T_DIR/err.out" && fail "an IPv6 NID was taken into a group"
grep -q "not supported yet.*2001:db8:1::2@tcp" "$T_DIR/err.out" || fail "IPv6 refusal unclear: $(cat "$T_DIR/err.out")"
lst add_batch b >/dev/null || fail "add_batch"
lst add_test --batch b --loop 20 --from c --to s brw write size=64k check=full >/dev/null || fail "add_test"
lst run b >/dev/null || fail "run"
stopped=
for _ in $(seq 120); do
  q=$(lst query b) || true
  [[ $q == *"b [0] is stopped"* ]] && stopped=1 && break
  sleep 0.5
done
[ -n "$stopped" ] || fail "the batch did not end: $q"
# (Into a file first: grep -q ending the pipe early would fail it under pipefail.)
lst show_error c s >"$T_DIR/err.out" || fail "show_error: $(cat "$T_DIR/err.out")"
grep -q "Total 0 error nodes in c" "$T_DIR/err.out" || fail "errors: $(cat "$T_DIR/err.out")"
lst end_session >/dev/null || fail "end_session"
log "PASS"
