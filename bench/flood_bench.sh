#!/usr/bin/env bash
# Floods against lnetd and lnet-proxy (issue 52), each measured against the quiet state
# in the same run: what the flood makes them hold (RSS, descriptors), whether they spin
# (CPU while flooded, and in the 5 s after: idle again), and what a well-behaved peer
# sees meanwhile (ping round trip, median of 50, against the quiet one: ratio).
#   1. 10 000 TCP connections to lnetd's acceptor that never send a HELLO (accept=all),
#      from 160 addresses, kept at 10 000 open for 20 s (every one the acceptor closes is
#      opened again);
#   2. 100 000 knocks on the proxy's doorbell with a wrong secret, from 16 addresses,
#      while an application connects through the proxy and moves data;
#   3. a proxy holding 20 000 messages (pings of lnetd it never finishes) on the bridge.
#   flood_bench.sh [BUILD_DIR]      (root; Open MPI; python3; about 3 minutes)
# Addresses 127.0.9.x (lnetd, the peer), the flooders' 127.0.10.x and 127.0.11.x; port 988.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build/default}" && pwd)"
export LNETD=$BUILD/lnetd/lnetd LNETCTL=$BUILD/tools/lnetctl LNET_XFER=$BUILD/tools/lnet-xfer
export LNET_PROXY_BIN=$BUILD/proxy/lnet-proxy PROXY_DEMO=$BUILD/examples/proxy_demo
PROBE=$BUILD/tests/bridge_probe
command -v python3 >/dev/null || { echo "flood_bench: needs python3" >&2; exit 1; }
[ -x "$PROBE" ] || { echo "flood_bench: build first ($PROBE)" >&2; exit 1; }
. "$ROOT/tests/integration/proxy_lib.sh"
px_setup flood_bench
ulimit -n "$(ulimit -Hn)"  # the flooders hold 10 000 sockets
A=127.0.9.2
SERVER=127.0.9.1
PEER=127.0.9.5
export LNET_ACCEPT=all  # the connection flood gets past accept() (accept=secure would close it there)
px_router $A
A_PID=$LNETD_PID
unset LNET_ACCEPT
px_server $SERVER $A
px_ompi_server
px_proxy proxy $A
PROXY_PID=${PROXY_PIDS[0]}

rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # CPU time in clock ticks (1/100 s)
fdn() { ls "/proc/$1/fd" | wc -l; }
# ping_ms: the median round trip of 50 pings of lnetd from a peer LNet (lnet-xfer)
ping_ms() {
  "$LNET_XFER" ping --nid "$PEER@tcp" --peer "$A@tcp" --count 50 --timeout 10 2>&1 |
    sed -n 's#.*round trip min/median/max [0-9.]*/\([0-9.]*\)/.*#\1#p'
}
# watch PID SECONDS: the largest RSS (KiB) of PID over SECONDS, sampled 5 times a second
watch_rss() {
  local max=0 r
  for _ in $(seq $(($2 * 5))); do
    r=$(rss "$1")
    [ "$r" -gt "$max" ] && max=$r
    sleep 0.2
  done
  echo "$max"
}
report() { printf '%-58s %s\n' "$1" "$2"; }

quiet_ms=$(ping_ms)
quiet_rss=$(rss $A_PID)
quiet_fds=$(fdn $A_PID)
t0=$(ticks $A_PID)
sleep 5
quiet_cpu=$(($(ticks $A_PID) - t0))
report "quiet: lnetd ping round trip (median of 50)" "$quiet_ms ms"
report "quiet: lnetd RSS, descriptors, CPU in 5 s" "$quiet_rss KiB, $quiet_fds fds, $quiet_cpu ticks"

log "flood 1: 10 000 connections that never say HELLO"
cat >"$DIR/conns.py" <<'EOF'
import selectors, socket, sys, time
target, n, secs = (sys.argv[1], 988), int(sys.argv[2]), float(sys.argv[3])
sel = selectors.DefaultSelector()
opened = [0]
def open_one():
    s = socket.socket()
    s.setblocking(False)
    s.bind(("127.0.11.%d" % (1 + opened[0] % 160), 0))
    try:
        s.connect(target)
    except BlockingIOError:
        pass
    sel.register(s, selectors.EVENT_READ)
    opened[0] += 1
for _ in range(n):
    open_one()
end = time.time() + secs
while time.time() < end:
    for key, _ in sel.select(0.2):
        try:
            data = key.fileobj.recv(4096)
        except OSError:
            data = b""
        if not data:  # closed by lnetd: open another, so that n stay open
            sel.unregister(key.fileobj)
            key.fileobj.close()
            open_one()
print("opened", opened[0])
EOF
t0=$(ticks $A_PID)
python3 "$DIR/conns.py" $A 10000 20 >"$DIR/conns.log" 2>&1 &
FLOOD=$!
PIDS+=($FLOOD)
sleep 3
flood_ms=$(ping_ms)
max_rss=$(watch_rss $A_PID 5)
flood_fds=$(fdn $A_PID)
wait $FLOOD || true
flood_cpu=$(($(ticks $A_PID) - t0))
sleep 2
t0=$(ticks $A_PID)
sleep 5
after_cpu=$(($(ticks $A_PID) - t0))
report "flood 1: connections opened (kept at 10 000 for 20 s)" "$(awk '{print $2}' "$DIR/conns.log")"
report "flood 1: ping round trip during / quiet" "$flood_ms ms / $quiet_ms ms ($(awk -v a="$flood_ms" -v b="$quiet_ms" 'BEGIN {printf "%.1fx", a / b}'))"
report "flood 1: lnetd RSS at most (quiet)" "$max_rss KiB (+$((max_rss - quiet_rss)) KiB)"
report "flood 1: lnetd descriptors during" "$flood_fds"
report "flood 1: lnetd CPU during the flood / 5 s after it" "$flood_cpu / $after_cpu ticks"
report "flood 1: lnetd counters" "$("$LNETCTL" --socket "$DIR/$A.ctl" stats show | grep -Eo '(conns_refused_busy|handshakes_evicted): [0-9]+' | tr '\n' ' ')"

log "flood 2: 100 000 knocks with a wrong secret, an application served meanwhile"
bell=$(sed -n 's/^doorbell //p' "$DIR/proxy.port")
cat >"$DIR/knocks.py" <<'EOF'
import socket, sys, threading
host, port = sys.argv[1].rsplit(":", 1)
total, workers = int(sys.argv[2]), 64
done = [0, 0]
lock = threading.Lock()
def worker(i):
    src = "127.0.10.%d" % (1 + i % 16)
    for _ in range(total // workers):
        s = socket.socket()
        try:
            s.bind((src, 0))
            s.settimeout(10)
            s.connect((host, int(port)))
            s.sendall(b"KNOCK 2 1 0123456789abcdef0123456789abcdef\n")
            answer = s.recv(256)
            with lock:
                done[0 if answer.startswith(b"ERROR") else 1] += 1
        except OSError:
            with lock:
                done[1] += 1
        finally:
            s.close()
ts = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
for t in ts: t.start()
for t in ts: t.join()
print("knocks", done[0] + done[1], "refused_with_error", done[0], "closed_or_failed", done[1])
EOF
p_rss=$(rss $PROXY_PID)
t0=$(ticks $PROXY_PID)
start=$SECONDS
python3 "$DIR/knocks.py" "$bell" 100000 >"$DIR/knocks.log" 2>&1 &
KNOCKS=$!
PIDS+=($KNOCKS)
sleep 2
app_start=$SECONDS
client app 2 --count 5 || fail "an application could not use the proxy during the knocks: $(tail -n 5 "$DIR/app.log")"
app_s=$((SECONDS - app_start))
p_max=$(watch_rss $PROXY_PID 2)
wait $KNOCKS || true
knock_s=$((SECONDS - start))
knock_cpu=$(($(ticks $PROXY_PID) - t0))
sleep 2
t0=$(ticks $PROXY_PID)
sleep 5
p_after=$(($(ticks $PROXY_PID) - t0))
report "flood 2: knocks" "$(cat "$DIR/knocks.log") in $knock_s s"
report "flood 2: an application through the proxy meanwhile" "ok in $app_s s"
report "flood 2: proxy rank 0 RSS at most (before)" "$p_max KiB ($p_rss KiB)"
report "flood 2: proxy rank 0 CPU during the knocks / 5 s after" "$knock_cpu / $p_after ticks"

log "flood 3: a proxy holding 20 000 messages on the bridge"
mkfifo "$DIR/hold.in"
"$PROBE" hold "$DIR/$A.bridge" 20000 <"$DIR/hold.in" >"$DIR/hold.log" 2>&1 &
HOLD=$!
PIDS+=($HOLD)
exec 9>"$DIR/hold.in"
wait_for "$DIR/hold.log" "^held:" "the greedy proxy did not finish sending" 120
held_rss=$(rss $A_PID)
held_ms=$(ping_ms)
exec 9>&-
wait $HOLD || true
report "flood 3: $(cat "$DIR/hold.log")" ""
report "flood 3: lnetd RSS holding them (quiet)" "$held_rss KiB (+$((held_rss - quiet_rss)) KiB)"
report "flood 3: ping round trip meanwhile / quiet" "$held_ms ms / $quiet_ms ms"
log "done"
