// Fuzz target: the MPI LND's message decoder (what arrives in a short-message receive
// from any rank). A message that decodes encodes back to the same header bytes, and a
// decoded IMMEDIATE's payload lies inside the input, and so does each message a PACKED
// carries.
#include <cstdlib>
#include <cstring>
#include <string>

#include "mpi_wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lnet::mpi;
  auto d = decode_msg(std::span(data, size));
  // The in-place form (the receive path's) gives the same verdict and the same reason.
  Decoded in_place;
  std::string why;
  if (decode_msg(std::span(data, size), in_place, &why) != static_cast<bool>(d)) std::abort();
  if (!d && why != d.message()) std::abort();
  if (d && (!why.empty() || in_place.hdr.kind != d->hdr.kind || in_place.payload.data() != d->payload.data()))
    std::abort();
  if (!d) return 0;
  std::uint8_t hdr[kMsgHdrSize];
  encode_msg_hdr(d->hdr, hdr);
  // The reserved word is not kept: compare the rest.
  if (std::memcmp(hdr, data, 28) != 0) std::abort();
  if (!d->payload.empty() && (d->payload.data() < data || d->payload.data() + d->payload.size() > data + size))
    std::abort();
  if (d->hdr.kind == MsgKind::Packed) {
    // Each packed message lies inside the body, after the one before; a bad one ends it.
    std::span<const std::uint8_t> rest = d->payload;
    const std::uint8_t* at = rest.data();
    while (!rest.empty()) {
      auto sub = next_packed(rest);
      if (!sub) break;
      if (sub->hdr.kind != MsgKind::Immediate || sub->hdr.credits) std::abort();
      if (sub->payload.data() < at || sub->payload.data() + sub->payload.size() > rest.data()) std::abort();
      if (sub->payload.size() != sub->lnet.payload_length) std::abort();
      at = rest.data();
    }
  }
  if (d->hdr.kind == MsgKind::Query || d->hdr.kind == MsgKind::Response) {
    std::uint8_t hello[kHelloSize];
    encode_hello(d->hello, hello);
    if (std::memcmp(hello, data + kMsgHdrSize, 28) != 0) std::abort();
  }
  return 0;
}
