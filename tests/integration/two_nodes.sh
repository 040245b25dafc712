#!/usr/bin/env bash
# Two hosts (namespaces A and B), each with lnetd on port 988: lnetctl pings both ways;
# PUT and GET of 0 B, 1 B, 4 KiB and 1 MiB with data checks, in both directions, between
# liblnet processes on second addresses of the same hosts (also on port 988); lnet-xfer's
# ping, put and get (several in flight, data checked, a transfer past the server's
# buffer, a portal nobody serves).
. "$(dirname "$0")/lib.sh"
setup
new_ns A a
new_ns B b
link "$A" eth0 10.77.1.1/24 "$B" eth0 10.77.1.2/24
for ip in 11 21; do ip -n "$A" addr add 10.77.1.$ip/24 dev eth0; done
for ip in 12 22; do ip -n "$B" addr add 10.77.1.$ip/24 dev eth0; done
lnetd_start "$A" a "$(tcp_cfg eth0)"
lnetd_start "$B" b "$(tcp_cfg eth0)"

out=$(ctl a net show)
echo "$out" | grep -q "nid: 10.77.1.1@tcp" || fail "net show on A: $out"
log "A pings B"
ctl a ping --timeout 5 10.77.1.2@tcp | tee "$T_DIR/ping1.out" | grep -q "primary nid: 10.77.1.2@tcp" || fail "ping A->B"
log "B pings A"
ctl b ping --timeout 5 10.77.1.1@tcp | grep -q "primary nid: 10.77.1.1@tcp" || fail "ping B->A"
ctl a peer show | grep -q "10.77.1.2@tcp" || fail "A has no peer entry for B"

bg "$A" serve_a timeout 120 "$LNET_XFER" serve --nid 10.77.1.11@tcp
bg "$B" serve_b timeout 120 "$LNET_XFER" serve --nid 10.77.1.12@tcp
wait_for_log serve_a serving
wait_for_log serve_b serving
log "PUT/GET from B to A"
ip netns exec "$B" timeout 60 "$LNET_XFER" check --nid 10.77.1.22@tcp --peer 10.77.1.11@tcp || fail "PUT/GET B->A"
log "PUT/GET from A to B"
ip netns exec "$A" timeout 60 "$LNET_XFER" check --nid 10.77.1.21@tcp --peer 10.77.1.12@tcp || fail "PUT/GET A->B"

# lnet-xfer's client modes against the server on A: ping, put and get with several in
# flight and every byte checked, and what they print.
x() { ip netns exec "$B" timeout 60 "$LNET_XFER" "$@" --nid 10.77.1.22@tcp --peer 10.77.1.11@tcp 2>"$T_DIR/x.err"; }
log "lnet-xfer ping, put and get B -> A"
out=$(x ping --count 3) || fail "lnet-xfer ping: $out"
echo "$out" | grep -q "^3 pings, 3 answered, round trip min/median/max" || fail "lnet-xfer ping said: $out"
echo "$out" | grep -q "^reply from 12345-10.77.1.11@tcp in .* ms: pid 12345, NIDs 10.77.1.11@tcp$" ||
  fail "lnet-xfer ping lists no NIDs: $out"
out=$(x put --sizes 4K,1M --count 20 --depth 2 --check) || fail "lnet-xfer put: $out"
echo "$out"
for size in 4096 1048576; do
  echo "$out" | grep -Eq "^put $size B x 20 \(depth 2\) to 12345-10.77.1.11@tcp: 20 ok, 0 failed, .* MiB/s, .* ops/s, latency median .* ms, max .* ms, data checked$" ||
    fail "lnet-xfer put of $size B said: $out"
done
out=$(x get --sizes 1M --count 20 --depth 2 --check) || fail "lnet-xfer get: $out"
echo "$out" | grep -q "^get 1048576 B x 20 (depth 2) to 12345-10.77.1.11@tcp: 20 ok, 0 failed" || fail "lnet-xfer get said: $out"
# Past the end of A's 2 MiB buffer: truncated, reported, status 1.
out=$(x put --sizes 1M --count 4 --depth 4) && fail "a put past the server's buffer passed: $out"
echo "$out" | grep -q "truncated to 0 bytes (the server's buffer ends before offset" || fail "no truncation reported: $out"
echo "$out" | grep -q "^put 1048576 B x 4 (depth 4) to 12345-10.77.1.11@tcp: 2 ok, 2 failed" || fail "put past the end said: $out"
# A portal nobody serves: A drops the PUTs, no ACK comes; --timeout gives up after 2 s
# (LNet's own deadline is 150 s), each PUT reported, status 1.
out=$(x put --portal 41 --sizes 4K --count 2 --timeout 2) && fail "a put to a portal nobody serves passed: $out"
echo "$out" | grep -q "^put 4096 B: op 1 failed after .* ms: no ACK in time$" || fail "no ACK timeout said: $out"
echo "$out" | grep -q "^put 4096 B x 2 (depth 1) to 12345-10.77.1.11@tcp: 0 ok, 2 failed" || fail "portal 41 said: $out"

stats=$(ctl a stats show)
echo "$stats" | grep -q "recv_count: [1-9]" || fail "A counted nothing: $stats"
log "PASS"
