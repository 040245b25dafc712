#!/usr/bin/env bash
# lst at the scale of its man page's sample: 7 servers, 127 readers and 127 writers,
# each an lnetd with self-test on in a namespace of its own, all on one switch, and the
# console in a 262nd. The manual's groups (servers 10.80.10.[8,10,12-16]@tcp, readers
# 10.80.1.[1-253/2]@tcp, writers 10.80.1.[2-254/2]@tcp), then a short batch over every
# node: readers read 1M (check=simple) and writers write 4K (check=full) from the
# servers, until each client has done its loops. Every node must be added and active,
# every test RPC must succeed. Prints the memory of an idle lnetd and the console's time
# to add each group, to run the batch and to stat each group ("figure:" lines, for
# docs/perf.md). In the plain build's suite only (tests/CMakeLists.txt says why).
. "$(dirname "$0")/lib.sh"
setup
[ -x "${LST:-}" ] || fail "missing binary \$LST"
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", b - a}'; }
t0=$(now)
# The kernel's ARP table is one for all namespaces, and its default hard limit (1024
# entries) is below what 262 hosts on one segment need (each server knows every client):
# past it connections fail with "No route to host". Raised for the run, restored after.
for k in gc_thresh2 gc_thresh3; do
  v=$(sysctl -n "net.ipv4.neigh.default.$k")
  T_AT_EXIT+=("sysctl -qw net.ipv4.neigh.default.$k=$v")
done
[ "$(sysctl -n net.ipv4.neigh.default.gc_thresh3)" -ge 16384 ] ||
  sysctl -qw net.ipv4.neigh.default.gc_thresh2=8192 net.ipv4.neigh.default.gc_thresh3=16384
new_switch SW sw
ip netns exec "$SW" sysctl -qw net.bridge.bridge-nf-call-iptables=0 2>/dev/null || true
start_node() {  # NAME ADDRESS
  local ns
  new_ns ns "$1"
  plug "$ns" eth0 "$2/16" "$SW"
  lnetd_start "$ns" "$1" "$(tcp_cfg eth0)
selftest:
    enable: 1
" --log-level=warn
}
start_node console 10.80.0.1
SERVERS=(8 10 12 13 14 15 16)
for s in "${SERVERS[@]}"; do start_node "s$s" "10.80.10.$s"; done
for i in $(seq 1 254); do
  start_node "c$i" "10.80.1.$i"
  ((i % 50)) || log "$((1 + ${#SERVERS[@]} + i)) lnetds up"
done
n=$(ls "$T_DIR"/*.sock | wc -l)
[ "$n" = 262 ] || fail "$n lnetds up, not 262"
log "262 lnetds up in $(secs "$t0" "$(now)") s"
# The memory of an idle lnetd: the mean resident size of the clients'.
rss=$(for i in $(seq 1 254); do awk '/^VmRSS/ {print $2}' "/proc/$(cat "$T_DIR/c$i.pid")/status"; done |
  awk '{s += $1} END {printf "%.1f", s / NR / 1024}')
log "figure: an idle lnetd (tcp NI, self-test on) resident: $rss MiB (mean of 254)"

export LST_SESSION=$$ LNET_CTL_SOCKET="$T_DIR/console.sock"
lst() { timeout 300 "$LST" "$@"; }
lst new_session --timeout 600 read/write >/dev/null || fail "new_session"
add() {  # GROUP NODES COUNT
  local t1 t2
  t1=$(now)
  lst add_group "$1" "$2" >"$T_DIR/add_$1.out" 2>&1 || fail "add_group $1: $(head -n 20 "$T_DIR/add_$1.out")"
  t2=$(now)
  lst list_group "$1" >"$T_DIR/list_$1.out"
  grep -qP "^\t$3\t0\t0\t0\t$3\t$1$" "$T_DIR/list_$1.out" || fail "group $1 not all active: $(cat "$T_DIR/list_$1.out")"
  log "figure: add_group $1 ($3 nodes): $(secs "$t1" "$t2") s"
}
add servers '10.80.10.[8,10,12-16]@tcp' 7
add readers '10.80.1.[1-253/2]@tcp' 127
add writers '10.80.1.[2-254/2]@tcp' 127
lst add_batch bulk_rw >/dev/null
lst add_test --batch bulk_rw --loop 4 --from readers --to servers brw read check=simple size=1M ||
  fail "add_test read"
lst add_test --batch bulk_rw --loop 50 --from writers --to servers brw write check=full size=4K ||
  fail "add_test write"
t1=$(now)
lst run bulk_rw >/dev/null || fail "run"
lst query bulk_rw --loop 120 --delay 1 >"$T_DIR/query.out" || fail "query: $(tail "$T_DIR/query.out")"
grep -q "^bulk_rw \[0\] is stopped" "$T_DIR/query.out" ||
  fail "the batch did not end on every client: $(tail -n 3 "$T_DIR/query.out")"
t2=$(now)
log "figure: the batch (127 x 4 reads of 1 MiB, 127 x 50 writes of 4 KiB) ran in $(secs "$t1" "$t2") s"
for g in servers readers writers; do
  t1=$(now)
  lst stat --count 1 --delay 1 "$g" >"$T_DIR/stat_$g.out" || fail "stat $g"
  t2=$(now)
  grep -q "Failed to stat" "$T_DIR/stat_$g.out" && fail "stat $g: $(cat "$T_DIR/stat_$g.out")"
  log "figure: stat --count 1 --delay 1 $g: $(secs "$t1" "$t2") s (two rounds, 1 s apart)"
done
lst show_error servers readers writers >"$T_DIR/err.out" || fail "show_error"
for g in servers readers writers; do
  grep -q "^Total 0 error nodes in $g$" "$T_DIR/err.out" || fail "errors in $g: $(head -n 20 "$T_DIR/err.out")"
done
# Every client did its loops (the servers counted the test RPCs).
rcvd=$(lst stat --count 1 --delay 1 --yaml servers | awk '/rpcs_rcvd:/ {s += $2} END {print s + 0}')
[ "$rcvd" -ge $((127 * 4 + 127 * 50)) ] || fail "the servers received $rcvd RPCs, fewer than the tests' 6858"
log "the servers received $rcvd RPCs in all (the tests' 6858 and the console's)"
lst end_session >/dev/null || fail "end_session"
log "PASS ($(secs "$t0" "$(now)") s in all)"
