#!/usr/bin/env bash
# A link cut between two lnetds: pings fail with an error within their timeout instead of
# hanging, and work again once the link is back.
. "$(dirname "$0")/lib.sh"
setup
new_ns A a
new_ns B b
link "$A" eth0 10.79.1.1/24 "$B" eth0 10.79.1.2/24
lnetd_start "$A" a "$(tcp_cfg eth0)"
lnetd_start "$B" b "$(tcp_cfg eth0)"
ctl a ping --timeout 5 10.79.1.2@tcp >/dev/null || fail "first ping"

log "link down"
ip -n "$A" link set eth0 down
start=$(date +%s%N)
if ctl a ping --timeout 2 10.79.1.2@tcp >"$T_DIR/cut.out" 2>&1; then fail "ping over a cut link succeeded"; fi
ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$T_DIR/cut.out"
grep -q "errno" "$T_DIR/cut.out" || fail "no error block from the failed ping"
[ $ms -lt 10000 ] || fail "the failed ping took ${ms} ms (timeout 2 s)"
log "failed in ${ms} ms"

log "link up"
ip -n "$A" link set eth0 up
for i in $(seq 30); do
  if ctl a ping --timeout 2 10.79.1.2@tcp >/dev/null 2>&1; then
    log "ping works again after $i attempt(s)"
    log "PASS"
    exit 0
  fi
  sleep 1
done
fail "ping did not recover after the link came back"
