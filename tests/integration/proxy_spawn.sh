#!/usr/bin/env bash
# The parallel proxy in mode 2 (LNET_PROXY=spawn:...): the application spawns its own
# lnet-proxy job, one rank per router lnetd (loopback addresses 127.0.3.x), and the
# proxy ends with it. No ompi-server: spawning stays inside the application's mpirun.
#   - an application of 4 ranks reaches the tcp server through both spawned proxy ranks,
#     its data checked; the spawned ranks exit when it ends and lnetd releases the pid;
#   - a second application after it gets a proxy of its own, rank 0 on the other router;
#   - a bridge that does not exist: the application fails with the proxy's reason, and
#     nothing is left running;
#   - a malformed spawn list: a clear error before anything is spawned;
#   - an application of 1 rank: its spawned rank is not bound to a core (Open MPI binds
#     a new job that fits the cores), and kill -9 of it ends the application (no hang),
#     nothing left running.
# Needs root (port 988) and Open MPI (proxy_lib.sh).
. "$(dirname "$0")/proxy_lib.sh"
px_setup proxy_spawn

SERVER=127.0.3.1
ROUTERS=(127.0.3.2 127.0.3.3)
for ip in "${ROUTERS[@]}"; do px_router "$ip"; done
px_server $SERVER "${ROUTERS[@]}"
export LNET_PROXY_BIN  # what spawn: starts (set by CTest)

spawned() { pgrep -f "^$LNET_PROXY_BIN --bridge $DIR/" || true; }

log "an application of 4 ranks spawning a proxy of 2 ranks"
LNET_PROXY="spawn:$DIR/${ROUTERS[0]}.bridge,$DIR/${ROUTERS[1]}.bridge" client e2e 4 --count 3 ||
  fail "the 4-rank application failed"
grep -q "all ranks ok" "$DIR/e2e.log" || fail "no 'all ranks ok'"
grep -q "2 proxy rank(s)" "$DIR/e2e.log" || fail "not 2 proxy ranks: $(head -n 3 "$DIR/e2e.log")"
awk '/@mpi .* ok$/ { if ($(NF-1) < 1 || $(NF-2) < 1) bad = 1; n++ } END { exit bad || n != 4 }' "$DIR/e2e.log" ||
  fail "not every rank used both gateways: $(cat "$DIR/e2e.log")"
[ -z "$(spawned)" ] || fail "spawned proxy ranks outlived their application: $(spawned)"
for ip in "${ROUTERS[@]}"; do
  wait_for "$DIR/lnetd-$ip.log" "released" "lnetd $ip did not release the application's pid" 10
  "$LNETCTL" --socket "$DIR/$ip.ctl" stats show | grep -q "route_count: [1-9]" || fail "router $ip forwarded nothing"
done

# Every router the server may answer through must be in the list (its pid is known
# only to the lnetds of the spawned ranks): the same two, rank 0 on the other one now.
log "a second application, its own proxy"
LNET_PROXY="spawn:$DIR/${ROUTERS[1]}.bridge,$DIR/${ROUTERS[0]}.bridge" client second 2 --count 2 ||
  fail "the second application failed"
grep -q "2 proxy rank(s)" "$DIR/second.log" || fail "not 2 proxy ranks: $(head -n 3 "$DIR/second.log")"
[ -z "$(spawned)" ] || fail "spawned proxy ranks outlived their application: $(spawned)"

log "an application started with plain MPI_Init (MPI_THREAD_SINGLE) spawns its proxy"
LNET_PROXY="spawn:$DIR/${ROUTERS[0]}.bridge,$DIR/${ROUTERS[1]}.bridge" client single 2 --count 2 --thread-level single ||
  fail "the single-threaded application failed: $(tail -n 5 "$DIR/single.log")"
grep -q "MPI thread level single" "$DIR/single.log" || fail "MPI did not give single: $(head -n 1 "$DIR/single.log")"
[ -z "$(spawned)" ] || fail "spawned proxy ranks outlived their application: $(spawned)"

log "a bridge that does not exist"
if LNET_PROXY="spawn:$DIR/nowhere.bridge" LNET_PROXY_TIMEOUT=20 client nobridge 2 --count 1; then
  fail "an application started without a bridge"
fi
grep -q "could not start.*nowhere.bridge" "$DIR/nobridge.log" ||
  fail "the reason was not passed on: $(tail -n 5 "$DIR/nobridge.log")"
[ -z "$(spawned)" ] || fail "spawned proxy ranks left running: $(spawned)"

log "a malformed spawn list"
if LNET_PROXY="spawn:relative.bridge" client badlist 1 --count 1; then fail "a relative bridge path was taken"; fi
grep -q "bad bridge path 'relative.bridge'" "$DIR/badlist.log" || fail "unclear error: $(tail -n 3 "$DIR/badlist.log")"
# A spawned rank is part of the application's mpirun: its death ends the application
# (Open MPI aborts the whole job), which must not hang or leave anything behind. One
# application rank and one proxy rank: a job that fits the cores is where Open MPI binds
# (an oversubscribed one it leaves unbound), and the spawned rank must not be bound.
log "one rank and its proxy: the proxy is not bound; then kill -9 of the proxy"
before=$(grep -cE "allocated|registered" "$DIR/lnetd-${ROUTERS[0]}.log" || true)
LNET_PROXY="spawn:$DIR/${ROUTERS[0]}.bridge" client killed 1 --count 100000 &
C=$!
# Killed once the spawned rank has allocated the application's pid (rank 0 of a proxy
# allocates it, the others register it).
for _ in $(seq 300); do
  [ "$(grep -cE "allocated|registered" "$DIR/lnetd-${ROUTERS[0]}.log" || true)" -gt "$before" ] && break
  sleep 0.1
done
victim=$(spawned | tail -n 1)
[ -n "$victim" ] || fail "no spawned proxy rank to kill"
cpus() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status"; }
[ "$(cpus "$victim")" = "$(cpus $$)" ] ||
  fail "the spawned proxy rank is bound to CPUs $(cpus "$victim") (this test may use $(cpus $$))"
kill -9 "$victim"
if wait $C; then fail "the application survived the death of its proxy"; fi
for _ in $(seq 100); do [ -z "$(spawned)" ] && break; sleep 0.1; done
[ -z "$(spawned)" ] || fail "spawned proxy ranks left running: $(spawned)"
for p in "${LNETD_PIDS[@]}"; do kill -0 "$p" || fail "lnetd $p died"; done
log "PASS"
