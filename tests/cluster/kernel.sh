# Kernel nodes of the virtual cluster (sourced by cluster.sh): a node of kind=kernel is a
# qemu guest of the kernel LNet kit (../shared/kernel-lnet: Lustre's lnet, ksocklnd and
# lnet_selftest modules with the real lnetctl, lst and lctl) with one NIC per fabric, a
# tap on the fabric's bridge in the cluster's namespace, so that it is wired where a
# namespace node's veth is. Its state lives in $CL/kn (the kit's KN_STATE). The taps are
# the node's ports: poweroff, partition and heal work on them as on a veth's switch end.

# The kit: LNET_KERNEL_KIT, else ../shared/kernel-lnet next to the source tree.
kernel_kit() { echo "${LNET_KERNEL_KIT:-$(cd "$SRC/.." && pwd)/shared/kernel-lnet}"; }

# kernel_missing: why kernel nodes cannot start here (empty when they can).
kernel_missing() {
  local kit
  kit=$(kernel_kit)
  if [ ! -x "$kit/kernel-node.sh" ]; then
    echo "no kernel LNet kit at $kit (set LNET_KERNEL_KIT)"
  elif ! command -v "${KN_QEMU:-qemu-system-x86_64}" >/dev/null; then
    echo "no ${KN_QEMU:-qemu-system-x86_64} (Debian package qemu-system-x86; scripts/setup.sh installs it)"
  fi
}

is_kernel() { [ "${CL_KIND[$1]:-namespace}" = kernel ]; }
has_kernel_nodes() {
  local n
  for n in "${CL_NODES[@]}"; do is_kernel "$n" && return 0; done
  return 1
}

# kn ARGS...: the kit's front end on this cluster's kernel nodes.
kn() { KN_STATE="$CL/kn" "$(kernel_kit)/kernel-node.sh" "$@"; }

kernel_qemu_pid() {
  local p
  p=$(cat "$CL/kn/$1/qemu.pid" 2>/dev/null) || return 1
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo "$p"
}

# kernel_boot NODE: starts its guest in the background (the kit waits for KN READY);
# kernel_ready NODE waits for it. A router gets more memory (its buffers).
kernel_boot() {
  local node=$1 dir="$CL/nodes/$1" a brs="" ips="" mem=512
  mkdir -p "$dir/log" "$CL/kn"
  for a in ${CL_ADDRS[$node]}; do
    brs+="${brs:+,}${a%%=*}"
    ips+="${ips:+,}${a#*=}"
  done
  has_role "$node" router && mem=768
  rm -f "$dir/boot.rc"
  (
    rc=0
    KN_NET=${CL_KNET[$node]} KN_MEM=${KN_MEM:-$mem} KN_MODPROBE="$dir/modprobe.conf" \
      kn start "$node" "$(fab_ns)" "$brs" "$ips" "$dir/lnet.conf" || rc=$?
    echo "$rc" >"$dir/boot.rc"
  ) </dev/null 9>&- >>"$dir/log/boot.log" 2>&1 &
}

kernel_ready() {
  local node=$1 dir="$CL/nodes/$1" i
  for i in $(seq $((${KN_BOOT_TIMEOUT:-300} * 10 + 100))); do
    [ -f "$dir/boot.rc" ] && break
    sleep 0.1
  done
  [ "$(cat "$dir/boot.rc" 2>/dev/null)" = 0 ] ||
    die "kernel node $node did not boot: $(tail -n 8 "$dir/log/boot.log" 2>/dev/null)"
  # Its taps, in the order of its addresses, are its ports on the fabrics.
  local taps=() a k=0
  read -ra taps <<<"$(sed -n 's/^tap=//p' "$CL/kn/$node/node.env")"
  for a in ${CL_ADDRS[$node]}; do
    echo "${taps[k]}" >"$dir/port.${a%%=*}"
    k=$((k + 1))
  done
  echo on >"$dir/state"
  note "kernel node $node is up: $(grep -m1 '^KN READY' "$CL/kn/$node/console.log") in $(cat "$CL/kn/$node/boot_seconds") s"
}

# kernel_exec NODE COMMAND...: the command in the guest, run by its sh: one word is a
# script (as ssh NODE 'a; b' runs one), several are a command and its arguments (each
# word quoted).
kernel_exec() {
  local node=$1 script="" w
  shift
  if [ $# = 1 ]; then
    script=$1
  else
    for w in "$@"; do script+="'${w//\'/\'\\\'\'}' "; done
  fi
  kn exec "$node" "$script"
}

# kernel_stop NODE: the guest goes at once (a reboot's power cut: no clean shutdown).
kernel_stop() {
  local p
  if p=$(kernel_qemu_pid "$1"); then kill_pids "$p"; fi
  kn stop "$1" >/dev/null 2>&1 || true
}
