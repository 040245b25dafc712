#!/usr/bin/env bash
# Two hosts (namespaces A and B), each with lnetd on port 988: lnetctl pings both ways;
# PUT and GET of 0 B, 1 B, 4 KiB and 1 MiB with data checks, in both directions, between
# liblnet processes on second addresses of the same hosts (also on port 988).
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
stats=$(ctl a stats show)
echo "$stats" | grep -q "recv_count: [1-9]" || fail "A counted nothing: $stats"
log "PASS"
