#!/usr/bin/env bash
# The packages as a new site meets them: installs the .deb files of scripts/package.sh
# on this machine, checks what they put where (programs, libraries, man pages that man
# finds, completion, units that systemd-analyze accepts, the group and run directory of
# the maintainer scripts, the conffiles), runs lnetd.service's command lines the way
# systemd does (systemd itself need not run: ExecStart with the unit's environment and
# a notify socket; ExecReload; a broken configuration) and the standing proxy's units
# (ompi-server, lnet-proxy-supervise over mpirun), then removes the packages and
# checks that nothing but configuration is left, and purges them.
#   package_test.sh DEB_DIR
# Needs root. Refuses to run where the packages are installed already (it would remove
# a site's installation).
set -euo pipefail
debs="$(cd "${1:?usage: package_test.sh DEB_DIR}" && pwd)"
pkgs=(lnet-utils liblnet-dev liblnet-mpi0 liblnet-up0 liblnet0)
log() { echo "[package_test] $*"; }
fail() {
  echo "[package_test] FAIL: $*" >&2
  exit 1
}
((EUID == 0)) || { echo "package_test: needs root: skipped" >&2; exit 77; }
for p in "${pkgs[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    fail "$p is installed on this machine already: not touching it"
  fi
done
ls "$debs"/*.deb >/dev/null 2>&1 || fail "no .deb files in $debs (scripts/package.sh makes them)"
work=$(mktemp -d)
had_group=0 had_run=0
getent group lnet >/dev/null && had_group=1
[ -e /run/lnet ] && had_run=1
daemon=
cleanup() {
  local rc=$?
  set +e
  [ -n "${mainpid:-}" ] && kill -KILL "$mainpid" 2>/dev/null
  [ -n "$daemon" ] && kill -KILL "$daemon" 2>/dev/null
  [ -n "${listener:-}" ] && kill -KILL "$listener" 2>/dev/null
  if [ -n "${supervisor:-}" ]; then  # it stops the job (mpirun and the rank) on SIGTERM
    kill -TERM "$supervisor" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$supervisor" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$supervisor" 2>/dev/null
    pkill -KILL -f "^/usr/sbin/lnet-proxy " 2>/dev/null
  fi
  [ -n "${ompi:-}" ] && kill -KILL "$ompi" 2>/dev/null
  dpkg --purge "${pkgs[@]}" >/dev/null 2>&1
  ((had_group)) || groupdel lnet 2>/dev/null
  ((had_run)) || rm -rf /run/lnet  # what a killed daemon left (sockets, pid file)
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT

log "install"
apt-get install -y -qq --no-install-recommends "$debs"/*.deb >"$work/apt.log" 2>&1 ||
  fail "apt-get install: $(tail -n 20 "$work/apt.log")"
for f in /usr/sbin/lnetd /usr/sbin/lnetctl /usr/bin/lst /usr/bin/lnet-xfer /usr/sbin/lnet-proxy /usr/bin/lst-node \
  /usr/sbin/lnet-proxy-supervise /usr/include/lnet/lnet.h /usr/lib/x86_64-linux-gnu/pkgconfig/lnet.pc \
  /usr/lib/systemd/system/lnetd.service /etc/lnet.conf /etc/default/lnet /usr/lib/tmpfiles.d/lnet.conf; do
  [ -e "$f" ] || fail "$f is not installed"
done
/usr/sbin/lnetd --help >/dev/null || fail "lnetd --help"
/usr/bin/lnet-xfer --help >/dev/null || fail "lnet-xfer --help"
readelf -d /usr/sbin/lnetd | grep -q RUNPATH && fail "lnetd under /usr carries a run path"
getent group lnet >/dev/null || fail "the maintainer script made no group lnet"
[ -d /run/lnet ] || fail "the maintainer script made no /run/lnet"
for f in /etc/lnet.conf /etc/default/lnet; do
  dpkg-query -W -f='${Conffiles}\n' lnet-utils | grep -q " $f " || fail "$f is not a conffile"
done
if grep -qs "^path-exclude.*/usr/share/man" /etc/dpkg/dpkg.cfg.d/*; then
  # A slimmed image's dpkg drops every package's man pages: the packages' own are checked.
  log "dpkg here excludes /usr/share/man: the man pages are checked in the packages"
  for page in man8/lnetctl.8.gz man8/lnetd.8.gz man8/lst.8.gz man1/lst-node.1.gz man1/lnet-xfer.1.gz man3/lnet.3.gz; do
    for d in "$debs"/lnet-utils_*.deb "$debs"/liblnet-dev_*.deb; do dpkg-deb -c "$d"; done | grep -q "/usr/share/man/$page" ||
      fail "no $page in the packages"
  done
else
  for page in lnetctl lnetd lst lnet-proxy lst-node lnet-xfer "3 lnet" "7 lnet-lnd"; do
    # shellcheck disable=SC2086
    man -w $page >/dev/null 2>&1 || fail "man -w $page finds nothing"
  done
  MANWIDTH=80 man lnetctl 2>/dev/null | grep -q "configure and inspect a running lnetd" || fail "man lnetctl"
fi
if command -v systemd-analyze >/dev/null; then
  for u in lnetd lnet-proxy lnet-ompi-server; do
    systemd-analyze verify --man=no "/usr/lib/systemd/system/$u.service" >"$work/verify" 2>&1 ||
      fail "systemd-analyze verify $u.service: $(cat "$work/verify")"
  done
else
  log "no systemd-analyze on this machine: the units' syntax is not verified"
fi
comp=/usr/share/bash-completion/completions
[ -f $comp/lnetctl ] && [ -f $comp/lst ] || fail "no completion of lnetctl and lst in $comp"
out=$(bash -c ". $comp/lnetctl; COMP_WORDS=(lnetctl net a); COMP_CWORD=2; _lnetctl; echo \"\${COMPREPLY[*]}\"")
[ "$out" = add ] || fail "completion of 'lnetctl net a<TAB>' gave '$out', not 'add'"

log "lnetd.service's command lines"
unit=/usr/lib/systemd/system/lnetd.service
# systemd's expansion: ${X} is one argument (empty included), $X splits on white space.
line() { sed -n "s/^$1=//p" "${2:-$unit}" | sed 's/\${\([A-Za-z_]*\)}/"${\1}"/g'; }
env_defaults() { sed -n 's/^Environment=//p' "${1:-$unit}"; }
start_cmd=$(line ExecStart)
reload_cmd=$(line ExecReload)
[ -n "$start_cmd" ] && [ -n "$reload_cmd" ] || fail "no ExecStart or ExecReload in $unit"
grep -q '^Type=notify' "$unit" || fail "lnetd.service is not Type=notify"
cat >"$work/ok.conf" <<'EOF'
net:
    - net type: tcp
      local NI(s):
        - interfaces:
              0: lo
    - net type: mpi
      local NI(s):
        - nid: 127.0.0.1@mpi
route:
    - net: tcp5
      gateway: 127.0.0.2@tcp
EOF
# What a site changes in /etc/default/lnet: here no listener (a CI machine's port 988).
run_unit() {  # run_unit CONF CMD: CMD in the unit's environment, with LNET_CONF=CONF
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin NOTIFY_SOCKET="${NOTIFY_SOCKET:-}" bash -c '
    set -a; eval "$1"; [ -r /etc/default/lnet ] && . /etc/default/lnet
    LNET_CONF=$2 LNETD_OPTIONS="--accept none"; set +a; eval "exec $3"' _ "$(env_defaults)" "$1" "$2"
}
listen() {  # listen SOCKET SECONDS: prints the first datagram on SOCKET (none: nothing)
  rm -f "$1" "$1.bound"
  python3 - "$1" "$2" >"$1.out" <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1]); s.settimeout(float(sys.argv[2]))
open(sys.argv[1] + ".bound", "w").close()
try:
    print(s.recv(4096).decode())
except socket.timeout:
    pass
EOF
  listener=$!
  for _ in $(seq 100); do [ -e "$1.bound" ] && return 0; sleep 0.05; done
  fail "the notify socket $1 was not bound"
}
sock="$work/notify"

# The standing proxy's units as systemd runs them, against the lnetd above: ompi-server
# (ExecStartPre, ExecStart, ExecStartPost: its URI file), then lnet-proxy.service's
# ExecStart (lnet-proxy-supervise over mpirun with the settings' defaults) until the job
# says it is ready and its port file is there; SIGTERM stops the job and removes it.
# It execs: call it in a subshell, "( run_env_unit ... )", or with "&" (then $! is the
# unit's process itself, as systemd's main pid).
run_env_unit() {  # run_env_unit UNIT DEFAULTS CMD: CMD with UNIT's Environment= and DEFAULTS
  exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin bash -c '
    set -a; eval "$1"; [ -r "$2" ] && . "$2"; set +a; eval "exec $3"' _ "$(env_defaults "$1")" "$2" "$3"
}
proxy_units() {
  local os=/usr/lib/systemd/system/lnet-ompi-server.service px=/usr/lib/systemd/system/lnet-proxy.service
  if ! command -v mpirun >/dev/null || ! command -v ompi-server >/dev/null; then
    log "no Open MPI here (mpirun, ompi-server): the proxy units are not run"
    return
  fi
  log "lnet-ompi-server.service and lnet-proxy.service's command lines"
  (run_env_unit $os /etc/default/lnet-proxy "$(line ExecStartPre $os)") || fail "ompi-server's ExecStartPre"
  run_env_unit $os /etc/default/lnet-proxy "$(line ExecStart $os)" >"$work/ompi.log" 2>&1 &
  ompi=$!
  (run_env_unit $os /etc/default/lnet-proxy "$(line ExecStartPost $os)") || fail "ompi-server: $(cat "$work/ompi.log")"
  run_env_unit $px /etc/default/lnet-proxy "$(line ExecStart $px)" >"$work/proxy.log" 2>&1 &
  supervisor=$!
  for _ in $(seq 600); do grep -qs "lnet-proxy: ready" "$work/proxy.log" && break; sleep 0.1; done
  grep -q "lnet-proxy: ready" "$work/proxy.log" || fail "the proxy job is not ready: $(tail -n 8 "$work/proxy.log")"
  grep -q "^port " /run/lnet/lnet-proxy.port || fail "no port file: $(cat /run/lnet/lnet-proxy.port 2>&1)"
  kill -TERM "$supervisor"
  wait "$supervisor" || fail "the supervisor ended with status $? on SIGTERM: $(tail -n 5 "$work/proxy.log")"
  supervisor=
  [ -e /run/lnet/lnet-proxy.port ] && fail "the stopped job left its port file"
  kill -TERM "$ompi"
  wait "$ompi" 2>/dev/null
  ompi=
  (run_env_unit $os /etc/default/lnet-proxy "$(line ExecStopPost $os)") || fail "ompi-server's ExecStopPost"
  log "the proxy job came up through its units and stopped cleanly"
}
# A broken configuration: the YAML error on stderr at priority err, a non-zero status,
# and no READY.
printf 'net: [\n' >"$work/bad.conf"
listen "$sock.bad" 2
if NOTIFY_SOCKET="$sock.bad" run_unit "$work/bad.conf" "$start_cmd" 2>"$work/bad.err"; then
  fail "lnetd started with a broken configuration"
fi
wait "$listener"
grep -q "^<3>.*bad configuration in $work/bad.conf" "$work/bad.err" || fail "no error line: $(cat "$work/bad.err")"
[ -s "$sock.bad.out" ] && fail "lnetd with a broken configuration told systemd: $(cat "$sock.bad.out")"

listen "$sock" 30
NOTIFY_SOCKET=$sock run_unit "$work/ok.conf" "$start_cmd" 2>"$work/lnetd.err" &
daemon=$!
wait "$listener"
grep -q "^READY=1" "$sock.out" || fail "no READY from lnetd ('$(cat "$sock.out")'): $(cat "$work/lnetd.err")"
# lnetd's own pid, as systemd learns it (the job above is the shell that started it).
mainpid=$(sed -n 's/^MAINPID=//p' "$sock.out")
[ -n "$mainpid" ] && kill -0 "$mainpid" || fail "READY named no live MAINPID: $(cat "$sock.out")"
lnetctl net show | grep -q "nid: 127.0.0.1@tcp" || fail "net show: $(lnetctl net show)"
grep -q "^<6>lnetd up" "$work/lnetd.err" || fail "no info line at priority 6: $(head -n 3 "$work/lnetd.err")"

printf '    - net: tcp6\n      gateway: 127.0.0.2@tcp\n' >>"$work/ok.conf"
run_unit "$work/ok.conf" "$reload_cmd" >"$work/reload.out" || fail "reload: $(cat "$work/reload.out")"
lnetctl route show | grep -q "net: tcp6" || fail "the reload added no route: $(lnetctl route show)"
lnetctl export --backup >"$work/before.yaml"
run_unit "$work/bad.conf" "$reload_cmd" >/dev/null 2>&1 && fail "a reload with a broken file succeeded"
lnetctl export --backup >"$work/after.yaml"
cmp -s "$work/before.yaml" "$work/after.yaml" || fail "a failed reload changed the configuration"
# SIGHUP (a daemon started by hand) merges the file it started with, as the reload does.
printf '    - net: tcp7\n      gateway: 127.0.0.2@tcp\n' >>"$work/ok.conf"
kill -HUP "$mainpid"
for _ in $(seq 100); do
  lnetctl route show | grep -q "net: tcp7" && break
  sleep 0.1
done
lnetctl route show | grep -q "net: tcp7" || fail "SIGHUP added no route: $(tail -n 3 "$work/lnetd.err")"
grep -q "^<6>SIGHUP: $work/ok.conf merged" "$work/lnetd.err" || fail "SIGHUP: $(tail -n 3 "$work/lnetd.err")"
proxy_units
kill -TERM "$mainpid"
wait "$daemon" || fail "lnetd ended with status $? on SIGTERM"
daemon= mainpid=

log "remove: nothing but configuration left"
for p in "${pkgs[@]}"; do dpkg -L "$p"; done | sort -u >"$work/files"
dpkg-query -W -f='${Conffiles}\n' lnet-utils | awk 'NF {print $1}' >"$work/conffiles"
apt-get remove -y -qq "${pkgs[@]}" >"$work/apt.log" 2>&1 || fail "apt-get remove: $(tail -n 20 "$work/apt.log")"
while read -r f; do
  [ -d "$f" ] && continue  # directories others share (/usr/bin, ...)
  [ -e "$f" ] || [ -L "$f" ] || continue
  grep -qxF "$f" "$work/conffiles" || fail "$f is left after remove"
done <"$work/files"
[ -e /etc/lnet.conf ] || fail "remove took /etc/lnet.conf (configuration stays until purge)"
[ -d /run/lnet ] && fail "/run/lnet is left after remove"
dpkg --purge "${pkgs[@]}" >"$work/apt.log" 2>&1 || fail "dpkg --purge: $(tail -n 20 "$work/apt.log")"
[ -e /etc/lnet.conf ] && fail "purge left /etc/lnet.conf"
log "PASS"
