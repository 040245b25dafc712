#!/usr/bin/env bash
# Garbage on port 988: random bytes, a truncated request, a wrong magic, an oversized
# HELLO, bad frames after a good handshake, an oversized message, and a slow-loris client
# that says nothing; then bad frames and a silent client on the control socket. Each
# connection is closed and logged; the daemon and its other connections carry on, and
# it still shuts down cleanly.
. "$(dirname "$0")/lib.sh"
setup
new_ns A a
new_ns B b
link "$A" eth0 10.80.1.1/24 "$B" eth0 10.80.1.2/24
ip -n "$B" addr add 10.80.1.3/24 dev eth0
lnetd_start "$A" a "$(tcp_cfg eth0)" --accept all --log-level=debug
lnetd_start "$B" b "$(tcp_cfg eth0)"
ctl b ping --timeout 5 10.80.1.1@tcp >/dev/null || fail "ping before"

le32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)); }
le64() { le32 $(($1 & 0xffffffff)); le32 $((($1 >> 32) & 0xffffffff)); }
A_NID=0x000200000A500101
J_NID=0x000200000A500103
CONNREQ="$(le32 0xacce7100)$(le32 1)$(le64 $A_NID)"
hello() {  # hello NIPS
  printf '%s' "$(le32 0x45726963)$(le32 3)$(le64 $J_NID)$(le64 $A_NID)$(le32 12345)$(le32 12345)$(le64 7)$(le64 0)$(le32 1)$(le32 "$1")"
}
# send NAME FORMAT: connect from 10.80.1.3, write the bytes, wait for the daemon to hang up.
send() {
  local fmt="$2"
  ip netns exec "$B" timeout 15 bash -c "exec 3<>/dev/tcp/10.80.1.1/988; printf '$fmt' >&3; timeout 10 cat <&3 >/dev/null" \
    2>/dev/null || true
  log "sent: $1"
}

send "random bytes" "$(head -c 64 /dev/urandom | od -An -tx1 -v | tr -d ' \n' | sed 's/../\\x&/g')"
send "a truncated acceptor request" "$(le32 0xacce7100)$(le32 1)"
send "an HTTP request" "GET / HTTP/1.0\r\n\r\n"
send "an acceptor request for another NID" "$(le32 0xacce7100)$(le32 1)$(le64 0x000200000A5001FF)"
send "an oversized HELLO" "$CONNREQ$(hello 1000)"
send "a bad frame type after the handshake" "$CONNREQ$(hello 0)$(le32 0xdeadbeef)$(le32 0)$(le64 0)$(le64 0)"
send "an unknown zero-copy ACK" "$CONNREQ$(hello 0)$(le32 0xc0)$(le32 0)$(le64 0)$(le64 77)"
# A PUT header announcing 2 MiB of payload.
LHDR="$(le64 $A_NID)$(le64 $J_NID)$(le32 12345)$(le32 12345)$(le32 1)$(le32 2097152)$(le64 -1)$(le64 -1)$(le64 1)$(le64 0)$(le32 4)$(le32 0)"
send "an oversized PUT" "$CONNREQ$(hello 0)$(le32 0xc1)$(le32 0)$(le64 0)$(le64 0)$LHDR"

log "a slow-loris client"
start=$(date +%s)
ip netns exec "$B" timeout 20 bash -c 'exec 3<>/dev/tcp/10.80.1.1/988; timeout 15 cat <&3 >/dev/null' || true
took=$(($(date +%s) - start))
[ $took -lt 12 ] || fail "a silent client was kept for ${took} s (accept timeout 5 s)"
log "silent client closed after ${took} s"

# The control socket: a frame announcing 1 GiB, YAML garbage, and a client that connects
# and says nothing (still connected when the daemon is stopped at the end: shutdown must
# not wait for it). perl is part of every Debian system (perl-base).
ctl_raw() {  # ctl_raw LENGTH TEXT: a frame announcing LENGTH bytes, then TEXT; prints the answer
  perl -MIO::Socket::UNIX -e '
    my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "connect: $!";
    print $s pack("V", $ARGV[1]) . $ARGV[2]; shutdown($s, 1);
    local $/; my $r = <$s>; print substr($r, 4) if defined $r && length($r) > 4;
  ' "$T_DIR/a.sock" "$1" "$2"
}
ctl_raw 1073741824 "" >/dev/null
log "sent: an oversized control frame"
reply=$(ctl_raw 11 "{not: [yaml")
echo "$reply" | grep -q "errno: -71" || fail "bad control YAML got: $reply"
log "sent: bad YAML on the control socket (answered with an error)"
perl -MIO::Socket::UNIX -e 'my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die; sleep 60' "$T_DIR/a.sock" &
T_PIDS+=($!)
ctl a net show >/dev/null || fail "lnetctl blocked by a silent control client"

kill -0 "${T_PIDS[0]}" || fail "lnetd died"
ctl b ping --timeout 5 10.80.1.1@tcp >/dev/null || fail "ping after the garbage"
for want in "not an LNet acceptor request" "which asked for 10.80.1.255@tcp: no NI of ours is" "bad HELLO" "bad message type" \
  "unknown zero-copy cookie" "dropping the connection" "handshake with 10.80.1.[23] timed out" \
  "bad control request"; do
  grep -q "$want" "$T_DIR/a.log" || fail "lnetd did not log '$want'"
done

log "stopping lnetd with the silent control client still connected"
a_pid=${T_DAEMONS[0]}
kill -TERM "$a_pid"
for _ in $(seq 100); do
  kill -0 "$a_pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$a_pid" 2>/dev/null && fail "lnetd did not stop within 10 s of SIGTERM"
log "PASS"
