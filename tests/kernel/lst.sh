#!/usr/bin/env bash
# LNet self-test between the kernel and lnetd, with either console: the kernel's lst on
# k1 drives u1 (an lnetd with selftest on) and itself, ours on u1 drives k1 and itself:
# brw write 1M check=full, brw read 64K check=full and ping, each way, no error node;
# the bytes are seen arriving on the other side.
. "$(dirname "$0")/lib.sh"
kn_case kernel.lst

before=$(stat_of u1 recv_length)
kbrw k1 "$K1" "$U1" --loop 8 --concurrency 2 brw write size=1M check=full
kbrw k1 "$K1" "$U1" --loop 16 brw read size=64K check=full
kbrw k1 "$K1" "$U1" --loop 20 ping
got=$(($(stat_of u1 recv_length) - before))
[ "$got" -ge $((8 << 20)) ] || fail "u1 received $got bytes from the kernel's brw writes (8 MiB at least)"
log "the kernel's console: brw write 1M and read 64K check=full, ping, k1 -> u1: no error; u1 received $((got >> 20)) MiB"

before=$(stat_of k1 recv_length)
ubrw u1 "$U1" "$K1" --loop 8 --concurrency 2 brw write size=1M check=full
ubrw u1 "$U1" "$K1" --loop 16 brw read size=64K check=full
ubrw u1 "$U1" "$K1" --loop 20 ping
got=$(($(stat_of k1 recv_length) - before))
[ "$got" -ge $((8 << 20)) ] || fail "k1 received $got bytes from our brw writes (8 MiB at least)"
log "our console: brw write 1M and read 64K check=full, ping, u1 -> k1: no error; k1 received $((got >> 20)) MiB"
log PASS
