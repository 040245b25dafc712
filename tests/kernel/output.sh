#!/usr/bin/env bash
# lnetctl's and lst's output on an lnetd against the kernel's, the kernel's tools being
# the reference. k2 (kernel) and u3 (lnetd) stand alike on tcp1: one NI, a route to tcp
# through a router (u2 for k2, kr for u3), the other as a discovered peer. Each command
# runs on both; its exit status and standard output (and, where marked, its standard
# error) must match once NIDs, numbers, interface names and CPT lists are made words.
# The differences kept on purpose (docs/interop.md) are taken out by name first.
. "$(dirname "$0")/lib.sh"
kn_case kernel.output

# NIDs (also the kernel lst's garbled 0-1000200@<3:24842>), interfaces, CPT lists and
# numbers as words; an error's descr is text of its own (the errno is compared).
normalize() {
  sed -E -e 's/\b[0-9]+-[0-9a-f]+@<[0-9]+:[0-9]+>/12345-NID/g' \
    -e 's/[0-9a-fA-F:.]*[0-9a-fA-F]@[a-z]+[0-9]*/NID/g' \
    -e 's/^( +0: )[^ ]+$/\1IF/' -e 's/"\[[0-9,]*\]"/CPT/g' \
    -e 's/(descr: ).*/\1TEXT/' -e 's/[0-9]+(\.[0-9]+)?/N/g' -e 's/ +/ /g'
}
# What lnetd shows besides lnetctl (docs/interop.md): the router checker's two tunables
# in global show and export, and stats show's lnd and selftest sections.
kept_differences() {
  sed -E -e '/^ +(alive_router_check_interval|router_ping_timeout): /d' -e '/^(lnd|selftest) statistics:$/,$d'
}

# run_on NODE TAG CMD: CMD (a script for the node's shell) on NODE; its normalized
# output, errors and status in $T_DIR/TAG.{out,err,rc}, as it printed them in TAG.{raw,rawerr}.
run_on() {
  local n=$1 tag=$2 cmd=$3 rc=0
  # (Split on the node: a kernel node's exec merges its standard error into its output.)
  on $n "{ $cmd; } >/tmp/kn.out 2>/tmp/kn.err; rc=\$?; cat /tmp/kn.out; echo @@stderr@@; cat /tmp/kn.err; exit \$rc" \
    >"$T_DIR/$tag.both" 2>&1 || rc=$?
  [ $rc = 124 ] && fail "'$cmd' on $n took more than 90 s"
  sed '/^@@stderr@@$/,$d' "$T_DIR/$tag.both" >"$T_DIR/$tag.raw"
  sed '1,/^@@stderr@@$/d' "$T_DIR/$tag.both" >"$T_DIR/$tag.rawerr"
  kept_differences <"$T_DIR/$tag.raw" | grep -v "batch in stopping$" | normalize >"$T_DIR/$tag.out" || true
  normalize <"$T_DIR/$tag.rawerr" >"$T_DIR/$tag.err"
  echo $rc >"$T_DIR/$tag.rc"
}

CHECKED=0
# compare WHAT STDERR TAG_K TAG_U: the exit status and output alike (and the errors, STDERR 1).
compare() {
  local what=$1 stderr=$2 k=$T_DIR/$3 u=$T_DIR/$4
  [ "$(cat "$k.rc")" = "$(cat "$u.rc")" ] ||
    fail "$what: exit status $(cat "$u.rc"), the kernel's $(cat "$k.rc")$(printf '\nours:\n')$(cat "$u.raw" "$u.rawerr")$(printf '\nthe kernel:\n')$(cat "$k.raw" "$k.rawerr")"
  diff -u --label "kernel: $what" --label "lnetd: $what" "$k.out" "$u.out" >"$T_DIR/diff" ||
    fail "$what: the output differs from the kernel's:$(printf '\n')$(cat "$T_DIR/diff")"
  if [ "$stderr" = 1 ]; then
    diff -u --label "kernel: $what (stderr)" --label "lnetd: $what (stderr)" "$k.err" "$u.err" >"$T_DIR/diff" ||
      fail "$what: the errors differ from the kernel's:$(printf '\n')$(cat "$T_DIR/diff")"
  fi
  CHECKED=$((CHECKED + 1))
}

# same WHAT [--stderr] CMD_K [CMD_U]: CMD_K on k2, CMD_U on u3, alike.
same() {
  local what=$1 stderr=0
  shift
  [ "$1" = --stderr ] && stderr=1 && shift
  run_on k2 k "$1"
  run_on u3 u "${2:-$1}"
  compare "$what" $stderr k u
}

# plan WHAT [--stderr] CMD_K [CMD_U]: the same, in a sequence run_plan runs whole on k2,
# then whole on u3 (two lst consoles would take each other's nodes).
PLAN_WHAT=() PLAN_ERR=() PLAN_K=() PLAN_U=()
plan() {
  local stderr=0 what=$1
  shift
  [ "$1" = --stderr ] && stderr=1 && shift
  PLAN_WHAT+=("$what") PLAN_ERR+=($stderr) PLAN_K+=("$1") PLAN_U+=("${2:-$1}")
}
run_plan() {
  local i
  for i in "${!PLAN_WHAT[@]}"; do run_on k2 "k$i" "${PLAN_K[i]}"; done
  for i in "${!PLAN_WHAT[@]}"; do run_on u3 "u$i" "${PLAN_U[i]}"; done
  for i in "${!PLAN_WHAT[@]}"; do compare "${PLAN_WHAT[i]}" "${PLAN_ERR[i]}" "k$i" "u$i"; done
}

log "k2 and u3 alike: peers of each other (discovered), routes up"
wait_until 30 "k2's route to tcp through u2 is up" route_is k2 tcp "$U21" up
wait_until 30 "u3's route to tcp through kr is up" route_is u3 tcp "$KR1" up
# The peers other cases left go; a gateway's stays (both refuse to delete it).
for n in k2 u3; do
  on $n 'for p in $(lnetctl peer show | awk "/primary nid/ {print \$NF}"); do lnetctl peer del --prim_nid $p >/dev/null 2>&1 || true; done'
done
on k2 "lnetctl ping $U3 >/dev/null && lnetctl discover $U3 >/dev/null" || fail "k2 cannot reach u3"
on u3 "lnetctl ping $K2 >/dev/null && lnetctl discover $K2 >/dev/null" || fail "u3 cannot reach k2"
[ "$(on k2 lnetctl peer show | grep -c 'primary nid')" = 2 ] || fail "k2's peers: $(on k2 lnetctl peer show)"
[ "$(on u3 lnetctl peer show | grep -c 'primary nid')" = 2 ] || fail "u3's peers: $(on u3 lnetctl peer show)"

log "lnetctl: show at every verbosity, stats, globals, ping, discover, export"
for cmd in "net show" "net show -v" "net show -v 2" "net show -v 3" "net show -v 4" "net show --net tcp1 -v" \
  "peer show" "peer show -v" "peer show -v 2" "peer show -v 3" "peer show -v 4" \
  "stats show" "global show" "route show" "route show -v" "route show -v 2" "routing show" \
  "export" "export --backup"; do
  same "lnetctl $cmd" "lnetctl $cmd"
done
same "lnetctl peer show --nid" "lnetctl peer show --nid $U3" "lnetctl peer show --nid $K2"
same "lnetctl ping" "lnetctl ping $U3" "lnetctl ping $K2"
same "lnetctl discover" "lnetctl discover $U3" "lnetctl discover $K2"

log "lnetctl: refusals (exit status, and the error document on the standard error)"
same "lnetctl peer show of no peer" "lnetctl peer show --nid 10.97.3.99@tcp1"
same "lnetctl route add with a bad gateway" --stderr "lnetctl route add --net tcp9 --gateway bogus"
same "lnetctl peer del of a gateway" "lnetctl peer del --prim_nid $U21" "lnetctl peer del --prim_nid $KR1"
same "lnetctl net del of no net" --stderr "lnetctl net del --net tcp9"
same "lnetctl ping of no node" "lnetctl ping --timeout 2 10.97.3.99@tcp1"
same "lnetctl unknown command" --stderr "lnetctl frobnicate"
same "lnetctl unknown subcommand" --stderr "lnetctl net frob"

log "lst: a session, groups, a batch run, stat, show_error, stop, end"
s="export LST_SESSION=4244; lst"
plan "lst new_session" "$s new_session --force --timeout 100 out"
plan "lst add_group (self)" "$s add_group s $K2" "$s add_group s $U3"
plan "lst add_group (other)" "$s add_group o $U3" "$s add_group o $K2"
plan "lst add_batch" "$s add_batch b"
plan "lst add_test" "$s add_test --batch b --loop 100000 --concurrency 2 --from s --to o brw write size=64K"
plan "lst list_batch (idle)" "$s list_batch b"
plan "lst run" "$s run b"
for cmd in "list_group" "list_batch" "list_batch b" "list_batch b --test 1" "list_batch b --test 1 --all" \
  "list_batch b --test 1 --server --active" "list_batch b --test 1 --invalid" "query b" "query b --all" \
  "stat --count 1 --delay 1 s o" "stat --count 1 --delay 1 --bw s" "show_error --session s o"; do
  plan "lst $cmd" "$s $cmd"
done
plan "lst del_group of a group in use" "$s del_group s"
plan "lst stop" "$s stop b"
plan "lst query (stopped)" "$s query b"
plan "lst list_batch (stopped)" "$s list_batch b"
plan "lst list_batch of no batch" "$s list_batch nob"
plan "lst list_batch of no test" "$s list_batch b --test 7"
plan "lst add_batch without a name" "$s add_batch"
plan "lst stat without a group" "$s stat >/tmp/stat.out; rc=\$?; head -c 15 /tmp/stat.out; exit \$rc"
plan "lst unknown command" "$s frobnicate"
plan "lst end_session" "$s end_session"
plan "lst end_session (none)" "$s end_session"
plan "lst add_group (no session)" --stderr "$s add_group g $K2" "$s add_group g $U3"
run_plan
log "$CHECKED commands: the same exit status and output as the kernel's tools"
log PASS
