#!/usr/bin/env bash
# lnet-xfer's command line: --help and --version exit 0; what it cannot do is refused
# with status 2 and a message naming the bad option or value, before any network comes
# up (its modes run in tests/integration: two_nodes, routed, fault_rules, failover).
#   lnet_xfer_cli_test.sh LNET_XFER
set -uo pipefail
xfer="$1"
fails=0
refused() {  # refused "TEXT" ARGS...: lnet-xfer ARGS exits 2 and says TEXT
  local want=$1
  shift
  local out rc
  out=$(timeout 20 "$xfer" "$@" 2>&1)
  rc=$?
  if [ $rc != 2 ] || [[ $out != *"$want"* ]]; then
    echo "lnet_xfer_cli_test: lnet-xfer $* gave status $rc and '$out', expected 2 and '$want'" >&2
    fails=$((fails + 1))
  fi
}
out=$("$xfer" --help) || { echo "lnet_xfer_cli_test: --help failed" >&2; fails=$((fails + 1)); }
for word in serve ping put get check stream --sizes --depth --check --timeout; do
  [[ $out == *"$word"* ]] || { echo "lnet_xfer_cli_test: --help says nothing of $word" >&2; fails=$((fails + 1)); }
done
"$xfer" put --help >/dev/null || { echo "lnet_xfer_cli_test: put --help failed" >&2; fails=$((fails + 1)); }
"$xfer" --version | grep -q "^lnet-xfer " || { echo "lnet_xfer_cli_test: --version" >&2; fails=$((fails + 1)); }
refused "give a mode" 
refused "unknown mode 'push'" push --peer 1@mpi
refused "--buffer does not apply to put" put --peer 10.0.0.1@tcp --buffer 1M
refused "--depth does not apply to serve" serve --nid 10.0.0.1@tcp --depth 2
refused "put needs --peer" put --nid 10.0.0.2@tcp
refused "bad value '2M' for --sizes (0..1048576)" put --peer 10.0.0.1@tcp --sizes 4K,2M
refused "bad value '' for --sizes" put --peer 10.0.0.1@tcp --sizes 4K,
refused "bad value '-1' for --count" put --peer 10.0.0.1@tcp --count -1
refused "bad value '65' for --depth (1..64)" get --peer 10.0.0.1@tcp --depth 65
refused "bad value '0' for --count (1..1000000000)" put --peer 10.0.0.1@tcp --count 0
refused "bad value '64' for --portal" serve --nid 10.0.0.1@tcp --portal 64
refused "bad NID '10.0.0.300@tcp' for --peer" ping --peer 10.0.0.300@tcp
refused "bad --route 'tcp1' (NET@GATEWAY_NID" check --peer 10.0.0.1@tcp --route tcp1
refused "give --sizes or --size, not both" put --peer 10.0.0.1@tcp --size 4K --sizes 8
refused "unrecognised option '--bogus'" serve --bogus
refused "no network: give --nid NID or set LNET_NETWORKS" ping --peer 10.0.0.1@tcp
# Boost's error messages would fill in a %placeholder% held by the argument forever.
refused "bad argument '--%original_token%': no argument may hold a %name%" ping "--%original_token%"
# An o2ib NID that is no RDMA port's address (none here, or not this one): status 1, with
# the driver's reason.
out=$(timeout 20 "$xfer" ping --nid 10.9.9.9@o2ib --peer 10.9.9.8@o2ib 2>&1)
rc=$?
if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
  want="cannot start network o2ib: no RDMA device on this machine"
else
  want="cannot start network o2ib: "
fi
if [ $rc != 1 ] || [[ $out != *"$want"* ]]; then
  echo "lnet_xfer_cli_test: an o2ib NID without its RDMA port gave status $rc and '$out'" >&2
  fails=$((fails + 1))
fi
((fails == 0)) && echo "lnet_xfer_cli_test: OK"
exit $((fails > 0))
