#!/usr/bin/env bash
# lnetctl import/export against live daemons: the example document of the reference
# facts (a real lnetctl export: nets, routes, peers, UDSP rules, global tunables)
# imports into A as it is; export --backup, import into B, export --backup again gives
# the same document; a bad document names its fault and line and applies nothing; lnet
# unconfigure takes the nets down and lnet configure --all succeeds.
. "$(dirname "$0")/lib.sh"
setup
HERE="$(cd "$(dirname "$0")" && pwd)"
new_ns A a
new_ns B b
link "$A" eth1 10.9.0.5/24 "$B" eth1 10.9.0.6/24
lnetd_start "$A" a ""
lnetd_start "$B" b ""

log "import the facts example (as the kernel's lnetctl exports it) into A"
cp "$HERE/facts_example.yaml" "$T_DIR/example.yaml"
ctl a import "$T_DIR/example.yaml" || fail "import of the example"
ctl a export --backup >"$T_DIR/e1.yaml"
cat "$T_DIR/e1.yaml"
for want in "net type: tcp" "0: eth1" "net: tcp7" "gateway: 10.9.0.1@tcp" "primary nid: 10.9.0.42@tcp" \
  "nid: 10.10.0.42@tcp1" "src: tcp1"; do
  grep -q "$want" "$T_DIR/e1.yaml" || fail "export lacks '$want'"
done
ctl a net show | grep -q "nid: 10.9.0.5@tcp" || fail "the tcp NI on eth1 is not up"

log "export --backup | import on B | export --backup"
ctl b import - <"$T_DIR/e1.yaml" || fail "import into B"
ctl b export --backup >"$T_DIR/e2.yaml"
diff -u "$T_DIR/e1.yaml" "$T_DIR/e2.yaml" || fail "the round trip changed the document"

log "a bad document applies nothing"
printf 'route:\n    - net: tcp9\n      gateway: 10.9.0.1@tcp\n    - net: tcp8\n      gateway: 10.9.0.1@tcp\n      hop: 900\n' >"$T_DIR/bad.yaml"
if ctl b import "$T_DIR/bad.yaml" 2>"$T_DIR/bad.out"; then fail "a bad import succeeded"; fi
cat "$T_DIR/bad.out"
grep -q "'hop' 900" "$T_DIR/bad.out" || fail "the error does not name the bad hop"
grep -q "line 6" "$T_DIR/bad.out" || fail "the error does not name the line"
ctl b export --backup | diff -u "$T_DIR/e2.yaml" - || fail "the failed import changed the configuration"

log "unconfigure and configure"
ctl b lnet unconfigure || fail "unconfigure"
ctl b net show | grep -q "tcp" && fail "tcp still up after unconfigure"
ctl b lnet configure --all || fail "configure"
log "PASS"
