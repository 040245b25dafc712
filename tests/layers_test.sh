#!/usr/bin/env bash
# The layers the build enforces (docs/design/overview.md): for each layer, a probe file
# compiled with that layer's own compile command (from compile_commands.json) must
# compile with an include the layer may use, and must fail with one it may not.
#   layers_test.sh BUILD_DIR
set -uo pipefail
build="$1"
db="$build/compile_commands.json"
[ -f "$db" ] || { echo "layers_test: no $db" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The compile command of one source file of a layer, with the source swapped for a probe.
command_for() {
  python3 - "$db" "$1" "$2" <<'EOF'
import json, shlex, sys
db, source, probe = sys.argv[1:]
for e in json.load(open(db)):
    if e["file"].endswith(source):
        args = shlex.split(e["command"])
        out = []
        skip = False
        for a in args:
            if skip:
                skip = False
                continue
            if a in ("-o", "-MF", "-MT"):
                skip = True
                continue
            if a in ("-c", e["file"]) or a.endswith(source) or a == "-MD":
                continue
            out.append(a)
        print(shlex.join(out + ["-fsyntax-only", "-c", probe]))
        sys.exit(0)
sys.exit(1)
EOF
}

fails=0
# check LAYER SOURCE_OF_THE_LAYER HEADER allowed|forbidden
check() {
  local layer="$1" source="$2" header="$3" want="$4"
  local probe="$work/probe.cpp" cmd
  printf '#include "%s"\n' "$header" >"$probe"
  cmd=$(command_for "$source" "$probe") || { echo "layers_test: $source is not in $db" >&2; fails=$((fails + 1)); return; }
  if (cd "$build" && eval "$cmd") >"$work/out" 2>&1; then
    got=allowed
  elif grep -qE "No such file or directory|file not found" "$work/out"; then  # gcc's words, clang's
    got=forbidden
  else
    got="broken (it failed for another reason)"
  fi
  if [ "$got" != "$want" ]; then
    echo "FAIL: $layer including \"$header\" is $got, should be $want"
    sed 's/^/    /' "$work/out" | head -5
    fails=$((fails + 1))
  else
    echo "ok: $layer including \"$header\": $got"
  fi
}

check base liblnet/src/base/nid.cpp base/cpt.hpp allowed
check base liblnet/src/base/nid.cpp portals/portal_table.hpp forbidden
check base liblnet/src/base/nid.cpp net/ni.hpp forbidden
check portals liblnet/src/portals/portal_table.cpp base/counters.hpp allowed
check portals liblnet/src/portals/portal_table.cpp core/core.hpp forbidden
check portals liblnet/src/portals/portal_table.cpp net/peer_table.hpp forbidden
check net liblnet/src/net/selection.cpp base/cpt.hpp allowed
check net liblnet/src/net/selection.cpp portals/delivery.hpp forbidden
check net liblnet/src/net/selection.cpp msg/message.hpp forbidden
check net liblnet/src/net/state.cpp msg/message.hpp forbidden
check msg liblnet/src/msg/message_pool.cpp portals/delivery.hpp allowed
check msg liblnet/src/msg/message_pool.cpp peer/discovery.hpp forbidden
check msg liblnet/src/msg/message_pool.cpp core/core.hpp forbidden
check peer liblnet/src/peer/discovery.cpp net/state.hpp allowed
check peer liblnet/src/peer/discovery.cpp msg/message.hpp allowed
check peer liblnet/src/peer/discovery.cpp core/core.hpp forbidden
check health liblnet/src/health/health.cpp net/state.hpp allowed
check health liblnet/src/health/health.cpp peer/discovery.hpp forbidden
check health liblnet/src/health/health.cpp core/core.hpp forbidden
check router liblnet/src/router/forward.cpp peer/discovery.hpp allowed
check router liblnet/src/router/forward.cpp health/health.hpp allowed
check router liblnet/src/router/forward.cpp core/core.hpp forbidden
check peer liblnet/src/peer/discovery.cpp router/router.hpp forbidden
check core liblnet/src/core/send.cpp router/router.hpp allowed
check core liblnet/src/core/send.cpp health/health.hpp allowed
check core liblnet/src/core/send.cpp peer/discovery.hpp allowed
check core liblnet/src/core/send.cpp portals/portal_table.hpp allowed
check core liblnet/src/core/send.cpp net/selection.hpp allowed
check "socket driver" liblnet/src/lnd/socket/sock_lnd.cpp lnet/lnd/pool.hpp allowed
check "socket driver" liblnet/src/lnd/socket/sock_lnd.cpp base/cpt.hpp forbidden
check "socket driver" liblnet/src/lnd/socket/sock_lnd.cpp core/core.hpp forbidden
check "loopback driver" liblnet/src/lnd/lo/lo_lnd.cpp base/text.hpp forbidden
check "C API" liblnet/src/capi/lnet_c.cpp core/core.hpp forbidden
check dlc liblnet/src/dlc/apply.cpp base/text.hpp allowed
check dlc liblnet/src/dlc/apply.cpp core/core.hpp forbidden
check dlc liblnet/src/dlc/apply.cpp net/ni.hpp forbidden
if grep -q mpilnd/src/ni.cpp "$db"; then
  check "MPI driver" mpilnd/src/ni.cpp lnet/lnd/fifo.hpp allowed
  check "MPI driver" mpilnd/src/ni.cpp base/cpt.hpp forbidden
  check "MPI driver" mpilnd/src/ni.cpp core/core.hpp forbidden
fi
# Self-test is an application of the public API (and the control-socket codec).
check selftest selftest/src/framework.cpp lnet/lnet.hpp allowed
check selftest selftest/src/lst_commands.cpp lnet/dlc.hpp allowed
check selftest selftest/src/framework.cpp core/core.hpp forbidden
check selftest selftest/src/framework.cpp base/cpt.hpp forbidden
check selftest selftest/src/rpc.cpp portals/portal_table.hpp forbidden
# The application's umbrella header is the API only: no driver SPI in it.
check application examples/01_loopback/loopback_demo.cpp lnet/lnet.hpp allowed
printf '#include <lnet/lnet.hpp>\nlnet::LndHost* h;\n' >"$work/api.cpp"
cmd=$(command_for examples/01_loopback/loopback_demo.cpp "$work/api.cpp") && if (cd "$build" && eval "$cmd") >/dev/null 2>&1; then
  echo "FAIL: <lnet/lnet.hpp> declares the driver SPI (LndHost)"
  fails=$((fails + 1))
else
  echo "ok: <lnet/lnet.hpp> leaves the driver SPI out"
fi
[ "$fails" = 0 ] && echo "layers_test: every layer sees what it may and nothing else" || exit 1
