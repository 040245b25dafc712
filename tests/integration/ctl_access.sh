#!/usr/bin/env bash
# Who may use lnetd's control socket (issue 52): its mode follows the groups given (0600
# root only, 0660 with --ctl-group, 0666 with --ctl-read-group, SO_PEERCRED deciding);
# a user in neither group is refused; a member of the read group may run the commands
# that only show and is refused the others; a member of the control group may run every
# command, also when it is in more than 64 groups. lnetctl runs as nobody with the groups
# given (setpriv), so no account or group needs to exist.
. "$(dirname "$0")/lib.sh"
setup
command -v setpriv >/dev/null || { echo "[$T_NAME] SKIP: no setpriv (util-linux)"; exit 77; }
new_ns A a
new_ns B b
link "$A" eth0 10.80.9.1/24 "$B" eth0 10.80.9.2/24
CTL=4242
READ=4243
lnetd_start "$A" a "$(tcp_cfg eth0)" --ctl-group $CTL --ctl-read-group $READ
lnetd_start "$B" b "$(tcp_cfg eth0)" --ctl-group $CTL
lnetd_start "$B" c "" --log-level=info
chmod 755 "$T_DIR"
cp "$LNETCTL" "$T_DIR/lnetctl"  # wherever the build is, nobody can run this copy
chmod 755 "$T_DIR/lnetctl"

[ "$(stat -c %a "$T_DIR/a.sock")" = 666 ] || fail "with a read group the socket is $(stat -c %a "$T_DIR/a.sock"), not 666"
[ "$(stat -c %a:%g "$T_DIR/b.sock")" = "660:$CTL" ] || fail "with a control group: $(stat -c %a:%g "$T_DIR/b.sock")"
[ "$(stat -c %a "$T_DIR/c.sock")" = 600 ] || fail "without groups the socket is $(stat -c %a "$T_DIR/c.sock")"

# as GROUPS SOCKET args...: lnetctl as nobody in GROUPS (comma-separated gids)
as() {
  local groups=$1 sock=$2
  shift 2
  timeout 60 setpriv --reuid=65534 --regid=65534 --groups="$groups" "$T_DIR/lnetctl" --socket "$T_DIR/$sock.sock" "$@"
}

log "a user in neither group is refused"
if out=$(as 65534 a net show 2>&1); then fail "nobody ran net show: $out"; fi
grep -q "permission denied" <<<"$out" || fail "no clear refusal: $out"
grep -q "refused a control connection from uid 65534" "$T_DIR/a.log" || fail "the refusal was not logged"

log "the read group may show"
out=$(as $READ a net show) || fail "the read group cannot run net show: $out"
grep -q "10.80.9.1@tcp" <<<"$out" || fail "net show as the read group: $out"
as $READ a stats show >/dev/null || fail "the read group cannot run stats show"
as $READ a export >/dev/null || fail "the read group cannot run export"
as $READ a peer show >/dev/null || fail "the read group cannot run peer show"

log "the read group may not change, ping or drive lst"
before=$(ctl a global show | grep transaction_timeout)
for cmd in "set transaction_timeout 55" "net del --net tcp" "ping 10.80.9.2@tcp" "stats reset"; do
  # shellcheck disable=SC2086
  if out=$(as $READ a $cmd 2>&1); then fail "the read group ran '$cmd': $out"; fi
  grep -q "may only show" <<<"$out" || fail "'$cmd' refused without saying why: $out"
done
if [ -n "${LST:-}" ]; then
  cp "$LST" "$T_DIR/lst"
  chmod 755 "$T_DIR/lst"
  if out=$(LST_SESSION=$$ LNET_CTL_SOCKET="$T_DIR/a.sock" timeout 60 setpriv --reuid=65534 --regid=65534 --groups=$READ \
    "$T_DIR/lst" new_session --timeout 30 s 2>&1); then fail "the read group opened an lst session: $out"; fi
  grep -q "may only show" <<<"$out" || fail "lst refused without saying why: $out"
fi
[ "$(ctl a global show | grep transaction_timeout)" = "$before" ] || fail "the read group changed something: $(ctl a global show)"

log "the control group may do everything, also in more than 64 groups"
as $CTL a set transaction_timeout 55 || fail "the control group cannot change the configuration"
ctl a global show | grep -q "transaction_timeout: 55" || fail "the change did not take: $(ctl a global show)"
many="$(seq -s, 5000 5099),$CTL"
as "$many" b ping 10.80.9.1@tcp >/dev/null || fail "a member of 101 groups was refused"
if as "$(seq -s, 5000 5099)" b net show >/dev/null 2>&1; then fail "101 groups without the control group got in"; fi
log "PASS"
