# Shared helpers of the multi-host tests: network namespaces joined by veth pairs, lnetd
# daemons in them, and clean-up of everything on any exit. Source it, then call setup.
# Needs root. Binaries come from $LNETD, $LNETCTL, $LNET_XFER (set by CTest).
set -euo pipefail

T_DIR=""
T_PIDS=()
T_DAEMONS=()
T_NS=()
T_LINKS=()  # veth names while they are still in the root namespace
T_AT_EXIT=()  # commands the clean-up runs last (restoring what a test changed on the host)
T_NAME="$(basename "$0" .sh)"

log() { echo "[$T_NAME] $*"; }
fail() {
  echo "[$T_NAME] FAIL: $*" >&2
  exit 1
}

cleanup() {
  local rc=$?
  set +e
  # Twice: a router's lnetd drains its routes on the first (lnetd(8)), stops on the second.
  local sig
  for sig in TERM TERM; do
    for p in "${T_PIDS[@]}"; do kill -"$sig" "$p" 2>/dev/null; done
    for _ in $(seq 50); do
      local alive=0
      for p in "${T_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ $alive = 0 ] && break
      sleep 0.1
    done
  done
  for p in "${T_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  # A daemon that did not shut down cleanly (sanitizer report, crash, hang) fails the test.
  for p in "${T_DAEMONS[@]}"; do
    wait "$p"
    local prc=$?
    if [ $prc != 0 ] && [ $rc = 0 ]; then
      echo "[$T_NAME] FAIL: daemon pid $p exited with status $prc on shutdown" >&2
      rc=1
    fi
  done
  for ns in "${T_NS[@]}"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL; ip netns del "$ns" 2>/dev/null; done
  # A veth pair still in the root namespace (a test that failed half-way through link).
  for l in "${T_LINKS[@]}"; do ip link del "$l" 2>/dev/null; done
  for c in "${T_AT_EXIT[@]}"; do eval "$c"; done
  if [ $rc != 0 ] && [ -n "$T_DIR" ]; then
    for f in "$T_DIR"/*.log; do [ -f "$f" ] && { echo "----- $f"; tail -n 40 "$f"; }; done
  fi
  # LNET_IT_KEEP=DIR keeps every log of the run there (debugging).
  [ -n "$T_DIR" ] && [ -n "${LNET_IT_KEEP:-}" ] && rm -rf "$LNET_IT_KEEP" && cp -r "$T_DIR" "$LNET_IT_KEEP"
  [ -n "$T_DIR" ] && rm -rf "$T_DIR"
  exit $rc
}

setup() {
  # Exit code 77 tells CTest the test was skipped, not passed.
  if [ "$(id -u)" != 0 ]; then echo "[$T_NAME] SKIP: needs root (network namespaces, port 988)"; exit 77; fi
  if ! ip netns add "ltprobe$$" 2>/dev/null; then echo "[$T_NAME] SKIP: cannot create network namespaces here"; exit 77; fi
  ip netns del "ltprobe$$"
  for b in "$LNETD" "$LNETCTL"; do [ -x "$b" ] || fail "missing binary $b"; done
  T_DIR="$(mktemp -d /tmp/lnet-it.XXXXXX)"
  trap cleanup EXIT INT TERM
}

# new_ns VAR NAME: a namespace (its name made unique to this run) with lo up; its name
# goes into the variable VAR. Runs in this shell, not in a $(...) subshell, so that the
# clean-up knows every namespace (it deletes those in T_NS).
new_ns() {
  local n="lt$$$2"
  T_NS+=("$n")
  ip netns add "$n"
  ip -n "$n" link set lo up
  printf -v "$1" '%s' "$n"
}

# veth NS1 IF1 ADDR1/LEN NS2 IF2: a veth pair, IF1 (up, with ADDR1) in NS1 and IF2 (down)
# in NS2. The root namespace only sees it for a moment (clean-up deletes it from there).
veth() {
  local tmp1="v$$a$RANDOM" tmp2="v$$b$RANDOM"
  T_LINKS+=("$tmp1" "$tmp2")
  ip link add "$tmp1" type veth peer name "$tmp2"
  ip link set "$tmp1" netns "$1"
  ip link set "$tmp2" netns "$4"
  ip -n "$1" link set "$tmp1" name "$2"
  ip -n "$4" link set "$tmp2" name "$5"
  ip -n "$1" addr add "$3" dev "$2"
  ip -n "$1" link set "$2" up
}

# link NS1 IF1 ADDR1/LEN NS2 IF2 ADDR2/LEN
link() {
  veth "$1" "$2" "$3" "$4" "$5"
  ip -n "$4" addr add "$6" dev "$5"
  ip -n "$4" link set "$5" up
}

# lnetd_start NS NAME CONFIG_TEXT [lnetd args...]: an lnetd in NS, control socket $T_DIR/NAME.sock.
lnetd_start() {
  local ns="$1" name="$2" cfg="$3"
  shift 3
  printf '%s' "$cfg" >"$T_DIR/$name.yaml"
  ip netns exec "$ns" "$LNETD" -f -c "$T_DIR/$name.yaml" -s "$T_DIR/$name.sock" -p "$T_DIR/$name.pid" \
    "${@:---log-level=info}" >"$T_DIR/$name.log" 2>&1 &
  T_PIDS+=($!)
  T_DAEMONS+=($!)
  for _ in $(seq 100); do
    [ -S "$T_DIR/$name.sock" ] && return 0
    kill -0 $! 2>/dev/null || fail "lnetd $name exited: $(tail -n 5 "$T_DIR/$name.log")"
    sleep 0.1
  done
  fail "lnetd $name did not come up"
}

# lnetd_kill NAME: kills the lnetd NAME outright (a node that dies); clean-up no longer
# judges its exit.
lnetd_kill() {
  local pid
  pid="$(cat "$T_DIR/$1.pid")"
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  local keep=()
  for p in "${T_DAEMONS[@]}"; do [ "$p" != "$pid" ] && keep+=("$p"); done
  T_DAEMONS=("${keep[@]}")
}

# ctl NAME args...: lnetctl against the lnetd NAME, bounded in time.
ctl() {
  local name="$1"
  shift
  timeout 60 "$LNETCTL" --socket "$T_DIR/$name.sock" "$@"
}

# bg NS LOGNAME cmd...: a background process in NS, cleaned up at exit.
bg() {
  local ns="$1" name="$2"
  shift 2
  ip netns exec "$ns" "$@" >"$T_DIR/$name.log" 2>&1 &
  T_PIDS+=($!)
}

# wait_for_log NAME PATTERN: until the log of NAME has PATTERN (10 s at most).
wait_for_log() {
  for _ in $(seq 100); do
    grep -q "$2" "$T_DIR/$1.log" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "no '$2' in $1.log"
}

# v6 NS IFNAME ADDR/LEN: IPv6 on IFNAME in NS with that address, usable at once (nodad:
# duplicate address detection would hold it "tentative" a while, and a bind fail).
v6() {
  ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0 \
    "net.ipv6.conf.$2.disable_ipv6=0" && ip -n "$1" addr add "$3" dev "$2" nodad
}

ni() {  # ni NET NID: one entry of a configuration's net: list, an NI given by its NID
  printf '    - net type: %s\n      local NI(s):\n        - nid: %s\n' "$1" "$2"
}

# capture_start NS IFNAME FILE PEER_IP: dumpcap in NS records port 988 (and the discard
# port) on IFNAME into FILE; CAP_PID is its pid. Returns once the capture is armed:
# dumpcap says "Capturing on" before it is, so the discard port of PEER_IP is probed
# until a probe is in the file, and nothing sent after can slip by. A 32 MiB buffer:
# with the default 2 MiB a 1 MiB transfer now and then overflows it.
capture_start() {
  bg "$1" capture dumpcap -q -B 32 -i "$2" -f "tcp port 988 or udp port 9" -w "$3"
  CAP_PID=${T_PIDS[-1]}
  wait_for_log capture "Capturing on"
  local _
  for _ in $(seq 100); do
    ip netns exec "$1" bash -c "echo probe >/dev/udp/$4/9" 2>/dev/null || true
    tshark -r "$3" -Y "udp.dstport == 9" -T fields -e frame.number 2>/dev/null | grep -q . && return 0
    sleep 0.1
  done
  fail "dumpcap captured none of 100 probes in 10 s"
}

tcp_cfg() {  # tcp_cfg IFNAME [NET]: an lnetd configuration with one tcp NI
  printf 'net:\n    - net type: %s\n      local NI(s):\n        - interfaces:\n              0: %s\n' "${2:-tcp}" "$1"
}

# new_switch VAR NAME: a namespace holding a Linux bridge br0, one LNet network's shared
# segment (more than two hosts on one net); hosts join it with plug.
new_switch() {
  new_ns "$1" "$2"
  ip -n "${!1}" link add br0 type bridge
  ip -n "${!1}" link set br0 up
}

# plug NS IF ADDR/LEN SWITCH_NS: IF in NS, with ADDR, on the switch's bridge.
plug() {
  local port="p$((${#T_LINKS[@]} / 2))"
  veth "$1" "$2" "$3" "$4" "$port"
  ip -n "$4" link set "$port" master br0
  ip -n "$4" link set "$port" up
}

# The stream of lnet-xfer (its log is $S; see tools/xfer).
# until_line PATTERN SECONDS [FROM_LINE]: until a line of the stream's matches.
until_line() {
  local pattern="$1" secs="$2" from="${3:-1}"
  for _ in $(seq $((secs * 10))); do
    tail -n +"$from" "$S" 2>/dev/null | grep -Eq "$pattern" && return 0
    sleep 0.1
  done
  return 1
}
# next_line: the number of the stream's next line.
next_line() { echo $(($(wc -l <"$S") + 1)); }
# stream_end: stops the stream, waits for its summary and sets ops, failed and max_ms
# from it (failing the test without one or with fewer than 100 rounds).
stream_end() {
  touch "$T_DIR/stop"
  for _ in $(seq 600); do grep -q '^summary:' "$S" && break; sleep 0.1; done
  local summary
  summary=$(grep '^summary:' "$S") || fail "no summary from the stream"
  log "$summary"
  grep '^op ' "$S" || true
  failed=$(echo "$summary" | sed -E 's/.* failed=([0-9]+).*/\1/')
  max_ms=$(echo "$summary" | sed -E 's/.* max_ms=([0-9]+).*/\1/')
  ops=$(echo "$summary" | sed -E 's/summary: ops=([0-9]+).*/\1/')
  [ "$ops" -gt 100 ] || fail "only $ops rounds"
}
