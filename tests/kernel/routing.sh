#!/usr/bin/env bash
# Routing in both roles: our lnetd u2 forwards between the kernel nodes k1 (tcp) and k2
# (tcp1); the kernel router kr forwards between the lnetds u1 (tcp) and u3 (tcp1). Pings
# both ways and lst brw write/read 1M check=full through each router, no error node, the
# router's route_count and route_length grow by what went through it.
. "$(dirname "$0")/lib.sh"
kn_case kernel.routing

# ---- our lnetd routes between two kernels ----
wait_until 30 "k1's route to tcp1 through u2 up" route_is k1 tcp1 "$U2" up
wait_until 30 "k2's route to tcp through u2 up" route_is k2 tcp "$U21" up
on k1 lnetctl ping "$K2" >/dev/null || fail "k1 cannot ping k2 through u2"
on k2 lnetctl ping "$K1" >/dev/null || fail "k2 cannot ping k1 through u2"
count=$(stat_of u2 route_count)
bytes=$(stat_of u2 route_length)
kbrw k1 "$K1" "$K2" --loop 8 --concurrency 2 brw write size=1M check=full
kbrw k1 "$K1" "$K2" --loop 8 --concurrency 2 brw read size=1M check=full
count=$(($(stat_of u2 route_count) - count))
bytes=$(($(stat_of u2 route_length) - bytes))
[ "$bytes" -ge $((32 << 20)) ] || fail "u2 forwarded $bytes bytes of the 2 x 16 MiB brw"
log "u2 (lnetd) routes k1 <-> k2: pings both ways, brw write and read 1M check=full, $count messages and $((bytes >> 20)) MiB forwarded"

# ---- the kernel routes between two lnetds ----
wait_until 30 "u1's route to tcp1 through kr up" route_is u1 tcp1 "$KR" up
wait_until 30 "u3's route to tcp through kr up" route_is u3 tcp "$KR1" up
on u1 lnetctl ping "$U3" >/dev/null || fail "u1 cannot ping u3 through kr"
on u3 lnetctl ping "$U1" >/dev/null || fail "u3 cannot ping u1 through kr"
count=$(stat_of kr route_count)
bytes=$(stat_of kr route_length)
ubrw u1 "$U1" "$U3" --loop 8 --concurrency 2 brw write size=1M check=full
ubrw u1 "$U1" "$U3" --loop 8 --concurrency 2 brw read size=1M check=full
count=$(($(stat_of kr route_count) - count))
bytes=$(($(stat_of kr route_length) - bytes))
[ "$bytes" -ge $((32 << 20)) ] || fail "kr forwarded $bytes bytes of the 2 x 16 MiB brw"
log "kr (kernel) routes u1 <-> u3: pings both ways, brw write and read 1M check=full, $count messages and $((bytes >> 20)) MiB forwarded"
log PASS
