// ko2iblnd's messages and rejects (docs/design/o2iblnd.md §1): ours go out little-endian,
// a peer's come in its own order (the magic says which).
#include <lnet/o2ib/wire.hpp>

#include <bit>
#include <cerrno>
#include <string>

#include <lnet/lnd/byteorder.hpp>

namespace lnet::o2ib {

namespace {

using wire::ByteReader;
using wire::ByteWriter;

constexpr std::uint32_t kLnetProtoMagic = 0xeebc0ded;  // LNET_PROTO_MAGIC
constexpr std::size_t kCksumOffset = 12;
constexpr std::size_t kPutAckFixed = kMsgHeaderSize + 8 + 8 + 8;            // cookies, key, count
constexpr std::size_t kGetReqFixed = kMsgHeaderSize + kHeaderSize + 8 + 8;  // header, cookie, key, count
constexpr std::size_t kCompletionSize = kMsgHeaderSize + 8 + 4;

std::uint32_t swap32(std::uint32_t v) { return __builtin_bswap32(v); }

Failure bad(const std::string& why) { return Failure{-EPROTO, why}; }

std::string hex(std::uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%#llx", static_cast<unsigned long long>(v));
  return b;
}

// The descriptor after `at` (key, count, fragments), checked against what arrived.
Status read_rd(ByteReader& r, std::size_t at, std::size_t nob, unsigned max_frags, Msg& m) {
  m.rd_key = r.u32();
  m.rd_nfrags = r.u32();
  if (m.rd_nfrags == 0 || m.rd_nfrags > max_frags)
    return bad(std::string(msg_type_name(m.h.type)) + " with " + std::to_string(m.rd_nfrags) + " RDMA fragments (1.." +
               std::to_string(max_frags) + ")");
  std::size_t need = at + 8 + static_cast<std::size_t>(m.rd_nfrags) * kFragSize;
  if (nob < need)
    return bad("short " + std::string(msg_type_name(m.h.type)) + ": " + std::to_string(nob) + " bytes for " +
               std::to_string(m.rd_nfrags) + " fragments (" + std::to_string(need) + ")");
  m.frags_ = r.pos();
  return {};
}

Status read_body(ByteReader& r, std::span<const std::uint8_t> in, unsigned max_frags, Msg& m) {
  auto lnet_header = [&]() -> Status {
    if (decode_header(in.subspan(kMsgHeaderSize, kHeaderSize), m.lnet) != 0)
      return bad("bad LNet header in " + std::string(msg_type_name(m.h.type)));
    r.skip(kHeaderSize);
    return {};
  };
  switch (m.h.type) {
    case MsgType::ConnReq:
    case MsgType::ConnAck:
      m.params.queue_depth = r.u16();
      m.params.max_frags = r.u16();
      m.params.max_msg_size = r.u32();
      return {};
    case MsgType::Noop: return {};
    case MsgType::Immediate:
      if (Status s = lnet_header(); !s) return s;
      m.payload = in.subspan(kImmediatePayloadOffset, m.h.nob - kImmediatePayloadOffset);
      return {};
    case MsgType::PutReq:
      if (Status s = lnet_header(); !s) return s;
      m.cookie = r.u64();
      return {};
    case MsgType::PutAck:
      m.src_cookie = r.u64();
      m.cookie = r.u64();
      return read_rd(r, kMsgHeaderSize + 16, m.h.nob, max_frags, m);
    case MsgType::GetReq:
      if (Status s = lnet_header(); !s) return s;
      m.cookie = r.u64();
      return read_rd(r, kMsgHeaderSize + kHeaderSize + 8, m.h.nob, max_frags, m);
    case MsgType::PutNak:
    case MsgType::PutDone:
    case MsgType::GetDone:
      m.cookie = r.u64();
      m.status = r.i32();
      return {};
  }
  return bad("unknown message type " + hex(static_cast<unsigned>(m.h.type)));
}

}  // namespace

const char* msg_type_name(MsgType t) {
  switch (t) {
    case MsgType::ConnReq: return "CONNREQ";
    case MsgType::ConnAck: return "CONNACK";
    case MsgType::Noop: return "NOOP";
    case MsgType::Immediate: return "IMMEDIATE";
    case MsgType::PutReq: return "PUT_REQ";
    case MsgType::PutNak: return "PUT_NAK";
    case MsgType::PutAck: return "PUT_ACK";
    case MsgType::PutDone: return "PUT_DONE";
    case MsgType::GetReq: return "GET_REQ";
    case MsgType::GetDone: return "GET_DONE";
  }
  return "???";
}

std::size_t min_size(MsgType t) {
  switch (t) {
    case MsgType::ConnReq:
    case MsgType::ConnAck: return kMsgHeaderSize + kConnParamsSize;
    case MsgType::Noop: return kMsgHeaderSize;
    case MsgType::Immediate: return kImmediatePayloadOffset;
    case MsgType::PutReq: return kMsgHeaderSize + kHeaderSize + 8;
    case MsgType::PutAck: return kPutAckFixed;
    case MsgType::GetReq: return kGetReqFixed;
    case MsgType::PutNak:
    case MsgType::PutDone:
    case MsgType::GetDone: return kCompletionSize;
  }
  return 0;
}

const char* reject_reason_name(RejectReason r) {
  switch (r) {
    case RejectReason::ConnRace: return "connection race";
    case RejectReason::NoResources: return "no resources";
    case RejectReason::Fatal: return "fatal";
    case RejectReason::ConnUncompat: return "incompatible version";
    case RejectReason::ConnStale: return "stale";
    case RejectReason::RdmaFrags: return "RDMA fragments";
    case RejectReason::MsgQueueSize: return "queue depth";
    case RejectReason::InvalidServiceId: return "invalid service id";
    case RejectReason::Early: return "NI not ready";
  }
  return "unknown reason";
}

RdmaFrag Msg::frag(std::uint32_t i) const {
  ByteReader r(frags_ + static_cast<std::size_t>(i) * kFragSize, swapped ? wire::kForeignOrder : std::endian::little);
  RdmaFrag f;
  f.nob = r.u32();
  f.addr = r.u64();
  return f;
}

std::uint32_t checksum(std::span<const std::uint8_t> msg) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < msg.size(); ++i) {
    bool in_field = i >= kCksumOffset && i < kCksumOffset + 4;
    auto byte = static_cast<std::int8_t>(in_field ? 0 : msg[i]);
    sum = std::rotl(sum, 1) + static_cast<std::uint32_t>(static_cast<std::int32_t>(byte));
  }
  return sum == 0 ? 1 : sum;
}

Result<Msg> unpack(std::span<const std::uint8_t> in, unsigned max_frags) {
  if (in.size() < 6) return bad("short message: " + std::to_string(in.size()) + " bytes");
  Msg m;
  std::uint32_t magic = wire::get_le32(in.data());
  if (magic == kMagic)
    m.swapped = false;
  else if (magic == swap32(kMagic))
    m.swapped = true;
  else
    return bad("bad magic " + hex(magic));
  ByteReader r(in.data() + 4, m.swapped ? wire::kForeignOrder : std::endian::little);
  m.h.version = r.u16();
  if (m.h.version != kVersion1 && m.h.version != kVersion2) return bad("bad version " + hex(m.h.version));
  if (in.size() < kMsgHeaderSize) return bad("short message: " + std::to_string(in.size()) + " bytes");
  m.h.type = static_cast<MsgType>(r.u8());
  m.h.credits = r.u8();
  m.h.nob = r.u32();
  m.h.cksum = r.u32();
  if (m.h.nob > in.size())
    return bad("short message: got " + std::to_string(in.size()) + " bytes, it says " + std::to_string(m.h.nob));
  if (m.h.cksum != 0 && m.h.cksum != checksum(in.first(m.h.nob))) return bad("bad checksum");
  m.h.src_nid = r.u64();
  m.h.src_stamp = r.u64();
  m.h.dst_nid = r.u64();
  m.h.dst_stamp = r.u64();
  if (m.h.src_nid == ~0ULL) return bad("bad source NID (ANY)");
  std::size_t need = min_size(m.h.type);
  if (need == 0) return bad("unknown message type " + hex(static_cast<unsigned>(m.h.type)));
  if (m.h.nob < need)
    return bad("short " + std::string(msg_type_name(m.h.type)) + ": " + std::to_string(m.h.nob) + " bytes (" +
               std::to_string(need) + ")");
  if (m.h.nob > kMsgSize) return bad("message of " + std::to_string(m.h.nob) + " bytes (at most 4096)");
  if (Status s = read_body(r, in, max_frags, m); !s) return s.failure();
  return m;
}

// ---------------------------------------------------------------- encoding

std::size_t put_conn_params(std::span<std::uint8_t> msg, const ConnParams& p) {
  ByteWriter(msg.data() + kMsgHeaderSize).u16(p.queue_depth).u16(p.max_frags).u32(p.max_msg_size);
  return kMsgHeaderSize + kConnParamsSize;
}

std::size_t put_noop(std::span<std::uint8_t>) { return kMsgHeaderSize; }

std::size_t put_immediate(std::span<std::uint8_t> msg, const Header& lnet, std::size_t payload_len) {
  encode_header(lnet, msg.subspan(kMsgHeaderSize).first<kHeaderSize>());
  return kImmediatePayloadOffset + payload_len;
}

std::size_t put_put_req(std::span<std::uint8_t> msg, const Header& lnet, std::uint64_t cookie) {
  encode_header(lnet, msg.subspan(kMsgHeaderSize).first<kHeaderSize>());
  ByteWriter(msg.data() + kMsgHeaderSize + kHeaderSize).u64(cookie);
  return kMsgHeaderSize + kHeaderSize + 8;
}

namespace {
std::size_t put_rd(ByteWriter w, std::size_t at, std::uint32_t key, std::span<const RdmaFrag> frags) {
  w.u32(key).u32(static_cast<std::uint32_t>(frags.size()));
  for (const RdmaFrag& f : frags) w.u32(f.nob).u64(f.addr);
  return at + 8 + frags.size() * kFragSize;
}
}  // namespace

std::size_t put_put_ack(std::span<std::uint8_t> msg, std::uint64_t src_cookie, std::uint64_t dst_cookie,
                        std::uint32_t key, std::span<const RdmaFrag> frags) {
  ByteWriter w(msg.data() + kMsgHeaderSize);
  w.u64(src_cookie).u64(dst_cookie);
  return put_rd(w, kMsgHeaderSize + 16, key, frags);
}

std::size_t put_get_req(std::span<std::uint8_t> msg, const Header& lnet, std::uint64_t cookie, std::uint32_t key,
                        std::span<const RdmaFrag> frags) {
  encode_header(lnet, msg.subspan(kMsgHeaderSize).first<kHeaderSize>());
  ByteWriter w(msg.data() + kMsgHeaderSize + kHeaderSize);
  w.u64(cookie);
  return put_rd(w, kMsgHeaderSize + kHeaderSize + 8, key, frags);
}

std::size_t put_completion(std::span<std::uint8_t> msg, std::uint64_t cookie, std::int32_t status) {
  ByteWriter(msg.data() + kMsgHeaderSize).u64(cookie).i32(status);
  return kCompletionSize;
}

void finish(std::span<std::uint8_t> msg, const MsgHeader& h, bool with_checksum) {
  ByteWriter w(msg.data());
  w.u32(kMagic).u16(h.version).u8(static_cast<std::uint8_t>(h.type)).u8(h.credits).u32(h.nob).u32(0);
  w.u64(h.src_nid).u64(h.src_stamp).u64(h.dst_nid).u64(h.dst_stamp);
  if (with_checksum) wire::put_le32(msg.data() + kCksumOffset, checksum(msg.first(h.nob)));
}

std::array<std::uint8_t, kRejectSize> pack_reject(const Reject& rej) {
  std::array<std::uint8_t, kRejectSize> out{};
  ByteWriter(out.data())
      .u32(rej.magic)
      .u16(rej.version)
      .u8(static_cast<std::uint8_t>(rej.why))
      .u8(0)
      .u64(rej.incarnation)
      .u16(rej.params.queue_depth)
      .u16(rej.params.max_frags)
      .u32(rej.params.max_msg_size);
  return out;
}

Result<Reject> unpack_reject(std::span<const std::uint8_t> in) {
  if (in.size() < 8) return bad("short reject: " + std::to_string(in.size()) + " bytes");
  std::uint32_t magic = wire::get_le32(in.data());
  bool swapped;
  if (magic == kMagic || magic == kLnetProtoMagic)
    swapped = false;
  else if (magic == swap32(kMagic) || magic == swap32(kLnetProtoMagic))
    swapped = true;
  else
    return bad("reject with bad magic " + hex(magic));
  ByteReader r(in.data(), swapped ? wire::kForeignOrder : std::endian::little);
  Reject rej;
  rej.magic = r.u32();
  rej.version = r.u16();
  rej.why = static_cast<RejectReason>(r.u8());
  r.skip(1);
  rej.full = in.size() >= kRejectSize;
  if (!rej.full) return rej;
  rej.incarnation = r.u64();
  rej.params.queue_depth = r.u16();
  rej.params.max_frags = r.u16();
  rej.params.max_msg_size = r.u32();
  return rej;
}

}  // namespace lnet::o2ib
