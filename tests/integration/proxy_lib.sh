# Shared helpers of the parallel proxy tests: router lnetds with the UP LND on loopback
# addresses, a tcp server, ompi-server, lnet-proxy, applications; everything started is
# stopped on any exit (newest first, each gone before the next). Source it, then call
# px_setup NAME. Needs root (port 988) and Open MPI. Binaries from $LNETD, $LNETCTL,
# $LNET_XFER, $LNET_PROXY_BIN, $PROXY_DEMO (set by CTest).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/procs.sh"
T_NAME=proxy
DIR=""
PIDS=()
LNETD_PIDS=() # every lnetd px_router started

log() { echo "[$T_NAME] $*"; }
fail() {
  echo "[$T_NAME] FAIL: $*" >&2
  exit 1
}

px_cleanup() {
  local rc=$?
  set +e
  stop_all "${PIDS[@]}"
  if [ $rc != 0 ]; then
    for f in "$DIR"/*.log; do [ -s "$f" ] && { echo "----- $(basename "$f")"; tail -n 30 "$f"; }; done
  fi
  [ -n "$DIR" ] && rm -rf "$DIR"
  exit $rc
}

px_setup() {  # px_setup NAME
  T_NAME=$1
  if [ "$(id -u)" != 0 ]; then log "SKIP: needs root (port 988)"; exit 77; fi
  command -v ompi-server >/dev/null || { log "SKIP: no ompi-server (Open MPI)"; exit 77; }
  for b in "$LNETD" "$LNETCTL" "$LNET_XFER" "$LNET_PROXY_BIN" "$PROXY_DEMO"; do
    [ -x "$b" ] || fail "missing binary $b"
  done
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  unset LNET_PROXY OMPI_MCA_pmix_server_uri
  DIR="$(mktemp -d "/tmp/lnet-$T_NAME.XXXXXX")"
  trap px_cleanup EXIT INT TERM
}

wait_for() {  # wait_for FILE PATTERN WHAT [SECONDS]
  for _ in $(seq $((${4:-30} * 10))); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "$3"
}

# px_router IP [YAML]: an lnetd with IP@tcp and IP@mpi (the UP LND, bridge $DIR/IP.bridge),
# routing, and YAML (more top-level lines) if given; its pid in LNETD_PID, also appended
# to LNETD_PIDS.
px_router() {
  local ip=$1
  printf 'net:\n    - net type: tcp\n      local NI(s):\n        - nid: %s@tcp\n          interfaces:\n              0: lo\n    - net type: mpi\n      local NI(s):\n        - nid: %s@mpi\nrouting:\n    enable: 1\n%b' \
    "$ip" "$ip" "${2:+$2\n}" >"$DIR/$ip.yaml"
  rm -f "$DIR/$ip.bridge"
  "$LNETD" -f -c "$DIR/$ip.yaml" -s "$DIR/$ip.ctl" -p "" --bridge "$DIR/$ip.bridge" --bridge-size 256 \
    >>"$DIR/lnetd-$ip.log" 2>&1 &
  PIDS+=($!)
  LNETD_PID=$!
  LNETD_PIDS+=($!)
  for _ in $(seq 100); do [ -S "$DIR/$ip.bridge" ] && return 0; sleep 0.1; done
  fail "lnetd $ip did not come up"
}

# px_selftest_server IP ROUTER_IP: an lnetd with IP@tcp, a route to mpi through the
# router and self-test on (control socket $DIR/server.ctl); its pid in SERVER_PID.
px_selftest_server() {
  printf 'net:\n    - net type: tcp\n      local NI(s):\n        - nid: %s@tcp\n          interfaces:\n              0: lo\nroute:\n    - net: mpi\n      gateway: %s@tcp\nselftest: enable\n' \
    "$1" "$2" >"$DIR/server.yaml"
  "$LNETD" -f -c "$DIR/server.yaml" -s "$DIR/server.ctl" -p "" --bridge "$DIR/server.bridge" \
    >"$DIR/lnetd-server.log" 2>&1 &
  PIDS+=($!)
  SERVER_PID=$!
  for _ in $(seq 100); do [ -S "$DIR/server.ctl" ] && return 0; sleep 0.1; done
  fail "the server lnetd did not come up"
}

px_server() {  # px_server IP ROUTER_IP...: lnet-xfer serve on IP@tcp, 8 MiB, routes to mpi
  local ip=$1 routes=()
  shift
  for r in "$@"; do routes+=(--route "mpi@$r@tcp"); done
  "$LNET_XFER" serve --nid "$ip@tcp" "${routes[@]}" --buffer $((8 << 20)) >"$DIR/server.log" 2>&1 &
  PIDS+=($!)
  wait_for "$DIR/server.log" serving "the server did not come up"
}

px_ompi_server() {
  ompi-server --no-daemonize -r "$DIR/ompi.uri" >>"$DIR/ompi-server.log" 2>&1 &
  PIDS+=($!)
  OMPI_SERVER_PID=$!
  for _ in $(seq 100); do [ -s "$DIR/ompi.uri" ] && break; sleep 0.1; done
  [ -s "$DIR/ompi.uri" ] || fail "ompi-server did not start"
  export OMPI_MCA_pmix_server_uri="file:$DIR/ompi.uri"
}

# px_proxy LOG IP... [-- lnet-proxy options]: lnet-proxy with one rank per router IP;
# mpirun's pid in PROXY_JOB, the ranks' pids in PROXY_PIDS; LNET_PROXY exported.
px_proxy() {
  local out=$1 args=() extra=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    [ ${#args[@]} = 0 ] || args+=(:)
    args+=(-n 1 "$LNET_PROXY_BIN" --bridge "$DIR/$1.bridge")
    [ ${#args[@]} -gt 5 ] || args+=(--port-file "$DIR/proxy.port")
    shift
  done
  [ "${1:-}" = -- ] && shift && extra=("$@")
  if [ ${#extra[@]} -gt 0 ]; then
    # Options for every rank: after each rank's --bridge.
    local with=() i
    for ((i = 0; i < ${#args[@]}; i++)); do
      with+=("${args[i]}")
      [ "${args[i]}" = --bridge ] && with+=("${args[++i]}" "${extra[@]}")
    done
    args=("${with[@]}")
  fi
  env -u LNET_PROXY mpirun --bind-to none ${PX_MPIRUN_ARGS:-} "${args[@]}" >"$DIR/$out.log" 2>&1 &
  PIDS+=($!)
  PROXY_JOB=$!
  wait_for "$DIR/$out.log" "lnet-proxy: ready" "the proxy did not come up"
  mapfile -t PROXY_PIDS < <(pgrep -f "^$LNET_PROXY_BIN --bridge $DIR/")
  export LNET_PROXY="$DIR/proxy.port"
}

client() {  # client LOG RANKS [proxy_demo args...]: an application, 120 s at most
  local out="$1" n="$2"
  shift 2
  timeout 120 mpirun --bind-to none -n "$n" "$PROXY_DEMO" --server "$SERVER@tcp" "$@" >"$DIR/$out.log" 2>&1
}

fds() { ls "/proc/$1/fd" | wc -l; }
rss_kib() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status"; }
