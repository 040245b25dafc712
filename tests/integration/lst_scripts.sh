#!/usr/bin/env bash
# lst as Lustre's own scripts and its manual run it, against lnetds in network namespaces
# on one switch: A runs the console; S1, S2 are servers, C1..C4 clients. Three scripts
# of tests/data/lst/, unchanged but for their addresses: the smoke test that Lustre's
# lnet-selftest.sh writes (run with sh and judged as that framework judges it: stop the
# batch, show_error c s, end_session, and no "Total N ..." line with N other than 0), the
# manual's sample script (its `lst stat servers & sleep N; kill $!` written to a file
# keeps every block printed before the kill), and the manual's command examples.
. "$(dirname "$0")/lib.sh"
setup
[ -x "${LST:-}" ] || fail "missing binary \$LST"
DATA="$(cd "$(dirname "$0")/../data/lst" && pwd)"
new_switch SW sw
NODES=(a:1 s1:10 s2:11 c1:20 c2:21 c3:22 c4:23)
for n in "${NODES[@]}"; do
  name=${n%%:*}
  new_ns NS "$name"
  plug "$NS" eth0 "10.79.1.${n##*:}/24" "$SW"
  # rpc_timeout as the other self-test tests: a dead node's RPCs fail after 20 s.
  lnetd_start "$NS" "$name" "$(tcp_cfg eth0)
selftest:
    enable: 1
    rpc_timeout: 20
"
done
export PATH="$(dirname "$LST"):$PATH" LNET_CTL_SOCKET="$T_DIR/a.sock"
# script NAME WORD=VALUE...: tests/data/lst/NAME with its @WORDS@ filled in.
script() {
  local f="$T_DIR/$1" kv
  cp "$DATA/$1" "$f"
  shift
  for kv in "$@"; do sed -i "s|@${kv%%=*}@|${kv#*=}|g" "$f"; done
  ! grep -v '^#' "$f" | grep -q '@[A-Z_]*@' || fail "$f: words left: $(grep -v '^#' "$f" | grep -o '@[A-Z_]*@' | sort -u | tr '\n' ' ')"
  echo "$f"
}
# The framework's judgement of a log (lnet-selftest.sh): every line starting "Total"
# that counts nodes has 0 as its second word.
no_errors_in() { ! awk '/^Total.*nodes/ {print $2}' "$1" | grep -vq '^0$'; }

# The durations leave room for a sanitizer build, where a stat round over nodes busy with
# 20 tests may take up to its --timeout (10 s) before the first block is printed.
log "lnet-selftest.sh's smoke test (sh, set -e; 20 tests, 35 s of stat every 10 s)"
smoke=$(script smoke.sh CLIENTS="10.79.1.20@tcp 10.79.1.21@tcp 10.79.1.22@tcp 10.79.1.23@tcp" \
  SERVERS="10.79.1.10@tcp 10.79.1.11@tcp" NC=4 NS=2 LOOP=1000 DURATION=35)
export LST_SESSION=$$
# Through a pipe, as the framework runs it (`sh $file | tee $log`): the stat blocks printed
# before the script kills lst must all be there.
timeout 120 sh "$smoke" 2>&1 | tee "$T_DIR/smoke.out" >/dev/null ||
  fail "the smoke script failed: $(tail -n 20 "$T_DIR/smoke.out")"
grep -q "SESSION: hh FEATURES: 1 TIMEOUT: 100000 FORCE: No" "$T_DIR/smoke.out" || fail "new_session --timeo 100000"
grep -q "^10.79.1.20@tcp are added to session" "$T_DIR/smoke.out" || fail "add_group: no 'are added to session'"
grep -qP "^\t2\t0\t0\t0\t2\ts$" "$T_DIR/smoke.out" || fail "list_group s bad_group c: s not listed"
grep -q "^\[LNet Bandwidth of s\]" "$T_DIR/smoke.out" || fail "no stat block of s before the kill"
grep -q "^\[LNet Rates of c\]" "$T_DIR/smoke.out" || fail "no stat block of c before the kill"
grep -q "^killing " "$T_DIR/smoke.out" || fail "the script's cleanup did not run"
# What the framework does after the script (test-framework.sh lst_end_session --verbose),
# with the session's key read from show_session as it does.
key=$(LST_SESSION= lst show_session 2>/dev/null | awk -F " " '{print $5}')
[ "$key" = "$$" ] || fail "show_session gives key '$key', not $$"
{
  LST_SESSION=$key lst stop b
  LST_SESSION=$key lst show_error c s
  LST_SESSION=$key lst end_session
} >>"$T_DIR/smoke.out" 2>&1 || fail "stop / show_error / end_session: $(tail -n 10 "$T_DIR/smoke.out")"
grep -q "^Total 0 error nodes in c$" "$T_DIR/smoke.out" || fail "show_error c: $(grep Total "$T_DIR/smoke.out")"
grep -q "^Total 0 error nodes in s$" "$T_DIR/smoke.out" || fail "show_error s: $(grep Total "$T_DIR/smoke.out")"
grep -q "^Batch is stopped" "$T_DIR/smoke.out" || fail "stop b did not wait for the batch to stop"
# (end_session says nothing, as lst's: the session is gone.)
LST_SESSION=$key lst show_session >/dev/null 2>&1 && fail "a session is left after end_session"
no_errors_in "$T_DIR/smoke.out" || fail "the framework would fail the run: $(grep '^Total' "$T_DIR/smoke.out")"
log "smoke: $(grep -c '^\[LNet Rates of' "$T_DIR/smoke.out") stat blocks, no error node"

log "the manual's sample script (stat in the background, killed; output to a file)"
rw=$(script manual_rw.sh SERVERS="10.79.1.[10-11]@tcp" READERS="10.79.1.[21-23/2]@tcp" \
  WRITERS="10.79.1.[20-22/2]@tcp" DURATION=25)
timeout 120 bash "$rw" >"$T_DIR/rw.out" 2>"$T_DIR/rw.err" || fail "the manual's script failed: $(tail "$T_DIR/rw.err")"
blocks=$(grep -c "^\[LNet Bandwidth of servers\]" "$T_DIR/rw.out" || true)
[ "$blocks" -ge 1 ] || fail "no stat block in the file after the kill: $(cat "$T_DIR/rw.out")"
grep -qP "^\[W\] Avg: +[0-9.]+ +MiB/s" "$T_DIR/rw.out" || fail "stat blocks are cut short: $(cat "$T_DIR/rw.out")"
lst show_session >/dev/null 2>&1 && fail "a session is left after the manual's end_session: $(tail "$T_DIR/rw.out")"
grep -q "^10.79.1.\[21-23/2\]@tcp are added to session" "$T_DIR/rw.out" || fail "readers not added"
log "manual_rw: $blocks stat blocks of servers kept in the file"

log "the manual's command examples"
export LST_SESSION=$((LST_SESSION + 1))
cmds=$(script manual_commands.sh SERVERS="10.79.1.[10-11]@tcp" CLIENTS="10.79.1.[20-21]@tcp" \
  MORE_CLIENTS="10.79.1.[22-23]@tcp" ONE_MORE_CLIENT="10.79.1.22@tcp")
timeout 180 bash -x "$cmds" >"$T_DIR/cmds.out" 2>&1 || fail "a manual example failed: $(tail -n 15 "$T_DIR/cmds.out")"
grep -q "^Total 1 nodes \[ spare \]" "$T_DIR/cmds.out" || fail "update_group --remove: $(grep -A3 'spare --all' "$T_DIR/cmds.out")"
grep -q "^Total 0 error nodes in clients" "$T_DIR/cmds.out" || fail "errors in clients"
log "manual_commands: every example ran"

log "refusals: nothing half-made"
export LST_SESSION=$((LST_SESSION + 1))
lst new_session refusals >/dev/null
lst add_group g '10.79.1.[5-5]@tcp' 2>"$T_DIR/err.out" && fail "[5-5] was taken"
grep -q "Ignore invalid id list 10.79.1.\[5-5\]@tcp" "$T_DIR/err.out" || fail "[5-5]: $(cat "$T_DIR/err.out")"
grep -q "No nodes added successfully, deleting group g" "$T_DIR/err.out" || fail "g kept: $(cat "$T_DIR/err.out")"
# A group of nodes no lnetd answers for (no address on the switch): not kept either.
rc=0
lst add_group dead 10.79.1.99@tcp 2>"$T_DIR/err.out" || rc=$?
[ "$rc" = 254 ] || fail "add_group of an unreachable node: status $rc, not lst's 254"
grep -q "create session RPC failed on 12345-10.79.1.99@tcp" "$T_DIR/err.out" || fail "dead: $(cat "$T_DIR/err.out")"
grep -q "deleting group dead" "$T_DIR/err.out" || fail "dead kept"
[ "$(lst list_group | tail -n 1)" = "Total 0 groups" ] || fail "groups left: $(lst list_group)"
lst stat --delay 0 10.79.1.10@tcp 2>"$T_DIR/err.out" && fail "stat --delay 0 ran"
grep -qx "Invalid timeout or delay value" "$T_DIR/err.out" || fail "stat --delay 0: $(cat "$T_DIR/err.out")"
lst end_session >/dev/null
log "PASS"
