#!/usr/bin/env bash
# Daemon-free LNet self-test in one MPI job: `mpirun -n 3 lst-node --script FILE`, rank 0
# the console, ranks 1-2 the servers: brw write 1M and brw read 4k with check=full and a
# ping test; the data checks pass (no error anywhere) and the counters add up (the RPCs
# every node sent were received by the others). Then a server rank is killed mid-batch:
# the job ends (MPI aborts it) within its deadline and leaves nothing running.
# Binaries from $LST_NODE and $MPIEXEC (the MPI the build found).
set -euo pipefail
T_NAME=selftest_mpi
log() { echo "[$T_NAME] $*"; }
fail() {
  echo "[$T_NAME] FAIL: $*" >&2
  exit 1
}
[ -x "${LST_NODE:-}" ] || fail "missing binary \$LST_NODE"
MPIEXEC="${MPIEXEC:-mpirun}"
DIR="$(mktemp -d /tmp/lnet-selftest-mpi.XXXXXX)"
JOB=""
cleanup() {
  local rc=$?
  set +e
  [ -n "$JOB" ] && kill -KILL "$JOB" 2>/dev/null
  pkill -KILL -f "^$LST_NODE" 2>/dev/null
  [ $rc != 0 ] && for f in "$DIR"/*; do echo "----- $f"; tail -n 40 "$f"; done
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT INT TERM

cat >"$DIR/script.lst" <<'LST'
# rank 0 is the console and the client; the other ranks serve
new_session --timeout 120 mpi_job
add_group clients 0@mpi
add_group servers @RANKS@
list_group servers
add_batch bulk
add_test --batch bulk --loop 20 --concurrency 4 --distribute 1:2 --from clients --to servers brw write size=1M check=full
add_test --batch bulk --loop 40 --concurrency 2 --distribute 1:2 --from clients --to servers brw read size=4k check=full
add_test --batch bulk --loop 100 --from clients --to servers ping
run bulk
query --loop 60 --delay 1 bulk
show_error clients servers
stat --count 1 --delay 1 clients servers
stat --count 1 --delay 1 --yaml clients servers
end_session
LST

log "the script"
timeout 120 "$MPIEXEC" -n 3 "$LST_NODE" --script "$DIR/script.lst" >"$DIR/run.log" 2>&1 ||
  fail "lst-node failed"
grep -q "lst-node: 3 ranks serve self-test" "$DIR/run.log" || fail "no start line"
grep -qP "^\t2\t0\t0\t0\t2" "$DIR/run.log" || fail "the servers were not both active"
grep -q "bulk is running now" "$DIR/run.log" || fail "the batch did not run"
grep -q "^bulk \[0\] is stopped" "$DIR/run.log" || fail "the batch did not end"
grep -q "Total 0 error nodes in clients" "$DIR/run.log" || fail "errors on the client"
grep -q "Total 0 error nodes in servers" "$DIR/run.log" || fail "errors on the servers"
grep -q "\[LNet Bandwidth of servers\]" "$DIR/run.log" || fail "no stat block"
# The counters: every node's, from the YAML round. 3 x 20 x 2... the test RPCs alone are
# 20x4 + 40x2 + 100 = 260 from the client; the servers received them (and the console's
# own requests, which the client's count includes too: rank 0 is both).
sed -n '/^---$/,$p' "$DIR/run.log" | awk '
  /rpcs_sent:/ { sent += $2 } /rpcs_rcvd:/ { rcvd += $2 } /rpc_errors:/ { err += $2 }
  /brw_errors:|ping_errors:|rpcs_expired:|rpcs_dropped:/ { bad += $2 }
  END {
    printf "sent %d received %d errors %d test errors %d\n", sent, rcvd, err, bad
    # STATs of the round in flight may be counted on one side only: one per node.
    d = sent - rcvd - err; if (d < 0) d = -d
    exit !(sent >= 260 && rcvd >= 260 && bad == 0 && d <= 3)
  }' | tee "$DIR/sums.log" || fail "the counters do not add up: $(cat "$DIR/sums.log")"

log "a server rank killed mid-batch"
cat >"$DIR/kill.lst" <<'LST'
new_session kill
add_group clients 0@mpi
add_group servers @RANKS@
add_test --concurrency 2 --distribute 1:2 --from clients --to servers brw write size=64k
run
query --loop 100 --delay 1
LST
timeout 120 "$MPIEXEC" -n 3 "$LST_NODE" --script "$DIR/kill.lst" >"$DIR/kill.log" 2>&1 &
JOB=$!
for _ in $(seq 300); do grep -q "batch is running now" "$DIR/kill.log" && break; sleep 0.1; done
grep -q "batch is running now" "$DIR/kill.log" || fail "the endless batch did not start"
victim=$(pgrep -f "^$LST_NODE --script $DIR/kill.lst" | tail -n 1)
kill -KILL "$victim"
rc=0
wait "$JOB" || rc=$?
JOB=""
[ $rc != 0 ] || fail "the job went on as if nothing happened"
[ $rc != 124 ] || fail "the job hung after a rank died"
pgrep -f "^$LST_NODE" >/dev/null && fail "lst-node ranks left running"

# A script that fails at once ends its session within milliseconds, before the other
# ranks look again: they must still see it end and exit (they used to serve on).
log "a script that fails right after its first group"
printf 'new_session quick\nadd_group all @ALL@\nadd_group bad 1.2.3@mpi\nend_session\n' >"$DIR/bad.lst"
rc=0
timeout 120 "$MPIEXEC" -n 3 "$LST_NODE" --script "$DIR/bad.lst" >"$DIR/bad.log" 2>&1 || rc=$?
[ $rc != 124 ] || fail "the ranks served on after the failed script ended the session"
[ $rc != 0 ] || fail "a failed script line did not fail the job"
grep -q "bad.lst:3 failed: lst add_group bad 1.2.3@mpi" "$DIR/bad.log" || fail "the failed line is not named"
pgrep -f "^$LST_NODE" >/dev/null && fail "lst-node ranks left running"

# A script whose session never reaches the other ranks (its first group is a node that
# does not answer): they end with it (they used to serve until killed).
log "a script that fails before its session reaches the other ranks"
printf 'new_session never\nadd_group far 7@mpi\nend_session\n' >"$DIR/far.lst"
rc=0
timeout 60 "$MPIEXEC" -n 3 "$LST_NODE" --rpc-timeout 3 --script "$DIR/far.lst" >"$DIR/far.log" 2>&1 || rc=$?
[ $rc != 124 ] || fail "the ranks served on after a script that never reached them"
[ $rc != 0 ] || fail "a failed script line did not fail the job"
grep -q "far.lst:2 failed: lst add_group far 7@mpi" "$DIR/far.log" || fail "the failed line is not named"
pgrep -f "^$LST_NODE" >/dev/null && fail "lst-node ranks left running"
log "PASS"
