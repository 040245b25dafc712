#!/bin/bash
# lnetctl as Lustre's LNet test suite drives it, on one node: each test below is written
# in the shape of the suite's own (sanity-lnet.sh: its commands, options, file layouts
# and the way it reads the output), from lnetctl(8) and the Lustre manual. Nothing here
# knows it is not the kernel's lnetctl.
#
# The caller gives: LNETCTL (lnetctl for this node), INTERFACES (the node's interfaces,
# the first one up with an IPv4 address), FAKE_IF (a second interface, up), TMP (a
# scratch directory), and yaml_compare (FILE FILE: the same YAML, as the suite's
# verify_compare_yaml decides it).
set -e
NETTYPE=tcp
testnum=""
error() { echo "FAIL test $testnum: $*" >&2; exit 1; }
do_lnetctl() { echo "$LNETCTL $*"; $LNETCTL "$@"; }
run_test() { testnum=$1; echo "== test $1: $2"; "test_$1"; }

GLOBAL_YAML_FILE=$TMP/sanity-lnet-global.yaml
reinit_dlc() {
	do_lnetctl lnet unconfigure || error "lnetctl lnet unconfigure failed $?"
	do_lnetctl lnet configure || error "lnetctl lnet configure failed $?"
	$LNETCTL export --backup &>${GLOBAL_YAML_FILE} || error "Failed to export global yaml $?"
}
append_global_yaml() { cat ${GLOBAL_YAML_FILE} >> $TMP/sanity-lnet-$testnum-expected.yaml; }
compare_yaml_files() {
	yaml_compare $TMP/sanity-lnet-$testnum-actual.yaml $TMP/sanity-lnet-$testnum-expected.yaml
}
add_net() { do_lnetctl net add --net $1 --if $2 || error "Failed to add net $1 on if $2"; }

test_0() {
	reinit_dlc
	do_lnetctl import < ${GLOBAL_YAML_FILE} || error "Import failed $?"
	$LNETCTL export --backup > $TMP/sanity-lnet-$testnum-actual.yaml
	rm -f $TMP/sanity-lnet-$testnum-expected.yaml
	append_global_yaml
	compare_yaml_files || error "Configuration changed after import"
}
run_test 0 "Export empty config, import the config, compare"

test_16() {
	reinit_dlc
	cat <<EOF > $TMP/sanity-lnet-$testnum-expected.yaml
peer:
    - primary nid: 1.1.1.1@tcp
      Multi-Rail: True
      peer ni:
        - nid: 1.1.1.1@tcp
        - nid: 2.2.2.2@tcp
        - nid: 3.3.3.3@tcp
EOF
	do_lnetctl import < $TMP/sanity-lnet-$testnum-expected.yaml || error "Import failed $?"
	do_lnetctl import --del < $TMP/sanity-lnet-$testnum-expected.yaml || error "Import failed $?"
	rm -f $TMP/sanity-lnet-$testnum-expected.yaml
	append_global_yaml
	$LNETCTL export --backup > $TMP/sanity-lnet-$testnum-actual.yaml
	compare_yaml_files || error "the peer is still there"
}
run_test 16 "import peer create/delete with multiple nids"

test_27() {
	reinit_dlc
	local tmp=$TMP/t27.yaml
	echo "foobar:" > $tmp
	do_lnetctl import $tmp 2>&1 | grep -q "invalid key" || error "Expected import to detect invalid key"
	cat ${GLOBAL_YAML_FILE} > $tmp
	sed -i 's/discovery:.*/discovery:/' $tmp
	do_lnetctl import $tmp 2>&1 | grep -q "no value" || error "Expected import to detect missing value"
	sed -i 's/discovery:/discovery: foo/' $tmp
	do_lnetctl import $tmp 2>&1 | grep -q "invalid value" || error "Expected import to detect invalid value"
}
run_test 27 "Import bad config should fail gracefully"

IF0_IP=$(ip -o -4 a s ${INTERFACES[0]} | awk '{print $4}' | sed 's/\/.*//' | head -n 1)
IF0_NET=$(awk -F. '{print $1"."$2"."$3}' <<<"${IF0_IP}")
GW_HOSTNUM=$(($(awk -F. '{print $4}' <<<"${IF0_IP}") + 1))
test_101() {
	reinit_dlc
	add_net tcp ${INTERFACES[0]}
	local gw="${IF0_NET}.[$GW_HOSTNUM-$((GW_HOSTNUM + 4))]@${NETTYPE}"
	do_lnetctl route add --net tcp1 --gateway ${gw} || error "route add failed $?"
	$LNETCTL export --backup > $TMP/sanity-lnet-$testnum-actual.yaml
	local n=$(grep -c -- 'gateway:' $TMP/sanity-lnet-$testnum-actual.yaml)
	((n == 5)) || error "Expected 5 gateways but found $n"
	grep -q "health_sensitivity: 1" $TMP/sanity-lnet-$testnum-actual.yaml || error "no route health_sensitivity"
	do_lnetctl route del --net tcp1 --gateway ${gw} || error "route del failed $?"
	(($($LNETCTL export --backup | grep -c -- 'gateway:') == 0)) || error "routes left"
}
run_test 101 "Add route with multiple gw"

test_103() {
	reinit_dlc
	add_net tcp ${INTERFACES[0]}
	local nid_expr="${IF0_NET}.[$GW_HOSTNUM-$((GW_HOSTNUM+5))/2]"
	do_lnetctl route add --net ${NETTYPE}103 --gateway ${nid_expr}@${NETTYPE} || error "route add failed $?"
	(($($LNETCTL route show | grep -c gateway) == 3)) || error "not 3 routes"
	do_lnetctl route del --net ${NETTYPE}103 --gateway ${nid_expr}@${NETTYPE} || error "route del failed $?"
}
run_test 103 "Delete route with multiple gw"

test_108() {
	reinit_dlc
	add_net tcp ${INTERFACES[0]}
	$LNETCTL net show > $TMP/sanity-lnet-$testnum-expected.yaml
	add_net tcp $FAKE_IF
	local fake_nid=$(ip -o -4 a s $FAKE_IF | awk '{print $4}' | sed 's/\/.*//')@tcp
	cat <<EOF >> $TMP/sanity-lnet-$testnum-expected.yaml
      -     nid: $fake_nid
            status: up
            interfaces:
                  0: ${FAKE_IF}
EOF
	$LNETCTL net show > $TMP/sanity-lnet-$testnum-actual.yaml
	compare_yaml_files || error "not all interfaces were setup"
}
run_test 108 "Check Multi-Rail setup"

test_110() {
	reinit_dlc
	add_net ${NETTYPE} ${INTERFACES[0]}
	local nid=${IF0_IP}@tcp
	reinit_dlc
	do_lnetctl net add --nid $nid || error "Failed to add net via nid \"$nid\""
	$LNETCTL net show --net $NETTYPE | grep -q "nid: $nid" || error "Failed to configure $nid"
	do_lnetctl net del --nid $nid || error "Failed to del net via nid \"$nid\""
	$LNETCTL net show | grep -q "nid: $nid" && error "$nid should have been deleted"
	return 0
}
run_test 110 "Configure NI using lnetctl net add --nid"

test_215_like() {
	reinit_dlc
	add_net "${NETTYPE}1" "${INTERFACES[0]}"
	add_net "${NETTYPE}2" "${INTERFACES[0]}"
	$LNETCTL net show | grep -q "nid: ${IF0_IP}@tcp2" || error "no tcp2 NI on ${INTERFACES[0]}"
}
run_test 215_like "Two nets on one interface"

test_219() {
	reinit_dlc
	add_net "${NETTYPE}" "${INTERFACES[0]}"
	add_net "${NETTYPE}1" "${INTERFACES[0]}"
	local nid1=${IF0_IP}@tcp nid2=${IF0_IP}@tcp1
	do_lnetctl ping $nid1 || error "Ping failed $?"
	do_lnetctl ping $nid2 || error "Ping failed $?"
	do_lnetctl discover $nid2 || error "Discovery failed"
	$LNETCTL peer show --nid $nid1 | grep -q $nid2 || error "$nid2 is not listed under $nid1"
}
run_test 219 "Consolidate peer entries"

test_217() {
	reinit_dlc
	do_lnetctl discover 0@lo || error "Failed to discover 0@lo"
}
run_test 217 "Don't leak memory when discovering peer with nnis <= 1"

test_231() {
	reinit_dlc
	local net=${NETTYPE}231
	local opts="--net $net --if ${INTERFACES[0]}"
	do_lnetctl net add $opts || error "Failed to add net"
	$LNETCTL export --backup > $TMP/sanity-lnet-$testnum-expected.yaml
	for pto in -1 0 60 180; do
		reinit_dlc
		sed -i 's/peer_timeout: .*/peer_timeout: '$pto'/' $TMP/sanity-lnet-$testnum-expected.yaml
		do_lnetctl import $TMP/sanity-lnet-$testnum-expected.yaml || error "Failed to import configuration"
		$LNETCTL export --backup > $TMP/sanity-lnet-$testnum-actual.yaml
		((pto != -1)) || sed -i 's/peer_timeout: '$pto'/peer_timeout: 180/' $TMP/sanity-lnet-$testnum-expected.yaml
		compare_yaml_files || error "Wrong config after import"
		do_lnetctl net del $opts || error "Failed to delete net $net"
		do_lnetctl net add $opts --peer-timeout=$pto || error "Failed to add net with peer-timeout=$pto"
		$LNETCTL export --backup > $TMP/sanity-lnet-$testnum-actual.yaml
		compare_yaml_files || error "Wrong config after lnetctl net add"
	done
}
run_test 231 "Check DLC handling of peer_timeout parameter"

test_241() {
	reinit_dlc
	do_lnetctl net add --net ${NETTYPE} --if ${INTERFACES[0]} || error "Failed to add net"
	do_lnetctl net set -h | grep -q -- "--lnd-timeout:" || error "net set -h does not offer --lnd-timeout"
	local global_lnd_to=$($LNETCTL global show -v | awk '/lnd_timeout:/{print $NF}')
	[[ -n $global_lnd_to ]] || error "global show -v has no lnd_timeout"
}
run_test 241 "net set -h and global show -v"

test_301() {
	reinit_dlc
	do_lnetctl net add --net ${NETTYPE} --if ${INTERFACES[0]} || error "Failed to add net"
	do_lnetctl net add --net ${NETTYPE} --if ${INTERFACES[0]} && error "add net should have failed"
	do_lnetctl net del --net ${NETTYPE} --if ${INTERFACES[0]} || error "Failed to del net"
}
run_test 301 "Check for dynamic adds of same/wrong interface"

test_302() {
	reinit_dlc
	add_net "${NETTYPE}" "${INTERFACES[0]}"
	local nid=${IF0_IP}@tcp
	do_lnetctl ping ${nid} || error "pinging self failed $?"
	do_lnetctl debug peer --nid ${nid} || error "failed to dump peer debug info $?"
}
run_test 302 "Check that peer debug info can be dumped"

test_304() {
	reinit_dlc
	add_net "tcp" "${INTERFACES[0]}"
	add_net "tcp" "$FAKE_IF"
	local nid1=${IF0_IP}@tcp
	local nid2=$(ip -o -4 a s $FAKE_IF | awk '{print $4}' | sed 's/\/.*//')@tcp
	do_lnetctl peer add --prim_nid ${nid2} --lock_prim || error "peer add failed $?"
	local state=$($LNETCTL peer show -v 4 --nid ${nid2} | awk '/peer state/{print $NF}')
	(( state == 1048585 )) || error "Wrong peer state \"$state\" expected 1048585"
	do_lnetctl peer set --nid ${nid2} --state 1048577 || error "peer set failed $?"
	do_lnetctl discover ${nid1} || error "Failed to discover peer"
	cat <<EOF > $TMP/sanity-lnet-$testnum-expected.yaml
peer:
    - primary nid: ${nid2}
      Multi-Rail: True
      peer ni:
        - nid: ${nid1}
          state: NA
        - nid: ${nid2}
          state: NA
EOF
	$LNETCTL peer show > $TMP/sanity-lnet-$testnum-actual.yaml
	compare_yaml_files || error "Unexpected peer configuration"
	state=$($LNETCTL peer show -v 4 --nid ${nid2} | awk '/peer state/{print $NF}')
	(( state == 1048849 )) || error "Wrong peer state \"$state\" expected 1048849"
}
run_test 304 "Check locked primary peer nid consolidation"

test_305() {
	reinit_dlc
	add_net "${NETTYPE}" "${INTERFACES[0]}"
	local nid="$(hostname -s)@${NETTYPE}"
	[[ "$(getent ahostsv4 $(hostname -s) | awk '{print $1; exit}')" == "$IF0_IP" ]] || {
		echo "skip: $(hostname -s) is not $IF0_IP"; return 0; }
	do_lnetctl ping $nid || error "pinging own hostname $nid failed $?"
}
run_test 305 "Resolve hostname before lnetctl ping"

test_401() {
	reinit_dlc
	do_lnetctl net add --net ${NETTYPE} --if ${INTERFACES[0]} || error "Failed to add net"
	do_lnetctl udsp add --dst ${NETTYPE} --prio 1 || error "Failed to add peer net priority rule"
	do_lnetctl discover ${IF0_IP}@tcp || error "Failed to discover peer"
	local prios=$($LNETCTL peer show -v 5 | awk '/net priority:/{print $NF}' | sort -u | xargs)
	[[ $prios == 1 ]] || error "net priorities '$prios', expected 1"
	do_lnetctl udsp del --idx 0 || error "udsp del"
}
run_test 401 "Discover peer after adding peer net UDSP rule"

test_export_down() {
	local out
	out=$(LNET_CTL_SOCKET=$TMP/no-lnetd.sock $LNETCTL_BIN export) || error "export without LNet exits $?"
	[[ -z $out ]] || error "export without LNet printed: $out"
}
run_test export_down "export with LNet not running"
echo "ALL PASSED"
