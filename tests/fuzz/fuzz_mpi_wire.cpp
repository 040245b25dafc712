// Fuzz target: the MPI LND's message decoder (what arrives in a short-message receive
// from any rank). A message that decodes encodes back to the same header bytes, and a
// decoded IMMEDIATE's payload lies inside the input.
#include <cstdlib>
#include <cstring>

#include "mpi_wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lnet::mpi;
  auto d = decode_msg(std::span(data, size));
  if (!d) return 0;
  std::uint8_t hdr[kMsgHdrSize];
  encode_msg_hdr(d->hdr, hdr);
  // The reserved word is not kept: compare the rest.
  if (std::memcmp(hdr, data, 28) != 0) std::abort();
  if (!d->payload.empty() && (d->payload.data() < data || d->payload.data() + d->payload.size() > data + size))
    std::abort();
  if (d->hdr.kind == MsgKind::Query || d->hdr.kind == MsgKind::Response) {
    std::uint8_t hello[kHelloSize];
    encode_hello(d->hello, hello);
    if (std::memcmp(hello, data + kMsgHdrSize, 28) != 0) std::abort();
  }
  return 0;
}
