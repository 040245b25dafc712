#!/usr/bin/env bash
# Many nets on one interface (lnetctl net add --net tcp2 --if eth0 when tcp is on eth0):
# as in LNet, one acceptor per address (port 988) serves every net on it, and the
# acceptor request's target NID tells them apart.
#   - A has tcp and tcp2 on eth0 (the second added at run time, as Lustre's test suite
#     adds it); B reaches each of A's NIDs over its own net, through the shared port;
#   - an acceptor request for a NID A does not have on that address is refused, naming it;
#   - deleting one net keeps the acceptor for the other; deleting both frees the port.
. "$(dirname "$0")/lib.sh"
setup
new_ns A a
new_ns B b
link "$A" eth0 10.84.1.1/24 "$B" eth0 10.84.1.2/24
two_nets() {
  printf 'net:\n    - net type: tcp\n      local NI(s):\n        - interfaces:\n              0: eth0\n'
  printf '    - net type: tcp2\n      local NI(s):\n        - interfaces:\n              0: eth0\n'
}
lnetd_start "$A" a "$(tcp_cfg eth0)" --accept all --log-level=info  # all: the hand-made request below comes from an unprivileged port
lnetd_start "$B" b "$(two_nets)"

log "A adds tcp2 on eth0, where tcp already is"
ctl a net add --net tcp2 --if eth0 || fail "net add --net tcp2 --if eth0 beside tcp"
ctl a net show | tee "$T_DIR/nets.out"
for nid in 10.84.1.1@tcp 10.84.1.1@tcp2; do grep -q "nid: $nid" "$T_DIR/nets.out" || fail "A lacks $nid"; done
[ "$(ip netns exec "$A" ss -Htln 'sport = :988' | wc -l)" = 1 ] || fail "not one listening socket on port 988"

log "B reaches each of A's NIDs over its own net"
for nid in 10.84.1.1@tcp 10.84.1.1@tcp2; do
  ctl b ping --timeout 5 "$nid" >/dev/null || fail "B cannot ping $nid"
done
grep -q "connected .* 10.84.1.1@tcp2 <-> 10.84.1.2@tcp2" "$T_DIR/a.log" || fail "no connection of A's tcp2 NI"
grep -q "connected .* 10.84.1.1@tcp <-> 10.84.1.2@tcp " "$T_DIR/a.log" || fail "no connection of A's tcp NI"
# A reaches B's NIDs too: its connections go out from the same address.
for nid in 10.84.1.2@tcp 10.84.1.2@tcp2; do
  ctl a ping --timeout 5 "$nid" >/dev/null || fail "A cannot ping $nid"
done

log "an acceptor request for a NID A does not have is refused"
le32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)); }
le64() { le32 $(($1 & 0xffffffff)); le32 $((($1 >> 32) & 0xffffffff)); }
# 10.84.1.1@tcp3: net type 2 (tcp), number 3.
ip netns exec "$B" timeout 15 bash -c "exec 3<>/dev/tcp/10.84.1.1/988; printf '$(le32 0xacce7100)$(le32 1)$(le64 0x000200030A540101)' >&3; timeout 10 cat <&3 >/dev/null" \
  2>/dev/null || true
wait_for_log a "refused 10.84.1.2, which asked for 10.84.1.1@tcp3: no NI of ours is 10.84.1.1@tcp3"
ctl b ping --timeout 5 10.84.1.1@tcp2 >/dev/null || fail "A stopped serving tcp2 after the bad request"

log "deleting tcp keeps the acceptor for tcp2; deleting both frees port 988"
ctl a net del --net tcp --if eth0 || fail "net del tcp"
ctl b ping --timeout 5 10.84.1.1@tcp2 >/dev/null || fail "tcp2 unreachable after tcp went"
ip netns exec "$A" ss -Htln 'sport = :988' | grep -q . || fail "the acceptor went with tcp"
ctl a net del --net tcp2 --if eth0 || fail "net del tcp2"
for _ in $(seq 50); do ip netns exec "$A" ss -Htln 'sport = :988' | grep -q . || break; sleep 0.1; done
ip netns exec "$A" ss -Htln 'sport = :988' | grep -q . && fail "port 988 still listening with no net on it"
ctl a net add --net tcp --if eth0 || fail "net add tcp again"
ctl b ping --timeout 5 10.84.1.1@tcp >/dev/null || fail "tcp unreachable after it came back"
log "ok"
