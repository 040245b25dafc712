// Fuzz target: the ksocklnd decoders (acceptor request v1/v2, HELLO of every version
// including V4's 20-byte NIDs, message header), driven the way a connection reads them.
// What decodes re-encodes and decodes the same.
#include <cstdlib>

#include "lnd/socket/sock_wire.hpp"

using namespace lnet::sock;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size >= 4) {
    bool flip = false;
    FirstWord w = classify_first_word(std::span<const std::uint8_t, 4>(data, 4), &flip);
    if (w == FirstWord::Acceptor && size >= 8) {
      std::size_t n = connreq_size(std::span<const std::uint8_t, 8>(data, 8), flip);
      if (n != 0 && n != kConnReqSize && n != kConnReqV2Size) std::abort();
    }
    if (w == FirstWord::Acceptor && size >= kConnReqSize) {
      (void)decode_connreq(std::span<const std::uint8_t, kConnReqSize>(data, kConnReqSize), flip);
    }
    if (w == FirstWord::Acceptor && size >= kConnReqV2Size) {
      auto r = decode_connreq_v2(std::span<const std::uint8_t, kConnReqV2Size>(data, kConnReqV2Size), flip);
      if (r) {  // what decodes re-encodes to a request for the same NID
        std::uint8_t again[kConnReqV2Size];
        encode_connreq_v2(r->target, std::span<std::uint8_t, kConnReqV2Size>(again, kConnReqV2Size));
        auto back = decode_connreq_v2(std::span<const std::uint8_t, kConnReqV2Size>(again, kConnReqV2Size), false);
        if (!back || back->target != r->target) std::abort();
      }
    }
  }
  if (size >= kHelloPrefixSize) {
    auto p = decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize>(data, kHelloPrefixSize));
    if (p && size >= kHelloPrefixSize + hello_body_size(*p)) {
      std::uint32_t nips = 0;
      auto h = decode_hello_body(*p, std::span(data + kHelloPrefixSize, size - kHelloPrefixSize), &nips);
      if (h) {
        if (nips > kMaxHelloIps) std::abort();
        std::size_t at = kHelloPrefixSize + hello_body_size(*p);
        if (size >= at + 4 * nips) decode_hello_ips(*p, std::span(data + at, 4 * nips), *h);
        {
          auto bytes = encode_hello(*h);
          auto p2 =
              decode_hello_prefix(std::span<const std::uint8_t, kHelloPrefixSize>(bytes.data(), kHelloPrefixSize));
          std::uint32_t n2 = 0;
          if (!p2) std::abort();
          auto again =
              decode_hello_body(*p2, std::span(bytes.data() + kHelloPrefixSize, bytes.size() - kHelloPrefixSize), &n2);
          if (!again || again->src_nid != h->src_nid || again->ctype != h->ctype) std::abort();
        }
      }
    }
  }
  if (size >= kMsgHdrSize) {
    MsgHdr m;
    if (decode_msg_hdr(std::span<const std::uint8_t, kMsgHdrSize>(data, kMsgHdrSize), false, m) == 0) {
      std::uint8_t out[kMsgHdrSize];
      encode_msg_hdr(m, std::span<std::uint8_t, kMsgHdrSize>(out, kMsgHdrSize));
      for (std::size_t i = 0; i < kMsgHdrSize; ++i)
        if (out[i] != data[i]) std::abort();
    }
  }
  return 0;
}
