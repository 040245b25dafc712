#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main demo: an MPI job on a virtual
# cluster (tests/cluster/topologies/demo.cluster, lnet-cluster(8)) reaching a data
# server and a kernel LNet node on tcp through the parallel proxy.
#
#   login       mpi  10.90.0.10   the job's mpirun runs on its first node; ompi-server
#   c1, c2      mpi  10.90.0.11-12  compute nodes, 2 ranks each
#   r1, r2      mpi + tcp0      server/router nodes: lnetd with the UP LND's NI on the MPI
#                               network (gni: a type the kernel names) and a tcp NI,
#                               routing; one proxy rank each, spawned by the job
#                               (LNET_PROXY=spawn:r1:...,r2:..., mode 2)
#   s1          tcp0 10.90.1.31  the data server (lnet-xfer serve), routes to gni via r1, r2
#   k1          tcp0 10.90.1.41  the kernel's LNet (Lustre's modules and tools in qemu),
#                               routes to gni via r1, r2 (lnetctl route add --net gni ...)
#
# Every rank pings both proxies' lnetds and the server, then PUTs (with ACK) and GETs back
# 1 MiB ten times at its own offset of the server's buffer, checking every byte; the
# report names each rank's node, then each router's forwarded messages and bytes. Then
# the kernel node: its lnetctl pings the MPI network, the ranks run LNet self-test
# against it (lst-node: brw write and read of 1 MiB with check=full, ping), and its own
# lst console drives the ranks (they join its session). Without qemu or the kernel kit
# (../shared/kernel-lnet) the kernel node is left out, saying so.
# Everything it starts it removes (the cluster with its namespaces and processes), also
# on failure or Ctrl-C. Needs root. Arguments go to proxy_demo (--size, --count);
# --single-host runs the earlier chain on this host's loopback addresses instead (for
# debugging: no namespaces).
set -euo pipefail
. "$(dirname "$0")/lib/procs.sh"
cd "$(dirname "$0")/.."
single=0
args=()
for a in "$@"; do
  if [ "$a" = --single-host ]; then single=1; else args+=("$a"); fi
done
scripts/setup.sh
scripts/build.sh default
B="$PWD/build/default"
[ "$(id -u)" = 0 ] || { echo "demo: needs root (network namespaces; lnetd listens on the privileged port 988)" >&2; exit 1; }

step() { echo "demo: $*"; }
fail() { echo "demo: FAILED: $*" >&2; exit 1; }

# ---- the virtual cluster (default) ------------------------------------------------------
SPAWN=LNET_PROXY=spawn:r1:/run/lnet/bridge.sock,r2:/run/lnet/bridge.sock
# job ARGS...: an MPI job of 4 ranks on c1 and c2 with its proxy ranks on r1 and r2.
job() { timeout 240 "$cl" mpirun --host c1:2,c2:2,r1:1,r2:1 -n 4 -x LNET_LOG_LEVEL=warn -x "$SPAWN" "$@"; }
# nid_of NODE NET: the node's NID on NET as its lnetctl prints it.
nid_of() { "$cl" exec "$1" lnetctl net show --net "$2" | awk '$2 == "nid:" {print $3; exit}'; }

cluster_demo() {
  export LNET_CLUSTER="demo$$" LNET_BUILD="$B"
  cl=tests/cluster/cluster.sh
  local desc=tests/cluster/topologies/demo.cluster kit=${LNET_KERNEL_KIT:-$(cd .. && pwd)/shared/kernel-lnet} kernel=1
  TMP_DESC=$(mktemp /tmp/lnet-demo-cluster.XXXXXX)
  trap 'rc=$?; set +e; rm -f "$TMP_DESC"; [ $rc = 0 ] || "$cl" status; "$cl" down "$LNET_CLUSTER"; exit $rc' EXIT
  trap 'exit 130' INT TERM
  if ! command -v qemu-system-x86_64 >/dev/null || [ ! -x "$kit/kernel-node.sh" ]; then
    kernel=0
    step "NOTE: no qemu-system-x86_64 or no kernel LNet kit at $kit (LNET_KERNEL_KIT): the kernel node k1 is left out;"
    step "      the job reaches the userspace server s1 only (scripts/setup.sh installs qemu-system-x86)"
    grep -vE 'kind=kernel|^route k1 ' "$desc" >"$TMP_DESC"
    desc=$TMP_DESC
  fi
  step "making the virtual cluster (tests/cluster/topologies/demo.cluster)"
  "$cl" up "$desc" --name "$LNET_CLUSTER" || fail "the cluster did not come up"
  local server
  server="$("$cl" addr s1 tcp0)@tcp"
  echo
  step "the job: 4 ranks on c1 and c2, its proxy ranks spawned on r1 and r2, server $server"
  step "  cluster.sh mpirun --host c1:2,c2:2,r1:1,r2:1 -n 4 -x $SPAWN proxy_demo --server $server"
  echo
  job proxy_demo --server "$server" "${args[@]}" || fail "the job failed"
  echo
  local n
  for n in r1 r2; do
    local stats
    stats="$("$cl" exec "$n" lnetctl stats show)"
    echo "router $n ($(nid_of "$n" gni), $(nid_of "$n" tcp)) forwarded" \
      "$(sed -n 's/^ *route_count: //p' <<<"$stats") messages, $(sed -n 's/^ *route_length: //p' <<<"$stats") payload bytes"
  done
  for n in r1 r2; do
    grep -hE "pid [0-9]+\(user\) (allocated|registered|released)" "$("$cl" log "$n" lnetd)" | sed "s/^[0-9.]* lnetd info: /lnetd on $n: /"
  done
  [ $kernel = 1 ] && kernel_demo
  step "done; removing the cluster"
}

# The kernel node k1: Lustre's own LNet reaches the MPI network, and the ranks reach it.
kernel_demo() {
  local k1 shared lst=(env LST_SESSION=4242 lst) before after t0
  k1="$("$cl" addr k1 tcp0)@tcp"
  shared="/run/lnet-cluster/$LNET_CLUSTER/shared"
  echo
  step "the kernel node k1 ($k1, Lustre $("$cl" exec k1 cat /sys/module/lnet/version)): its routes to the MPI network"
  "$cl" exec k1 lnetctl route show -v | sed 's/^/    k1: /'
  step "k1 pings r1's NID on the MPI network through its route: lnetctl ping $(nid_of r1 gni)"
  "$cl" exec k1 lnetctl ping "$(nid_of r1 gni)" | sed 's/^/    k1: /' || fail "k1 cannot ping $(nid_of r1 gni)"
  before=$("$cl" exec k1 lnetctl stats show | awk '$1 == "recv_length:" {print $2}')
  t0=$SECONDS
  cat >"$shared/kernel.lst" <<LST
new_session mission
add_group ranks @ALL@
add_group lustre $k1
add_batch bulk
add_test --batch bulk --loop 8 --concurrency 2 --from ranks --to lustre brw write size=1M check=full
add_test --batch bulk --loop 8 --concurrency 2 --from ranks --to lustre brw read size=1M check=full
add_test --batch bulk --loop 20 --from ranks --to lustre ping
run bulk
query --loop 120 --delay 1 bulk
show_error ranks lustre
end_session
LST
  echo
  step "LNet self-test from the ranks to k1 (lst-node, rank 0 the console): brw write and read 1M check=full, ping"
  job lst-node --script "$shared/kernel.lst" | tee "$shared/kernel.out" | sed 's/^/    /' || fail "the self-test job failed"
  grep -q "Total 0 error nodes in ranks" "$shared/kernel.out" && grep -q "Total 0 error nodes in lustre" "$shared/kernel.out" ||
    fail "self-test errors between the ranks and k1"
  echo
  step "k1's own lst console drives the ranks: they join its session (lst-node --join), brw write 1M check=full to k1"
  "$cl" exec k1 "${lst[@]}" new_session --timeout 120 kconsole >/dev/null || fail "lst new_session on k1"
  "$cl" exec k1 "${lst[@]}" add_group lustre "$k1" >/dev/null || fail "lst add_group on k1"
  job lst-node --join ranks --console "$k1" >"$shared/join.out" 2>&1 &
  local joined=$! i active=0
  for i in $(seq 120); do
    active=$("$cl" exec k1 "${lst[@]}" list_group ranks 2>/dev/null | awk 'NF >= 5 && $1 ~ /^[0-9]+$/ {print $1; exit}')
    [ "${active:-0}" = 4 ] && break
    kill -0 $joined 2>/dev/null || fail "the joining job ended: $(tail -n 5 "$shared/join.out")"
    sleep 0.5
  done
  [ "${active:-0}" = 4 ] || fail "the ranks did not join k1's session ($active active)"
  "$cl" exec k1 "${lst[@]}" add_batch b >/dev/null
  "$cl" exec k1 "${lst[@]}" add_test --batch b --loop 8 --concurrency 2 --from ranks --to lustre brw write size=1M \
    check=full >/dev/null || fail "lst add_test on k1"
  "$cl" exec k1 "${lst[@]}" run b | sed 's/^/    k1: /'
  for i in $(seq 120); do
    "$cl" exec k1 "${lst[@]}" query b | grep -q "stopped" && break
    sleep 0.5
  done
  "$cl" exec k1 "${lst[@]}" show_error ranks lustre | tee "$shared/kerr.out" | sed 's/^/    k1: /'
  grep -q "Total 0 error nodes in ranks" "$shared/kerr.out" || fail "errors on the ranks (k1's console)"
  "$cl" exec k1 "${lst[@]}" end_session | sed 's/^/    k1: /'
  wait $joined || fail "the joined ranks did not end cleanly: $(tail -n 5 "$shared/join.out")"
  after=$("$cl" exec k1 lnetctl stats show | awk '$1 == "recv_length:" {print $2}')
  echo
  step "k1 received $(((after - before) >> 20)) MiB from the ranks in $((SECONDS - t0)) s, every byte checked; its peers on the MPI network:"
  "$cl" exec k1 lnetctl peer show | awk '/primary nid: [0-9]+@gni/ {print "    k1: " $0}'
}

# ---- the earlier chain on this host (--single-host) --------------------------------------
#   server   127.0.0.1@tcp     lnet-xfer serve, routes to mpi through both routers
#   routers  127.0.0.2, .3     lnetd each, with a tcp NI and the UP LND's mpi NI
#   proxy    2 ranks           lnet-proxy, rank r attached to router r's bridge (mode 1c)
#   client   4 ranks           proxy_demo with LNET_PROXY=<port file>
single_host_demo() {
  export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
  export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
  DIR="$(mktemp -d /tmp/lnet-demo.XXXXXX)"
  PIDS=()
  cleanup() {
    local rc=$?
    set +e
    stop_all "${PIDS[@]}"
    if [ $rc != 0 ]; then
      for f in "$DIR"/*.log; do [ -s "$f" ] && { echo "----- $(basename "$f")"; tail -n 15 "$f"; }; done
    fi
    rm -rf "$DIR"
    exit $rc
  }
  trap cleanup EXIT INT TERM
  # wait_for FILE PATTERN WHAT: until FILE has PATTERN (30 s at most).
  wait_for() {
    for _ in $(seq 300); do
      grep -q "$2" "$1" 2>/dev/null && return 0
      sleep 0.1
    done
    fail "$3"
  }
  router_yaml() {  # router_yaml IP
    printf 'net:\n    - net type: tcp\n      local NI(s):\n        - nid: %s@tcp\n          interfaces:\n              0: lo\n' "$1"
    printf '    - net type: mpi\n      local NI(s):\n        - nid: %s@mpi\n' "$1"
    printf 'routing:\n    enable: 1\n'
  }
  for ip in 127.0.0.2 127.0.0.3; do
    router_yaml $ip >"$DIR/$ip.yaml"
    "$B/lnetd/lnetd" -f -c "$DIR/$ip.yaml" -s "$DIR/$ip.ctl" -p "" --bridge "$DIR/$ip.bridge" \
      --bridge-size 256 >"$DIR/lnetd-$ip.log" 2>&1 &
    PIDS+=($!)
  done
  for ip in 127.0.0.2 127.0.0.3; do wait_for "$DIR/lnetd-$ip.log" "bridge" "lnetd $ip did not come up"; done
  for _ in $(seq 100); do [ -S "$DIR/127.0.0.2.bridge" ] && [ -S "$DIR/127.0.0.3.bridge" ] && break; sleep 0.1; done
  step "routers up: 127.0.0.2 and 127.0.0.3, each 127.0.0.x@tcp + 127.0.0.x@mpi (UP LND), routing"
  local nranks=4
  "$B/tools/lnet-xfer" serve --nid 127.0.0.1@tcp --route mpi@127.0.0.2@tcp --route mpi@127.0.0.3@tcp \
    --buffer $((nranks << 20)) >"$DIR/server.log" 2>&1 &
  PIDS+=($!)
  wait_for "$DIR/server.log" serving "the server did not come up"
  step "server up: 127.0.0.1@tcp, routes to mpi via 127.0.0.2@tcp and 127.0.0.3@tcp"
  ompi-server --no-daemonize -r "$DIR/ompi.uri" >"$DIR/ompi-server.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do [ -s "$DIR/ompi.uri" ] && break; sleep 0.1; done
  [ -s "$DIR/ompi.uri" ] || fail "ompi-server did not start"
  export OMPI_MCA_pmix_server_uri="file:$DIR/ompi.uri"
  mpirun --bind-to none -n 1 "$B/proxy/lnet-proxy" --bridge "$DIR/127.0.0.2.bridge" --port-file "$DIR/proxy.port" \
    : -n 1 "$B/proxy/lnet-proxy" --bridge "$DIR/127.0.0.3.bridge" >"$DIR/proxy.log" 2>&1 &
  PIDS+=($!)
  wait_for "$DIR/proxy.log" "lnet-proxy: ready" "the proxy did not come up"
  step "proxy up: 2 ranks, attached to 127.0.0.2@mpi and 127.0.0.3@mpi"
  step "client: mpirun -n $nranks proxy_demo with LNET_PROXY=<port file>"
  echo
  LNET_PROXY="$DIR/proxy.port" timeout 120 mpirun --bind-to none -n $nranks "$B/examples/proxy_demo" \
    --server 127.0.0.1@tcp "${args[@]}" || fail "the client job failed"
  echo
  for ip in 127.0.0.2 127.0.0.3; do
    stats="$("$B/tools/lnetctl" --socket "$DIR/$ip.ctl" stats show)"
    echo "router $ip forwarded $(sed -n 's/^ *route_count: //p' <<<"$stats") messages, $(sed -n 's/^ *route_length: //p' <<<"$stats") payload bytes"
  done
  grep -E "application .* (rank|goodbye)" "$DIR/proxy.log" | sed 's/^[0-9.]* lnet info: /proxy log: /'
  step "done; stopping everything"
}

if [ $single = 1 ]; then single_host_demo; else cluster_demo; fi
