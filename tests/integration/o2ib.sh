#!/usr/bin/env bash
# The o2ib LND in lnetd (docs/design/o2iblnd.md). On every machine: an o2ib NI where
# there is no RDMA device is refused, naming the network (lnetctl net add --net o2ib --if
# eth0, and an o2ib net in an imported YAML) with the reason ("no RDMA device"), the
# daemon and its tcp NI go on, and ko2iblnd's memory-mapping tunables in YAML are warned
# about. With an RDMA device (real IB/RoCE, or Soft-RoCE where the kernel has rdma_rxe):
# o2ib NIs on both sides, ping both ways, LNet self-test brw write and read of 1 MiB with
# check=full, and a tcp-only node pinging the o2ib NI through a router. Without one, that
# part reports "SKIP: no RDMA device" (exit 77): it never passes silently.
. "$(dirname "$0")/lib.sh"
setup
[ -x "${LST:-}" ] || fail "missing binary \$LST"
new_ns A a
new_ns B b
new_ns C c
link "$A" eth0 10.0.0.5/24 "$B" eth0 10.0.0.6/24
link "$B" eth1 10.9.0.6/24 "$C" eth0 10.9.0.7/24
lnetd_start "$A" a "$(tcp_cfg eth0)
selftest:
    enable: 1
"

has_rdma() { [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; }

if ! has_rdma; then
  log "no RDMA device: an o2ib NI is refused clearly"
  ctl a net add --net o2ib --if eth0 2>"$T_DIR/err.out" && fail "an o2ib NI came up without an RDMA device"
  grep -q "cannot start network o2ib: no RDMA device on this machine" "$T_DIR/err.out" ||
    fail "the error does not name the network and the reason: $(cat "$T_DIR/err.out")"
  wait_for_log a "no RDMA device"
  cat >"$T_DIR/o2ib.yaml" <<'YAML'
net:
    - net type: o2ib
      local NI(s):
        - interfaces:
              0: eth0
          tunables:
              peer_credits: 32
          lnd tunables:
              peercredits_hiw: 16
              map_on_demand: 1
              concurrent_sends: 64
              fmr_pool_size: 512
              ntx: 2048
YAML
  ctl a import "$T_DIR/o2ib.yaml" 2>"$T_DIR/err.out" && fail "an o2ib net was imported without an RDMA device"
  grep -q "cannot start network o2ib: no RDMA device on this machine" "$T_DIR/err.out" ||
    fail "the import error does not name the network and the reason: $(cat "$T_DIR/err.out")"
  grep -q "'map_on_demand' has no effect on this o2ib driver" "$T_DIR/err.out" ||
    fail "no warning for map_on_demand: $(cat "$T_DIR/err.out")"
  grep -q "peercredits_hiw\|concurrent_sends\|ntx" "$T_DIR/err.out" &&
    fail "a tunable the driver takes was warned about: $(cat "$T_DIR/err.out")"
  ctl a net show | grep -q "10.0.0.5@tcp" || fail "the tcp NI went"
  ctl a net show | grep -q "o2ib" && fail "a half-made o2ib NI is shown"
  cat "$T_DIR/err.out"
  log "a bad ko2iblnd module parameter (LNET_O2IB_*) is named, before any device is looked for"
  LNET_O2IB_SERVICE=0 lnetd_start "$C" c "$(tcp_cfg eth0)"
  ctl c net add --net o2ib --if eth0 2>"$T_DIR/err.out" && fail "an o2ib NI came up with LNET_O2IB_SERVICE=0"
  grep -q "LNET_O2IB_SERVICE='0' is not a number in 1..65535" "$T_DIR/err.out" ||
    fail "the bad variable is not named: $(cat "$T_DIR/err.out")"
  log "SKIP: no RDMA device (the device tests need IB/RoCE or Soft-RoCE: modprobe rdma_rxe)"
  exit 77
fi

log "an RDMA device: o2ib NIs on it"
# Soft-RoCE on the veths when the machine has no port of its own there.
for ns in "$A" "$B"; do
  ip netns exec "$ns" rdma link add "rxe_$ns" type rxe netdev eth0 2>/dev/null || true
done
lnetd_start "$B" b "$(tcp_cfg eth1)
selftest:
    enable: 1
routing:
    enable: 1
"
lnetd_start "$C" c "$(tcp_cfg eth0)"
ctl a net add --net o2ib --if eth0 || fail "o2ib NI on A: $(tail -n 3 "$T_DIR/a.log")"
ctl b net add --net o2ib --if eth0 || fail "o2ib NI on B: $(tail -n 3 "$T_DIR/b.log")"
ctl a ping 10.0.0.6@o2ib | grep -q "10.0.0.6@o2ib" || fail "A cannot ping B over o2ib"
ctl b ping 10.0.0.5@o2ib | grep -q "10.0.0.5@o2ib" || fail "B cannot ping A over o2ib"

log "self-test: brw write and read of 1 MiB, check=full"
export LST_SESSION=$$ LNET_CTL_SOCKET="$T_DIR/a.sock"
lst() { timeout 90 "$LST" "$@"; }
lst new_session --timeout 120 o2ib >/dev/null || fail "new_session"
lst add_group clients 10.0.0.5@o2ib || fail "add_group clients"
lst add_group servers 10.0.0.6@o2ib || fail "add_group servers"
lst add_batch bulk || fail "add_batch"
lst add_test --batch bulk --loop 20 --concurrency 4 --from clients --to servers brw write size=1M check=full ||
  fail "add_test write"
lst add_test --batch bulk --loop 20 --concurrency 4 --from clients --to servers brw read size=1M check=full ||
  fail "add_test read"
lst run bulk >/dev/null || fail "run"
for _ in $(seq 120); do
  lst query bulk | grep -q "^bulk \[0\] is stopped" && break
  sleep 0.5
done
lst query bulk | grep -q "^bulk \[0\] is stopped" || fail "the batch did not end"
lst show_error clients servers | tee "$T_DIR/err.out"
grep -q "Total 0 error nodes in clients" "$T_DIR/err.out" || fail "self-test errors over o2ib"
lst end_session >/dev/null

log "routed: a tcp-only node reaches the o2ib NI through B"
ctl c route add --net o2ib --gateway 10.9.0.6@tcp || fail "route on C"
ctl a route add --net tcp --gateway 10.0.0.6@o2ib || fail "route on A"
ctl c ping 10.0.0.5@o2ib | grep -q "10.0.0.5@o2ib" || fail "C cannot reach A's o2ib NI through B"
ctl a stats show | grep -A14 "o2ib" | tee "$T_DIR/stats.out"
log "o2ib: ping, self-test and routing passed on $(ls /sys/class/infiniband | tr '\n' ' ')"
