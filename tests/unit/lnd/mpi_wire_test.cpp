// The MPI LND's message codecs: golden bytes, round trips, and every rejection.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include <lnet/lnd/byteorder.hpp>

#include "mpi_wire.hpp"

namespace lnet::mpi {
namespace {

std::vector<std::uint8_t> message(const MsgHdr& h, std::vector<std::uint8_t> body = {}) {
  std::vector<std::uint8_t> m(kMsgHdrSize);
  MsgHdr x = h;
  x.nob = static_cast<std::uint32_t>(kMsgHdrSize + body.size());
  encode_msg_hdr(x, std::span<std::uint8_t, kMsgHdrSize>(m.data(), kMsgHdrSize));
  m.insert(m.end(), body.begin(), body.end());
  return m;
}

TEST(MpiWire, HeaderGoldenBytes) {
  MsgHdr h;
  h.kind = MsgKind::Bulk;
  h.credits = 3;
  h.nob = 104;
  h.tag = 0x1234;
  h.stamp = 0x0102030405060708ULL;
  h.status = -61;
  std::uint8_t out[kMsgHdrSize];
  encode_msg_hdr(h, out);
  const std::uint8_t want[kMsgHdrSize] = {
      0x4e, 0x4c, 0x50, 0x4d,                          // "MPLN" little-endian
      0x01, 0x00,                                      // version 1
      0x04, 0x03,                                      // BULK, 3 credits
      0x68, 0x00, 0x00, 0x00,                          // nob 104
      0x34, 0x12, 0x00, 0x00,                          // tag
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // stamp
      0xc3, 0xff, 0xff, 0xff,                          // status -61
      0x00, 0x00, 0x00, 0x00,                          // reserved
  };
  EXPECT_EQ(0, std::memcmp(out, want, kMsgHdrSize));
}

TEST(MpiWire, HelloRoundTrips) {
  Hello he{1, 8192, 64, 8, 0x80001234u, 5, 1000};
  std::vector<std::uint8_t> body(kHelloSize);
  encode_hello(he, std::span<std::uint8_t, kHelloSize>(body.data(), kHelloSize));
  MsgHdr h;
  h.kind = MsgKind::Query;
  h.stamp = 42;
  auto m = message(h, body);
  auto d = decode_msg(m);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->hdr.kind, MsgKind::Query);
  EXPECT_EQ(d->hdr.stamp, 42u);
  EXPECT_EQ(d->hello.short_max, 8192u);
  EXPECT_EQ(d->hello.pool_depth, 64u);
  EXPECT_EQ(d->hello.credits, 8u);
  EXPECT_EQ(d->hello.pid, 0x80001234u);
  EXPECT_EQ(d->hello.rank, 5u);
  EXPECT_EQ(d->hello.chunk, 1000u);
}

std::vector<std::uint8_t> lnet_header(MsgType type, std::uint32_t payload) {
  Header h;
  h.type = type;
  h.src_nid = Nid::make(NetId::make(kMpiLnd, 0), 1);
  h.dest_nid = Nid::make(NetId::make(kMpiLnd, 0), 2);
  h.payload_length = payload;
  if (type == MsgType::Get) h.msg.get.sink_length = 4096;
  std::vector<std::uint8_t> b(kHeaderSize);
  encode_header(h, std::span<std::uint8_t, kHeaderSize>(b.data(), kHeaderSize));
  return b;
}

TEST(MpiWire, ImmediateCarriesHeaderAndPayload) {
  auto body = lnet_header(MsgType::Put, 3);
  body.insert(body.end(), {7, 8, 9});
  MsgHdr h;
  h.kind = MsgKind::Immediate;
  auto m = message(h, body);  // the decoded payload points into it
  auto d = decode_msg(m);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->lnet.type, MsgType::Put);
  ASSERT_EQ(d->payload.size(), 3u);
  EXPECT_EQ(d->payload[2], 9);
}

TEST(MpiWire, RejectsWhatIsWrong) {
  auto expect_bad = [](const std::vector<std::uint8_t>& m, const char* why) {
    auto d = decode_msg(m);
    ASSERT_FALSE(d) << why;
    EXPECT_EQ(d.code(), -EPROTO);
    EXPECT_NE(d.message().find(why), std::string::npos) << d.message();
  };
  MsgHdr h;
  h.kind = MsgKind::Noop;
  auto ok = message(h);
  ASSERT_TRUE(decode_msg(ok));
  expect_bad({1, 2, 3}, "shorter than its header");
  auto m = ok;
  m[0] ^= 0xff;
  expect_bad(m, "magic 0x4d504cb1");
  m = ok;
  m[4] = 2;
  expect_bad(m, "version 2");
  m = ok;
  m[6] = 0;
  expect_bad(m, "unknown kind 0");
  m = ok;
  m[6] = 9;
  expect_bad(m, "unknown kind 9");
  m = ok;
  m.push_back(0);
  expect_bad(m, "says 32 bytes, 33 arrived");
  h.kind = MsgKind::Response;
  expect_bad(message(h), "without its hello");
  std::vector<std::uint8_t> hello(kHelloSize);
  encode_hello(Hello{2, 8192, 64, 8, 1, 0, 1000}, std::span<std::uint8_t, kHelloSize>(hello.data(), kHelloSize));
  expect_bad(message(h, hello), "hello of protocol version 2");
  encode_hello(Hello{1, 8192, 64, 8, 1, 0, 0}, std::span<std::uint8_t, kHelloSize>(hello.data(), kHelloSize));
  expect_bad(message(h, hello), "chunk size of 0");
  h.kind = MsgKind::Immediate;
  expect_bad(message(h), "without its LNet header");
  auto body = lnet_header(MsgType::Put, 10);
  expect_bad(message(h, body), "0 payload bytes for a payload_length of 10");
  h.kind = MsgKind::Bulk;
  h.tag = 2;
  body = lnet_header(MsgType::Put, 1 << 20);
  body.push_back(0);
  expect_bad(message(h, body), "bytes after its LNet header");
  h.kind = MsgKind::GetReq;
  expect_bad(message(h, lnet_header(MsgType::Put, 0)), "GET_REQ that is not a GET");
  h.tag = 0;
  expect_bad(message(h, lnet_header(MsgType::Get, 0)), "GET_REQ with tag 0");
  h.kind = MsgKind::GetNak;
  h.tag = 3;
  h.status = 0;
  expect_bad(message(h), "GET_NAK with status 0");
  auto lh = lnet_header(MsgType::Put, 0);
  lh[24] = 9;  // an LNet type that does not exist
  h.kind = MsgKind::Immediate;
  expect_bad(message(h, lh), "bad LNet header");
}

// An IMMEDIATE PUT of `payload` bytes (value `fill`), as it goes inside a PACKED.
std::vector<std::uint8_t> immediate(std::uint32_t payload, std::uint8_t fill, std::uint8_t credits = 0) {
  auto body = lnet_header(MsgType::Put, payload);
  body.insert(body.end(), payload, fill);
  MsgHdr h;
  h.kind = MsgKind::Immediate;
  h.credits = credits;
  return message(h, body);
}

std::vector<std::uint8_t> packed(const std::vector<std::vector<std::uint8_t>>& parts) {
  std::vector<std::uint8_t> body;
  for (const auto& p : parts) body.insert(body.end(), p.begin(), p.end());
  MsgHdr h;
  h.kind = MsgKind::Packed;
  h.credits = 5;
  return message(h, body);
}

TEST(MpiWire, PackedCarriesWholeImmediates) {
  auto m = packed({immediate(3, 0xa1), immediate(0, 0), immediate(8, 0xc3)});
  auto d = decode_msg(m);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->hdr.kind, MsgKind::Packed);
  EXPECT_EQ(d->hdr.credits, 5);
  EXPECT_TRUE(takes_credit(MsgKind::Packed)) << "one credit for the whole PACKED";
  std::span<const std::uint8_t> rest = d->payload;
  std::vector<std::size_t> sizes;
  while (!rest.empty()) {
    auto sub = next_packed(rest);
    ASSERT_TRUE(sub) << sub.message();
    EXPECT_EQ(sub->lnet.type, MsgType::Put);
    EXPECT_EQ(sub->payload.size(), sub->lnet.payload_length);
    for (std::uint8_t b : sub->payload) EXPECT_EQ(b, sub->payload.size() == 3 ? 0xa1 : 0xc3);
    sizes.push_back(sub->payload.size());
  }
  EXPECT_EQ(sizes, (std::vector<std::size_t>{3, 0, 8}));
}

// The receive path's form: decoded in place, the reason put into words only on request,
// and the same verdict as the Result form.
TEST(MpiWire, DecodesInPlaceAndSaysWhyOnlyWhenAsked) {
  auto m = immediate(5, 0x7e, 2);
  Decoded d;
  std::string why;
  ASSERT_TRUE(decode_msg(m, d, &why)) << why;
  EXPECT_TRUE(why.empty());
  EXPECT_EQ(d.hdr.kind, MsgKind::Immediate);
  EXPECT_EQ(d.hdr.credits, 2);
  EXPECT_EQ(d.lnet.type, MsgType::Put);
  ASSERT_EQ(d.payload.size(), 5u);
  EXPECT_EQ(d.payload.data(), m.data() + m.size() - 5) << "the payload is not copied";

  m[0] ^= 0xff;
  Decoded bad;
  EXPECT_FALSE(decode_msg(m, bad, nullptr));
  EXPECT_FALSE(decode_msg(m, bad, &why));
  auto r = decode_msg(m);
  ASSERT_FALSE(r);
  EXPECT_EQ(why, r.message());
  EXPECT_NE(why.find("magic"), std::string::npos) << why;

  auto p = packed({immediate(1, 1), immediate(2, 2)});
  ASSERT_TRUE(decode_msg(p, d, nullptr));
  std::span<const std::uint8_t> rest = d.payload;
  Decoded sub;
  ASSERT_TRUE(next_packed(rest, sub, nullptr));
  EXPECT_EQ(sub.payload.size(), 1u);
  Decoded sub2;
  ASSERT_TRUE(next_packed(rest, sub2, &why));
  EXPECT_EQ(sub2.payload.size(), 2u);
  EXPECT_TRUE(rest.empty());
}

TEST(MpiWire, PackedRejectsWhatIsWrong) {
  auto expect_bad_sub = [](const std::vector<std::uint8_t>& m, const char* why) {
    auto d = decode_msg(m);
    ASSERT_TRUE(d) << d.message();
    std::span<const std::uint8_t> rest = d->payload;
    for (;;) {
      ASSERT_FALSE(rest.empty()) << "no bad part found; expected: " << why;
      auto sub = next_packed(rest);
      if (sub) continue;
      EXPECT_EQ(sub.code(), -EPROTO);
      EXPECT_NE(sub.message().find(why), std::string::npos) << sub.message();
      return;
    }
  };
  MsgHdr h;
  h.kind = MsgKind::Packed;
  auto empty = message(h);
  auto d = decode_msg(empty);
  ASSERT_FALSE(d);
  EXPECT_NE(d.message().find("PACKED with nothing packed"), std::string::npos) << d.message();

  auto noop = message(MsgHdr{});
  expect_bad_sub(packed({immediate(1, 1), noop}), "a NOOP packed in a PACKED");
  expect_bad_sub(packed({immediate(1, 1, 2)}), "a packed IMMEDIATE returning credits");
  auto cut = immediate(4, 4);
  cut.resize(cut.size() - 1);  // its nob now says more than is there
  expect_bad_sub(packed({immediate(1, 1), cut}), "bytes where");
  auto stray = packed({immediate(1, 1)});
  stray.insert(stray.end(), {1, 2, 3});
  wire::put_le32(stray.data() + 8, static_cast<std::uint32_t>(stray.size()));  // the PACKED's nob
  expect_bad_sub(stray, "3 stray bytes");
  auto tiny = immediate(1, 1);
  wire::put_le32(tiny.data() + 8, 4);
  expect_bad_sub(packed({tiny}), "packed message of 4 bytes");
}

TEST(MpiWire, ChunkCounts) {
  EXPECT_EQ(chunk_count(0, 10), 1u);
  EXPECT_EQ(chunk_count(1, 10), 1u);
  EXPECT_EQ(chunk_count(10, 10), 1u);
  EXPECT_EQ(chunk_count(11, 10), 2u);
  EXPECT_EQ(chunk_count(5000000000ULL, 2147483647u), 3u);
}

}  // namespace
}  // namespace lnet::mpi
