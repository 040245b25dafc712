// Self-test messages against their wire layout (docs/design/selftest-wire.md §1-2): each
// body is stated here field by field at its byte offset in the 160-byte message, as a
// separate description of the layout; the encoder must produce exactly those bytes (our
// order), and the decoder must read them back in either byte order.
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>

#include <selftest/brw.hpp>
#include <selftest/wire.hpp>

namespace lnet::selftest {
namespace {

struct Field {
  std::size_t at;    // offset in the message
  std::size_t size;  // 1, 2, 4, 8, or 32 (a name)
  std::uint64_t value;
  const char* name = nullptr;  // for size 32
};

// The message bytes the fields describe, in little-endian (ours) or big-endian order.
std::array<std::uint8_t, kMsgSize> bytes_of(std::uint32_t type, std::uint32_t feats, std::initializer_list<Field> body,
                                            bool big_endian) {
  std::array<std::uint8_t, kMsgSize> out{};
  auto put = [&](std::size_t at, std::size_t size, std::uint64_t v) {
    for (std::size_t i = 0; i < size; ++i) {
      std::size_t shift = 8 * (big_endian ? size - 1 - i : i);
      out[at + i] = static_cast<std::uint8_t>(v >> shift);
    }
  };
  put(0, 4, kMsgMagic);
  put(4, 4, 1);
  put(8, 4, type);
  put(20, 4, feats);
  for (const Field& f : body) {
    if (f.size == 32)
      std::memcpy(&out[f.at], f.name, std::strlen(f.name));
    else
      put(f.at, f.size, f.value);
  }
  return out;
}

constexpr std::uint64_t kNid = 0x000200000a000001ULL;  // 10.0.0.1@tcp
constexpr std::int64_t kStamp = 0x0102030405060708LL;

// The session id at msg@at: two fields.
#define SID(at) \
  Field{at, 8, kNid}, Field { at + 8, 8, static_cast<std::uint64_t>(kStamp) }

void check(const Message& m, std::initializer_list<Field> body) {
  SCOPED_TRACE(msg_type_name(m.type()));
  auto type = static_cast<std::uint32_t>(m.type());
  auto le = bytes_of(type, m.feats, body, false);
  auto be = bytes_of(type, m.feats, body, true);
  EXPECT_EQ(encode(m), le) << "our encoding is not the layout";
  auto d = decode(le);
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->body, m.body);
  EXPECT_FALSE(d->swapped);
  auto s = decode(be);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(s->body, m.body) << "the other byte order reads differently";
  EXPECT_EQ(s->feats, m.feats);
  EXPECT_TRUE(s->swapped);
}

const SessionId kSid{kNid, kStamp};

TEST(SelftestWire, SessionMessages) {
  check(Message{1, kFeatBulkLen, MksnReq{0x1111, kSid, 1, "sess"}},
        {{24, 8, 0x1111}, SID(32), {48, 4, 1}, {52, 32, 0, "sess"}});
  check(Message{1, kFeatBulkLen, MksnReply{16, kSid, 100, "other"}},
        {{24, 4, 16}, SID(28), {44, 4, 100}, {48, 32, 0, "other"}});
  check(Message{1, 0, RmsnReq{0x2222, kSid}}, {{24, 8, 0x2222}, SID(32)});
  check(Message{1, 0, RmsnReply{3, kSid}}, {{24, 4, 3}, SID(28)});
  check(Message{1, 0, DebugReq{0x3333, kSid, 7}}, {{24, 8, 0x3333}, SID(32), {48, 4, 7}});
  check(Message{1, 0, DebugReply{0, kSid, 100, 2, "s"}},
        {{24, 4, 0}, SID(28), {44, 4, 100}, {48, 4, 2}, {52, 32, 0, "s"}});
  check(Message{1, 0, JoinReq{0x4444, SessionId::invalid(), "clients"}},
        {{24, 8, 0x4444}, {32, 8, ~0ULL}, {40, 8, ~0ULL}, {48, 32, 0, "clients"}});
  check(Message{1, 0, JoinReply{0, kSid, 300, "sess"}}, {{24, 4, 0}, SID(28), {44, 4, 300}, {48, 32, 0, "sess"}});
}

TEST(SelftestWire, BatchAndStat) {
  check(Message{1, 1, BatchReq{0x5555, kSid, BatchId{9}, 2, 1, 1}},
        {{24, 8, 0x5555}, SID(32), {48, 8, 9}, {56, 4, 2}, {60, 4, 1}, {64, 4, 1}});
  check(Message{1, 1, BatchReply{0, kSid, 4, 0}}, {{24, 4, 0}, SID(28), {44, 4, 4}, {48, 4, 0}});
  check(Message{1, 1, StatReq{0x6666, kSid, 0}}, {{24, 8, 0x6666}, SID(32), {48, 4, 0}});
  StatReply st{0, kSid, {1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11, 12}, {13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}};
  check(Message{1, 1, st},
        {{24, 4, 0},   SID(28),      {44, 4, 1},   {48, 4, 2},   {52, 4, 3},   {56, 4, 4},   {60, 4, 5},
         {64, 4, 6},   {68, 4, 7},   {72, 4, 8},   {76, 4, 9},   {80, 4, 10},  {84, 8, 11},  {92, 8, 12},
         {100, 4, 13}, {104, 4, 14}, {108, 4, 15}, {112, 4, 16}, {116, 4, 17}, {120, 4, 18}, {124, 4, 19},
         {128, 8, 20}, {136, 8, 21}, {144, 8, 22}, {152, 8, 23}});
}

TEST(SelftestWire, TestRequestsCarryTheirParametersByServiceAndFeature) {
  TestReq t{0x7777, 0x8888, kSid, BatchId{3}, 11, 0xFFFFFFFF, 4, 1, 1, 2, BulkParamsV1{2, 3, 1048576, 8}};
  check(Message{1, kFeatBulkLen, t}, {{24, 8, 0x7777},
                                      {32, 8, 0x8888},
                                      SID(40),
                                      {56, 8, 3},
                                      {64, 4, 11},
                                      {68, 4, 0xFFFFFFFF},
                                      {72, 4, 4},
                                      {76, 1, 1},
                                      {77, 1, 1},
                                      {78, 4, 2},
                                      {82, 2, 2},
                                      {84, 2, 3},
                                      {86, 4, 1048576},
                                      {90, 4, 8}});
  t.params = BulkParamsV0{1, 256, 2};  // without BULK_LEN: a page count
  check(Message{1, 0, t}, {{24, 8, 0x7777},
                           {32, 8, 0x8888},
                           SID(40),
                           {56, 8, 3},
                           {64, 4, 11},
                           {68, 4, 0xFFFFFFFF},
                           {72, 4, 4},
                           {76, 1, 1},
                           {77, 1, 1},
                           {78, 4, 2},
                           {82, 4, 1},
                           {86, 4, 256},
                           {90, 4, 2}});
  t.service = 12;
  t.params = PingParams{8, 0};
  check(Message{1, kFeatBulkLen, t}, {{24, 8, 0x7777},
                                      {32, 8, 0x8888},
                                      SID(40),
                                      {56, 8, 3},
                                      {64, 4, 12},
                                      {68, 4, 0xFFFFFFFF},
                                      {72, 4, 4},
                                      {76, 1, 1},
                                      {77, 1, 1},
                                      {78, 4, 2},
                                      {82, 4, 8},
                                      {86, 4, 0}});
  check(Message{1, 0, TestReply{22, kSid}}, {{24, 4, 22}, SID(28)});
}

TEST(SelftestWire, TestServiceMessages) {
  check(Message{1, 1, BrwReq{0x9999, 0xAAAA, 2, 4096, 3}},
        {{24, 8, 0x9999}, {32, 8, 0xAAAA}, {40, 4, 2}, {44, 4, 4096}, {48, 4, 3}});
  check(Message{1, 1, BrwReply{74}}, {{24, 4, 74}});
  check(Message{1, 1, PingReq{0xBBBB, kPingTestMagic, 42, 1700000000, 999}},
        {{24, 8, 0xBBBB}, {32, 4, kPingTestMagic}, {36, 4, 42}, {40, 8, 1700000000}, {48, 8, 999}});
  check(Message{1, 1, PingReply{0, kPingTestMagic, 42}}, {{24, 4, 0}, {28, 4, kPingTestMagic}, {32, 4, 42}});
}

TEST(SelftestWire, BadMessagesAreRefusedNamingWhatIsWrong) {
  auto good = encode(Message{1, 0, RmsnReq{1, kSid}});
  auto refused = [](std::span<const std::uint8_t> in, const char* what) {
    auto r = decode(in);
    EXPECT_FALSE(r) << what;
    if (!r) {
      EXPECT_EQ(r.code(), -EPROTO);
      EXPECT_NE(r.message().find(what), std::string::npos) << r.message();
    }
  };
  refused(std::span(good).first(159), "159 bytes, not 160");
  auto m = good;
  m[0] ^= 1;
  refused(m, "bad magic");
  m = good;
  m[8] = 18;
  refused(m, "unknown type 18");
  auto t = encode(Message{1, 0, TestReq{1, 2, kSid, {}, 11, 1, 1, 0, 0, 0, BulkParamsV0{}}});
  t[64] = 13;
  auto other = decode(t);
  ASSERT_TRUE(other) << "read, for the node to answer EINVAL";
  EXPECT_EQ(std::get<TestReq>(other->body).service, 13u);
  auto n = encode(Message{1, 0, MksnReq{1, kSid, 0, "x"}});
  std::memset(&n[52], 'a', 32);
  refused(n, "without a NUL");
  // Another version is read as it is: the RPC layer answers it with EPROTO.
  m = good;
  m[4] = 2;
  auto v = decode(m);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->version, 2u);
  // A name too long for its field is cut, NUL-terminated.
  auto cut = decode(encode(Message{1, 0, MksnReq{1, kSid, 0, std::string(40, 'n')}}));
  ASSERT_TRUE(cut);
  EXPECT_EQ(std::get<MksnReq>(cut->body).name, std::string(31, 'n'));
}

TEST(SelftestWire, IdListsFill341ToAPage) {
  EXPECT_EQ(kIdsPerPage, 341u);
  EXPECT_EQ(id_list_bytes(1), 12u);
  EXPECT_EQ(id_list_bytes(341), 4092u);
  EXPECT_EQ(id_list_bytes(342), 4096u + 12u);
  std::vector<ProcessIdPacked> ids;
  for (std::uint32_t i = 0; i < 345; ++i) ids.push_back({kNid + i, 12345 + i});
  std::vector<std::uint8_t> buf(id_list_bytes(ids.size()));
  encode_ids(ids, buf);
  // Entry 341 opens the second page; each is {nid u64, pid u32}, packed.
  std::uint64_t nid;
  std::uint32_t pid;
  std::memcpy(&nid, &buf[4096], 8);
  std::memcpy(&pid, &buf[4104], 4);
  EXPECT_EQ(nid, kNid + 341);
  EXPECT_EQ(pid, 12345u + 341);
  auto back = decode_ids(buf, ids.size(), false);
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(*back, ids);
  EXPECT_FALSE(decode_ids(std::span(buf).first(4095), 342, false)) << "short for its count";
}

TEST(SelftestBrw, SimpleMarksEachFragmentsEndsFullEveryWord) {
  std::vector<std::uint8_t> buf(2 * kPageSize, 0);
  brw_fill(buf, 0, BrwCheck::Simple, kBrwMagic);
  auto word = [&](std::size_t at) {
    std::uint64_t v;
    std::memcpy(&v, &buf[at], 8);
    return v;
  };
  for (std::size_t at : {0ul, 4088ul, 4096ul, 8184ul}) EXPECT_EQ(word(at), kBrwMagic) << at;
  EXPECT_EQ(word(8), 0u);
  EXPECT_TRUE(brw_check(buf, 0, BrwCheck::Simple, kBrwMagic));
  EXPECT_FALSE(brw_check(buf, 0, BrwCheck::Full, kBrwMagic)) << "full wants every word";
  buf[4090] ^= 1;
  EXPECT_FALSE(brw_check(buf, 0, BrwCheck::Simple, kBrwMagic));
  // An offset moves the fragment boundaries: the first ends at the page's end.
  std::vector<std::uint8_t> off(4096, 0);
  brw_fill(off, 4000, BrwCheck::Simple, kBrwMagic);
  std::memcpy(&buf[0], &off[0], 8);
  EXPECT_EQ(word(0), kBrwMagic);
  std::uint64_t v;
  std::memcpy(&v, &off[88], 8);  // the last word of the first fragment (96 bytes)
  EXPECT_EQ(v, kBrwMagic);
  std::memcpy(&v, &off[96], 8);  // the second fragment's first
  EXPECT_EQ(v, kBrwMagic);
  brw_fill(buf, 0, BrwCheck::Full, kBrwPoison);
  EXPECT_TRUE(brw_check(buf, 0, BrwCheck::Full, kBrwPoison));
  EXPECT_FALSE(brw_check(buf, 0, BrwCheck::Full, kBrwMagic));
  EXPECT_TRUE(brw_check(buf, 0, BrwCheck::None, kBrwMagic)) << "none checks nothing";
}

TEST(SelftestConsole, DistributeWindows) {
  // 1:1 over 3 servers: client i talks to server i mod 3.
  EXPECT_EQ(distribute_window(0, 1, 1, 3), (std::vector<std::size_t>{0}));
  EXPECT_EQ(distribute_window(4, 1, 1, 3), (std::vector<std::size_t>{1}));
  // 2:3 over 4: clients 0,1 -> 0,1,2; clients 2,3 -> 3,0,1.
  EXPECT_EQ(distribute_window(1, 2, 3, 4), (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(distribute_window(2, 2, 3, 4), (std::vector<std::size_t>{3, 0, 1}));
  EXPECT_TRUE(distribute_window(0, 1, 5, 4).empty()) << "a span larger than the group";
}

TEST(SelftestConsole, StatRatesOverTheNodesRunningTime) {
  FwCounters f0{1000}, f1{3000};
  LnetCounters l0, l1;
  l0.recv_count = 100;
  l1.recv_count = 300;
  l0.send_count = 0xFFFFFFF0u;  // wraps
  l1.send_count = 0x10;
  l1.recv_length = 4 * 1048576;
  l1.send_length = 2000000;
  auto r = node_rates(f0, l0, f1, l1, kMiB);
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(r->recv_rate, 100.0);  // 200 messages in 2 s
  EXPECT_DOUBLE_EQ(r->send_rate, 16.0);   // 32 across the wrap
  EXPECT_DOUBLE_EQ(r->recv_bw, 2.0);      // 4 MiB in 2 s
  EXPECT_DOUBLE_EQ(node_rates(f0, l0, f1, l1, kMB)->send_bw, 1.0);
  EXPECT_FALSE(node_rates(f1, l1, f1, l1, kMiB)) << "no time passed";
  NodeRates a{10, 0, 1, 0}, b{30, 0, 3, 0};
  std::vector<NodeRates> nodes{a, b};
  GroupRates g = group_rates(nodes);
  EXPECT_EQ(g.nodes, 2u);
  EXPECT_DOUBLE_EQ(g.recv_rate.avg, 20);
  EXPECT_DOUBLE_EQ(g.recv_rate.min, 10);
  EXPECT_DOUBLE_EQ(g.recv_rate.max, 30);
  EXPECT_DOUBLE_EQ(g.send_rate.min, 0) << "a node at 0 is the minimum";
}

}  // namespace
}  // namespace lnet::selftest
