#!/usr/bin/env bash
# Wire compatibility: the traffic of two hosts (lnetctl ping between lnetds, PUT/GET of
# 0 B, 1 B, 4 KiB and 1 MiB between liblnet processes, with the discovery ping and push
# before them) is captured on port 988 and
# decoded by tshark's LNet dissector. Every message must decode, without malformed
# frames, into the types, NIDs, portal, match bits and lengths that were sent.
. "$(dirname "$0")/lib.sh"
setup
command -v dumpcap >/dev/null && command -v tshark >/dev/null || fail "needs tshark and dumpcap (scripts/setup.sh)"
new_ns A a
new_ns B b
link "$A" eth0 10.78.1.1/24 "$B" eth0 10.78.1.2/24
ip -n "$A" addr add 10.78.1.21/24 dev eth0
ip -n "$B" addr add 10.78.1.12/24 dev eth0
lnetd_start "$A" a "$(tcp_cfg eth0)"
lnetd_start "$B" b "$(tcp_cfg eth0)"

CAP="$T_DIR/lnet.pcapng"
# Out-of-order reassembly: on veth the capture now and then records two segments of a
# 1 MiB transfer in the other order, and tshark would take the late one for a
# retransmission and never complete the message.
decode() {
  tshark -r "$CAP" -o tcp.desegment_tcp_streams:TRUE -o tcp.reassemble_out_of_order:TRUE "$@" 2>/dev/null
}
capture_start "$A" eth0 "$CAP" 10.78.1.2

ctl a ping --timeout 5 10.78.1.2@tcp >/dev/null || fail "ping A->B"
bg "$B" serve_b timeout 120 "$LNET_XFER" serve --nid 10.78.1.12@tcp
wait_for_log serve_b serving
BITS=0x00001234abcd0000
ip netns exec "$A" timeout 60 "$LNET_XFER" check --nid 10.78.1.21@tcp --peer 10.78.1.12@tcp --bits $BITS ||
  fail "PUT/GET A->B"
# dumpcap writes what it captured every 100 ms or so: stop it once the last message (the
# REPLY with 1 MiB) is in the file, or after 20 s (then the checks below say what is missing).
until_s=$((SECONDS + 20))
while ((SECONDS < until_s)); do
  decode -Y "lnet.msg_type == 3 && lnet.payload_length == 1048576" -T fields -e frame.number | grep -q . && break
  sleep 0.1
done
kill -INT "$CAP_PID"
wait "$CAP_PID" || true
bad=$(decode -Y "(_ws.malformed && !lnet.bad_buflen) || lnet.bad_type" -T fields -e frame.number | tr '\n' ' ')
[ -z "$bad" ] || fail "tshark flags frames $bad as malformed"
# The dissector hands a PUT's payload to the Lustre dissector of its portal; for other
# portals (ours is 40) it leaves the payload undecoded and says so. Those notes must be
# exactly "header (24 + 72 bytes) decoded, payload_length bytes follow", nothing else.
while read -r frame type len msg; do
  [ "$type" = 1 ] && [ "$msg" = "Capture:$((96 + len)) offset:96 (length:0) msg_type:1 ib_type:00" ] ||
    fail "frame $frame: tshark cannot frame it: type $type, payload $len, '$msg'"
done < <(decode -Y lnet.bad_buflen -T fields -E separator=' ' -e frame.number -e lnet.msg_type \
  -e lnet.payload_length -e _ws.expert.message)
# One line per LNet message: socklnd type, LNet type, dest and src address, portal,
# match bits, payload length.
decode -Y lnet -T fields -E separator=' ' -e lnet.ksm_type -e lnet.msg_type -e lnet.nid.addr \
  -e lnet.ptl_index -e lnet.msg_dst_match_bits -e lnet.payload_length | tr -s ' ' >"$T_DIR/decoded.txt"
log "decoded $(wc -l <"$T_DIR/decoded.txt") LNet messages"
expect() { grep -qxF "$1" "$T_DIR/decoded.txt" || fail "no '$1' on the wire; tshark saw:$(echo; cat "$T_DIR/decoded.txt")"; }
# lnetctl ping: GET on portal 0 with the ping match bits, REPLY with the ping data.
expect "0x000000c1 2 10.78.1.2,10.78.1.1 0 0x8000000000000000 0"
grep -qE "^0x000000c1 3 10.78.1.1,10.78.1.2 [1-9][0-9]*$" "$T_DIR/decoded.txt" || fail "no ping REPLY"
NEXT=$(printf '0x%016x' $((BITS + 1)))
for size in 0 1 4096 1048576; do
  expect "0x000000c1 1 10.78.1.12,10.78.1.21 40 $BITS $size"  # PUT
  expect "0x000000c1 0 10.78.1.21,10.78.1.12 $BITS 0"         # its ACK
  expect "0x000000c1 3 10.78.1.21,10.78.1.12 $size"           # REPLY to the GET
done
expect "0x000000c1 2 10.78.1.12,10.78.1.21 40 $NEXT 0"        # GET
# Discovery (lnet-facts §4.2): the client's first PUT waited for a ping of the server (a
# GET on portal 0 with the ping match bits) and a push of the client's ping info (a PUT
# there: 16-byte header, 0@lo and its one NI of 16 bytes each).
expect "0x000000c1 2 10.78.1.12,10.78.1.21 0 0x8000000000000000 0"
expect "0x000000c1 1 10.78.1.12,10.78.1.21 0 0x8000000000000000 48"
expect "0x000000c1 0 10.78.1.21,10.78.1.12 0x8000000000000000 0"  # the push's ACK
log "PASS"
