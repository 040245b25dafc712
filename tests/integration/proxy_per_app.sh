#!/usr/bin/env bash
# The parallel proxy in mode 1b (lnet-proxy --mode per-app): a standing job that spawns a
# dedicated proxy job for each application that knocks (loopback addresses 127.0.6.x).
#   - without mpirun --enable-recovery the standing job refuses to start, saying why;
#   - applications B and A stream side by side, each through a proxy job of its own
#     (both gateways used);
#   - kill -9 of one of A's dedicated proxy ranks: A's rounds fail and it ends when asked
#     (no hang), its dedicated job is gone, the lnetds release its pid; B streams on with
#     no failed round (its longest round printed), the standing job runs on;
#   - kill -9 of an application rank: its dedicated job drops it and exits, B unaffected;
#   - a new application gets a new dedicated job and works; B stops cleanly.
# Needs root (port 988) and Open MPI (proxy_lib.sh).
. "$(dirname "$0")/proxy_lib.sh"
px_setup proxy_per_app
: "${LNET_MPI_STREAM:?lnet_mpi_stream (set by CTest)}"

SERVER=127.0.6.1
ROUTERS=(127.0.6.2 127.0.6.3)
for ip in "${ROUTERS[@]}"; do px_router "$ip"; done
px_server $SERVER "${ROUTERS[@]}"
px_ompi_server

log "--mode per-app without mpirun --enable-recovery is refused"
if env -u LNET_PROXY timeout 60 mpirun --bind-to none -n 1 "$LNET_PROXY_BIN" --bridge "$DIR/${ROUTERS[0]}.bridge" \
  --mode per-app --port-file "$DIR/refused.port" >"$DIR/refused.log" 2>&1; then
  fail "a per-app job started without --enable-recovery"
fi
grep -q "enable-recovery" "$DIR/refused.log" || fail "no reason given: $(cat "$DIR/refused.log")"

PX_MPIRUN_ARGS=--enable-recovery px_proxy proxy "${ROUTERS[@]}" -- --mode per-app --client-timeout 3
[ ${#PROXY_PIDS[@]} = 2 ] || fail "expected 2 standing proxy ranks, found ${#PROXY_PIDS[@]}"
grep -q "a dedicated proxy job per application" "$DIR/proxy.log" || fail "not in per-app mode: $(cat "$DIR/proxy.log")"

# The applications' deadlines as on the virtual cluster: a transfer given up after 5 s
# in MPI, a message after 10 s.
export LNET_MPI_TIMEOUT=5 LNET_TRANSACTION_TIMEOUT=10
dedicated() { pgrep -f "^$LNET_PROXY_BIN --bridge $DIR/.* --dedicated" | sort || true; }
# stream NAME OFFSET: lnet_mpi_stream of 2 ranks in the background, until NAME.stop
# (its mpirun under timeout in NAME_JOB and PIDS: the clean-up stops it and its ranks).
stream() {
  timeout 300 mpirun --bind-to none -n 2 "$LNET_MPI_STREAM" --server "$SERVER@tcp" --size 262144 --offset "$2" \
    --stop-file "$DIR/$1.stop" >"$DIR/$1.log" 2>&1 &
  PIDS+=($!)
  eval "${1}_JOB=$!"
}
streaming() { [ "$(grep -acE '^r[01] t=' "$DIR/$1.log")" -ge 2 ]; }
job_of() { eval "echo \$${1}_JOB"; }
ended() { ! kill -0 "$(job_of "$1")" 2>/dev/null; }
reap() {  # reap NAME: the ended job's exit status in NAME_STATUS
  local rc=0
  wait "$(job_of "$1")" || rc=$?
  eval "${1}_STATUS=$rc"
}
# good NAME: rounds that succeeded so far (each rank's last line: ops - failed).
good() {
  awk '/^r[0-9]+ t=/ {for (i = 2; i <= NF; i++) {if ($i ~ /^ops=/) o[$1] = substr($i, 5); if ($i ~ /^failed=/) f[$1] = substr($i, 8)}}
       END {s = 0; for (k in o) s += o[k] - f[k]; print s + 0}' "$DIR/$1.log"
}
until_true() {  # until_true SECONDS WHAT CMD...
  local secs=$1 what=$2
  shift 2
  for _ in $(seq $((secs * 10))); do "$@" && return 0; sleep 0.1; done
  fail "$what (not within $secs s)"
}

log "B and A stream side by side, each through a dedicated proxy job of its own"
stream B $((4 << 20))
until_true 60 "B streams: $(tail -n 3 "$DIR/B.log")" streaming B
mapfile -t for_b < <(dedicated)
[ ${#for_b[@]} = 2 ] || fail "B's dedicated job has ${#for_b[@]} ranks"
stream A 0
until_true 60 "A streams: $(tail -n 3 "$DIR/A.log")" streaming A
mapfile -t all < <(dedicated)
mapfile -t for_a < <(comm -13 <(printf '%s\n' "${for_b[@]}") <(printf '%s\n' "${all[@]}"))
[ ${#for_a[@]} = 2 ] || fail "A's dedicated job has ${#for_a[@]} ranks (all: ${all[*]})"
grep -q "pid [0-9]*(user) allocated by proxy rank 0 (pid ${for_a[0]})\|pid [0-9]*(user) allocated by proxy rank 0 (pid ${for_a[1]})" \
  "$DIR"/lnetd-*.log || fail "A's dedicated job did not get A a pid"
pid_a=$(grep -ho "pid [0-9]*(user) allocated by proxy rank 0 (pid \(${for_a[0]}\|${for_a[1]}\))" "$DIR"/lnetd-*.log |
  awk '{print $2}' | sed 's/(user)//' | head -n 1)

log "kill -9 of one of A's dedicated proxy ranks while B streams"
b_before=$(good B)
kill -9 "${for_a[1]}"
# A's rounds fail (within LNet's deadlines); it ends when asked to (no hang).
until_true 90 "A's rounds fail after its proxy rank died: $(tail -n 3 "$DIR/A.log")" grep -aq "failed: " "$DIR/A.log"
touch "$DIR/A.stop"
until_true 150 "A ends on its stop file (a hang?): $(tail -n 3 "$DIR/A.log")" ended A
reap A
! grep -aq " HANG" "$DIR/A.log" || fail "A hung: $(grep -a -m1 ' HANG' "$DIR/A.log")"
until_true 30 "A's dedicated job ends: $(dedicated | tr '\n' ' ')" eval '[ -z "$(comm -12 <(printf "%s\n" "${for_a[@]}") <(dedicated))" ]'
for ip in "${ROUTERS[@]}"; do
  until_true 30 "lnetd $ip releases A's pid $pid_a" grep -qE "pid $pid_a\(user\) released|pids \[([0-9]+,)*$pid_a(,[0-9]+)*\] released" "$DIR/lnetd-$ip.log"
done
for p in "${PROXY_PIDS[@]}" "${for_b[@]}"; do kill -0 "$p" || fail "process $p (the standing job or B's) died with A's proxy"; done
until_true 30 "B goes on after A's proxy died" eval '[ "$(good B)" -gt "$b_before" ]'
log "A ended with status $A_STATUS, its dedicated job gone, its pid released; B streams on"

log "kill -9 of a rank of application C while B streams"
stream C $((1 << 20))
until_true 60 "C streams: $(tail -n 3 "$DIR/C.log")" streaming C
mapfile -t all < <(dedicated)
mapfile -t for_c < <(comm -13 <(printf '%s\n' "${for_b[@]}") <(printf '%s\n' "${all[@]}"))
[ ${#for_c[@]} = 2 ] || fail "C's dedicated job has ${#for_c[@]} ranks"
kill -9 "$(pgrep -f "^$LNET_MPI_STREAM .*--stop-file $DIR/C.stop" | head -n 1)"
until_true 60 "C ends after its rank was killed" ended C
reap C
until_true 30 "C's dedicated job drops C and exits: $(dedicated | tr '\n' ' ')" \
  eval '[ -z "$(comm -12 <(printf "%s\n" "${for_c[@]}") <(dedicated))" ]'
for p in "${PROXY_PIDS[@]}" "${for_b[@]}"; do kill -0 "$p" || fail "process $p died with application C"; done

log "a new application gets a new dedicated job"
client after 2 --count 2 --offset $((6 << 20)) || fail "an application after the failures: $(tail -n 5 "$DIR/after.log")"

touch "$DIR/B.stop"
until_true 60 "B ends on its stop file" ended B
reap B
[ "$B_STATUS" = 0 ] || fail "B ended with status $B_STATUS"
b_failed=$(awk '/^summary/ {for (i = 1; i <= NF; i++) if ($i ~ /^failed=/) s += substr($i, 8)} END {print s + 0}' "$DIR/B.log")
[ "$b_failed" = 0 ] || fail "B lost $b_failed rounds while A and C died: $(grep -a -m 3 'failed:' "$DIR/B.log")"
stall=$(awk '/^summary/ {for (i = 1; i <= NF; i++) if ($i ~ /^max_ms=/) {v = substr($i, 8); if (v > m) m = v}} END {print m + 0}' "$DIR/B.log")
log "B: $(good B) rounds, none failed; its longest round took $stall ms (target: 2 heartbeat intervals, 2000 ms)"
until_true 30 "B's dedicated job exits with B" eval '[ -z "$(dedicated)" ]'
for p in "${PROXY_PIDS[@]}"; do kill -0 "$p" || fail "standing proxy rank $p died"; done
log "PASS"
