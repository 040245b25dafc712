#!/usr/bin/env bash
# lst-plot: a CSV of lst stat --csv becomes a PNG; files that are not that CSV, and
# groups it does not have, are refused naming them.
set -euo pipefail
PLOT="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
hdr="time_s,group,nodes,failed,recv_rate_avg,recv_rate_min,recv_rate_max,send_rate_avg,send_rate_min,send_rate_max,recv_bw_avg,recv_bw_min,recv_bw_max,send_bw_avg,send_bw_min,send_bw_max,bw_unit"
{
  echo "$hdr"
  for t in 1 2 3; do
    echo "$t.0,clients,2,0,100,90,110,200,190,210,1.0,0.9,1.1,900.5,890,910,MiB/s"
    echo "$t.0,servers,4,0,50,45,55,25,20,30,450.2,440,460,0.5,0.4,0.6,MiB/s"
  done
} >"$dir/s.csv"
"$PLOT" --out "$dir/s.png" --title "test" "$dir/s.csv" >/dev/null || fail "plot"
[ "$(head -c 8 "$dir/s.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "not a PNG"
"$PLOT" --group servers --total "$dir/s.csv" >/dev/null || fail "one group, totals"
[ -s "$dir/s.png" ] || fail "default output name"
"$PLOT" - <"$dir/s.csv" --out "$dir/stdin.png" >/dev/null || fail "stdin"
echo "a,b,c" >"$dir/bad.csv"
if "$PLOT" "$dir/bad.csv" 2>"$dir/err"; then fail "a foreign CSV was plotted"; fi
grep -q "not the CSV of lst stat" "$dir/err" || fail "unclear: $(cat "$dir/err")"
if "$PLOT" --group nobody "$dir/s.csv" 2>"$dir/err"; then fail "a missing group was plotted"; fi
grep -q "no group 'nobody'" "$dir/err" || fail "unclear: $(cat "$dir/err")"
if "$PLOT" --bogus "$dir/s.csv" 2>"$dir/err"; then fail "a bad option was taken"; fi
grep -q "bogus" "$dir/err" || fail "unclear: $(cat "$dir/err")"
echo PASS
