#!/usr/bin/env bash
# A cluster on one machine: every node a network namespace with its own host name (UTS),
# SysV IPC, boot id, /run/lnet and /dev/shm (a mount namespace), its addresses on the
# fabrics of its description (each fabric a Linux bridge in the cluster's own
# namespace), and its own lnetd on port 988 where its role needs one. MPI jobs span the
# nodes through a launch agent that enters a node as ssh would. Nodes can be powered off
# (frozen, links dropped), rebooted and partitioned. A node of kind=kernel is a qemu guest
# running the kernel's LNet (kernel.sh). User guide: lnet-cluster(8)
# (docs/man/lnet-cluster.8.md); design: docs/design/cluster.md. Front end:
# scripts/cluster.sh. Needs root.
set -euo pipefail

CL_ROOT=${LNET_CLUSTER_ROOT:-/run/lnet-cluster}
SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ME="$SRC/tests/cluster/cluster.sh"
NAME=""   # the cluster this command acts on
CL=""     # its state directory, $CL_ROOT/$NAME

usage() {
  cat <<EOF
usage: cluster.sh [--cluster NAME] COMMAND [ARGS...]

  up DESCRIPTION [--name NAME] [--build DIR]   make the cluster (nothing is made if the description is bad)
  down [NAME]                      remove every namespace, link, process and file of the cluster
  check DESCRIPTION                check a description and print its nodes
  status                           nodes, their state, daemons and the proxy job
  list                             the clusters that are up
  exec NODE COMMAND...             run COMMAND on NODE (as ssh NODE would: one word is a script; LNET_* variables pass)
  mpirun [--from NODE] ARGS...     Open MPI's mpirun on the job's first node (default hosts: the compute nodes)
  mpiexec.mpich [--from NODE] ARGS...   MPICH's mpiexec (hydra), likewise
  poweroff NODE                    freeze every process of NODE and drop its links (peers see silence)
  resume NODE                      thaw a node powered off: its processes go on, its links come back
  reboot NODE                      kill everything on NODE, links down and up, its daemons started again
  partition NODE FABRIC            cut NODE's link to FABRIC (nothing is killed)
  heal [NODE [FABRIC]]             restore the links partition cut
  proxy start|stop|restart|status|port [JOB...] [-- OPTIONS]
                                   the standing lnet-proxy jobs (one per proxy line, named by its first node)
  addr NODE [FABRIC]               NODE's address (on FABRIC, default: its first)
  hostfile ROLE [--mpich]          the path of a hostfile of the nodes with ROLE
  log NODE [NAME]                  the path of NODE's log directory (or of its log NAME; a kernel node's serial console: console)
  pids NODE                        the processes running on NODE

NAME defaults to \$LNET_CLUSTER, else the only cluster that is up. State lives in
$CL_ROOT/NAME. See lnet-cluster(8).
EOF
}

die() {
  echo "cluster: $*" >&2
  exit 1
}
note() { echo "cluster: $*"; }
now_ms() { date +%s%3N; }
# shellcheck source=tests/cluster/kernel.sh
. "$SRC/tests/cluster/kernel.sh"

need_root() {
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces, port 988)"
  for c in ip nsenter unshare flock; do command -v "$c" >/dev/null || die "missing command '$c' (iproute2, util-linux)"; done
}

# ---- which cluster ----------------------------------------------------------------------

clusters_up() {
  local d
  for d in "$CL_ROOT"/*/; do [ -f "$d/plan.sh" ] && basename "$d"; done 2>/dev/null || true
}

# pick_cluster: NAME from --cluster, $LNET_CLUSTER or the only one up; loads its plan.
pick_cluster() {
  if [ -z "$NAME" ]; then NAME=${LNET_CLUSTER:-}; fi
  if [ -z "$NAME" ]; then
    local up
    mapfile -t up < <(clusters_up)
    case ${#up[@]} in
      0) die "no cluster is up (cluster.sh up DESCRIPTION)" ;;
      1) NAME=${up[0]} ;;
      *) die "${#up[@]} clusters are up (${up[*]}): say which with --cluster NAME or LNET_CLUSTER" ;;
    esac
  fi
  CL="$CL_ROOT/$NAME"
  [ -f "$CL/plan.sh" ] || die "cluster '$NAME' is not up"
  # shellcheck source=/dev/null
  . "$CL/plan.sh"
  BUILD=$(cat "$CL/build")
}

# lock: one state-changing command at a time per cluster (fd 9, never inherited by what
# the command starts). `lock force`: a few seconds, then on regardless (down).
lock() {
  exec 9>>"$CL/lock"
  if [ "${1:-}" = force ]; then
    flock -w 10 9 || echo "cluster: $CL/lock is held (by a command that hangs?): removing the cluster anyway" >&2
    return 0
  fi
  flock -w 300 9 || die "cluster '$NAME' is busy (another command holds $CL/lock)"
}

node_ns() { echo "lc-$NAME-$1"; }
fab_ns() { echo "lc-$NAME"; }
holder() { cat "$CL/nodes/$1/holder" 2>/dev/null || true; }
node_state() { cat "$CL/nodes/$1/state" 2>/dev/null || echo gone; }
is_node() {
  local n
  for n in "${CL_NODES[@]}"; do [ "$n" = "$1" ] && return 0; done
  return 1
}
must_node() { is_node "$1" || die "no node '$1' in cluster '$NAME' (nodes: ${CL_NODES[*]})"; }
has_role() { [[ ",${CL_ROLES[$1]}," == *",$2,"* ]]; }

# addr NODE [FABRIC]: the node's address (without the prefix length).
addr_of() {
  local a
  for a in ${CL_ADDRS[$1]}; do
    if [ -z "${2:-}" ] || [ "${a%%=*}" = "$2" ]; then
      a=${a#*=}
      echo "${a%/*}"
      return 0
    fi
  done
  return 1
}

# The programs a node finds on its PATH: the build's, as if installed on every node.
node_path() {
  local b=$1
  echo "$b/lnetd:$b/tools:$b/proxy:$b/selftest:$b/examples:$b/tests:$b/bench:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
}

# node_env NODE [pass-LNET-vars]: the environment a command on NODE starts with, as a
# login over ssh gives it (env -i ...), plus the cluster's marks.
node_env() {
  local node=$1 pass=${2:-0} v
  ENV=(env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash "TERM=${TERM:-dumb}" LANG=C.UTF-8
    "PATH=$(node_path "$BUILD")" "HOSTNAME=$node" "LNET_CLUSTER=$NAME" "LNET_CLUSTER_NODE=$node")
  [ -n "${LNET_CLUSTER_JOB:-}" ] && ENV+=("LNET_CLUSTER_JOB=$LNET_CLUSTER_JOB")
  for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS; do [ -n "${!v:-}" ] && ENV+=("$v=${!v}"); done
  if [ "$pass" = 1 ]; then
    while IFS= read -r v; do
      case "$v" in LNET_CLUSTER*) ;; *) ENV+=("$v=${!v}") ;; esac
    done < <(compgen -e | grep -E '^(LNET_|OMPI_|PMIX_|UCX_|MPIR_|HYDRA_)' || true)
  fi
}

# enter NODE: the command prefix that runs inside NODE's namespaces.
enter() {
  local h
  is_kernel "$1" && die "node '$1' is a kernel node: only exec, poweroff, resume, reboot, partition and heal act on it"
  h=$(holder "$1")
  [ -n "$h" ] && kill -0 "$h" 2>/dev/null || die "node '$1' is not running (state: $(node_state "$1"))"
  ENTER=(nsenter -t "$h" --net --uts --ipc --mount --)
}

node_pids() {
  if is_kernel "$1"; then kernel_qemu_pid "$1" || true; else ip netns pids "$(node_ns "$1")" 2>/dev/null || true; fi
}

# ---- making a cluster -------------------------------------------------------------------

plan_tool() {
  local p="$BUILD/tests/lnet-cluster-plan"
  [ -x "$p" ] || die "no $p: build first (scripts/build.sh, or --build DIR)"
  echo "$p"
}

cmd_check() {
  [ $# = 1 ] || die "usage: cluster.sh check DESCRIPTION"
  BUILD=${LNET_BUILD:-$SRC/build/default}
  "$(plan_tool)" "$1"
}

# new_holder NODE: the process that keeps NODE's UTS, IPC and mount namespaces (its host
# name, SysV IPC, boot id, /etc/hosts, /run/lnet and /dev/shm) while the node is up.
new_holder() {
  local node=$1 dir="$CL/nodes/$1"
  cat /proc/sys/kernel/random/uuid >"$dir/boot_id"
  rm -f "$dir/ready"
  mkdir -p /run/lnet # the mount point: each node mounts its own /run/lnet over it
  setsid ip netns exec "$(node_ns "$node")" unshare --uts --ipc --mount --propagation slave \
    bash -c 'set -e
      echo "$1" >/proc/sys/kernel/hostname
      mount --bind "$2/hosts" /etc/hosts
      mount --bind "$2/nodes/$1/boot_id" /proc/sys/kernel/random/boot_id
      mount -t tmpfs -o mode=755 tmpfs /run/lnet
      mount -t tmpfs -o mode=1777 tmpfs /dev/shm
      touch "$2/nodes/$1/ready"
      exec -a "lnet-node-$3-$1" sleep infinity' bash "$node" "$CL" "$NAME" </dev/null 9>&- >>"$dir/log/node.log" 2>&1 &
  echo $! >"$dir/holder"
  local i
  for i in $(seq 100); do
    [ -f "$dir/ready" ] && return 0
    kill -0 "$(holder "$node")" 2>/dev/null || die "node $node did not start: $(tail -n 3 "$dir/log/node.log")"
    sleep 0.05
  done
  die "node $node did not start within 5 s"
}

# links NODE up|down: NODE's side of its fabric links.
node_links() {
  local a
  for a in ${CL_ADDRS[$1]}; do ip -n "$(node_ns "$1")" link set "${a%%=*}" "$2"; done
}
# ports NODE up|down [FABRIC]: the switch's side (the bridge ports).
ports() {
  local a f
  for a in ${CL_ADDRS[$1]}; do
    f=${a%%=*}
    [ -n "${3:-}" ] && [ "$f" != "$3" ] && continue
    ip -n "$(fab_ns)" link set "$(cat "$CL/nodes/$1/port.$f")" "$2"
  done
}

make_node() {
  local node=$1 ns i=0 a f ip port
  ns=$(node_ns "$node")
  mkdir -p "$CL/nodes/$node/log"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null || true
  for a in ${CL_ADDRS[$node]}; do
    f=${a%%=*}
    ip=${a#*=}
    port="p${NODE_INDEX[$node]}-$i"
    i=$((i + 1))
    ip -n "$ns" link add "$f" type veth peer name "$port" netns "$(fab_ns)"
    echo "$port" >"$CL/nodes/$node/port.$f"
    ip -n "$ns" addr add "$ip" dev "$f"
    ip -n "$(fab_ns)" link set "$port" master "$f"
  done
  node_links "$node" up
  ports "$node" up
  new_holder "$node"
  echo on >"$CL/nodes/$node/state"
}

# spawn NODE NAME COMMAND...: a daemon on NODE (its own session, log NAME.log); pid in
# nodes/NODE/pids/NAME.
spawn() {
  local node=$1 what=$2 dir="$CL/nodes/$1"
  shift 2
  enter "$node"
  node_env "$node"
  mkdir -p "$dir/pids"
  setsid "${ENTER[@]}" "${ENV[@]}" "$@" </dev/null 9>&- >>"$dir/log/$what.log" 2>&1 &
  echo $! >"$dir/pids/$what"
}

start_lnetd() {
  local node=$1 h sock
  [ "${CL_LNETD[$node]}" = 1 ] || return 0
  spawn "$node" lnetd lnetd -f -c "$CL/nodes/$node/lnet.conf"
  h=$(holder "$node")
  sock="/proc/$h/root/run/lnet/lnetd.sock"
  local i
  for i in $(seq 200); do
    [ -S "$sock" ] && return 0
    kill -0 "$(cat "$CL/nodes/$node/pids/lnetd")" 2>/dev/null ||
      die "lnetd on $node exited: $(tail -n 5 "$CL/nodes/$node/log/lnetd.log")"
    sleep 0.05
  done
  die "lnetd on $node did not come up within 10 s: $(tail -n 5 "$CL/nodes/$node/log/lnetd.log")"
}

start_daemons() {
  local node=$1 i
  for i in "${!CL_DAEMON_NODE[@]}"; do
    [ "${CL_DAEMON_NODE[i]}" = "$node" ] || continue
    spawn "$node" "daemon-$i" /bin/sh -c "exec ${CL_DAEMON_CMD[i]}"
  done
}

start_ompi_server() {
  [ -n "$CL_LOGIN" ] && command -v ompi-server >/dev/null || return 0
  rm -f "$CL/shared/ompi.uri"
  spawn "$CL_LOGIN" ompi-server "PMIX_MCA_ptl_tcp_if_include=$CL_MPI_SUBNET" PMIX_MCA_ptl_tcp_remote_connections=1 \
    ompi-server --no-daemonize -r "$CL/shared/ompi.uri"
  local i
  for i in $(seq 200); do
    [ -s "$CL/shared/ompi.uri" ] && return 0
    sleep 0.05
  done
  die "ompi-server on $CL_LOGIN did not start: $(tail -n 5 "$CL/nodes/$CL_LOGIN/log/ompi-server.log")"
}

# start_node NODE: what runs on NODE once it is up (as at boot).
start_node() {
  start_lnetd "$1"
  start_daemons "$1"
  [ "$1" = "$CL_LOGIN" ] && start_ompi_server
  return 0
}

cmd_up() {
  local desc="" name="" build=${LNET_BUILD:-$SRC/build/default}
  while [ $# -gt 0 ]; do
    case "$1" in
      --name) name=${2:?--name needs a value}; shift 2 ;;
      --build) build=${2:?--build needs a value}; shift 2 ;;
      -*) die "unknown option '$1' of up" ;;
      *) [ -z "$desc" ] || die "one description only"; desc=$1; shift ;;
    esac
  done
  [ -n "$desc" ] || die "usage: cluster.sh up DESCRIPTION [--name NAME] [--build DIR]"
  [ -f "$desc" ] || die "no description '$desc'"
  need_root
  BUILD=$(cd "$build" && pwd) || die "no build directory '$build'"
  local tmp
  tmp=$(mktemp -d /tmp/lnet-cluster-plan.XXXXXX)
  if ! "$(plan_tool)" ${name:+--name "$name"} --out "$tmp" "$desc"; then
    rm -rf "$tmp"
    exit 1
  fi
  # shellcheck source=/dev/null
  . "$tmp/plan.sh"
  NAME=$CL_NAME
  CL="$CL_ROOT/$NAME"
  mkdir -p "$CL_ROOT"
  if [ -e "$CL" ] || grep -Eq "^lc-$NAME(-| |\$)" <<<"$(ip netns list)"; then
    rm -rf "$tmp"
    if [ -f "$CL/up.done" ]; then
      die "cluster '$NAME' is already up (cluster.sh --cluster $NAME status; cluster.sh down $NAME); two clusters never share a name"
    fi
    die "leftovers of a cluster '$NAME' that did not finish (namespaces lc-$NAME*, or $CL): remove them with: cluster.sh down $NAME"
  fi
  mkdir -p "$CL"
  mv "$tmp"/* "$CL"/
  rmdir "$tmp"
  cp "$desc" "$CL/description"
  echo "$BUILD" >"$CL/build"
  mkdir -p "$CL/shared" "$CL/log"
  lock
  # A failure or Ctrl-C half-way removes what was made.
  trap 'rc=$?; trap - EXIT INT TERM; if [ $rc != 0 ]; then note "up failed: removing cluster $NAME"; do_down; fi; exit $rc' EXIT
  trap 'exit 130' INT TERM
  # The launch agent mpirun and mpiexec use, as they would use ssh.
  printf '#!/bin/sh\n# The launch agent of virtual cluster %s: ssh [OPTIONS] HOST COMMAND\nexec %q --cluster %q agent "$@"\n' \
    "$NAME" "$ME" "$NAME" >"$CL/agent"
  chmod +x "$CL/agent"
  local t0 f n i=0
  t0=$(now_ms)
  ip netns add "$(fab_ns)"
  ip -n "$(fab_ns)" link set lo up
  for f in "${CL_FABRICS[@]}"; do
    ip -n "$(fab_ns)" link add "$f" type bridge
    ip -n "$(fab_ns)" link set "$f" up
  done
  declare -gA NODE_INDEX=()
  for n in "${CL_NODES[@]}"; do NODE_INDEX[$n]=$i; i=$((i + 1)); done
  # Kernel nodes boot meanwhile (tens of seconds); their LNet comes up last, when the
  # lnetds they route through already run.
  if has_kernel_nodes; then
    local why
    why=$(kernel_missing)
    [ -z "$why" ] || die "cannot start the kernel nodes: $why"
    for n in "${CL_NODES[@]}"; do is_kernel "$n" && kernel_boot "$n"; done
  fi
  for n in "${CL_NODES[@]}"; do is_kernel "$n" || make_node "$n"; done
  for n in "${CL_NODES[@]}"; do is_kernel "$n" || start_node "$n"; done
  for n in "${CL_NODES[@]}"; do is_kernel "$n" && kernel_ready "$n"; done
  local j
  for j in "${CL_PROXY_JOBS[@]}"; do proxy_start "$j"; done
  note "cluster $NAME is up: ${#CL_NODES[@]} nodes, ${#CL_FABRICS[@]} fabrics ($(($(now_ms) - t0)) ms)"
  trap - EXIT INT TERM
  date '+%F %T' >"$CL/up.done"
  show_status
}

# ---- removing it ------------------------------------------------------------------------

# kill_all PIDS...: SIGCONT (a frozen process dies too) and SIGKILL.
kill_pids() {
  [ $# -gt 0 ] || return 0
  kill -CONT "$@" 2>/dev/null || true
  kill -KILL "$@" 2>/dev/null || true
}

# kill_ns NS: every process in NS, until none is left (5 s at most).
kill_ns() {
  local i pids
  for i in $(seq 100); do
    mapfile -t pids < <(ip netns pids "$1" 2>/dev/null)
    [ ${#pids[@]} = 0 ] && return 0
    kill_pids "${pids[@]}"
    sleep 0.05
  done
  echo "cluster: processes left in $1: ${pids[*]}" >&2
}

do_down() {
  local ns
  # Nodes first (their processes, then their namespaces), then the fabrics.
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^lc-$NAME-" || true); do kill_ns "$ns"; done
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^lc-$NAME(-|\$)" || true); do
    kill_ns "$ns"
    ip netns del "$ns" 2>/dev/null || echo "cluster: cannot delete namespace $ns" >&2
  done
  rm -rf "${CL:?}"
}

cmd_down() {
  [ $# -le 1 ] || die "usage: cluster.sh down [NAME]"
  need_root
  [ $# = 1 ] && NAME=$1
  if [ -z "$NAME" ] && [ -z "${LNET_CLUSTER:-}" ]; then pick_cluster; fi
  NAME=${NAME:-$LNET_CLUSTER}
  [[ "$NAME" =~ ^[a-z][a-z0-9]{0,11}$ ]] || die "bad cluster name '$NAME'"
  CL="$CL_ROOT/$NAME"
  if [ ! -e "$CL" ] && ! grep -Eq "^lc-$NAME(-| |\$)" <<<"$(ip netns list)"; then
    note "no cluster '$NAME' (nothing to remove)"
    return 0
  fi
  [ -d "$CL" ] && lock force
  do_down
  note "cluster $NAME removed"
}

# ---- running things on nodes ------------------------------------------------------------

cmd_exec() {
  [ $# -ge 2 ] || die "usage: cluster.sh exec NODE COMMAND..."
  pick_cluster
  local node=$1
  shift
  must_node "$node"
  [ "$(node_state "$node")" = on ] || die "node $node is powered off"
  if is_kernel "$node"; then
    kernel_exec "$node" "$@"
    exit $?
  fi
  enter "$node"
  node_env "$node" 1
  # One word is a script for the node's shell (as ssh NODE 'a | b' runs one).
  [ $# = 1 ] && set -- /bin/sh -c "$1"
  exec "${ENTER[@]}" "${ENV[@]}" "$@"
}

# agent [ssh options] HOST COMMAND...: what mpirun (plm_rsh_agent) and hydra
# (-launcher-exec) run to start their daemons on a node: enters it like ssh would, with
# a login's environment, and fails like ssh does when the node is off.
cmd_agent() {
  pick_cluster
  while [ $# -gt 0 ]; do
    case "$1" in
      -[oplieFEbcJLRDWwmOQS]) shift 2 ;;
      -*) shift ;;
      *) break ;;
    esac
  done
  [ $# -ge 1 ] || { echo "usage: ssh HOST COMMAND" >&2; exit 255; }
  local host=${1#*@}
  shift
  host=${host%%.*}
  if ! is_node "$host"; then
    echo "ssh: Could not resolve hostname $host: Name or service not known" >&2
    exit 255
  fi
  if [ "$(node_state "$host")" != on ]; then
    echo "ssh: connect to host $host port 22: No route to host" >&2
    exit 255
  fi
  if is_kernel "$host"; then
    echo "ssh: connect to host $host port 22: Connection refused (a kernel node runs no MPI)" >&2
    exit 255
  fi
  enter "$host"
  node_env "$host"
  exec "${ENTER[@]}" "${ENV[@]}" /bin/sh -c "$*"
}

# ompi_env: the MCA settings of a job on this cluster (the launch through the agent,
# daemons and ranks talking over the mpi fabric only, the name server).
ompi_env() {
  OMPI=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    "OMPI_MCA_plm_rsh_agent=$CL/agent" OMPI_MCA_plm_rsh_no_tree_spawn=1
    "OMPI_MCA_oob_tcp_if_include=$CL_MPI_SUBNET" "OMPI_MCA_btl_tcp_if_include=$CL_MPI_SUBNET"
    OMPI_MCA_btl=self,vader,tcp OMPI_MCA_hwloc_base_binding_policy=none OMPI_MCA_rmaps_base_oversubscribe=1
    "PMIX_MCA_ptl_tcp_if_include=$CL_MPI_SUBNET" PMIX_MCA_ptl_tcp_remote_connections=1)
  [ -s "$CL/shared/ompi.uri" ] && OMPI+=("OMPI_MCA_pmix_server_uri=file:$CL/shared/ompi.uri")
  return 0
}

# has_hosts ARGS...: whether mpirun's arguments place the ranks themselves.
has_hosts() {
  local a
  for a in "$@"; do
    case "$a" in --host | -host | -H | --hostfile | -hostfile | --machinefile | -machinefile | -f | -hosts | --default-hostfile) return 0 ;; esac
  done
  return 1
}

# first_host ARGS...: the first node of a job's hosts (--host/-H LIST, --hostfile FILE;
# MPICH: -hosts/-host LIST, -f FILE), else the first compute node.
first_host() {
  local a v
  while [ $# -gt 0 ]; do
    a=$1
    v=${2:-}
    case "$a" in
      --host | -host | -H | -hosts) v=${v%%,*}; echo "${v%%:*}"; return 0 ;;
      --hostfile | -hostfile | --machinefile | -machinefile | --default-hostfile | -f)
        awk '!/^[ \t]*(#|$)/ {sub(/:.*/, "", $1); print $1; exit}' "$v" 2>/dev/null; return 0 ;;
    esac
    shift
  done
  awk '{print $1; exit}' "$CL/hostfile.compute"
}

# launch_node ARGS...: where a job's mpirun runs (--from NODE, else its first host, as a
# batch system runs the job script on the first node of the allocation); sets FROM and
# leaves the rest in LAUNCH_ARGS.
launch_node() {
  FROM=""
  if [ "${1:-}" = --from ]; then
    FROM=${2:?--from needs a node}
    shift 2
  fi
  LAUNCH_ARGS=("$@")
  [ -n "$FROM" ] || FROM=$(first_host "$@")
  [ -n "$FROM" ] || die "no node to run mpirun on (give --host, --hostfile or --from NODE)"
  must_node "$FROM"
  [ "$(node_state "$FROM")" = on ] || die "node $FROM (where mpirun would run) is powered off"
}

cmd_mpirun() {
  pick_cluster
  launch_node "$@"
  set -- "${LAUNCH_ARGS[@]}"
  enter "$FROM"
  export LNET_CLUSTER_JOB=${LNET_CLUSTER_JOB:-job-$$}
  node_env "$FROM" 1
  ompi_env
  local hosts=()
  has_hosts "$@" || hosts=(--hostfile "$CL/hostfile.compute")
  exec "${ENTER[@]}" "${ENV[@]}" "${OMPI[@]}" mpirun "${hosts[@]}" "$@"
}

cmd_mpiexec_mpich() {
  pick_cluster
  command -v mpiexec.mpich >/dev/null || die "no mpiexec.mpich (MPICH is not installed)"
  [ -n "$CL_MPI_FABRIC" ] || die "cluster '$NAME' has no mpi fabric"
  launch_node "$@"
  set -- "${LAUNCH_ARGS[@]}"
  enter "$FROM"
  export LNET_CLUSTER_JOB=${LNET_CLUSTER_JOB:-job-$$}
  node_env "$FROM" 1
  local hosts=()
  has_hosts "$@" || hosts=(-f "$CL/hostfile-mpich.compute")
  exec "${ENTER[@]}" "${ENV[@]}" mpiexec.mpich -launcher ssh -launcher-exec "$CL/agent" -iface "$CL_MPI_FABRIC" \
    "${hosts[@]}" "$@"
}

# ---- the standing proxy jobs ------------------------------------------------------------

# Each proxy line of the description is a job named by its first node. A job on one node
# is launched from that node (with Open MPI 4.1 a job can accept applications only when
# all its ranks run on its mpirun's node: docs/design/cluster.md); one spanning nodes
# from the login node. Its state: proxy/JOB.{pid,tag}, its log log/proxy-JOB.log, its
# port file shared/lnet-proxy.JOB.port.
proxy_pid() { cat "$CL/proxy/$1.pid" 2>/dev/null || true; }
proxy_running() { local p; p=$(proxy_pid "$1"); [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }
proxy_port_file() { echo "$CL/shared/lnet-proxy.$1.port"; }
must_proxy_job() {
  local j
  for j in "${CL_PROXY_JOBS[@]}"; do [ "$j" = "$1" ] && return 0; done
  die "no proxy job '$1' (jobs: ${CL_PROXY_JOBS[*]:-none})"
}
proxy_launcher() { # the node a job's mpirun runs on
  local nodes
  read -ra nodes <<<"${CL_PROXY_NODES[$1]}"
  if [ ${#nodes[@]} = 1 ]; then echo "${nodes[0]}"; else echo "$CL_LOGIN"; fi
}

# kill_job TAG: every process of a job the cluster launched (LNET_CLUSTER_JOB=TAG), on
# every node.
kill_job() {
  local n p i
  for i in $(seq 50); do
    local left=()
    for n in "${CL_NODES[@]}"; do
      for p in $(node_pids "$n"); do
        grep -qxz "LNET_CLUSTER_JOB=$1" "/proc/$p/environ" 2>/dev/null && left+=("$p")
      done
    done
    [ ${#left[@]} = 0 ] && return 0
    kill_pids "${left[@]}"
    sleep 0.1
  done
}

proxy_stop() {
  local job=$1 p tag
  p=$(proxy_pid "$job")
  tag=$(cat "$CL/proxy/$job.tag" 2>/dev/null || true)
  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p" 2>/dev/null || true
    local i
    for i in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill_pids "$p"
  fi
  # What mpirun could not stop (ranks on a node that went away and came back, say).
  [ -n "$tag" ] && kill_job "$tag"
  rm -f "$CL/proxy/$job.pid" "$(proxy_port_file "$job")"
}

# proxy_start JOB [OPTIONS...]: the job, one rank per node of its line that is up (in
# the description's order); waits until it serves.
proxy_start() {
  local job=$1
  shift
  proxy_running "$job" && die "proxy job $job is already running (mpirun pid $(proxy_pid "$job"))"
  local hosts=() n from
  for n in ${CL_PROXY_NODES[$job]}; do [ "$(node_state "$n")" = on ] && hosts+=("$n"); done
  [ ${#hosts[@]} -gt 0 ] || die "proxy job $job: no node of it is up (${CL_PROXY_NODES[$job]})"
  [ "${hosts[*]}" = "${CL_PROXY_NODES[$job]}" ] ||
    note "proxy job $job: nodes ${CL_PROXY_NODES[$job]} named, starting on those up: ${hosts[*]}"
  from=$(proxy_launcher "$job")
  [ "$(node_state "$from")" = on ] || die "proxy job $job: its launch node $from is powered off"
  local args
  eval "args=(${CL_PROXY_ARGS[$job]})"
  [ $# -gt 0 ] && args=("$@")
  mkdir -p "$CL/proxy"
  local serial tag port
  serial=$(($(cat "$CL/proxy/$job.serial" 2>/dev/null || echo 0) + 1))
  echo "$serial" >"$CL/proxy/$job.serial"
  tag="proxy-$job-$serial"
  echo "$tag" >"$CL/proxy/$job.tag"
  port=$(proxy_port_file "$job")
  rm -f "$port"
  enter "$from"
  LNET_CLUSTER_JOB=$tag node_env "$from"
  ompi_env
  local log="$CL/log/proxy-$job.log" hostlist from_line
  echo "---- $(date '+%F %T') proxy job $job, start $serial, on ${hosts[*]} from $from" >>"$log"
  from_line=$(($(wc -l <"$log") + 1))
  hostlist=$(IFS=,; echo "${hosts[*]}")
  # A per-app job (mode 1b) outlives the dedicated jobs it spawns only with recovery on.
  local recovery=()
  [[ " ${args[*]} " == *" per-app "* || " ${args[*]} " == *" --mode=per-app "* ]] && recovery=(--enable-recovery)
  setsid "${ENTER[@]}" "${ENV[@]}" "${OMPI[@]}" mpirun "${recovery[@]}" --host "$hostlist" -n ${#hosts[@]} \
    lnet-proxy --port-file "$port" "${args[@]}" </dev/null 9>&- >>"$log" 2>&1 &
  echo $! >"$CL/proxy/$job.pid"
  local i
  for i in $(seq 600); do
    if grep -q "lnet-proxy: ready" < <(tail -n +"$from_line" "$log"); then
      note "proxy job $job serves on ${hosts[*]}: LNET_PROXY=$port"
      return 0
    fi
    proxy_running "$job" || die "proxy job $job exited: $(tail -n +"$from_line" "$log" | tail -n 8)"
    sleep 0.05
  done
  die "proxy job $job did not serve within 30 s: $(tail -n +"$from_line" "$log" | tail -n 8)"
}

cmd_proxy() {
  pick_cluster
  local what=${1:-status} jobs=() opts=() j
  [ $# -gt 0 ] && shift
  while [ $# -gt 0 ]; do
    if [ "$1" = -- ]; then shift; opts=("$@"); break; fi
    must_proxy_job "$1"
    jobs+=("$1")
    shift
  done
  [ ${#jobs[@]} -gt 0 ] || jobs=("${CL_PROXY_JOBS[@]}")
  [ ${#jobs[@]} -gt 0 ] || die "cluster '$NAME' has no proxy line"
  case "$what" in
    start) lock; for j in "${jobs[@]}"; do proxy_start "$j" "${opts[@]}"; done ;;
    stop) lock; for j in "${jobs[@]}"; do proxy_stop "$j"; note "proxy job $j stopped"; done ;;
    restart) lock; for j in "${jobs[@]}"; do proxy_stop "$j"; proxy_start "$j" "${opts[@]}"; done ;;
    status)
      for j in "${jobs[@]}"; do
        if proxy_running "$j"; then
          echo "proxy job $j: running on ${CL_PROXY_NODES[$j]} (mpirun pid $(proxy_pid "$j") on $(proxy_launcher "$j")), LNET_PROXY=$(proxy_port_file "$j")"
        else
          echo "proxy job $j: not running"
        fi
      done ;;
    port) for j in "${jobs[@]}"; do proxy_port_file "$j"; done ;;
    *) die "usage: cluster.sh proxy start|stop|restart|status|port [JOB...] [-- OPTIONS]" ;;
  esac
}

# ---- failures ---------------------------------------------------------------------------

# freeze NODE: SIGSTOP every process of NODE, again until a round finds none new (a
# process that forked while the others stopped is caught by the next round).
freeze() {
  local seen="" p new i
  for i in $(seq 50); do
    new=0
    for p in $(node_pids "$1"); do
      [[ " $seen " == *" $p "* ]] && continue
      kill -STOP "$p" 2>/dev/null || true
      seen+=" $p"
      new=1
    done
    [ $new = 0 ] && return 0
  done
}

cmd_poweroff() {
  [ $# = 1 ] || die "usage: cluster.sh poweroff NODE"
  pick_cluster
  must_node "$1"
  need_root
  lock
  [ "$(node_state "$1")" = on ] || die "node $1 is already off"
  echo off >"$CL/nodes/$1/state"
  freeze "$1"
  ports "$1" down
  note "node $1 is powered off at $(date +%s.%N | cut -c1-14): $(node_pids "$1" | wc -l) processes frozen, links down"
}

cmd_reboot() {
  [ $# = 1 ] || die "usage: cluster.sh reboot NODE"
  pick_cluster
  must_node "$1"
  need_root
  lock
  local node=$1 t0
  t0=$(now_ms)
  echo off >"$CL/nodes/$node/state"
  ports "$node" down
  if is_kernel "$node"; then
    rm -f "$CL/nodes/$node"/cut.*
    kernel_stop "$node"
    kernel_boot "$node"
    kernel_ready "$node"
    note "node $node rebooted in $(($(now_ms) - t0)) ms"
    return 0
  fi
  kill_ns "$(node_ns "$node")"
  rm -f "$CL/nodes/$node"/cut.* "$CL/nodes/$node/pids"/*
  node_links "$node" down
  node_links "$node" up
  new_holder "$node"
  ports "$node" up
  echo on >"$CL/nodes/$node/state"
  start_node "$node"
  # The proxy jobs with a rank on it, or launched from it, start again; all of them when
  # it is the login node (they published their jobs to its ompi-server, which is new).
  local j n
  for j in "${CL_PROXY_JOBS[@]}"; do
    for n in ${CL_PROXY_NODES[$j]} "$(proxy_launcher "$j")" "$([ "$node" = "$CL_LOGIN" ] && echo "$node")"; do
      if [ "$n" = "$node" ]; then
        proxy_stop "$j"
        proxy_start "$j"
        break
      fi
    done
  done
  note "node $node rebooted in $(($(now_ms) - t0)) ms"
}

# resume NODE: a node powered off comes back as a hung machine does: its processes go on
# where they stopped (their timers see the time that passed), its links come back (not
# those partition cut).
cmd_resume() {
  [ $# = 1 ] || die "usage: cluster.sh resume NODE"
  pick_cluster
  must_node "$1"
  need_root
  lock
  [ "$(node_state "$1")" = off ] || die "node $1 is not powered off"
  local p a f n=0
  for p in $(node_pids "$1"); do
    kill -CONT "$p" 2>/dev/null || true
    n=$((n + 1))
  done
  for a in ${CL_ADDRS[$1]}; do
    f=${a%%=*}
    [ -e "$CL/nodes/$1/cut.$f" ] || ports "$1" up "$f"
  done
  echo on >"$CL/nodes/$1/state"
  note "node $1 resumed at $(date +%s.%N | cut -c1-14): $n processes thawed, links up"
}

cmd_partition() {
  [ $# = 2 ] || die "usage: cluster.sh partition NODE FABRIC"
  pick_cluster
  must_node "$1"
  need_root
  addr_of "$1" "$2" >/dev/null || die "node $1 is not on fabric '$2'"
  lock
  ports "$1" down "$2"
  touch "$CL/nodes/$1/cut.$2"
  note "node $1 is cut from fabric $2"
}

cmd_heal() {
  [ $# -le 2 ] || die "usage: cluster.sh heal [NODE [FABRIC]]"
  pick_cluster
  need_root
  lock
  local n c f
  for n in "${CL_NODES[@]}"; do
    [ -n "${1:-}" ] && [ "$n" != "$1" ] && continue
    for c in "$CL/nodes/$n"/cut.*; do
      [ -e "$c" ] || continue
      f=${c##*/cut.}
      [ -n "${2:-}" ] && [ "$f" != "$2" ] && continue
      [ "$(node_state "$n")" = on ] && ports "$n" up "$f"
      rm -f "$c"
      note "node $n is back on fabric $f"
    done
  done
}

# ---- looking --------------------------------------------------------------------------

show_status() {
  printf '%-10s %-16s %-4s %-34s %s\n' NODE ROLES STATE ADDRESSES RUNNING
  local n what p d cut
  for n in "${CL_NODES[@]}"; do
    what=""
    for d in "$CL/nodes/$n/pids"/*; do
      [ -e "$d" ] || continue
      p=$(cat "$d")
      if kill -0 "$p" 2>/dev/null; then what+="${d##*/}($p) "; else what+="${d##*/}(exited) "; fi
    done
    if is_kernel "$n"; then
      if p=$(kernel_qemu_pid "$n"); then what+="qemu($p) kernel LNet"; else what+="qemu(exited)"; fi
    fi
    cut=""
    for d in "$CL/nodes/$n"/cut.*; do [ -e "$d" ] && cut+=" cut:${d##*/cut.}"; done
    printf '%-10s %-16s %-4s %-34s %s%s\n' "$n" "${CL_ROLES[$n]}" "$(node_state "$n")" "${CL_ADDRS[$n]}" "$what" "$cut"
  done
  local j
  for j in "${CL_PROXY_JOBS[@]}"; do
    if proxy_running "$j"; then
      echo "proxy job $j: running on ${CL_PROXY_NODES[$j]} (from $(proxy_launcher "$j")), LNET_PROXY=$(proxy_port_file "$j")"
    else
      echo "proxy job $j: not running"
    fi
  done
  [ -s "$CL/shared/ompi.uri" ] && echo "ompi-server: on $CL_LOGIN, $CL/shared/ompi.uri"
  return 0
}

cmd_status() {
  pick_cluster
  echo "cluster $NAME ($CL, build $BUILD)"
  show_status
}

cmd_list() { clusters_up; }

cmd_addr() {
  [ $# -ge 1 ] && [ $# -le 2 ] || die "usage: cluster.sh addr NODE [FABRIC]"
  pick_cluster
  must_node "$1"
  addr_of "$1" "${2:-}" || die "node $1 is not on fabric '$2'"
}

cmd_hostfile() {
  [ $# -ge 1 ] || die "usage: cluster.sh hostfile ROLE [--mpich]"
  pick_cluster
  local f="$CL/hostfile.$1"
  [ "${2:-}" = --mpich ] && f="$CL/hostfile-mpich.$1"
  [ -f "$f" ] || die "no role '$1' (login, compute, server, router)"
  echo "$f"
}

cmd_log() {
  [ $# -ge 1 ] || die "usage: cluster.sh log NODE [NAME]"
  pick_cluster
  must_node "$1"
  if is_kernel "$1" && [ "${2:-}" = console ]; then echo "$CL/kn/$1/console.log"; return 0; fi
  if [ -n "${2:-}" ]; then echo "$CL/nodes/$1/log/$2.log"; else echo "$CL/nodes/$1/log"; fi
}

cmd_pids() {
  [ $# = 1 ] || die "usage: cluster.sh pids NODE"
  pick_cluster
  must_node "$1"
  local p
  for p in $(node_pids "$1"); do
    printf '%s %s %s\n' "$p" "$(awk '/^State:/ {print $2}' "/proc/$p/status" 2>/dev/null)" \
      "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-100)"
  done
}

# ---- main ------------------------------------------------------------------------------

main() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --cluster) NAME=${2:?--cluster needs a name}; shift 2 ;;
      -h | --help) usage; exit 0 ;;
      *) break ;;
    esac
  done
  [ $# -ge 1 ] || { usage >&2; exit 2; }
  local cmd=$1
  shift
  case "$cmd" in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    check) cmd_check "$@" ;;
    status) cmd_status "$@" ;;
    list) cmd_list ;;
    exec) cmd_exec "$@" ;;
    agent) cmd_agent "$@" ;;
    mpirun) cmd_mpirun "$@" ;;
    mpiexec.mpich) cmd_mpiexec_mpich "$@" ;;
    poweroff) cmd_poweroff "$@" ;;
    resume) cmd_resume "$@" ;;
    reboot) cmd_reboot "$@" ;;
    partition) cmd_partition "$@" ;;
    heal) cmd_heal "$@" ;;
    proxy) cmd_proxy "$@" ;;
    addr) cmd_addr "$@" ;;
    hostfile) cmd_hostfile "$@" ;;
    log) cmd_log "$@" ;;
    pids) cmd_pids "$@" ;;
    help) usage ;;
    *) echo "cluster: unknown command '$cmd'" >&2; usage >&2; exit 2 ;;
  esac
}

main "$@"
