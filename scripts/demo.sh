#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main demo on this host: an MPI job
# reaching a tcp server through the parallel proxy.
#
#   server   127.0.0.1@tcp     a userspace LNet node serving portal 40 (lnet_xfer serve),
#                              routes to mpi through both routers
#   routers  127.0.0.2, .3     lnetd each, with a tcp NI and the UP LND's mpi NI
#                              (<IPv4>@mpi), routing between them
#   proxy    2 ranks           lnet-proxy, rank r attached to router r's bridge
#   client   4 ranks           proxy_demo with LNET_PROXY: pings both proxies and the
#                              server, PUTs/GETs 1 MiB per rank with data checks, reports
#
# Open MPI connects the two jobs through ompi-server, which the demo starts too.
# Everything it starts it stops, also on failure or Ctrl-C. Needs root (lnetd listens on
# port 988). Arguments go to proxy_demo (--size, --count).
set -euo pipefail
. "$(dirname "$0")/lib/procs.sh"
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh default
B="$PWD/build/default"

[ "$(id -u)" = 0 ] || { echo "demo: needs root (lnetd listens on the privileged port 988)" >&2; exit 1; }
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

step() { echo "demo: $*"; }
fail() { echo "demo: FAILED: $*" >&2; exit 1; }
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
  "$B/liblnet/lnetd" -f -c "$DIR/$ip.yaml" -s "$DIR/$ip.ctl" -p "" --bridge "$DIR/$ip.bridge" \
    --bridge-size 256 >"$DIR/lnetd-$ip.log" 2>&1 &
  PIDS+=($!)
done
for ip in 127.0.0.2 127.0.0.3; do wait_for "$DIR/lnetd-$ip.log" "bridge" "lnetd $ip did not come up"; done
for _ in $(seq 100); do [ -S "$DIR/127.0.0.2.bridge" ] && [ -S "$DIR/127.0.0.3.bridge" ] && break; sleep 0.1; done
step "routers up: 127.0.0.2 and 127.0.0.3, each 127.0.0.x@tcp + 127.0.0.x@mpi (UP LND), routing"

NRANKS=4
"$B/tests/lnet_xfer" serve --nid 127.0.0.1@tcp --route mpi@127.0.0.2@tcp --route mpi@127.0.0.3@tcp \
  --buffer $((NRANKS << 20)) >"$DIR/server.log" 2>&1 &
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
step "client: mpirun -n $NRANKS proxy_demo with LNET_PROXY=<port file>"
echo
LNET_PROXY="$DIR/proxy.port" timeout 120 mpirun --bind-to none -n $NRANKS "$B/examples/proxy_demo" \
  --server 127.0.0.1@tcp "$@" || fail "the client job failed"
echo
for ip in 127.0.0.2 127.0.0.3; do
  stats="$("$B/liblnet/lnetctl" --socket "$DIR/$ip.ctl" stats show)"
  count=$(sed -n 's/^ *route_count: //p' <<<"$stats")
  bytes=$(sed -n 's/^ *route_length: //p' <<<"$stats")
  echo "router $ip forwarded $count messages, $bytes payload bytes"
done
grep -E "application .* (rank|goodbye)" "$DIR/proxy.log" | sed 's/^[0-9.]* lnet info: /proxy log: /'
step "done; stopping everything"
