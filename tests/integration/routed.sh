#!/usr/bin/env bash
# Three hosts A - R - B on two tcp nets (tcp: 10.78.1.0/24, tcp1: 10.78.2.0/24), R routing:
# routed lnetctl ping, and PUT/GET with data checks from a client on A to a server on B.
. "$(dirname "$0")/lib.sh"
setup
new_ns A a
new_ns R r
new_ns B b
link "$A" eth0 10.78.1.1/24 "$R" eth0 10.78.1.2/24
link "$R" eth1 10.78.2.2/24 "$B" eth0 10.78.2.1/24
ip -n "$A" addr add 10.78.1.11/24 dev eth0
ip -n "$B" addr add 10.78.2.11/24 dev eth0

lnetd_start "$R" r "$(printf 'net:\n    - net type: tcp\n      local NI(s):\n        - interfaces:\n              0: eth0\n    - net type: tcp1\n      local NI(s):\n        - interfaces:\n              0: eth1\nrouting:\n    enable: 1\n')"
lnetd_start "$A" a "$(tcp_cfg eth0)$(printf '\nroute:\n    - net: tcp1\n      gateway: 10.78.1.2@tcp\n')"
lnetd_start "$B" b "$(tcp_cfg eth0 tcp1)$(printf '\nroute:\n    - net: tcp\n      gateway: 10.78.2.2@tcp1\n')"

ctl r routing show | grep -q "enable: 1" || fail "R does not route"
ctl a route show -v | grep -q "state: up" || fail "A's route is not up"
log "routed ping A -> B"
ctl a ping --timeout 5 10.78.2.1@tcp1 | grep -q "primary nid: 10.78.2.1@tcp1" || fail "routed ping A->B"
log "routed ping B -> A"
ctl b ping --timeout 5 10.78.1.1@tcp | grep -q "primary nid: 10.78.1.1@tcp" || fail "routed ping B->A"

bg "$B" serve_b timeout 120 "$LNET_XFER" serve --nid 10.78.2.11@tcp1 --route tcp@10.78.2.2@tcp1
wait_for_log serve_b serving
log "routed PUT/GET A -> B"
ip netns exec "$A" timeout 60 "$LNET_XFER" check --nid 10.78.1.11@tcp --peer 10.78.2.11@tcp1 \
  --route tcp1@10.78.1.2@tcp || fail "routed PUT/GET"
ctl r stats show | grep -q "route_count: [1-9]" || fail "R forwarded nothing"
if [ -n "${XFER_CLIENT_C:-}" ]; then
  # A client written in C from the man pages: an NI with an explicit NID on eth0 (an
  # address that is not the interface's first) and a route, by the C API alone.
  log "the C client (lnet_add_ni, lnet_add_route): routed PUT/GET A -> B"
  ip -n "$A" addr add 10.78.1.12/24 dev eth0
  out=$(ip netns exec "$A" env -u LNET_NETWORKS timeout 60 "$XFER_CLIENT_C" 10.78.1.12@tcp eth0 10.78.2.11@tcp1 \
    tcp1 10.78.1.2@tcp 1048576 2>&1) || fail "the C client: $out"
  echo "$out"
  case "$out" in *"PUT and GET of 1048576 bytes from 10.78.1.12@tcp: ok"*) ;; *) fail "the C client said: $out" ;; esac
  # Its NID is the one asked for, not eth0's first address: the router knows it as a peer.
  ctl r peer show | grep -q "10.78.1.12@tcp" || fail "R never saw 10.78.1.12@tcp: $(ctl r peer show)"
else
  log "the C client was not built (LNET_BUILD_EXAMPLES off): not run"
fi
log "PASS"
