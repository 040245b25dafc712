#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main demo: an MPI job on a virtual
# cluster (tests/cluster/topologies/demo.cluster, lnet-cluster(8)) reaching a data
# server on tcp through the parallel proxy.
#
#   login       mpi  10.90.0.10   the job's mpirun runs on its first node; ompi-server
#   c1, c2      mpi  10.90.0.11-12  compute nodes, 2 ranks each: proxy_demo
#   r1, r2      mpi + tcp0      server/router nodes: lnetd with the UP LND's mpi NI
#                               (<IPv4>@mpi) and a tcp NI, routing; one proxy rank each,
#                               spawned by the job (LNET_PROXY=spawn:r1:...,r2:..., mode 2)
#   s1          tcp0 10.90.1.31  the data server (lnet-xfer serve), routes to mpi via r1, r2
#
# Every rank pings both proxies' lnetds and the server, then PUTs (with ACK) and GETs back
# 1 MiB ten times at its own offset of the server's buffer, checking every byte; the
# report names each rank's node, then each router's forwarded messages and bytes.
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
cluster_demo() {
  export LNET_CLUSTER="demo$$" LNET_BUILD="$B"
  cl=tests/cluster/cluster.sh
  trap 'rc=$?; set +e; [ $rc = 0 ] || "$cl" status; "$cl" down "$LNET_CLUSTER"; exit $rc' EXIT
  trap 'exit 130' INT TERM
  step "making the virtual cluster (tests/cluster/topologies/demo.cluster)"
  "$cl" up tests/cluster/topologies/demo.cluster --name "$LNET_CLUSTER" || fail "the cluster did not come up"
  local server
  server="$("$cl" addr s1 tcp0)@tcp"
  echo
  step "the job: 4 ranks on c1 and c2, its proxy ranks spawned on r1 and r2, server $server"
  step "  cluster.sh mpirun --host c1:2,c2:2,r1:1,r2:1 -n 4 -x LNET_PROXY=spawn:r1:/run/lnet/bridge.sock,r2:/run/lnet/bridge.sock proxy_demo --server $server"
  echo
  timeout 180 "$cl" mpirun --host c1:2,c2:2,r1:1,r2:1 -n 4 -x LNET_LOG_LEVEL=warn \
    -x LNET_PROXY=spawn:r1:/run/lnet/bridge.sock,r2:/run/lnet/bridge.sock \
    proxy_demo --server "$server" "${args[@]}" || fail "the job failed"
  echo
  local n
  for n in r1 r2; do
    local stats
    stats="$("$cl" exec "$n" lnetctl stats show)"
    echo "router $n ($("$cl" addr "$n" mpi)@mpi, $("$cl" addr "$n" tcp0)@tcp) forwarded" \
      "$(sed -n 's/^ *route_count: //p' <<<"$stats") messages, $(sed -n 's/^ *route_length: //p' <<<"$stats") payload bytes"
  done
  for n in r1 r2; do
    grep -hE "pid [0-9]+\(user\) (allocated|registered|released)" "$("$cl" log "$n" lnetd)" | sed "s/^[0-9.]* lnetd info: /lnetd on $n: /"
  done
  step "done; removing the cluster"
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
  "$B/liblnet/lnet-xfer" serve --nid 127.0.0.1@tcp --route mpi@127.0.0.2@tcp --route mpi@127.0.0.3@tcp \
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
    stats="$("$B/liblnet/lnetctl" --socket "$DIR/$ip.ctl" stats show)"
    echo "router $ip forwarded $(sed -n 's/^ *route_count: //p' <<<"$stats") messages, $(sed -n 's/^ *route_length: //p' <<<"$stats") payload bytes"
  done
  grep -E "application .* (rank|goodbye)" "$DIR/proxy.log" | sed 's/^[0-9.]* lnet info: /proxy log: /'
  step "done; stopping everything"
}

if [ $single = 1 ]; then single_host_demo; else cluster_demo; fi
