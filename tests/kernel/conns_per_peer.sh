#!/usr/bin/env bash
# conns_per_peer with a kernel peer, on the tcp2 rail of k1 and u1 (each NI made again
# with `net add --conns-per-peer N` for every combination, which drops its connections).
# The kernel's rule, measured kernel to kernel: the side that dials opens one CONTROL
# and N of each bulk type, N its own conns_per_peer; the side that answers refuses what
# is over its own; neither opens more later. So a pair makes 1 + 2 x min(N1, N2)
# connections whoever dials: 9 for 4 and 4, 3 for 4 and 1. lnetd must do the same as
# the dialling side and as the answering side. (A dialler refused stops at the first
# refusal of each bulk type. The kernel's `net set --conns-per-peer` changes only what
# it shows: docs/interop.md.)
. "$(dirname "$0")/lib.sh"
kn_case kernel.conns_per_peer

# renew_k N / renew_u N: the tcp2 NI of k1 / u1 made again with conns_per_peer N.
renew_k() { on k1 "lnetctl net del --net tcp2 && lnetctl net add --net tcp2 --if eth1 --conns-per-peer $1" >/dev/null || fail "k1: net add --conns-per-peer $1"; }
renew_u() { on u1 "lnetctl net del --net tcp2 && lnetctl net add --net tcp2 --if rail --conns-per-peer $1" >/dev/null || fail "u1: net add --conns-per-peer $1"; }
# No discovery meanwhile: a push on an NI's change would dial before the side under test.
for n in k1 u1; do on $n lnetctl set discovery 0 || fail "$n: set discovery 0"; done
undo "renew_k 1; renew_u 0; on k1 lnetctl set discovery 1; on u1 lnetctl set discovery 1"
# conns: established connections between u1 and k1 on the rail, as u1 sees them.
conns() { on u1 "ss -Htn state established '( sport = :988 or dport = :988 )' | grep -c '10.97.2.41:'" || true; }
conns_are() { [ "$(conns)" = "$1" ]; }
excess() { on u1 lnetctl stats show | awk '$1 == "conns_refused_excess:" {print $2; exit}'; }

# check U K DIALER WANT: u1 at U, k1 at K, DIALER pings the other first; WANT connections.
check() {
  local u=$1 k=$2 dialer=$3 want=$4 refused
  renew_u "$u"
  renew_k "$k"
  on u1 "ss -Htn state established '( sport = :988 or dport = :988 )' | grep -q '10.97.2.41:'" &&
    fail "connections between u1 and k1 on tcp2 outlived their NIs"
  refused=$(excess)
  if [ "$dialer" = k1 ]; then
    on k1 lnetctl ping "$U1B" >/dev/null || fail "k1 cannot ping u1 on tcp2 (u1 $u, k1 $k)"
  else
    on u1 lnetctl ping "$K1B" >/dev/null || fail "u1 cannot ping k1 on tcp2 (u1 $u, k1 $k)"
  fi
  wait_until 15 "u1 $u, k1 $k, $dialer dials: $want connections (now $(conns))" conns_are "$want"
  # Then both send: nobody opens more.
  on k1 lnetctl ping "$U1B" >/dev/null && on u1 lnetctl ping "$K1B" >/dev/null || fail "pings after the first"
  sleep 1
  conns_are "$want" || fail "u1 $u, k1 $k, $dialer dials: $(conns) connections after both sent, not $want"
  log "u1 conns_per_peer $u, k1 $k, $dialer dials: $want connections (lnetd refused $(($(excess) - refused)) over its count)"
}

check 4 4 k1 9
check 4 4 u1 9
check 4 1 u1 3 # the kernel refuses lnetd's excess
start=$(excess)
check 1 4 k1 3 # lnetd refuses the kernel's excess: the second of each bulk type, after which it stops
[ $(($(excess) - start)) -ge 2 ] || fail "lnetd counted $(($(excess) - start)) refused connections (conns_refused_excess), not 2"
log PASS
