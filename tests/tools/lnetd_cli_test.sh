#!/usr/bin/env bash
# lnetd's command line refuses what it cannot do, naming it, with status 2 (nothing
# starts): --log-target values, and stderr/journal without --foreground.
#   lnetd_cli_test.sh LNETD
set -uo pipefail
lnetd="$1"
fails=0
refused() {  # refused "TEXT" ARGS...: lnetd ARGS exits 2 and says TEXT
  local want=$1
  shift
  local out rc
  out=$("$lnetd" "$@" 2>&1)
  rc=$?
  if [ $rc != 2 ] || [[ $out != *"$want"* ]]; then
    echo "lnetd_cli_test: lnetd $* gave status $rc and '$out', expected 2 and '$want'" >&2
    fails=$((fails + 1))
  fi
}
refused "bad --log-target 'console' (stderr, syslog, journal)" -f --log-target console
refused "--log-target journal needs --foreground" --log-target journal
refused "--log-target stderr needs --foreground" --log-target stderr
refused "bad argument '--%original_token%': no argument may hold a %name%" -f "--%original_token%"
refused "bad argument '%value%'" -f --port "%value%"
"$lnetd" --help | grep -q -- "--log-target" || { echo "lnetd_cli_test: --help lists no --log-target" >&2; fails=$((fails + 1)); }
((fails == 0)) && echo "lnetd_cli_test: OK"
exit $((fails > 0))
