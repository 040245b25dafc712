#!/usr/bin/env bash
# The white paper's failure test plan (seed 002 §3) on the virtual cluster, one scenario
# per run (CTest label `cluster`):
#   failures.sh gateway_poweroff | proxy_node_reboot | compute_poweroff | app_crash |
#               proxy_kill | routed | partition | per_app | rogue | spawned_side_by_side
# Each runs under traffic (lnet_mpi_stream: PUT+GET rounds of 256 KiB, every byte
# checked), with deadlines, and prints what the application saw, what went on working,
# what was freed, and the times to error and to recovery ("time:" lines). The expected
# outcome of each is in docs/design/cluster.md. Cluster: topologies/failures.cluster
# (routed: topologies/routed.cluster); LNet's timers are short there (a gateway pinged
# every second with 2 s to answer, a message's deadline 10 s, a transfer given up after
# 5 s in MPI).
. "$(dirname "$0")/lib.sh"
scenario=${1:?usage: failures.sh SCENARIO}
command -v ompi-server >/dev/null || { echo "[$scenario] SKIP: no Open MPI"; exit 77; }

R1=10.91.0.21@mpi
R2=10.91.0.22@mpi
S1=10.91.1.31@tcp  # routes to mpi through r1 and r2
S2=10.91.1.32@tcp  # through r1 alone: for the standing proxy on r1
SPAWN=(-x "LNET_PROXY=spawn:r1:/run/lnet/bridge.sock,r2:/run/lnet/bridge.sock")
# A job on c1 and c2 with its proxy ranks spawned on r1 (rank 0) and r2 (mode 2).
MODE2=(--host c1:2,c2:2,r1:1,r2:1 -n 4 "${SPAWN[@]}")

timing() { log "time: $*"; }
# Predicates for wait_until (run in this shell, so they may use the helpers).
has_route_event() { [ -n "$(route_event "$@")" ]; }      # NAME NET GW STATE SINCE
has_failure() { [ -n "$(first_failure "$@")" ]; }          # NAME SINCE
has_released() { [ -n "$(released_at "$@")" ]; }          # NODE PID SINCE
uses_both() { [ "$(via "$1" "$R1")" -gt 0 ] && [ "$(via "$1" "$R2")" -gt 0 ]; }
uses_r2_alone() { [ "$(via "$1" "$R1")" = 0 ] && [ "$(via "$1" "$R2")" -gt 0 ]; }
uses_r1() { [ "$(via "$1" "$R1")" -gt 0 ]; }
good_over() { [ "$(good "$1")" -gt "$2" ]; }               # NAME COUNT
in_log() { grep -q "$2" "$1"; }                            # FILE PATTERN
# logged_since FILE PATTERN SINCE: the epoch of the first line of FILE (a log stamped
# with the epoch) with PATTERN at or after SINCE.
logged_since() { awk -v p="$2" -v t="$3" 'index($0, p) && $1 >= t {print $1; exit}' "$1"; }
has_logged_since() { [ -n "$(logged_since "$@")" ]; }
# job_pid NAME: the LNet pid the job's ranks got (as lnetd logs it: without the user flag).
job_pid() { echo $(($(grep -ao '^start: [0-9]* ranks, pid [0-9]*' "$T_DIR/$1.log" | awk '{print $5}') & 0x7fffffff)); }
# released_at NODE PID SINCE: the epoch at which NODE's lnetd released the application pid.
# Either the proxy rank released it, or the rank left the bridge ("pids [2,7] released").
released_at() {
  awk -v p="pid $2(user) released" -v pid="$2" -v since="$3" '$1 < since {next}
    index($0, p) {print $1; exit}
    /left the bridge/ && match($0, /pids \[[0-9,]*\] released/) {
      n = split(substr($0, RSTART + 6, RLENGTH - 16), l, ",")
      for (i = 1; i <= n; i++) if (l[i] == pid) {print $1; exit}
    }' "$(cl log "$1" lnetd)"
}
lnetd_pid() { cat "/run/lnet-cluster/$LNET_CLUSTER/nodes/$1/pids/lnetd"; }
no_stream_on() { ! grep -q lnet_mpi_stream <<<"$(cl pids "$1")"; }
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
# max_fail_ms NAME: the longest a failed round of the job took (its error's delay).
max_fail_ms() {
  { grep -aoE 'failed: .* after [0-9]+ ms' "$T_DIR/$1.log" || true; } | awk '{v = $(NF - 1); if (v > m) m = v} END {print m + 0}'
}
# max_round_ms NAME: the longest round of any rank of the job (from the ranks' summaries).
max_round_ms() {
  summary "$1" | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^max_ms=/) {v = substr($i, 8); if (v > m) m = v}} END {print m + 0}'
}
# b_streamed_through WHAT: job B streams on, then stops cleanly with no failed round;
# its longest round (the stall what happened to A cost it) is printed.
b_streamed_through() {
  grows B 2
  stream_stop B
  [ "$STREAM_EXIT" = 0 ] && [ "$(failures B)" = 0 ] || fail "B: status $STREAM_EXIT, $(failures B) failed rounds"
  local stall
  stall=$(max_round_ms B)
  log "B streamed through $1 with every byte checked and no failed round; its longest round took $stall ms (target: 2 heartbeat intervals, 2000 ms)"
  timing "B's longest round through $1: $stall ms"
}
# errors_in_time NAME: every failed round failed in time, and none hung. LNet's deadline
# (10 s) bounds when an attempt (a resend) may start; the last one ends within the MPI
# LND's timeout (LNET_MPI_TIMEOUT=5, STREAM_ENV); 1 s for the LND's timeout scans and
# the event's way to the application.
errors_in_time() {
  no_hang "$1"
  local m
  m=$(max_fail_ms "$1")
  [ "$m" -le 16000 ] || {
    grep -aE "failed: .* after $m ms" "$T_DIR/$1.log" | head -3 >&2
    fail "job $1: a round failed only after $m ms (deadline 10 s + an attempt of 5 s)"
  }
}
# grows NAME SECONDS: the job did more rounds, successful ones, in the next SECONDS.
grows() {
  local before
  before=$(good "$1")
  sleep "$2"
  [ "$(good "$1")" -gt "$before" ] || fail "job $1 did no successful round in $2 s ($before so far)"
}

# ---- power off one of two proxy/router nodes ----------------------------------------------
gateway_poweroff() {
  stream_start A "$S1" "${MODE2[@]}"
  wait_until 30 "A uses both gateways" uses_both A
  log "A (4 ranks on c1, c2; proxy ranks spawned on r1, r2) streams through both gateways"
  local t_off t_gone t_down t_err t_s1 t_reb t_end t_both
  t_off=$(now)
  cl poweroff r1 >/dev/null
  t_gone=$(now)  # the command may have waited for the cluster's lock: r1 is off from here
  wait_until 30 "A's route through r1 goes down" has_route_event A tcp "$R1" down "$t_off"
  t_down=$(route_event A tcp "$R1" down "$t_off")
  sleep 8  # a round caught on r1 fails within LNet's deadline
  t_err=$(first_failure A "$t_off")
  errors_in_time A
  wait_until 30 "A's rounds go through r2 alone" uses_r2_alone A
  # Rounds caught on r1 fail within the deadline, then all of them go through r2: after
  # 20 s, none fails any more. (A round whose reply MPI had matched from r1's proxy rank
  # fails within the deadline too, but its rank waits for its buffer until the MPI LND
  # gives that receive up, four timeouts later: failures are stamped when they came.)
  sleep $(awk -v t="$t_gone" -v n="$(now)" 'BEGIN {d = t + 20 - n; print (d > 0 ? d : 0)}')
  grows A 3
  local last
  last=$(last_failure A)
  [ -z "$last" ] || awk -v a="$t_gone" -v b="$last" 'BEGIN {exit !(b - a <= 20)}' ||
    fail "A's rounds still failed $(secs "$t_gone" "$last") s after r1 went off (the poweroff took $(secs "$t_off" "$t_gone") s): $(grep -a 'failed:' "$T_DIR/A.log" | tail -n 2)"
  wait_until 30 "s1 takes its route through r1 down" in_log "$(cl log s1 daemon-0)" "gateway 10.91.1.21@tcp did not answer"
  t_s1=$(logged_since "$(cl log s1 daemon-0)" "gateway 10.91.1.21@tcp did not answer" "$t_off")
  log "r1 off: A's route through r1 down, its rounds through r2 alone ($(failures A "$t_off") failed, the longest after $(max_fail_ms A) ms); s1's route through r1 down"
  timing "poweroff -> A's route down $(secs "$t_off" "$t_down") s, first failed round $([ -n "$t_err" ] && echo "$(secs "$t_off" "$t_err") s" || echo none), s1's route down $(secs "$t_off" "$t_s1") s"
  # The reboot kills A's proxy rank and daemon on r1: Open MPI ends A with an error.
  t_reb=$(now)
  cl reboot r1 >/dev/null
  wait_until 90 "A ends after r1's reboot (not a hang)" stream_ended A
  t_end=$(now)
  [ "$STREAM_EXIT" != 0 ] || fail "A ended with status 0 after its proxy lost a node"
  grep -aq "lost communication with a remote daemon" "$T_DIR/A.log" || log "note: A ended otherwise: $(tail -n 3 "$T_DIR/A.log")"
  errors_in_time A
  log "r1 rebooted: A ends with status $STREAM_EXIT (Open MPI: its daemon on r1 was lost), no hang"
  # A new application uses both gateways again.
  STREAM_OFFSET=$((8 << 20)) stream_start B "$S1" "${MODE2[@]}"
  wait_until 60 "B uses both gateways" uses_both B
  t_both=$(now)
  stream_stop B
  [ "$STREAM_EXIT" = 0 ] && [ "$(failures B)" = 0 ] || fail "B: status $STREAM_EXIT, $(failures B) failed rounds"
  timing "reboot -> A ended $(secs "$t_reb" "$t_end") s; reboot -> a new job through both gateways $(secs "$t_reb" "$t_both") s"
}

# s2_has_r1 SINCE: s2's routes through r1 are up as far as its log says (above).
s2_has_r1() {
  local last
  last=$(awk -v t="$1" '$1 >= t && /gateway 10\.91\.1\.21@tcp (did not answer|answers again)/ {l = $0} END {print l}' \
    "$(cl log s2 daemon-1)")
  if [ -z "$last" ]; then [ "$(secs "$1" "$(now)" | cut -d. -f1)" -ge 5 ]; else [[ "$last" == *"answers again"* ]]; fi
}

# ---- reboot the standing proxy's node while no application runs ---------------------------
proxy_node_reboot() {
  local before after t_reb t_up t_back
  before=$(cl proxy status r1)
  grep -q running <<<"$before" || fail "the standing proxy is not running: $before"
  timeout 120 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" mpirun --host c1:2 -n 2 -x "LNET_PROXY=$(cl proxy port r1)" \
    proxy_demo --server "$S2" --size 262144 >"$T_DIR/first.log" 2>&1 || fail "a job before the reboot: $(tail "$T_DIR/first.log")"
  t_reb=$(now)
  cl reboot r1 >"$T_DIR/reboot.log"
  t_up=$(now)
  after=$(cl proxy status r1)
  grep -q running <<<"$after" || fail "the standing proxy did not come back: $after"
  [ "$before" != "$after" ] || fail "the standing proxy was not restarted: $after"
  # s2 checks its gateways every second (router_ping_timeout 2 s): r1's death is noticed
  # within 3 s of the kill, and its return only once the ping its old self was sent has
  # timed out (transaction_timeout: docs/design/cluster.md, what the runs do not show). The
  # next job starts when s2 has r1's routes up: no "did not answer" since the reboot 5 s
  # after it, or an "answers again" after the last one.
  wait_until 60 "s2 takes r1's routes up again after its reboot" s2_has_r1 "$t_reb"
  t_back=$(now)
  timeout 120 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" mpirun --host c1:2 -n 2 -x "LNET_PROXY=$(cl proxy port r1)" \
    proxy_demo --server "$S2" --size 262144 >"$T_DIR/next.log" 2>&1 || fail "the next job: $(tail -n 20 "$T_DIR/next.log")"
  grep -q "all ranks ok" "$T_DIR/next.log" || fail "the next job: $(tail "$T_DIR/next.log")"
  log "r1 rebooted while idle: lnetd and the standing proxy started again ($(grep -o 'mpirun pid [0-9]*' <<<"$after")), the next job on c1 reaches s2 through it"
  timing "reboot (kill, links, lnetd, proxy serving) $(secs "$t_reb" "$t_up") s; s2 has r1's routes up $(secs "$t_reb" "$t_back") s"
}

# ---- power off a compute node of a running application ---------------------------------
compute_poweroff() {
  stream_start A "$S1" "${MODE2[@]}"
  STREAM_OFFSET=$((8 << 20)) stream_start B "$S1" --host c3:2,r1:1,r2:1 -n 2 "${SPAWN[@]}"
  local pid_a l1 l2 t_off t1 t2 b_ops b_fail t_reb
  pid_a=$(job_pid A)
  l1=$(lnetd_pid r1)
  l2=$(lnetd_pid r2)
  log "A (c1, c2) and B (c3) stream to s1, each through its own proxy ranks on r1 and r2"
  b_ops=$(good B)
  t_off=$(now)
  cl poweroff c1 >/dev/null  # A's rank 0, rank 1 and its mpirun
  wait_until 60 "r1's lnetd releases A's pid" has_released r1 "$pid_a" "$t_off"
  wait_until 60 "r2's lnetd releases A's pid" has_released r2 "$pid_a" "$t_off"
  t1=$(released_at r1 "$pid_a" "$t_off")
  t2=$(released_at r2 "$pid_a" "$t_off")
  grows B 3
  b_fail=$(failures B)
  [ "$b_fail" = 0 ] || fail "B lost $b_fail rounds while A's node was off: $(grep -a -m 3 'failed:' "$T_DIR/B.log")"
  alive "$l1" && alive "$l2" || fail "an lnetd died"
  grep -q running <<<"$(cl proxy status r1)" || fail "the standing proxy on r1 died"
  log "c1 off: A's proxy ranks freed its pid and descriptors at r1 and r2 (heartbeats stopped); B did $(($(good B) - b_ops)) rounds meanwhile, none failed; lnetds and the standing proxy run on"
  timing "poweroff -> A's pid released: r1 $(secs "$t_off" "$t1") s, r2 $(secs "$t_off" "$t2") s (the proxy's heartbeat deadline is 10 s)"
  t_reb=$(now)
  cl reboot c1 >/dev/null
  # What was left of A elsewhere (its ranks on c2, its proxy ranks) goes with its mpirun.
  wait_until 60 "A's processes on c2 end once c1 is back" no_stream_on c2
  wait_until 60 "A ends" stream_ended A
  stream_stop B
  [ "$STREAM_EXIT" = 0 ] && [ "$(failures B)" = 0 ] || fail "B: status $STREAM_EXIT, $(failures B) failed rounds"
  log "c1 rebooted: what was left of A on c2 ended; B ended cleanly"
  timing "c1 reboot -> A's leftovers gone $(secs "$t_reb" "$(now)") s"
}

# ---- abort and crash application processes ---------------------------------------------
# Single-node jobs through the standing proxy on r1 (mode 1c), while another job on c3
# streams through it too: the proxy and lnetd survive each, free the job's pid, and the
# other job is not disturbed.
app_crash() {
  local port
  port=$(cl proxy port r1)
  STREAM_OFFSET=$((4 << 20)) stream_start B "$S2" --host c3:2 -n 2 -x "LNET_PROXY=$port"
  local proxy_before l1 how who n=0
  proxy_before=$(cl proxy status r1)
  l1=$(lnetd_pid r1)
  for how in abort segv kill; do
    for who in one all; do
      n=$((n + 1))
      local job="A$n" sig pids t0 t_end t_rel pid_a
      stream_start "$job" "$S2" --host c1:2 -n 2 -x "LNET_PROXY=$port"
      pid_a=$(job_pid "$job")
      mapfile -t pids < <(cl pids c1 | awk '$3 ~ /lnet_mpi_stream$/ {print $1}')
      [ ${#pids[@]} = 2 ] || fail "$job: ${#pids[@]} ranks on c1"
      [ "$who" = one ] && pids=("${pids[1]}")
      case "$how" in abort) sig=USR1 ;; segv) sig=SEGV ;; kill) sig=KILL ;; esac
      t0=$(now)
      kill -"$sig" "${pids[@]}"
      wait_until 60 "$job ends after $how of $who rank(s) (not a hang)" stream_ended "$job"
      t_end=$(now)
      [ "$STREAM_EXIT" != 0 ] || fail "$job ended with status 0 after $how"
      wait_until 30 "r1's lnetd releases $job's pid" has_released r1 "$pid_a" "$t0"
      t_rel=$(released_at r1 "$pid_a" "$t0")
      no_hang "$job"
      log "$how of $who rank(s): the job ends with status $STREAM_EXIT in $(secs "$t0" "$t_end") s; the proxy dropped it, r1's lnetd released its pid in $(secs "$t0" "$t_rel") s"
      timing "$how of $who rank(s) -> job ended $(secs "$t0" "$t_end") s, pid released $(secs "$t0" "$t_rel") s ($(secs "$t_end" "$t_rel") s after the job ended; client timeout 5 s)"
    done
  done
  grows B 2
  [ "$(cl proxy status r1)" = "$proxy_before" ] || fail "the standing proxy changed: $(cl proxy status r1)"
  alive "$l1" || fail "r1's lnetd died"
  stream_stop B
  [ "$STREAM_EXIT" = 0 ] || fail "B ended with status $STREAM_EXIT"
  errors_in_time B
  # Mode 1c isolates applications no further than one process serving them all does
  # (seed 002 §2.1): B's rounds may fail, within the deadline; it streams on.
  log "six crashes: the standing proxy and r1's lnetd served on; B streamed through all of them ($(failures B) of its rounds failed, within the deadline)"
}

# ---- kill proxy processes ---------------------------------------------------------------
proxy_kill() {
  # Mode 1c: the standing proxy's rank (all of it: one rank on r1) under a job on c1.
  local port t0 t_err t_end p
  port=$(cl proxy port r1)
  stream_start A "$S2" --host c1:2 -n 2 -x "LNET_PROXY=$port"
  p=$(cl pids r1 | awk '$3 ~ /lnet-proxy$/ && /--port-file/ && !f {print $1; f = 1}')
  [ -n "$p" ] || fail "no standing proxy process on r1"
  t0=$(now)
  kill -KILL "$p"
  wait_until 30 "A's rounds fail after its proxy died" has_failure A "$t0"
  t_err=$(first_failure A "$t0")
  sleep 3
  stream_stop A 120
  t_end=$(now)
  errors_in_time A
  log "standing proxy killed: A's rounds fail ($(failures A "$t0") failed, the longest after $(max_fail_ms A) ms), A stops on request with status $STREAM_EXIT"
  timing "kill -> A's first failed round $(secs "$t0" "$t_err") s; stop -> A ended $(secs "$t0" "$t_end") s after the kill"
  cl proxy restart r1 >/dev/null
  timeout 120 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" mpirun --host c1:2 -n 2 -x "LNET_PROXY=$(cl proxy port r1)" \
    proxy_demo --server "$S2" --size 262144 >"$T_DIR/after.log" 2>&1 || fail "a job after the restart: $(tail "$T_DIR/after.log")"
  log "the restarted standing proxy serves the next job"

  # Mode 2: a spawned proxy rank, then every one, under a job on c1 and c2.
  local which n=0
  for which in one all; do
    n=$((n + 1))
    local job="M$n" pid_a t_rel
    STREAM_OFFSET=0 stream_start "$job" "$S1" "${MODE2[@]}"
    pid_a=$(job_pid "$job")
    local victims=()
    victims+=("$(cl pids r1 | awk '$3 ~ /lnet-proxy$/ && /--bridge/ && !f {print $1; f = 1}')")
    [ "$which" = all ] && victims+=("$(cl pids r2 | awk '$3 ~ /lnet-proxy$/ && /--bridge/ && !f {print $1; f = 1}')")
    t0=$(now)
    kill -KILL "${victims[@]}"
    wait_until 60 "$job ends after its proxy ranks were killed (not a hang)" stream_ended "$job"
    t_end=$(now)
    [ "$STREAM_EXIT" != 0 ] || fail "$job ended with status 0"
    wait_until 30 "r2's lnetd releases $job's pid" has_released r2 "$pid_a" "$t0"
    t_rel=$(released_at r2 "$pid_a" "$t0")
    no_hang "$job"
    log "mode 2, $which spawned proxy rank(s) killed: Open MPI ends the job (status $STREAM_EXIT) in $(secs "$t0" "$t_end") s; r2's lnetd released its pid in $(secs "$t0" "$t_rel") s"
  done
  timeout 120 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" mpirun "${MODE2[@]}" proxy_demo --server "$S1" --size 262144 \
    >"$T_DIR/spawn-after.log" 2>&1 || fail "a job spawning its proxy afterwards: $(tail "$T_DIR/spawn-after.log")"
  log "the next job spawns its proxy and reaches s1 through both gateways"
}

# ---- a routed configuration: power off one of two routers mid-stream -------------------
routed() {
  local port t_off t_p1 t_s1 t_reb t_p1_up t_s1_up fwd1 fwd2
  port=$(cl proxy port p1)
  local server=10.94.2.41@tcp1
  stream_start A "$server" --host c1:2 -n 2 -x "LNET_PROXY=$port"
  fwd() { cl exec "$1" lnetctl stats show | awk '/^ *route_count:/ {print $2}'; }
  fwd_over() { [ "$(fwd "$1")" -gt "$2" ]; }  # NODE COUNT
  wait_until 30 "rt1 forwards A's rounds" fwd_over rt1 100
  wait_until 30 "rt2 forwards A's rounds" fwd_over rt2 100
  log "A (c1, through the standing proxy on p1) streams to s1 on tcp1; rt1 and rt2 both forward"
  t_off=$(now)
  cl poweroff rt1 >/dev/null
  local p1_log s1_log
  p1_log=$(cl log p1 lnetd)
  s1_log=$(cl log s1 daemon-0)
  wait_until 30 "p1 takes its route through rt1 down" has_logged_since "$p1_log" "gateway 10.94.1.31@tcp did not answer" "$t_off"
  wait_until 30 "s1 takes its route through rt1 down" has_logged_since "$s1_log" "gateway 10.94.2.31@tcp1 did not answer" "$t_off"
  t_p1=$(logged_since "$p1_log" "gateway 10.94.1.31@tcp did not answer" "$t_off")
  t_s1=$(logged_since "$s1_log" "gateway 10.94.2.31@tcp1 did not answer" "$t_off")
  # The rounds in flight through rt1 fail by LNet's deadline (10 s); the next ones go
  # through rt2.
  local base
  wait_until 40 "every rank of A reports rounds after the deadline of those in flight" \
    printed_since A "$(awk -v t="$t_off" 'BEGIN {printf "%.3f", t + 11}')"
  base=$(good A)
  fwd2=$(fwd rt2)
  wait_until 40 "A's rounds succeed again after rt1 went off" good_over A $((base + 100))
  [ "$(fwd rt2)" -gt "$fwd2" ] || fail "rt2 forwards nothing after rt1 went off"
  errors_in_time A
  # Marked down within router_ping_timeout (2 s) + the check interval (1 s); a loaded
  # 2-core host gets some slack.
  local lim=9
  awk -v a="$t_off" -v b="$t_p1" -v c="$t_s1" -v l=$lim 'BEGIN {exit !(b - a <= l && c - a <= l)}' ||
    fail "a route through rt1 went down only after $(secs "$t_off" "$t_p1") s (p1) / $(secs "$t_off" "$t_s1") s (s1)"
  log "rt1 off: A goes on through rt2 ($(failures A "$t_off") rounds failed, the longest after $(max_fail_ms A) ms); p1 and s1 take their routes through rt1 down"
  timing "poweroff -> route through rt1 down: p1 $(secs "$t_off" "$t_p1") s, s1 $(secs "$t_off" "$t_s1") s (router_ping_timeout 2 + check interval 1)"
  t_reb=$(now)
  cl reboot rt1 >/dev/null
  wait_until 60 "p1's route through rt1 comes back" has_logged_since "$p1_log" "gateway 10.94.1.31@tcp answers again" "$t_reb"
  wait_until 60 "s1's route through rt1 comes back" has_logged_since "$s1_log" "gateway 10.94.2.31@tcp1 answers again" "$t_reb"
  t_p1_up=$(logged_since "$p1_log" "gateway 10.94.1.31@tcp answers again" "$t_reb")
  t_s1_up=$(logged_since "$s1_log" "gateway 10.94.2.31@tcp1 answers again" "$t_reb")
  fwd1=$(fwd rt1)
  wait_until 30 "rt1 forwards A's rounds again" fwd_over rt1 $((fwd1 + 50))
  stream_stop A
  errors_in_time A
  log "rt1 rebooted: the routes through it come back up and it forwards again; A ends with status $STREAM_EXIT"
  timing "reboot -> route through rt1 up: p1 $(secs "$t_reb" "$t_p1_up") s, s1 $(secs "$t_reb" "$t_s1_up") s"
}

# ---- partition a proxy node's mpi link, then heal --------------------------------------
partition() {
  local t_cut t_heal t_up t_resume
  stream_start A "$S1" "${MODE2[@]}"
  wait_until 30 "A uses both gateways" uses_both A
  # r2 holds the spawned proxy's rank 1: cut, its rounds fail and go through r1; healed,
  # nothing was dropped and both gateways carry rounds again. (Rank 0 keeps hearing the
  # application's heartbeats: the cut may last as long as the outage of a link does.)
  t_cut=$(now)
  cl partition r2 mpi >/dev/null
  wait_until 30 "A's route through r2 goes down" has_route_event A tcp "$R2" down "$t_cut"
  sleep 8
  t_heal=$(now)
  cl heal >/dev/null
  wait_until 60 "A's route through r2 comes back" has_route_event A tcp "$R2" up "$t_heal"
  t_up=$(route_event A tcp "$R2" up "$t_heal")
  wait_until 60 "A's rounds go through r2 again" uses_both A
  t_resume=$(now)
  grows A 3
  errors_in_time A
  log "r2 cut from mpi for $(secs "$t_cut" "$t_heal") s: $(failures A "$t_cut") rounds failed (the longest after $(max_fail_ms A) ms), A went on through r1; healed: both gateways again"
  timing "cut -> route down $(secs "$t_cut" "$(route_event A tcp "$R2" down "$t_cut")") s; heal -> route up $(secs "$t_heal" "$t_up") s, -> rounds through both $(secs "$t_heal" "$t_resume") s"
  # r1 holds rank 0, which hears the application's heartbeats: cut for longer than their
  # deadline (10 s), the proxy drops A and releases its pid; A's rounds fail (no route
  # left), never hang; after the heal a new job works.
  t_cut=$(now)
  cl partition r1 mpi >/dev/null
  wait_until 60 "r1's lnetd releases A's pid" has_released r1 "$(job_pid A)" "$t_cut"
  local t_rel t_rel2
  t_rel=$(released_at r1 "$(job_pid A)" "$t_cut")
  t_heal=$(now)
  cl heal >/dev/null
  # Rank 1 on r2 hears of it once rank 0 can tell it again.
  wait_until 60 "r2's lnetd releases A's pid after the heal" has_released r2 "$(job_pid A)" "$t_cut"
  t_rel2=$(released_at r2 "$(job_pid A)" "$t_cut")
  stream_stop A 120
  errors_in_time A
  log "r1 cut for $(secs "$t_cut" "$t_heal") s: the proxy dropped A (no heartbeat reached its rank 0) and released its pid; A's rounds failed since ($(failures A "$t_cut")), A stops on request (status $STREAM_EXIT)"
  timing "cut -> A's pid released at r1 $(secs "$t_cut" "$t_rel") s (the heartbeat deadline is 10 s); heal -> released at r2 $(secs "$t_heal" "$t_rel2") s"
  STREAM_OFFSET=$((8 << 20)) stream_start B "$S1" "${MODE2[@]}"
  wait_until 60 "B uses both gateways" uses_both B
  stream_stop B
  [ "$STREAM_EXIT" = 0 ] && [ "$(failures B)" = 0 ] || fail "B: status $STREAM_EXIT, $(failures B) failed rounds"
  log "after the heal a new job streams through both gateways"
  timing "heal -> a new job through both gateways $(secs "$t_heal" "$(now)") s"
}

# ---- mode 1b: a dedicated proxy job per application, applications side by side -------
# The standing job on r1 restarted with --mode per-app. B (on c3) streams through a
# dedicated job of its own while A (on c1), through another, is killed each way: kill -9
# of one rank, MPI_Abort, kill -9 of its dedicated proxy rank, its node powered off.
# Each time A's dedicated job goes and r1's lnetd releases A's pid within the deadline,
# B loses no round, and the standing job runs on. B's longest round is printed.
per_app() {
  cl proxy restart r1 -- --mode per-app --client-timeout 5 >/dev/null
  grep -q "a dedicated proxy job per application" "/run/lnet-cluster/$LNET_CLUSTER/log/proxy-r1.log" ||
    fail "the standing proxy on r1 is not in per-app mode"
  local port standing
  port=$(cl proxy port r1)
  standing=$(cl pids r1 | awk '$3 ~ /lnet-proxy$/ && /--mode/ {print $1; exit}')
  [ -n "$standing" ] || fail "no standing per-app proxy on r1"
  dedicated_on_r1() { cl pids r1 | awk '$3 ~ /lnet-proxy$/ && /--dedicated/ {print $1}' | sort; }
  STREAM_OFFSET=$((4 << 20)) stream_start B "$S2" --host c3:2 -n 2 -x "LNET_PROXY=$port"
  local for_b
  for_b=$(dedicated_on_r1)
  [ "$(wc -w <<<"$for_b")" = 1 ] || fail "B's dedicated job: '$for_b'"
  log "B streams from c3 through a dedicated proxy job on r1 (pid $for_b)"
  local how n=0
  for how in kill abort proxy poweroff; do
    n=$((n + 1))
    local job="A$n" pid_a for_a t0 t_gone t_rel pids
    stream_start "$job" "$S2" --host c1:2 -n 2 -x "LNET_PROXY=$port"
    pid_a=$(job_pid "$job")
    for_a=$(comm -13 <(echo "$for_b") <(dedicated_on_r1))
    [ "$(wc -w <<<"$for_a")" = 1 ] || fail "$job's dedicated job: '$for_a'"
    mapfile -t pids < <(cl pids c1 | awk '$3 ~ /lnet_mpi_stream$/ {print $1}')
    t0=$(now)
    case "$how" in
      kill) kill -KILL "${pids[1]}" ;;
      abort) kill -USR1 "${pids[1]}" ;;
      proxy) kill -KILL "$for_a" ;;
      poweroff) cl poweroff c1 >/dev/null ;;
    esac
    dedicated_gone() { ! grep -qx "$for_a" <(dedicated_on_r1); }
    wait_until 30 "$job's dedicated proxy job ends after $how" dedicated_gone
    t_gone=$(now)
    wait_until 30 "r1's lnetd releases $job's pid" has_released r1 "$pid_a" "$t0"
    t_rel=$(released_at r1 "$pid_a" "$t0")
    case "$how" in
      kill | abort) wait_until 60 "$job ends after the $how (not a hang)" stream_ended "$job" ;;
      proxy)
        wait_until 30 "$job's rounds fail after its proxy died" has_failure "$job" "$t0"
        stream_stop "$job" 120
        errors_in_time "$job"
        ;;
      poweroff)
        cl reboot c1 >/dev/null
        wait_until 60 "$job ends once c1 is back" stream_ended "$job"
        ;;
    esac
    no_hang "$job"
    grep -qx "$for_b" <(dedicated_on_r1) || fail "B's dedicated job died with $job's ($how)"
    alive "$standing" || fail "the standing per-app proxy died with $job ($how)"
    [ "$(failures B)" = 0 ] || fail "B lost rounds when $job died ($how): $(grep -a -m 3 'failed:' "$T_DIR/B.log")"
    log "$how: $job's dedicated job gone in $(secs "$t0" "$t_gone") s, its pid released in $(secs "$t0" "$t_rel") s; B lost no round"
    timing "$how -> $job's dedicated job gone $(secs "$t0" "$t_gone") s, pid released $(secs "$t0" "$t_rel") s (heartbeat deadline 5 s)"
  done
  b_streamed_through "A's four deaths"
  wait_until 30 "B's dedicated job ends with B" eval '[ -z "$(dedicated_on_r1)" ]'
}

# ---- applications that misbehave, through the standing proxy (mode 1c) -----------------
# B on c3 streams through the standing proxy on r1 while rogue applications on c1
# (tests/mpi/proxy_rogue.cpp) connect and never say HELLO, send MPI LND messages that
# cannot be decoded, and send a well-formed PUT claiming B's pid: each is dropped and its
# pid released, B loses no round, the proxy is the same process throughout.
rogue() {
  cl proxy restart r1 -- --client-timeout 5 --timeout 10 >/dev/null
  local port plog l1 proxy_before pid_b
  port=$(cl proxy port r1)
  plog="/run/lnet-cluster/$LNET_CLUSTER/log/proxy-r1.log"
  l1=$(lnetd_pid r1)
  proxy_before=$(cl proxy status r1)
  STREAM_OFFSET=$((4 << 20)) stream_start B "$S2" --host c3:2 -n 2 -x "LNET_PROXY=$port"
  pid_b=$(job_pid B)
  log "B (pid $pid_b) streams from c3 through the standing proxy on r1"
  # rogue_start NAME MODE ARGS...: proxy_rogue MODE as job NAME on c1; waits for its line.
  rogue_start() {
    local name=$1 mode=$2
    shift 2
    (
      set +e
      timeout 300 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" mpirun "${STREAM_ENV[@]}" --host c1:2 -n 2 \
        -x "LNET_PROXY=$port" proxy_rogue "$mode" "$@"
      echo "exit $?"
    ) >"$T_DIR/$name.log" 2>&1 &
    T_BG+=($!)
    eval "${name}_PID=$!"
  }
  rogue_stop() {  # NAME: kill -9 its ranks; its mpirun ends
    local p
    p=$(cl pids c1 | awk '$3 ~ /proxy_rogue$/ {print $1}')
    [ -z "$p" ] || kill -KILL $p
    wait_until 30 "the rogue job $1 ends" stream_ended "$1"
  }
  count_in() { grep -c "$2" "$1" || true; }
  more_in() { [ "$(count_in "$1" "$2")" -gt "$3" ]; }   # FILE PATTERN COUNT
  local n t0 t_drop t_rel

  # A client that connects and says nothing: dropped after --timeout (10 s).
  n=$(count_in "$plog" "sent no HELLO")
  rogue_start S connect-only "$port"
  wait_until 60 "the silent client connects: $(tail -n 3 "$T_DIR/S.log")" in_log "$T_DIR/S.log" "connected: silent"
  t0=$(now)
  wait_until 30 "the proxy drops the silent client" more_in "$plog" "sent no HELLO" "$n"
  t_drop=$(now)
  rogue_stop S
  log "a client that connected and said nothing: dropped $(secs "$t0" "$t_drop") s after it connected (--timeout 10)"
  timing "silent client dropped $(secs "$t0" "$t_drop") s after connecting (--timeout 10 s)"

  # Undecodable messages, then a PUT claiming B's pid: the application is dropped.
  local mode
  for mode in garbage claim-pid; do
    local args=() job pid
    [ "$mode" = claim-pid ] && args=($((pid_b | 0x80000000)))
    job=G${mode%%-*}
    n=$(count_in "$plog" "the MPI LND refused: dropped")
    # The pid may be released before "sent" is seen in the rogue's log: look from its start.
    t_start=$(now)
    rogue_start "$job" "$mode" "${args[@]}"
    wait_until 60 "the rogue ($mode) sends: $(tail -n 3 "$T_DIR/$job.log")" in_log "$T_DIR/$job.log" "$mode: sent"
    t0=$(now)
    wait_until 30 "the proxy drops the rogue ($mode)" more_in "$plog" "the MPI LND refused: dropped" "$n"
    t_drop=$(now)
    pid=$(sed -n 's/.*application pid \([0-9]*\) sent .* refused: dropped.*/\1/p' "$plog" | tail -n 1)
    pid=$((pid & 0x7fffffff))
    [ "$pid" != "$pid_b" ] || fail "the proxy dropped B ($pid_b) for the rogue's messages ($mode)"
    wait_until 30 "r1's lnetd releases the rogue's pid $pid ($mode)" has_released r1 "$pid" "$t_start"
    t_rel=$(released_at r1 "$pid" "$t_start")
    t_rel=$(awk -v a="$t_rel" -v b="$t0" 'BEGIN {print (a < b ? b : a)}')  # released before "sent" was seen: 0 s
    rogue_stop "$job"
    log "$mode: the rogue (pid $pid) dropped $(secs "$t0" "$t_drop") s after it sent, its pid released in $(secs "$t0" "$t_rel") s"
    timing "$mode -> rogue dropped $(secs "$t0" "$t_drop") s, pid released $(secs "$t0" "$t_rel") s"
  done

  [ "$(cl proxy status r1)" = "$proxy_before" ] || fail "the standing proxy changed: $(cl proxy status r1)"
  alive "$l1" || fail "r1's lnetd died"
  b_streamed_through "three rogues dropped"
}

# ---- mode 2 side by side: one application's crash while another streams -----------------
# A (c1, c2) and B (c3) each spawned proxy ranks of their own on r1 and r2 (mode 2). A
# is killed two ways (kill -9 of one rank; MPI_Abort): Open MPI ends A with its spawned
# proxy ranks, r1's and r2's lnetds release A's pid, B loses no round. (A's compute node
# powered off: compute_poweroff.)
spawned_side_by_side() {
  STREAM_OFFSET=$((8 << 20)) stream_start B "$S1" --host c3:2,r1:1,r2:1 -n 2 "${SPAWN[@]}"
  log "B streams from c3 to s1 through proxy ranks of its own on r1 and r2"
  local l1 l2 how n=0
  l1=$(lnetd_pid r1)
  l2=$(lnetd_pid r2)
  for how in kill abort; do
    n=$((n + 1))
    local job="A$n" pid_a pids t0 t_end t1 t2
    stream_start "$job" "$S1" "${MODE2[@]}"
    pid_a=$(job_pid "$job")
    mapfile -t pids < <(cl pids c1 | awk '$3 ~ /lnet_mpi_stream$/ {print $1}')
    [ ${#pids[@]} = 2 ] || fail "$job: ${#pids[@]} ranks on c1"
    t0=$(now)
    case "$how" in
      kill) kill -KILL "${pids[1]}" ;;
      abort) kill -USR1 "${pids[1]}" ;;
    esac
    wait_until 60 "$job ends after the $how (not a hang)" stream_ended "$job"
    t_end=$(now)
    [ "$STREAM_EXIT" != 0 ] || fail "$job ended with status 0 after the $how"
    no_hang "$job"
    wait_until 30 "r1's lnetd releases $job's pid" has_released r1 "$pid_a" "$t0"
    wait_until 30 "r2's lnetd releases $job's pid" has_released r2 "$pid_a" "$t0"
    t1=$(released_at r1 "$pid_a" "$t0")
    t2=$(released_at r2 "$pid_a" "$t0")
    [ "$(failures B)" = 0 ] || fail "B lost rounds when $job died ($how): $(grep -a -m 3 'failed:' "$T_DIR/B.log")"
    log "$how: $job ended (status $STREAM_EXIT) in $(secs "$t0" "$t_end") s; its pid released at r1 in $(secs "$t0" "$t1") s, at r2 in $(secs "$t0" "$t2") s; B lost no round"
    timing "$how -> $job ended $(secs "$t0" "$t_end") s, pid released r1 $(secs "$t0" "$t1") s, r2 $(secs "$t0" "$t2") s"
  done
  alive "$l1" && alive "$l2" || fail "an lnetd died"
  b_streamed_through "A's two crashes"
}

case "$scenario" in
  gateway_poweroff | proxy_node_reboot | compute_poweroff | app_crash | proxy_kill | partition | per_app | rogue | \
    spawned_side_by_side)
    cl_setup "$scenario" "$TOPOLOGIES/failures.cluster"
    ;;
  routed) cl_setup "$scenario" "$TOPOLOGIES/routed.cluster" ;;
  *) echo "failures.sh: unknown scenario '$scenario'" >&2; exit 2 ;;
esac
"$scenario"
log "PASS"
