#!/usr/bin/env bash
# MPI jobs across the virtual cluster's nodes (Open MPI), on the failure tests' cluster
# (topologies/failures.cluster):
#   - mpirun launches ranks on the nodes of its hosts through the cluster's agent, and
#     the MPI LND's own test suite passes with its ranks on two nodes (TCP between them);
#   - mode 2: LNET_PROXY=spawn:r1:BRIDGE,r2:BRIDGE places proxy rank 0 on r1 and rank 1
#     on r2 (each attached to its node's lnetd), and a job on c1 and c2 reaches the tcp
#     server through both;
#   - mode 1c: a job on c1 connects to the standing proxy on r1 through ompi-server on
#     the login node;
#   - a job on two nodes is refused by mode 1c with Open MPI 4 (whose connect between
#     such jobs crashes both), and the standing proxy serves the next job as before.
# With MPICH (LNET_MPICH=1, the mpich preset) only the launch and the MPI LND's suite:
# Debian's MPICH cannot connect or spawn jobs.
. "$(dirname "$0")/lib.sh"
if [ -n "${LNET_MPICH:-}" ]; then
  command -v mpiexec.mpich >/dev/null || { echo "[mpi_mpich] SKIP: no MPICH"; exit 77; }
  cl_setup mpi_mpich -
  cat >"$T_DIR/mpich.cluster" <<'EOF'
fabric mpi 10.93.0.0/24
node login login   mpi=10
node c1    compute mpi=11
node c2    compute mpi=12
EOF
  "$CLUSTER_SH" up "$T_DIR/mpich.cluster" --name "$LNET_CLUSTER" >"$T_DIR/up.log" 2>&1 || fail "up: $(cat "$T_DIR/up.log")"
  # Two processes, one a node: Debian's MPICH (ch4:ucx, UCX 1.13) hangs in MPI_Finalize
  # when three or more talk over UCX's TCP transport (a bare init/barrier/finalize does,
  # docs/design/cluster.md), which ranks on two nodes do.
  out=$(timeout 120 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" mpiexec.mpich -hosts c1:1,c2:1 -n 2 \
    bash -c 'echo "rank $PMI_RANK on $(uname -n)"' | sort)
  [ "$out" = "$(printf 'rank 0 on c1\nrank 1 on c2')" ] || fail "ranks not on c1 and c2: $out"
  timeout 120 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" mpiexec.mpich -hosts c1:1,c2:1 -n 2 mpi_ping --count 20 \
    >"$T_DIR/ping.log" 2>&1 || fail "mpi_ping across nodes: $(tail -n 20 "$T_DIR/ping.log")"
  grep -q "all ranks ok" "$T_DIR/ping.log" || fail "mpi_ping: $(tail "$T_DIR/ping.log")"
  log "MPICH: hydra placed rank 0 on c1 and rank 1 on c2; mpi_ping between them ok"
  # The same MPICH hang has also been seen with two ranks on two nodes, once, after the
  # suite had passed (rank 0 progressing UCX in MPI_Finalize, rank 1 in the PMI barrier):
  # a suite that passed and then hangs in MPICH's MPI_Finalize is reported and stopped;
  # a failure, or a hang before the suite's verdict, fails the test.
  for mode in thread poll; do
    rc=0
    timeout 120 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" mpiexec.mpich -hosts c1:1,c2:1 -n 2 \
      -genv LNET_MPI_PROGRESS "$mode" lnet_mpi_test --gtest_color=no >"$T_DIR/suite-$mode.log" 2>&1 || rc=$?
    verdict=$(grep -ao '^\[  PASSED  \].*' "$T_DIR/suite-$mode.log" | tail -n 1)
    if [ "$rc" = 124 ] && [ -n "$verdict" ] && ! grep -aqE '^\[  FAILED  \]|Failure' "$T_DIR/suite-$mode.log"; then
      log "MPICH: the suite passed ($mode progress: $verdict), then MPICH hung in MPI_Finalize (MPICH 4.0.2 with UCX's TCP transport, docs/design/cluster.md): stopped after 120 s"
    elif [ "$rc" != 0 ]; then
      fail "the MPI LND suite across nodes ($mode, exit $rc): $(grep -aE 'FAILED|Failure' "$T_DIR/suite-$mode.log" | head)"
    else
      log "MPICH: the MPI LND suite passes with its ranks on c1 and c2 ($mode progress): $verdict"
    fi
  done
  log "PASS"
  exit 0
fi

command -v ompi-server >/dev/null || { echo "[mpi] SKIP: no Open MPI"; exit 77; }
cl_setup mpi "$TOPOLOGIES/failures.cluster"
run() { timeout 180 "$CLUSTER_SH" --cluster "$LNET_CLUSTER" mpirun "$@"; }

out=$(run --host c1:2,c2:2 -n 4 uname -n | sort | uniq -c | awk '{print $2 "x" $1}' | tr '\n' ' ')
[ "$out" = "c1x2 c2x2 " ] || fail "4 ranks on c1:2,c2:2 ran on: $out"
log "mpirun from c1 placed ranks on: $out"
run --host c1:2,c2:2 -n 4 mpi_ping --count 20 >"$T_DIR/ping.log" 2>&1 || fail "mpi_ping: $(tail -n 20 "$T_DIR/ping.log")"
grep -q "all ranks ok" "$T_DIR/ping.log" || fail "mpi_ping: $(tail "$T_DIR/ping.log")"
for mode in thread poll; do
  run --host c1:2,c2:1 -n 3 -x LNET_MPI_PROGRESS=$mode lnet_mpi_test --gtest_color=no >"$T_DIR/suite-$mode.log" 2>&1 ||
    fail "the MPI LND suite across nodes ($mode): $(grep -aE 'FAILED|Failure' "$T_DIR/suite-$mode.log" | head)"
  log "the MPI LND suite passes with its ranks on c1 and c2 ($mode progress): $(grep -ao 'PASSED.*' "$T_DIR/suite-$mode.log" | tail -n 1)"
done

# Mode 2: the spawned proxy's ranks on the nodes named, each attached to its own lnetd.
spawn="LNET_PROXY=spawn:r1:/run/lnet/bridge.sock,r2:/run/lnet/bridge.sock"
run --host c1:2,c2:2,r1:1,r2:1 -n 4 -x "$spawn" proxy_demo --server 10.91.1.31@tcp --size 262144 >"$T_DIR/spawn.log" 2>&1 ||
  fail "mode 2 across nodes: $(tail -n 20 "$T_DIR/spawn.log")"
grep -q "all ranks ok" "$T_DIR/spawn.log" || fail "mode 2: $(tail "$T_DIR/spawn.log")"
grep -q "ping 10.91.0.21@mpi .*ping 10.91.0.22@mpi" "$T_DIR/spawn.log" || fail "mode 2: the proxies are not r1's and r2's lnetds"
r1_log=$(cl log r1 lnetd)
r2_log=$(cl log r2 lnetd)
grep -Eq "10.91.0.21@mpi: proxy rank 0 \(pid [0-9]+\) connected" "$r1_log" || fail "r1's lnetd saw no proxy rank 0"
grep -Eq "10.91.0.22@mpi: proxy rank 1 \(pid [0-9]+\) connected" "$r2_log" || fail "r2's lnetd saw no proxy rank 1"
grep -q " registered by proxy rank 1" "$r2_log" || fail "r2's lnetd did not register the application's pid"
log "mode 2: spawned rank 0 on r1 and rank 1 on r2, each on its node's lnetd; 4 ranks on c1, c2 reach s1 through both"

# Mode 1c: a job on c1 (its mpirun there too) and the standing proxy on r1 (routes to mpi
# through r1 alone on s2: the job's pid is known to r1's lnetd only).
port=$(cl proxy port r1)
run --host c1:2 -n 2 -x "LNET_PROXY=$port" proxy_demo --server 10.91.1.32@tcp --size 262144 >"$T_DIR/standing.log" 2>&1 ||
  fail "mode 1c across nodes: $(tail -n 20 "$T_DIR/standing.log")"
grep -q "all ranks ok" "$T_DIR/standing.log" || fail "mode 1c: $(tail "$T_DIR/standing.log")"
log "mode 1c: a job on c1 reached s2 through the standing proxy on r1 (ompi-server on login)"

# A job on two nodes is refused before it connects, and the proxy is unharmed.
if run --host c1:1,c2:1 -n 2 -x "LNET_PROXY=$port" proxy_demo --server 10.91.1.32@tcp >"$T_DIR/multi.log" 2>&1; then
  fail "a job on two nodes connected to the standing proxy"
fi
grep -q "ranks run on nodes other than its mpirun's, and Open MPI 4" "$T_DIR/multi.log" ||
  fail "a job on two nodes failed otherwise: $(tail -n 20 "$T_DIR/multi.log")"
grep -q "proxy job r1: running" <<<"$(cl proxy status r1)" || fail "the standing proxy died: $(tail "$(cl log r1)"/../../../log/proxy-r1.log)"
run --host c1:2 -n 2 -x "LNET_PROXY=$port" proxy_demo --server 10.91.1.32@tcp --size 65536 >"$T_DIR/again.log" 2>&1 ||
  fail "the standing proxy after a refused job: $(tail -n 20 "$T_DIR/again.log")"
log "mode 1c: a job on c1 and c2 is refused ($(grep -o '[0-9] of the job.*mpirun.s' "$T_DIR/multi.log" | head -n 1)); the proxy serves the next"
log "PASS"
