#!/usr/bin/env bash
# lnetctl as Lustre's LNet test suite runs it: tests/data/lnetctl/sanity_shaped.sh (tests
# written in the shape of sanity-lnet.sh's) runs unchanged in a node's namespace against
# its lnetd, with a second ("fake") interface, and a host name that resolves to the
# node's address (test 305). YAML files are compared as the suite compares them: as
# data, not as text.
. "$(dirname "$0")/lib.sh"
setup
command -v python3 >/dev/null && python3 -c 'import yaml' 2>/dev/null || fail "needs python3-yaml (scripts/setup.sh)"
new_ns A a
new_ns B b
link "$A" eth0 10.85.1.1/24 "$B" eth0 10.85.1.2/24
link "$A" test1pg 10.85.2.1/24 "$B" test1pl 10.85.2.2/24
lnetd_start "$A" a ""
# ip netns exec puts /etc/netns/NAME/hosts over /etc/hosts for the commands it runs.
mkdir -p "/etc/netns/$A"
T_AT_EXIT+=("rm -rf /etc/netns/$A")
echo "10.85.1.1 $(hostname -s)" >"/etc/netns/$A/hosts"

cat >"$T_DIR/lnetctl" <<W
#!/bin/sh
exec "$LNETCTL" --socket "$T_DIR/a.sock" "\$@"
W
chmod +x "$T_DIR/lnetctl"
cat >"$T_DIR/yaml_compare" <<'W'
#!/usr/bin/env python3
# The same YAML as data: mappings by key, sequences in order (as verify_compare_yaml).
import sys, yaml
a, b = (yaml.safe_load(open(f)) for f in sys.argv[1:3])
if a != b:
    print("YAML differs:\n--- %s\n%s\n--- %s\n%s" % (sys.argv[1], open(sys.argv[1]).read(), sys.argv[2], open(sys.argv[2]).read()))
    sys.exit(1)
W
chmod +x "$T_DIR/yaml_compare"
mkdir -p "$T_DIR/tmp"
log "running tests/data/lnetctl/sanity_shaped.sh in node A"
ip netns exec "$A" env LNETCTL="$T_DIR/lnetctl" LNETCTL_BIN="$LNETCTL" TMP="$T_DIR/tmp" PATH="$T_DIR:$PATH" \
  INTERFACES_LIST="eth0" FAKE_IF=test1pg timeout 150 \
  bash -c 'INTERFACES=($INTERFACES_LIST); yaml_compare() { "'"$T_DIR"'/yaml_compare" "$@"; }; . "$0"' \
  "$(dirname "$0")/../data/lnetctl/sanity_shaped.sh" 2>&1 | tee "$T_DIR/run.log"
grep -q "^ALL PASSED$" "$T_DIR/run.log" || fail "the script did not pass: $(grep FAIL "$T_DIR/run.log")"
log "ok"
