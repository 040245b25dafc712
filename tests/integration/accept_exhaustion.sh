#!/usr/bin/env bash
# An lnetd out of descriptors (issue 52): a flood of connections takes every descriptor
# its limit allows, so accept() fails with EMFILE on the acceptor and on the control
# socket. The listeners must rest instead of spinning (a level-triggered listener that
# stays readable would burn a core: about 300 ticks in 3 s), and lnetd must serve again
# once the flood is gone. The CPU bound is a resource check, not a timing one: a spinning
# thread is two orders of magnitude above it.
. "$(dirname "$0")/lib.sh"
setup
command -v python3 >/dev/null || { echo "[$T_NAME] SKIP: no python3"; exit 77; }
command -v prlimit >/dev/null || { echo "[$T_NAME] SKIP: no prlimit (util-linux)"; exit 77; }
new_ns A a
new_ns B b
link "$A" eth0 10.80.8.1/24 "$B" eth0 10.80.8.2/24
lnetd_start "$A" a "$(tcp_cfg eth0)" --accept all
lnetd_start "$B" b "$(tcp_cfg eth0)"
ctl b ping --timeout 5 10.80.8.1@tcp >/dev/null || fail "ping before"
pid=$(cat "$T_DIR/a.pid")
# Its descriptors now, and a limit a little above: the flood takes the rest.
used=$(ls "/proc/$pid/fd" | wc -l)
prlimit --pid "$pid" --nofile=$((used + 8)):$((used + 8))
log "lnetd uses $used descriptors; its limit is now $((used + 8))"

cat >"$T_DIR/hold.py" <<'EOF'
import socket, sys, time
conns = []
for _ in range(int(sys.argv[2])):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((sys.argv[1], 988))
        conns.append(s)
    except OSError:
        s.close()
print("open", len(conns), flush=True)
sys.stdin.read()  # until told to stop
EOF
mkfifo "$T_DIR/stop"
ip netns exec "$B" python3 "$T_DIR/hold.py" 10.80.8.1 60 <"$T_DIR/stop" >"$T_DIR/hold.log" 2>&1 &
HOLD=$!
T_PIDS+=($HOLD)
exec 8>"$T_DIR/stop"
for _ in $(seq 600); do grep -q "^open" "$T_DIR/hold.log" && break; sleep 0.1; done
log "the flood holds $(cat "$T_DIR/hold.log") connections"
wait_for_log a "Too many open files"
# The control socket runs out too (its accept fails).
ctl a net show >/dev/null 2>&1 || true
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
t0=$(ticks)
sleep 3
spent=$(($(ticks) - t0))
log "lnetd's CPU while out of descriptors: $spent ticks in 3 s"
[ "$spent" -lt 100 ] || fail "lnetd spins while out of descriptors: $spent ticks in 3 s"
exec 8>&-
wait $HOLD 2>/dev/null || true
log "the flood is gone: lnetd serves again"
ok=0
for _ in $(seq 60); do
  ctl b ping --timeout 5 10.80.8.1@tcp >/dev/null 2>&1 && ctl a net show >/dev/null 2>&1 && { ok=1; break; }
  sleep 1
done
[ $ok = 1 ] || fail "lnetd does not serve again after the flood"
lines=$(grep -c "Too many open files" "$T_DIR/a.log" || true)
log "lines about it in lnetd's log: $lines"
[ "$lines" -lt 50 ] || fail "lnetd logged $lines lines about EMFILE (rate-limited: one per 10 s)"
log "PASS"
