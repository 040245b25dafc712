#!/usr/bin/env bash
# The virtual cluster tool itself (lnet-cluster(8)):
#   - bad descriptions are refused naming the line, and nothing is made;
#   - each node has its own host name, boot id, SysV IPC, /run/lnet and /dev/shm, its
#     own addresses, and its own lnetd on port 988 where its role needs one;
#   - a second cluster of the same name is refused, a cluster whose `up` was killed
#     half-way is detected as leftovers and removed by `down`;
#   - poweroff: the node's processes are frozen and its peers see silence (a connection
#     to it times out, nothing refuses it), its commands fail like ssh to a dead host;
#   - reboot: everything on it killed, a new boot id, its lnetd back and reachable;
#   - partition/heal: one link cut and restored, nothing killed;
#   - down removes every namespace, link, process and file it made.
. "$(dirname "$0")/lib.sh"
cl_setup basics -
D="$T_DIR/basics.cluster"
cat >"$D" <<'EOF'
# login, two compute nodes, a router on mpi and tcp0, a server on tcp0
fabric mpi  10.92.0.0/24
fabric tcp0 10.92.1.0/24
node login login         mpi=10
node c1    compute       mpi=11
node c2    compute       mpi=12
node r1    server,router mpi=21 tcp0=21
node s1    server        tcp0=31
route s1 mpi r1
EOF

# ---- bad descriptions -------------------------------------------------------------------
bad() {  # bad LINE-NUMBER EXPECTED-TEXT: the description in $T_DIR/bad.cluster is refused
  if "$CLUSTER_SH" up "$T_DIR/bad.cluster" --name "$LNET_CLUSTER" >"$T_DIR/bad.out" 2>&1; then
    fail "a bad description was taken: $(cat "$T_DIR/bad.cluster")"
  fi
  grep -q "bad.cluster:$1: .*$2" "$T_DIR/bad.out" || fail "refused without naming line $1 ($2): $(cat "$T_DIR/bad.out")"
  ! grep -q "^lc-$LNET_CLUSTER" <<<"$(ip netns list)" || fail "a refused description made namespaces"
  [ ! -e "/run/lnet-cluster/$LNET_CLUSTER" ] || fail "a refused description made /run/lnet-cluster/$LNET_CLUSTER"
}
{ cat "$D"; echo "node c3 compute,gpu mpi=13"; } >"$T_DIR/bad.cluster"
bad 10 "unknown role 'gpu'"
{ cat "$D"; echo "node s2 server slots=2"; } >"$T_DIR/bad.cluster"
bad 10 "is on no fabric"
{ cat "$D"; echo "node c3 compute mpi=10.92.0.12"; } >"$T_DIR/bad.cluster"
bad 10 "already that of node 'c2'"
{ cat "$D"; echo "node localhost compute mpi=13"; } >"$T_DIR/bad.cluster"
bad 10 "would resolve to the local host"
# This machine's own name (case does not matter to a resolver), when it is a node name.
me=$(uname -n | cut -d. -f1 | tr 'A-Z' 'a-z')
if [[ "$me" =~ ^[a-z][a-z0-9-]{0,14}$ ]] && [[ "$me" != *- ]]; then
  { cat "$D"; echo "node $me compute mpi=13"; } >"$T_DIR/bad.cluster"
  bad 10 "would resolve to the local host"
fi
log "bad descriptions: refused naming the line, nothing made"

# ---- up, and what a node has of its own ------------------------------------------------
"$CLUSTER_SH" up "$D" --name "$LNET_CLUSTER" >"$T_DIR/up.log" 2>&1 || fail "up: $(cat "$T_DIR/up.log")"
log "up: $(grep 'is up' "$T_DIR/up.log")"
if "$CLUSTER_SH" up "$D" --name "$LNET_CLUSTER" >"$T_DIR/again.out" 2>&1; then fail "a second cluster of the same name came up"; fi
grep -q "is already up" "$T_DIR/again.out" || fail "second up: $(cat "$T_DIR/again.out")"
log "a second cluster of the same name is refused: $(cat "$T_DIR/again.out")"

for n in login c1 c2 r1 s1; do
  [ "$(cl exec "$n" uname -n)" = "$n" ] || fail "node $n's host name is $(cl exec "$n" uname -n)"
done
[ "$(cl exec c1 cat /proc/sys/kernel/random/boot_id)" != "$(cl exec c2 cat /proc/sys/kernel/random/boot_id)" ] ||
  fail "c1 and c2 share a boot id"
[ "$(cl exec c1 readlink /proc/self/ns/ipc)" != "$(cl exec c2 readlink /proc/self/ns/ipc)" ] || fail "c1 and c2 share SysV IPC"
cl exec c1 touch /dev/shm/lnet-basics-probe
! cl exec c2 test -e /dev/shm/lnet-basics-probe || fail "c2 sees c1's /dev/shm"
[ "$(cl exec c2 getent hosts r1 | awk '{print $1}')" = 10.92.0.21 ] || fail "r1 does not resolve to its mpi address on c2"
cl exec r1 test -S /run/lnet/lnetd.sock || fail "no lnetd control socket in r1's /run/lnet"
! cl exec c1 test -e /run/lnet/lnetd.sock || fail "c1 (compute) has an lnetd socket: /run/lnet is shared"
grep -q "nid: 10.92.1.21@tcp" <<<"$(cl exec r1 lnetctl net show)" || fail "r1's lnetd is not 10.92.1.21@tcp"
grep -q "gateway: 10.92.1.21@tcp" <<<"$(cl exec s1 lnetctl route show)" || fail "s1's route to mpi via r1 is missing"
cl exec s1 lnetctl ping 10.92.1.21@tcp >/dev/null || fail "s1 cannot ping r1's lnetd on port 988"
log "nodes: own host names, boot ids, IPC, /dev/shm, /run/lnet; lnetd on r1 and s1 talk over tcp0"

# ---- poweroff: silence ------------------------------------------------------------------
# connect_to NODE IP: a TCP connection from NODE to IP:988 within 3 s (status of the try:
# 0 connected, 124 nothing answered, other: refused or unreachable).
connect_to() { cl exec "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/988" >/dev/null 2>&1 && echo 0 || echo $?; }
[ "$(connect_to r1 10.92.1.31)" = 0 ] || fail "r1 cannot connect to s1's port 988"
s1_lnetd=$(cat "/run/lnet-cluster/$LNET_CLUSTER/nodes/s1/pids/lnetd")
cl poweroff s1 >/dev/null
[ "$(awk '/^State:/ {print $2}' "/proc/$s1_lnetd/status")" = T ] || fail "s1's lnetd is not stopped after poweroff"
rc=$(connect_to r1 10.92.1.31)
[ "$rc" = 124 ] || fail "a connection to powered-off s1 ended with status $rc, not silence (124)"
if cl exec s1 true 2>"$T_DIR/off.err"; then fail "a command ran on a powered-off node"; fi
set +e
"/run/lnet-cluster/$LNET_CLUSTER/agent" s1 true 2>"$T_DIR/agent.err"
rc=$?
set -e
[ $rc = 255 ] && grep -q "No route to host" "$T_DIR/agent.err" || fail "the launch agent to s1 (off): status $rc, $(cat "$T_DIR/agent.err")"
grep -Eq '^s1 .* off ' <<<"$(cl status)" || fail "status does not show s1 off: $(cl status)"
log "poweroff s1: its processes stopped, a connection to it times out (no reset), ssh-like launches fail (255)"

# gone PID: no such process any more (a zombie waiting to be reaped counts as gone).
gone() { [ ! -e "/proc/$1" ] || grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

# ---- reboot ----------------------------------------------------------------------------
boot_before=$(cat "/run/lnet-cluster/$LNET_CLUSTER/nodes/s1/boot_id")
cl reboot s1 >/dev/null
gone "$s1_lnetd" || fail "s1's old lnetd survived the reboot"
[ "$(cl exec s1 cat /proc/sys/kernel/random/boot_id)" != "$boot_before" ] || fail "s1's boot id did not change"
wait_until 30 "r1 reaches s1's new lnetd after its reboot" cl exec r1 lnetctl ping 10.92.1.31@tcp
log "reboot s1: old processes gone, new boot id, its lnetd back (pid $(cat "/run/lnet-cluster/$LNET_CLUSTER/nodes/s1/pids/lnetd"))"

# ---- partition and heal -----------------------------------------------------------------
cl partition s1 tcp0 >/dev/null
rc=$(connect_to r1 10.92.1.31)
[ "$rc" = 124 ] || fail "a connection to partitioned s1 ended with status $rc, not silence"
kill -0 "$(cat "/run/lnet-cluster/$LNET_CLUSTER/nodes/s1/pids/lnetd")" || fail "the partition killed s1's lnetd"
cl heal >/dev/null
[ "$(connect_to r1 10.92.1.31)" = 0 ] || fail "r1 cannot connect to s1 after heal"
log "partition s1 from tcp0: silence, nothing killed; heal: reachable again"

# ---- a cluster whose up was killed half-way --------------------------------------------
cl down >/dev/null
"$CLUSTER_SH" up "$D" --name "$LNET_CLUSTER" >/dev/null 2>&1 &
up_pid=$!
wait_until 30 "the second up made namespaces" test -e "/run/netns/lc-$LNET_CLUSTER-c1"
kill -KILL "$up_pid"
wait "$up_pid" 2>/dev/null || true
if "$CLUSTER_SH" up "$D" --name "$LNET_CLUSTER" >"$T_DIR/left.out" 2>&1; then fail "up went ahead over a killed run's leftovers"; fi
grep -q "leftovers" "$T_DIR/left.out" || fail "leftovers not named: $(cat "$T_DIR/left.out")"
"$CLUSTER_SH" down "$LNET_CLUSTER" >/dev/null
log "a killed up's leftovers are detected ($(head -c 120 "$T_DIR/left.out")...) and removed by down"

# ---- down leaves nothing -----------------------------------------------------------------
! grep -q "^lc-$LNET_CLUSTER" <<<"$(ip netns list)" || fail "namespaces left: $(ip netns list | grep "^lc-$LNET_CLUSTER")"
[ ! -e "/run/lnet-cluster/$LNET_CLUSTER" ] || fail "/run/lnet-cluster/$LNET_CLUSTER left"
! pgrep -f "lnet-node-$LNET_CLUSTER-" >/dev/null || fail "node processes left: $(pgrep -af "lnet-node-$LNET_CLUSTER-")"
! pgrep -f "/run/lnet-cluster/$LNET_CLUSTER/" >/dev/null || fail "processes left: $(pgrep -af "/run/lnet-cluster/$LNET_CLUSTER/")"
log "down: no namespace, link, process or file left"
log "PASS"
