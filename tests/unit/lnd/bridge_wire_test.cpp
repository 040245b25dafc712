// The bridge protocol's codec: golden bytes, every message type round trips, and every
// malformed frame is refused naming its fault.
#include <gtest/gtest.h>

#include <lnet/lnd/byteorder.hpp>
#include <lnet/lnd/lnd.hpp>
#include <lnet/up/bridge.hpp>

namespace lnet::up {
namespace {

using Frame = std::vector<std::uint8_t>;

Frame frame(const Message& m) {
  std::uint8_t buf[kMaxFrame];
  std::size_t n = encode(m, std::span<std::uint8_t, kMaxFrame>(buf, kMaxFrame));
  return Frame(buf, buf + n);
}

Header put_header() {
  Header h;
  h.dest_nid = *Nid::parse("10.0.0.1@mpi");
  h.src_nid = *Nid::parse("3@mpi");
  h.dest_pid = kPidLustre;
  h.src_pid = kPidUserFlag | 77;
  h.type = MsgType::Put;
  h.payload_length = 4096;
  h.msg.put.ack_wmd = WireHandle::none();
  h.msg.put.match_bits = 0x1122334455667788ULL;
  h.msg.put.ptl_index = 8;
  return h;
}

std::string refused(const Frame& f) {
  auto m = decode(f);
  EXPECT_FALSE(m);
  if (m) return "accepted";
  EXPECT_EQ(m.code(), -EPROTO);
  return m.message();
}

TEST(BridgeWire, FrameHeaderIsLittleEndianMagicVersionTypeLength) {
  Frame f = frame(PidNew{0x0102030405060708ULL, 0x0a0b0c0d});
  ASSERT_EQ(f.size(), kFrameHdrSize + 16);
  const std::uint8_t want[] = {0x4c, 0x4e, 0x55, 0x42,              // "LNUB"
                               3,    0,                             // version
                               3,    0,                             // PID_NEW
                               32,   0,    0,    0,                 // whole frame
                               0,    0,    0,    0,                 // reserved
                               8,    7,    6,    5,    4, 3, 2, 1,  // cookie
                               0x0d, 0x0c, 0x0b, 0x0a,              // ranks
                               0,    0,    0,    0};
  EXPECT_EQ(f, Frame(std::begin(want), std::end(want)));
}

TEST(BridgeWire, EveryTypeRoundTrips) {
  Welcome w;
  w.nid = *Nid::parse("192.168.1.2@mpi");
  w.pid = kPidLustre;
  w.region_size = 1ULL << 30;
  w.max_payload = 1 << 20;
  w.nnets = 2;
  w.nets[0] = *NetId::parse("tcp");
  w.nets[1] = *NetId::parse("o2ib3");
  Parse p{42, kPidUserFlag | 9, kParseRdma, *Nid::parse("5@mpi"), put_header()};
  Recv r;
  r.cookie = 42;
  r.desc = {7, 3};
  r.flags = kRecvSource | kRecvDelayed;
  r.offset = 1 << 20;
  r.mlen = 100;
  r.rlen = 100;
  r.hdr = put_header();
  Recv plain = r;
  plain.flags = 0;
  plain.hdr = Header{};
  Send s;
  s.desc = {1, 2};
  s.pid = kPidUserFlag | 9;
  s.target = ProcessId{*Nid::parse("5@mpi"), kPidUserFlag | 9};
  s.next_hop = *Nid::parse("5@mpi");
  s.offset = 8192;
  s.len = 4096;
  s.hdr = put_header();
  const Message all[] = {Hello{1, 3, 4242},
                         w,
                         PidNew{5, 64},
                         PidRegister{6, kPidUserFlag | 9, 64},
                         PidRelease{7, kPidUserFlag | 9},
                         PidReply{8, -EEXIST, kPidUserFlag | 9, *Nid::parse("10.1.2.3@mpi2")},
                         p,
                         r,
                         plain,
                         RecvDone{{7, 3}, -EIO, static_cast<std::uint32_t>(HealthStatus::LocalError)},
                         RecvDone{{7, 4}, -ETIMEDOUT, static_cast<std::uint32_t>(HealthStatus::LocalError), kDoneKept},
                         s,
                         SendDone{{1, 2}, 0, 0},
                         Notify{kPidUserFlag | 9, *Nid::parse("5@mpi"), true},
                         Error{-EPROTO, "bad thing"},
                         MemRelease{{9, 2}}};
  for (const Message& m : all) {
    Frame f = frame(m);
    auto back = decode(f);
    ASSERT_TRUE(back) << type_name(type_of(m)) << ": " << back.message();
    EXPECT_EQ(type_of(*back), type_of(m));
    EXPECT_EQ(frame(*back), f) << type_name(type_of(m));  // every field survived
  }
  EXPECT_EQ(frame(plain).size() + kHeaderSize, frame(r).size());  // the REPLY header only with kRecvSource
  auto pb = decode(frame(p));
  EXPECT_EQ(std::get<Parse>(*pb).hdr.msg.put.match_bits, 0x1122334455667788ULL);
  EXPECT_EQ(std::get<Parse>(*pb).from, *Nid::parse("5@mpi"));
  EXPECT_EQ(std::get<Error>(*decode(frame(Error{-5, "x"}))).text, "x");
}

TEST(BridgeWire, ErrorTextIsCutAt240Bytes) {
  auto m = decode(frame(Error{-EIO, std::string(1000, 'a')}));
  ASSERT_TRUE(m);
  EXPECT_EQ(std::get<Error>(*m).text.size(), kMaxErrorText);
}

TEST(BridgeWire, RefusesMalformedFramesNamingTheFault) {
  Frame good = frame(Parse{1, kPidUserFlag | 1, 0, *Nid::parse("0@mpi"), put_header()});
  auto with = [&](std::size_t at, std::uint32_t v) {
    Frame f = good;
    wire::put_le32(f.data() + at, v);
    return f;
  };
  EXPECT_NE(refused(Frame(good.begin(), good.begin() + 10)).find("shorter than a header"), std::string::npos);
  EXPECT_NE(refused(with(0, 0xdeadbeef)).find("magic"), std::string::npos);
  Frame v = good;
  wire::put_le16(v.data() + 4, 1);  // the version before PID_NEW carried the ranks
  EXPECT_NE(refused(v).find("version 1"), std::string::npos);
  Frame t = good;
  wire::put_le16(t.data() + 6, 99);
  EXPECT_NE(refused(t).find("unknown type 99"), std::string::npos);
  wire::put_le16(t.data() + 6, 0);
  EXPECT_NE(refused(t).find("unknown type 0"), std::string::npos);
  EXPECT_NE(refused(with(8, 1000)).find("frame length 1000"), std::string::npos);
  EXPECT_NE(refused(with(12, 1)).find("reserved"), std::string::npos);
  Frame longer = good;
  longer.push_back(0);
  wire::put_le32(longer.data() + 8, static_cast<std::uint32_t>(longer.size()));
  EXPECT_NE(refused(longer).find("PARSE: 1 bytes after the header, not inline"), std::string::npos);
  EXPECT_NE(refused(with(kFrameHdrSize + 12, 4)).find("unknown flags 4"), std::string::npos);
  Frame hdr = good;  // the LNet header's type field
  wire::put_le32(hdr.data() + kFrameHdrSize + 24 + 24, 99);
  EXPECT_NE(refused(hdr).find("LNet header that does not decode"), std::string::npos);
}

// The immediate receive: a small payload rides in its PARSE, its length the header's.
TEST(BridgeWire, InlineParseCarriesItsPayload) {
  Header h = put_header();
  h.payload_length = 11;
  Parse p{0, kPidUserFlag | 3, kParseInline, *Nid::parse("2@mpi"), h};
  std::memcpy(p.data, "hello there", 11);
  Frame f = frame(p);
  EXPECT_EQ(f.size(), kFrameHdrSize + 24 + kHeaderSize + 11);
  auto m = decode(f);
  ASSERT_TRUE(m) << m.message();
  const Parse& back = std::get<Parse>(*m);
  EXPECT_EQ(back.flags, kParseInline);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(back.data), 11), "hello there");

  Frame shorter(f.begin(), f.end() - 1);  // one byte fewer than the header says
  wire::put_le32(shorter.data() + 8, static_cast<std::uint32_t>(shorter.size()));
  EXPECT_NE(refused(shorter).find("inline payload of 10 bytes for a header of 11"), std::string::npos);
  Frame both = f;
  wire::put_le32(both.data() + kFrameHdrSize + 12, kParseInline | kParseRdma);
  EXPECT_NE(refused(both).find("optimised GET cannot be inline"), std::string::npos);
  Frame big = f;  // more than 256 bytes after the header
  big.resize(kFrameHdrSize + 24 + kHeaderSize + kMaxInline + 1);
  wire::put_le32(big.data() + 8, static_cast<std::uint32_t>(big.size()));
  EXPECT_NE(refused(big).find("PARSE: body of 353 bytes"), std::string::npos);
  // An inline PARSE of an empty payload (a GET, an ACK) is a header alone.
  h.payload_length = 0;
  Frame empty = frame(Parse{0, kPidUserFlag | 3, kParseInline, *Nid::parse("2@mpi"), h});
  EXPECT_EQ(empty.size(), kFrameHdrSize + 24 + kHeaderSize);
  EXPECT_TRUE(decode(empty));
}

TEST(BridgeWire, RefusesBadFieldsOfEachType) {
  Welcome w;
  Frame f = frame(w);
  wire::put_le32(f.data() + kFrameHdrSize + 12, 17);  // nnets
  EXPECT_NE(refused(f).find("17 nets"), std::string::npos);

  Frame done = frame(SendDone{{1, 1}, 0, 0});
  Frame h = done;
  wire::put_le32(h.data() + kFrameHdrSize + 12, 11);
  EXPECT_NE(refused(h).find("health status 11 unknown"), std::string::npos);
  Frame st = done;
  wire::put_le32(st.data() + kFrameHdrSize + 8, 5);
  EXPECT_NE(refused(st).find("positive status 5"), std::string::npos);

  Frame fl = done;
  wire::put_le32(fl.data() + kFrameHdrSize + 16, kDoneKept);  // kept is a RECV_DONE's flag
  EXPECT_NE(refused(fl).find("unknown flags 1"), std::string::npos);
  Frame ok = frame(RecvDone{{1, 1}, 0, 0, 0});
  wire::put_le32(ok.data() + kFrameHdrSize + 16, kDoneKept);  // kept with status 0
  EXPECT_NE(refused(ok).find("kept memory with status 0"), std::string::npos);

  Frame n = frame(Notify{1, Nid::lo(), true});
  wire::put_le32(n.data() + kFrameHdrSize + 4, 2);
  EXPECT_NE(refused(n).find("alive 2"), std::string::npos);

  Frame e = frame(Error{-1, "abc"});
  wire::put_le32(e.data() + kFrameHdrSize + 4, 2);  // text length disagrees with the frame
  EXPECT_NE(refused(e).find("text of 2 bytes in a body of 11"), std::string::npos);

  Recv r;
  r.mlen = 10;
  r.rlen = 5;
  EXPECT_NE(refused(frame(r)).find("mlen 10 beyond rlen 5"), std::string::npos);
  Recv src;
  src.flags = kRecvSource;
  src.hdr = put_header();
  Frame s = frame(src);
  wire::put_le32(s.data() + kFrameHdrSize + 20, 0);  // flags say no header, but one is there
  EXPECT_NE(refused(s).find("for flags 0"), std::string::npos);
}

}  // namespace
}  // namespace lnet::up
