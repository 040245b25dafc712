#!/usr/bin/env bash
# The YAML corpus (tests/data/yaml) against a live lnetd with eth0, eth1, eth2: every
# valid document imports into an unconfigured daemon, and export --backup, import into a
# clean one, export --backup again gives the same document (gateway peers of routes
# included); every invalid one is refused with its error and leaves the configuration as
# it was. Then import --exec runs a ping section, and a plain import says it did not.
. "$(dirname "$0")/lib.sh"
setup
CORPUS="$(cd "$(dirname "$0")/../data/yaml" && pwd)"
new_ns A a
new_ns B b
link "$A" eth0 10.0.0.5/24 "$B" eth0 10.0.0.6/24
link "$A" eth1 10.1.0.5/24 "$B" eth1 10.1.0.6/24
link "$A" eth2 10.2.0.5/24 "$B" eth2 10.2.0.6/24
# Two CPTs: the corpus puts NIs on one of them or on both.
export LNET_CPT_NUMBER=2
lnetd_start "$A" a ""
lnetd_start "$B" b "$(printf 'net:\n    - net type: tcp\n      local NI(s):\n        - interfaces:\n              0: eth0\n')"

clean() {
  ctl a lnet unconfigure || fail "unconfigure"
  ctl a import - <<<"global: {discovery: 1, retry_count: 2, transaction_timeout: 150, numa_range: 0, max_interfaces: 4096}" ||
    fail "reset the globals"
}

n=0
for doc in "$CORPUS"/valid/*.yaml; do
  name="$(basename "$doc" .yaml)"
  log "valid: $name"
  clean
  ctl a import "$doc" 2>"$T_DIR/$name.err" || fail "$name was refused: $(cat "$T_DIR/$name.err")"
  ctl a export --backup >"$T_DIR/$name.e1" || fail "export after $name"
  clean
  ctl a import "$T_DIR/$name.e1" 2>"$T_DIR/$name.err2" || fail "the export of $name was refused: $(cat "$T_DIR/$name.err2")"
  [ -s "$T_DIR/$name.err2" ] && fail "the export of $name imports with warnings: $(cat "$T_DIR/$name.err2")"
  ctl a export --backup >"$T_DIR/$name.e2"
  diff -u "$T_DIR/$name.e1" "$T_DIR/$name.e2" || fail "$name: export -> import -> export changed the document"
  n=$((n + 1))
done
log "$n valid documents imported and round-tripped"

log "routes bring their gateways as peers, and those round-trip"
grep -q "primary nid: 10.0.0.1@tcp" "$T_DIR/export_full.e1" || fail "the gateway of tcp7 is not among the peers"
grep -A1 "primary nid: 10.0.0.1@tcp" "$T_DIR/duplicate_sections.e1" | grep -q "Multi-Rail" ||
  fail "the gateway of the routes is not exported as a peer"

clean
ctl a import "$CORPUS/valid/manual_basic.yaml" || fail "base configuration"
ctl a export --backup >"$T_DIR/base.yaml"
n=0
for doc in "$CORPUS"/invalid/*.yaml; do
  name="$(basename "$doc" .yaml)"
  want="$(cat "${doc%.yaml}.error")"
  if ctl a import "$doc" 2>"$T_DIR/$name.err"; then fail "invalid $name was accepted"; fi
  grep -qF -- "$want" "$T_DIR/$name.err" || fail "$name: the error does not say '$want': $(cat "$T_DIR/$name.err")"
  ctl a export --backup | diff -u "$T_DIR/base.yaml" - || fail "invalid $name changed the configuration"
  n=$((n + 1))
done
log "$n invalid documents refused, nothing applied"

log "import --exec runs the ping section; a plain import does not"
clean
ctl a import "$CORPUS/valid/exec_sections.yaml" 2>"$T_DIR/exec.err" || fail "plain import of exec_sections"
grep -q "run with import --exec" "$T_DIR/exec.err" || fail "no warning that ping/discover did not run"
ctl a import --exec "$CORPUS/valid/exec_sections.yaml" >"$T_DIR/exec.out" 2>&1 || fail "import --exec: $(cat "$T_DIR/exec.out")"
cat "$T_DIR/exec.out"
grep -q "^ping:" "$T_DIR/exec.out" || fail "import --exec printed no ping"
grep -q "primary nid: 10.0.0.5@tcp" "$T_DIR/exec.out" || fail "the ping did not answer"
grep -q "^discover:" "$T_DIR/exec.out" || fail "import --exec printed no discover"
grep -q "primary nid: 10.0.0.6@tcp" "$T_DIR/exec.out" || fail "the discovery of b did not answer"

log "net add --ip2net picks the interfaces by address"
clean
ctl a net add --ip2net "tcp1(eth1) 10.1.0.*; tcp2 192.0.2.*" || fail "net add --ip2net"
ctl a net show | grep -q "nid: 10.1.0.5@tcp1" || fail "no tcp1 NI on eth1"
ctl a net show | grep -q "tcp2" && fail "tcp2 came up though no address matches"
if ctl a net add --ip2net "tcp3 192.0.2.*" 2>"$T_DIR/ip2.err"; then fail "an ip2net that matches nothing was accepted"; fi
grep -q "does not match any local IP interface" "$T_DIR/ip2.err" || fail "ip2net error: $(cat "$T_DIR/ip2.err")"

log "net set --lnd-timeout and --conns-per-peer"
ctl a net set --net tcp1 --lnd-timeout 7 || fail "net set --lnd-timeout"
ctl a net show -v --net tcp1 | grep -q "timeout: 7$" || fail "the tcp1 NI does not run with the timeout set: $(ctl a net show -v)"
ctl a net set --net tcp1 --lnd-timeout 0 || fail "net set --lnd-timeout 0"
ctl a net show -v --net tcp1 | grep -q "timeout: 49$" || fail "--lnd-timeout 0 is not LNet's lnd_timeout"
if ctl a net set --lnd-timeout 7 2>"$T_DIR/lt.err"; then fail "--lnd-timeout without --net was accepted"; fi
grep -q "without --net" "$T_DIR/lt.err" || fail "lnd-timeout error: $(cat "$T_DIR/lt.err")"
ctl a net set --net tcp1 --conns-per-peer 1 || fail "net set --conns-per-peer 1"
ctl a net set --net tcp1 --conns-per-peer 4 || fail "net set --conns-per-peer 4"
ctl a net show -v --net tcp1 | grep -q "conns_per_peer: 4$" || fail "conns_per_peer 4 not in effect: $(ctl a net show -v)"
# 0: the count computed from eth1's speed (a veth: 10000 Mb/s, ilog2(10) / 2 + 1 = 2).
ctl a net set --net tcp1 --conns-per-peer 0 || fail "net set --conns-per-peer 0"
ctl a net show -v --net tcp1 | grep -q "conns_per_peer: 2$" || fail "automatic conns_per_peer on a veth: $(ctl a net show -v)"
if ctl a net set --net tcp1 --conns-per-peer 128 2>"$T_DIR/cpp.err"; then fail "conns_per_peer 128 was accepted"; fi
grep -q "valid range 0-127" "$T_DIR/cpp.err" || fail "cpp range error: $(cat "$T_DIR/cpp.err")"

log "export shows the timeout the driver runs with, also for an NI whose interface it chose"
clean
ctl a import - <<<"$(printf 'net:\n    - net type: tcp\n')" || fail "import of a tcp net without interfaces"
ctl a export | grep -q "timeout: 50$" || fail "export does not show the driver's timeout: $(ctl a export)"
ctl a export --backup | grep -q "^ *timeout:" && fail "export --backup shows the read-only timeout"

log "NIs on some CPTs: shown, exported, a CPT lnetd lacks refused"
clean
ctl a import "$CORPUS/valid/nis_on_some_cpts.yaml" || fail "import of NIs on some CPTs"
ctl a net show --net tcp -v | tee "$T_DIR/cpt_show.out"
grep -q 'CPT: "\[1\]"' "$T_DIR/cpt_show.out" || fail "tcp on eth0 is not shown on CPT 1"
[ "$(ctl a net show --net tcp1 -v | grep -c 'CPT: ')" = 2 ] || fail "tcp1 does not show two CPT lists"
ctl a net show --net tcp1 -v | grep -q 'CPT: "\[0,1\]"' || fail "tcp1 on eth2 is not shown on both CPTs"
ctl a net add --net tcp3 --if eth1 --cpt 1 || fail "net add --cpt 1"
ctl a net show --net tcp3 -v | grep -q 'CPT: "\[1\]"' || fail "net add --cpt 1 did not put the NI on CPT 1"
# lnetctl export --backup lists the CPTs of every NI, all of them too.
ctl a export --backup | grep -c 'CPT: ' | grep -qx 4 || fail "export does not list the CPTs of the four NIs"
ctl a export --backup | grep -q 'CPT: "\[0,1\]"' || fail "export does not list tcp1 on eth2 on both CPTs"
if ctl a net add --net tcp4 --if eth2 --cpt "[0,2]" 2>"$T_DIR/cpt.err"; then fail "CPT 2 of 2 accepted"; fi
grep -q "CPT 2 of tcp4 is not one of the 2 CPTs" "$T_DIR/cpt.err" || fail "CPT 2 error: $(cat "$T_DIR/cpt.err")"

log "cpt-of-nid, peer add with ranges"
ctl a cpt-of-nid 10.0.0.5@tcp 10.0.0.6@tcp 0x10@gni | tee "$T_DIR/cpt.out"
grep -q "nid: 16@gni" "$T_DIR/cpt.out" || fail "cpt-of-nid did not normalise the NID"
# LNet's hash: the NID's bytes summed (10+5 and tcp's 2: 17; 18), modulo the 2 CPTs.
[ "$(grep -o "cpt: [0-9]*" "$T_DIR/cpt.out" | head -2 | tr '\n' ' ')" = "cpt: 1 cpt: 0 " ] ||
  fail "cpt-of-nid: 10.0.0.5@tcp is on CPT 1, 10.0.0.6@tcp on CPT 0"
ctl a peer add --prim_nid 10.0.0.40@tcp --nid "10.0.0.[41-42]@tcp,10.1.0.[40,44]@tcp1" || fail "peer add with ranges"
ctl a peer show --nid 10.0.0.40@tcp | tee "$T_DIR/peer.out"
for nid in 10.0.0.41@tcp 10.0.0.42@tcp 10.1.0.40@tcp1 10.1.0.44@tcp1; do
  grep -q "nid: $nid" "$T_DIR/peer.out" || fail "peer add did not add $nid"
done
if ctl a peer add --prim_nid 10.0.0.50@tcp --nid "10.0.0.*@tcp" 2>"$T_DIR/star.err"; then fail "'*' accepted in a peer list"; fi
grep -q "'\*' names no NIDs" "$T_DIR/star.err" || fail "star error: $(cat "$T_DIR/star.err")"
log "hostile sizes: a document beyond a request, more peers than a document may name"
ctl a export --backup >"$T_DIR/before.yaml"
awk 'BEGIN { print "peer:"; for (i = 1; i <= 1000000; i++) printf "- primary nid: %d@gni\n", i }' >"$T_DIR/million.yaml"
if ctl a import "$T_DIR/million.yaml" 2>"$T_DIR/million.err"; then fail "a 26 MB document was accepted"; fi
grep -q "more than a request may carry" "$T_DIR/million.err" || fail "million peers: $(cat "$T_DIR/million.err")"
head -n 100002 "$T_DIR/million.yaml" >"$T_DIR/many.yaml"
if ctl a import "$T_DIR/many.yaml" 2>"$T_DIR/many.err"; then fail "100 001 peers were accepted"; fi
grep -q "more than 100000 peers in one document (line 100002)" "$T_DIR/many.err" || fail "many peers: $(cat "$T_DIR/many.err")"
ctl a export --backup | diff -u "$T_DIR/before.yaml" - || fail "a refused document changed the configuration"
ctl a net show >/dev/null || fail "lnetd does not answer after the hostile documents"
log "PASS"
