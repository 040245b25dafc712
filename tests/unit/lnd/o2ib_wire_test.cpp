// The o2ib LND's wire (docs/design/o2iblnd.md §1): golden bytes of every message and of
// a reject, round trips, a peer of the other byte order, ko2iblnd's checksum, and every
// rejection a kernel receiver makes.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <lnet/o2ib/wire.hpp>

namespace lnet::o2ib {
namespace {

using Bytes = std::vector<std::uint8_t>;

MsgHeader header(MsgType t) {
  MsgHeader h;
  h.type = t;
  h.credits = 3;
  h.src_nid = 0x000500000a000001ULL;  // 10.0.0.1@o2ib
  h.src_stamp = 0x1122334455667788ULL;
  h.dst_nid = 0x000500000a000002ULL;  // 10.0.0.2@o2ib
  h.dst_stamp = 0;
  return h;
}

// The 48 header bytes golden for header(t) with `nob`.
Bytes golden_header(std::uint8_t type, std::uint32_t nob) {
  return {0x91,
          0x1b,
          0xe9,
          0x0b,  // magic 0x0be91b91
          0x12,
          0x00,  // version 2
          type,
          0x03,  // type, 3 credits
          static_cast<std::uint8_t>(nob),
          static_cast<std::uint8_t>(nob >> 8),
          0x00,
          0x00,  // nob
          0x00,
          0x00,
          0x00,
          0x00,  // no checksum
          0x01,
          0x00,
          0x00,
          0x0a,
          0x00,
          0x00,
          0x05,
          0x00,  // src 10.0.0.1@o2ib
          0x88,
          0x77,
          0x66,
          0x55,
          0x44,
          0x33,
          0x22,
          0x11,  // its incarnation
          0x02,
          0x00,
          0x00,
          0x0a,
          0x00,
          0x00,
          0x05,
          0x00,  // dst 10.0.0.2@o2ib
          0x00,
          0x00,
          0x00,
          0x00,
          0x00,
          0x00,
          0x00,
          0x00};  // dst incarnation unknown
}

Bytes concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Encodes with `body` (a put_* call) and finish(); the message's bytes.
template <class F>
Bytes encode(MsgType t, F body, bool cksum = false) {
  Bytes buf(kMsgSize, 0);
  MsgHeader h = header(t);
  h.nob = static_cast<std::uint32_t>(body(std::span<std::uint8_t>(buf)));
  finish(buf, h, cksum);
  buf.resize(h.nob);
  return buf;
}

Header a_put() {
  Header l;
  l.dest_nid = Nid(0x000500000a000002ULL);
  l.src_nid = Nid(0x000500000a000001ULL);
  l.dest_pid = 12345;
  l.src_pid = 12345;
  l.type = lnet::MsgType::Put;
  l.payload_length = 8;
  l.msg.put.match_bits = 0x42;
  l.msg.put.ptl_index = 40;
  return l;
}

TEST(O2ibWire, ConnReqGoldenBytesAndRoundTrip) {
  Bytes m = encode(MsgType::ConnReq, [](auto b) { return put_conn_params(b, ConnParams{8, 256, 4096}); });
  Bytes want = concat(golden_header(0xc0, 56), {0x08, 0x00, 0x00, 0x01, 0x00, 0x10, 0x00, 0x00});
  EXPECT_EQ(m, want);
  auto d = unpack(m);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->h.type, MsgType::ConnReq);
  EXPECT_EQ(d->h.version, kVersion2);
  EXPECT_EQ(d->h.credits, 3);
  EXPECT_EQ(d->h.src_nid, 0x000500000a000001ULL);
  EXPECT_EQ(d->h.src_stamp, 0x1122334455667788ULL);
  EXPECT_EQ(d->params, (ConnParams{8, 256, 4096}));
  EXPECT_FALSE(d->swapped);
}

TEST(O2ibWire, NoopAndCompletionGoldenBytes) {
  EXPECT_EQ(encode(MsgType::Noop, [](auto b) { return put_noop(b); }), golden_header(0xd0, 48));
  Bytes done = encode(MsgType::GetDone, [](auto b) { return put_completion(b, 0x0102030405060708ULL, -61); });
  EXPECT_EQ(done, concat(golden_header(0xd7, 60), {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // cookie
                                                   0xc3, 0xff, 0xff, 0xff}));                       // -ENODATA
  auto d = unpack(done);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->cookie, 0x0102030405060708ULL);
  EXPECT_EQ(d->status, -61);
  for (MsgType t : {MsgType::PutNak, MsgType::PutDone}) {
    auto c = unpack(encode(t, [](auto b) { return put_completion(b, 7, 4096); }));
    ASSERT_TRUE(c) << c.message();
    EXPECT_EQ(c->h.type, t);
    EXPECT_EQ(c->status, 4096);
  }
}

TEST(O2ibWire, ImmediateCarriesTheLnetHeaderAndThePayload) {
  Bytes m = encode(MsgType::Immediate, [](auto b) {
    std::memcpy(b.data() + kImmediatePayloadOffset, "payload!", 8);
    return put_immediate(b, a_put(), 8);
  });
  ASSERT_EQ(m.size(), 128u);
  EXPECT_EQ(Bytes(m.begin(), m.begin() + 48), golden_header(0xd1, 128));
  // The LNet header, little-endian as LNet's wire always is: dest NID first.
  EXPECT_EQ(Bytes(m.begin() + 48, m.begin() + 56), (Bytes{0x02, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x05, 0x00}));
  auto d = unpack(m);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->lnet.type, lnet::MsgType::Put);
  EXPECT_EQ(d->lnet.msg.put.match_bits, 0x42u);
  EXPECT_EQ(d->lnet.msg.put.ptl_index, 40u);
  ASSERT_EQ(d->payload.size(), 8u);
  EXPECT_EQ(std::memcmp(d->payload.data(), "payload!", 8), 0);
  EXPECT_EQ(kMaxImmediatePayload, 3976u);
}

TEST(O2ibWire, PutReqPutAckAndGetReqGoldenBytes) {
  Bytes req = encode(MsgType::PutReq, [](auto b) { return put_put_req(b, a_put(), 0xabcdef); });
  ASSERT_EQ(req.size(), 128u);
  EXPECT_EQ(Bytes(req.begin() + 120, req.end()), (Bytes{0xef, 0xcd, 0xab, 0x00, 0x00, 0x00, 0x00, 0x00}));
  const RdmaFrag frags[] = {{4096, 0x7f0000001000ULL}, {8192, 0x7f0000004000ULL}};
  Bytes ack = encode(MsgType::PutAck, [&](auto b) { return put_put_ack(b, 0xabcdef, 0x99, 0x1234, frags); });
  Bytes want = concat(golden_header(0xd4, 96), {
                                                   0xef, 0xcd, 0xab, 0, 0,    0,    0, 0,  // source cookie
                                                   0x99, 0,    0,    0, 0,    0,    0, 0,  // sink cookie
                                                   0x34, 0x12, 0,    0,                    // key
                                                   0x02, 0,    0,    0,                    // 2 fragments
                                                   0x00, 0x10, 0,    0,                    // 4096 bytes
                                                   0x00, 0x10, 0,    0, 0x00, 0x7f, 0, 0,  // at
                                                   0x00, 0x20, 0,    0,                    // 8192 bytes
                                                   0x00, 0x40, 0,    0, 0x00, 0x7f, 0, 0,  // at
                                               });
  EXPECT_EQ(ack, want);
  auto d = unpack(ack);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->src_cookie, 0xabcdefu);
  EXPECT_EQ(d->cookie, 0x99u);
  EXPECT_EQ(d->rd_key, 0x1234u);
  ASSERT_EQ(d->rd_nfrags, 2u);
  EXPECT_EQ(d->frag(0), frags[0]);
  EXPECT_EQ(d->frag(1), frags[1]);
  Header get = a_put();
  get.type = lnet::MsgType::Get;
  get.msg.get.sink_length = 1 << 20;
  Bytes greq = encode(MsgType::GetReq, [&](auto b) { return put_get_req(b, get, 5, 0x77, std::span(frags, 1)); });
  ASSERT_EQ(greq.size(), 148u);  // 136 + one fragment
  auto g = unpack(greq);
  ASSERT_TRUE(g) << g.message();
  EXPECT_EQ(g->lnet.msg.get.sink_length, 1u << 20);
  EXPECT_EQ(g->cookie, 5u);
  EXPECT_EQ(g->rd_key, 0x77u);
  EXPECT_EQ(g->frag(0), frags[0]);
}

// ko2iblnd's sum, written out as the kernel writes it, for comparison.
std::uint32_t reference_cksum(const Bytes& m) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    signed char c = (i >= 12 && i < 16) ? 0 : static_cast<signed char>(m[i]);
    sum = ((sum << 1) | (sum >> 31)) + static_cast<std::uint32_t>(static_cast<int>(c));
  }
  return sum ? sum : 1;
}

TEST(O2ibWire, ChecksumIsKo2iblndsAndIsChecked) {
  Bytes m = encode(
      MsgType::ConnAck,
      [](auto b) {
        return put_conn_params(b, ConnParams{16, 256, 4096});
      },
      true);
  std::uint32_t sent = static_cast<std::uint32_t>(m[12] | m[13] << 8 | m[14] << 16 | m[15] << 24);
  EXPECT_NE(sent, 0u);
  EXPECT_EQ(sent, reference_cksum(m));
  // Bytes above 0x7f count as negative (a signed char): the golden value of a fixed input.
  Bytes all(256);
  for (int i = 0; i < 256; ++i) all[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
  EXPECT_EQ(checksum(all), reference_cksum(all));
  EXPECT_TRUE(unpack(m));
  m[50] ^= 1;
  auto d = unpack(m);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.code(), -EPROTO);
  EXPECT_EQ(d.message(), "bad checksum");
}

// A big-endian sender's CONNREQ and PUT_ACK, written by hand.
TEST(O2ibWire, AMessageInTheOtherByteOrderIsRead) {
  Bytes m = {
      0x0b, 0xe9, 0x1b, 0x91, 0x00, 0x12, 0xc0, 0x05, 0x00, 0x00, 0x00, 0x38, 0,    0,    0,    0,
      0x00, 0x05, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x09,  // src 10.0.0.9@o2ib
      0,    0,    0,    0,    0,    0,    0,    0x2a,  // incarnation 42
      0x00, 0x05, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x01,  // dst
      0,    0,    0,    0,    0,    0,    0,    0,    0x00, 0x20, 0x01, 0x00, 0x00, 0x00, 0x10, 0x00};  // depth 32, 256
                                                                                                        // frags, 4096
  auto d = unpack(m);
  ASSERT_TRUE(d) << d.message();
  EXPECT_TRUE(d->swapped);
  EXPECT_EQ(d->h.credits, 5);
  EXPECT_EQ(d->h.nob, 56u);
  EXPECT_EQ(d->h.src_nid, 0x000500000a000009ULL);
  EXPECT_EQ(d->h.src_stamp, 42u);
  EXPECT_EQ(d->params, (ConnParams{32, 256, 4096}));
  Bytes ack = {0x0b, 0xe9, 0x1b, 0x91, 0x00, 0x12, 0xd4, 0x00, 0x00, 0x00, 0x00, 0x54, 0, 0,
               0,    0,    0x00, 0x05, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x09, 0,    0,    0, 0,
               0,    0,    0,    0x2a, 0x00, 0x05, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x01, 0, 0,
               0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0, 1,  // source cookie 1
               0,    0,    0,    0,    0,    0,    0,    2,                                   // sink cookie 2
               0,    0,    0x12, 0x34,                                                        // key
               0,    0,    0,    1,                                                           // one fragment
               0,    0x10, 0,    0,                                                           // 1 MiB
               0,    0,    0x7f, 0,    0,    0,    0x10, 0};                                  // at 0x7f0000001000
  auto a = unpack(ack);
  ASSERT_TRUE(a) << a.message();
  EXPECT_EQ(a->src_cookie, 1u);
  EXPECT_EQ(a->cookie, 2u);
  EXPECT_EQ(a->rd_key, 0x1234u);
  EXPECT_EQ(a->frag(0), (RdmaFrag{1 << 20, 0x7f0000001000ULL}));
}

TEST(O2ibWire, RejectGoldenBytesAndBothOrders) {
  Reject r;
  r.why = RejectReason::MsgQueueSize;
  r.incarnation = 0x0102030405060708ULL;
  r.params = ConnParams{8, 256, 4096};
  auto out = pack_reject(r);
  const Bytes want = {0x91, 0x1b, 0xe9, 0x0b, 0x12, 0x00, 0x07, 0x00, 0x08, 0x07, 0x06, 0x05,
                      0x04, 0x03, 0x02, 0x01, 0x08, 0x00, 0x00, 0x01, 0x00, 0x10, 0x00, 0x00};
  EXPECT_EQ(Bytes(out.begin(), out.end()), want);
  auto d = unpack_reject(out);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->why, RejectReason::MsgQueueSize);
  EXPECT_EQ(d->incarnation, r.incarnation);
  EXPECT_EQ(d->params, r.params);
  EXPECT_TRUE(d->full);
  const Bytes be = {0x0b, 0xe9, 0x1b, 0x91, 0x00, 0x12, 0x05, 0x00};  // stale, short
  auto s = unpack_reject(be);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(s->why, RejectReason::ConnStale);
  EXPECT_EQ(s->version, kVersion2);
  EXPECT_FALSE(s->full);
  EXPECT_FALSE(unpack_reject(Bytes{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_FALSE(unpack_reject(Bytes{0x91, 0x1b, 0xe9}));
}

struct Bad {
  const char* what;
  Bytes msg;
  const char* message;
};

Bytes with(Bytes m, std::size_t at, std::initializer_list<std::uint8_t> bytes) {
  for (std::uint8_t b : bytes) m[at++] = b;
  return m;
}

TEST(O2ibWire, EveryFaultAKernelReceiverRefusesIsRefused) {
  Bytes noop = encode(MsgType::Noop, [](auto b) { return put_noop(b); });
  Bytes conn = encode(MsgType::ConnReq, [](auto b) { return put_conn_params(b, ConnParams{8, 256, 4096}); });
  const RdmaFrag f[] = {{4096, 0x1000}};
  Bytes ack = encode(MsgType::PutAck, [&](auto b) { return put_put_ack(b, 1, 2, 3, f); });
  Bytes imm = encode(MsgType::Immediate, [](auto b) { return put_immediate(b, a_put(), 0); });
  const Bad cases[] = {
      {"5 bytes", Bytes(noop.begin(), noop.begin() + 5), "short message: 5 bytes"},
      {"bad magic", with(noop, 0, {0xde, 0xad}), "bad magic 0xbe9adde"},
      {"bad version", with(noop, 4, {0x13}), "bad version 0x13"},
      {"header cut", Bytes(noop.begin(), noop.begin() + 40), "short message: 40 bytes"},
      {"nob past what came", with(noop, 8, {0x40}), "short message: got 48 bytes, it says 64"},
      {"source ANY", with(noop, 16, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), "bad source NID (ANY)"},
      {"unknown type", with(noop, 6, {0xd8}), "unknown message type 0xd8"},
      {"CONNREQ cut", with(Bytes(conn.begin(), conn.begin() + 52), 8, {52}), "short CONNREQ: 52 bytes (56)"},
      {"no fragments", with(ack, 68, {0, 0, 0, 0}), "PUT_ACK with 0 RDMA fragments (1..256)"},
      {"257 fragments", with(ack, 68, {0x01, 0x01, 0, 0}), "PUT_ACK with 257 RDMA fragments (1..256)"},
      {"fragments past nob", with(ack, 68, {2}), "short PUT_ACK: 84 bytes for 2 fragments (96)"},
      {"bad LNet header", with(imm, 48 + 24, {9}), "bad LNet header in IMMEDIATE"},
  };
  for (const Bad& c : cases) {
    auto d = unpack(c.msg);
    ASSERT_FALSE(d) << c.what;
    EXPECT_EQ(d.code(), -EPROTO) << c.what;
    EXPECT_EQ(d.message(), c.message) << c.what;
  }
  // A connection that negotiated fewer fragments refuses more.
  auto d = unpack(encode(MsgType::PutAck,
                         [](auto b) {
                           const RdmaFrag two[] = {{1, 2}, {3, 4}};
                           return put_put_ack(b, 1, 2, 3, two);
                         }),
                  1);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.message(), "PUT_ACK with 2 RDMA fragments (1..1)");
}

}  // namespace
}  // namespace lnet::o2ib
