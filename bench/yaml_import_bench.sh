#!/usr/bin/env bash
# lnetctl import of a large configuration on a live lnetd (issue 16's target: 1 000 peers
# and 100 routes in under a second). One lnetd in a namespace with eth0 10.0.0.5/16 on
# tcp; the document: 1 000 peers of two NIDs each (10.0.a.b@tcp, 10.1.a.b@tcp1) and 100
# routes (tcp100..tcp199 through 10.0.0.1..10.0.0.4@tcp). Each round unconfigures, then
# times `lnetctl import` of it, `lnetctl export --backup` of the result, and, as the
# baseline in the same run, the import of a document of the same size that is only
# comments (the control socket and the YAML reader, nothing applied). Medians, ms.
#   bench/yaml_import_bench.sh [BUILD_DIR] [ROUNDS]   (build/default, 7)
# Needs root (network namespaces).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build/default}" && pwd)"
ROUNDS="${2:-7}"
export LNETD="$BUILD/lnetd/lnetd" LNETCTL="$BUILD/tools/lnetctl"
T_NAME=yaml_import_bench
. "$ROOT/tests/integration/lib.sh"
setup
new_ns A a
new_ns B b
link "$A" eth0 10.0.0.5/16 "$B" eth0 10.0.0.6/16
lnetd_start "$A" a "" --log-level=warn

doc="$T_DIR/big.yaml"
{
  printf 'net:\n    - net type: tcp\n      local NI(s):\n        - interfaces:\n              0: eth0\n'
  printf 'route:\n'
  for r in $(seq 100 199); do
    printf '    - net: tcp%d\n      gateway: 10.0.0.%d@tcp\n      hop: 1\n      priority: 0\n' "$r" $((r % 4 + 1))
  done
  printf 'peer:\n'
  for p in $(seq 0 999); do
    a=$((p / 250 + 1)) b=$((p % 250 + 1))
    printf '    - primary nid: 10.0.%d.%d@tcp\n      Multi-Rail: True\n      peer ni:\n' "$a" "$b"
    printf '        - nid: 10.0.%d.%d@tcp\n        - nid: 10.1.%d.%d@tcp1\n' "$a" "$b" "$a" "$b"
  done
} >"$doc"
sed 's/^/# /' "$doc" >"$T_DIR/comments.yaml"
echo "document: $(wc -l <"$doc") lines, $(wc -c <"$doc") bytes"

ms() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null; t1=$(date +%s%N); echo $(((t1 - t0) / 1000000)); }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
: >"$T_DIR/imp" >"$T_DIR/exp" >"$T_DIR/base"
for _ in $(seq "$ROUNDS"); do
  ctl a lnet unconfigure
  ms ctl a import "$T_DIR/comments.yaml" >>"$T_DIR/base"
  ms ctl a import "$doc" >>"$T_DIR/imp"
  ms ctl a export --backup >>"$T_DIR/exp"
done
ctl a export --backup >"$T_DIR/out.yaml"
peers=$(grep -c "primary nid" "$T_DIR/out.yaml")
routes=$(grep -c "gateway:" "$T_DIR/out.yaml")
[ "$peers" -ge 1000 ] && [ "$routes" -eq 100 ] || fail "the import made $peers peers and $routes routes"
imp=$(median <"$T_DIR/imp") exp=$(median <"$T_DIR/exp") base=$(median <"$T_DIR/base")
echo "rounds $ROUNDS; peers exported $peers (1000 + the 4 gateways), routes $routes"
echo "import (1000 peers, 100 routes): median $imp ms   (target < 1000 ms)"
echo "export --backup of it:           median $exp ms"
echo "baseline, same size of comments: median $base ms   import/baseline $(awk -v a="$imp" -v b="$base" 'BEGIN { printf "%.1f", a / (b ? b : 1) }')"
