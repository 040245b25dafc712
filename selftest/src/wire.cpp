// Self-test message codec: each body is written and read field by field at its offset
// (docs/design/selftest-wire.md §1) through liblnet's byte cursors.
#include <selftest/wire.hpp>

#include <bit>
#include <cerrno>
#include <cstring>

#include <lnet/lnd/byteorder.hpp>
#include <lnet/nid.hpp>

namespace lnet::selftest {
namespace {

// The byte cursors of <lnet/lnd/byteorder.hpp> (out: the sender's own byte order, as
// LNet's self-test writes; in: the order the magic says) with self-test's session ids
// and 32-byte names.
class Writer {
 public:
  explicit Writer(std::uint8_t* at) : w_(at, std::endian::native) {}
  Writer& u8(std::uint8_t v) { return fwd(w_.u8(v)); }
  Writer& u16(std::uint16_t v) { return fwd(w_.u16(v)); }
  Writer& u32(std::uint32_t v) { return fwd(w_.u32(v)); }
  Writer& u64(std::uint64_t v) { return fwd(w_.u64(v)); }
  Writer& s64(std::int64_t v) { return fwd(w_.i64(v)); }
  Writer& sid(const SessionId& s) { return u64(s.nid).s64(s.stamp); }
  Writer& name(const std::string& n) {
    std::uint8_t buf[kNameSize] = {};
    std::memcpy(buf, n.data(), std::min(n.size(), kNameSize - 1));
    return fwd(w_.bytes(buf, kNameSize));
  }

 private:
  Writer& fwd(wire::ByteWriter&) { return *this; }
  wire::ByteWriter w_;
};

class Reader {
 public:
  Reader(const std::uint8_t* at, bool swap) : r_(at, swap ? wire::kForeignOrder : std::endian::native) {}
  std::uint8_t u8() { return r_.u8(); }
  std::uint16_t u16() { return r_.u16(); }
  std::uint32_t u32() { return r_.u32(); }
  std::uint64_t u64() { return r_.u64(); }
  std::int64_t s64() { return r_.i64(); }
  SessionId sid() {
    SessionId s;
    s.nid = u64();
    s.stamp = s64();
    return s;
  }
  // A NUL-terminated name in its 32 bytes; false if it fills them.
  bool name(std::string& out) {
    const std::uint8_t* p = r_.pos();
    const std::uint8_t* end = static_cast<const std::uint8_t*>(std::memchr(p, 0, kNameSize));
    bool ok = end != nullptr;
    if (ok) out.assign(reinterpret_cast<const char*>(p), static_cast<std::size_t>(end - p));
    r_.skip(kNameSize);
    return ok;
  }

 private:
  wire::ByteReader r_;
};

Writer& put(Writer& w, const FwCounters& c) {
  return w.u32(c.running_ms).u32(c.active_batches).u32(c.zombie_sessions).u32(c.brw_errors).u32(c.ping_errors);
}
Writer& put(Writer& w, const RpcCounters& c) {
  return w.u32(c.errors)
      .u32(c.rpcs_sent)
      .u32(c.rpcs_rcvd)
      .u32(c.rpcs_dropped)
      .u32(c.rpcs_expired)
      .u64(c.bulk_get)
      .u64(c.bulk_put);
}
Writer& put(Writer& w, const LnetCounters& c) {
  return w.u32(c.msgs_alloc)
      .u32(c.msgs_max)
      .u32(c.errors)
      .u32(c.send_count)
      .u32(c.recv_count)
      .u32(c.route_count)
      .u32(c.drop_count)
      .u64(c.send_length)
      .u64(c.recv_length)
      .u64(c.route_length)
      .u64(c.drop_length);
}

// One overload per body: the fields in wire order.
void put_body(Writer& w, const MksnReq& b) { w.u64(b.rpyid).sid(b.sid).u32(b.force).name(b.name); }
void put_body(Writer& w, const MksnReply& b) { w.u32(b.status).sid(b.sid).u32(b.timeout).name(b.name); }
void put_body(Writer& w, const RmsnReq& b) { w.u64(b.rpyid).sid(b.sid); }
void put_body(Writer& w, const RmsnReply& b) { w.u32(b.status).sid(b.sid); }
void put_body(Writer& w, const BatchReq& b) {
  w.u64(b.rpyid).sid(b.sid).u64(b.bid.id).u32(b.opc).u32(b.testidx).u32(b.arg);
}
void put_body(Writer& w, const BatchReply& b) { w.u32(b.status).sid(b.sid).u32(b.active).u32(b.time); }
void put_body(Writer& w, const StatReq& b) { w.u64(b.rpyid).sid(b.sid).u32(b.type); }
void put_body(Writer& w, const StatReply& b) {
  w.u32(b.status).sid(b.sid);
  put(w, b.fw);
  put(w, b.rpc);
  put(w, b.lnet);
}
void put_body(Writer& w, const TestReq& b) {
  w.u64(b.rpyid).u64(b.bulkid).sid(b.sid).u64(b.bid.id).u32(b.service).u32(b.loop).u32(b.concur);
  w.u8(b.is_client).u8(b.stop_onerr).u32(b.ndest);
  if (const auto* p = std::get_if<PingParams>(&b.params)) w.u32(p->size).u32(p->flags);
  if (const auto* v0 = std::get_if<BulkParamsV0>(&b.params)) w.u32(v0->opc).u32(v0->npg).u32(v0->flags);
  if (const auto* v1 = std::get_if<BulkParamsV1>(&b.params)) w.u16(v1->opc).u16(v1->flags).u32(v1->len).u32(v1->offset);
}
void put_body(Writer& w, const TestReply& b) { w.u32(b.status).sid(b.sid); }
void put_body(Writer& w, const DebugReq& b) { w.u64(b.rpyid).sid(b.sid).u32(b.flags); }
void put_body(Writer& w, const DebugReply& b) { w.u32(b.status).sid(b.sid).u32(b.timeout).u32(b.nbatch).name(b.name); }
void put_body(Writer& w, const BrwReq& b) { w.u64(b.rpyid).u64(b.bulkid).u32(b.rw).u32(b.len).u32(b.flags); }
void put_body(Writer& w, const BrwReply& b) { w.u32(b.status); }
void put_body(Writer& w, const PingReq& b) { w.u64(b.rpyid).u32(b.magic).u32(b.seq).u64(b.time_sec).u64(b.time_nsec); }
void put_body(Writer& w, const PingReply& b) { w.u32(b.status).u32(b.magic).u32(b.seq); }
void put_body(Writer& w, const JoinReq& b) { w.u64(b.rpyid).sid(b.sid).name(b.group); }
void put_body(Writer& w, const JoinReply& b) { w.u32(b.status).sid(b.sid).u32(b.timeout).name(b.session); }

FwCounters get_fw(Reader& r) {
  FwCounters c;
  c.running_ms = r.u32();
  c.active_batches = r.u32();
  c.zombie_sessions = r.u32();
  c.brw_errors = r.u32();
  c.ping_errors = r.u32();
  return c;
}
RpcCounters get_rpc(Reader& r) {
  RpcCounters c;
  c.errors = r.u32();
  c.rpcs_sent = r.u32();
  c.rpcs_rcvd = r.u32();
  c.rpcs_dropped = r.u32();
  c.rpcs_expired = r.u32();
  c.bulk_get = r.u64();
  c.bulk_put = r.u64();
  return c;
}
LnetCounters get_lnet(Reader& r) {
  LnetCounters c;
  c.msgs_alloc = r.u32();
  c.msgs_max = r.u32();
  c.errors = r.u32();
  c.send_count = r.u32();
  c.recv_count = r.u32();
  c.route_count = r.u32();
  c.drop_count = r.u32();
  c.send_length = r.u64();
  c.recv_length = r.u64();
  c.route_length = r.u64();
  c.drop_length = r.u64();
  return c;
}

Failure bad(const std::string& what) { return Failure{-EPROTO, "self-test message: " + what}; }

// One overload per body, read in wire order; false when a name fills its 32 bytes
// without a NUL. `feats` picks TEST's brw parameters.
bool get_fields(Reader& r, MksnReq& b, std::uint32_t) {
  b.rpyid = r.u64();
  b.sid = r.sid();
  b.force = r.u32();
  return r.name(b.name);
}
bool get_fields(Reader& r, MksnReply& b, std::uint32_t) {
  b.status = r.u32();
  b.sid = r.sid();
  b.timeout = r.u32();
  return r.name(b.name);
}
bool get_fields(Reader& r, RmsnReq& b, std::uint32_t) {
  b = RmsnReq{r.u64(), r.sid()};
  return true;
}
bool get_fields(Reader& r, RmsnReply& b, std::uint32_t) {
  b = RmsnReply{r.u32(), r.sid()};
  return true;
}
bool get_fields(Reader& r, BatchReq& b, std::uint32_t) {
  b.rpyid = r.u64();
  b.sid = r.sid();
  b.bid.id = r.u64();
  b.opc = r.u32();
  b.testidx = r.u32();
  b.arg = r.u32();
  return true;
}
bool get_fields(Reader& r, BatchReply& b, std::uint32_t) {
  b.status = r.u32();
  b.sid = r.sid();
  b.active = r.u32();
  b.time = r.u32();
  return true;
}
bool get_fields(Reader& r, StatReq& b, std::uint32_t) {
  b.rpyid = r.u64();
  b.sid = r.sid();
  b.type = r.u32();
  return true;
}
bool get_fields(Reader& r, StatReply& b, std::uint32_t) {
  b.status = r.u32();
  b.sid = r.sid();
  b.fw = get_fw(r);
  b.rpc = get_rpc(r);
  b.lnet = get_lnet(r);
  return true;
}
// A TEST request's parameters: ping's for any service but brw (one the node refuses),
// brw's in the form the session's features say.
TestParams get_params(Reader& r, std::uint32_t service, std::uint32_t feats) {
  if (service != static_cast<std::uint32_t>(Service::Brw)) {
    PingParams p;
    p.size = r.u32();
    p.flags = r.u32();
    return p;
  }
  if (feats & kFeatBulkLen) {
    BulkParamsV1 v1;
    v1.opc = r.u16();
    v1.flags = r.u16();
    v1.len = r.u32();
    v1.offset = r.u32();
    return v1;
  }
  BulkParamsV0 v0;
  v0.opc = r.u32();
  v0.npg = r.u32();
  v0.flags = r.u32();
  return v0;
}
bool get_fields(Reader& r, TestReq& b, std::uint32_t feats) {
  b.rpyid = r.u64();
  b.bulkid = r.u64();
  b.sid = r.sid();
  b.bid.id = r.u64();
  b.service = r.u32();
  b.loop = r.u32();
  b.concur = r.u32();
  b.is_client = r.u8();
  b.stop_onerr = r.u8();
  b.ndest = r.u32();
  b.params = get_params(r, b.service, feats);
  return true;
}
bool get_fields(Reader& r, TestReply& b, std::uint32_t) {
  b = TestReply{r.u32(), r.sid()};
  return true;
}
bool get_fields(Reader& r, DebugReq& b, std::uint32_t) {
  b.rpyid = r.u64();
  b.sid = r.sid();
  b.flags = r.u32();
  return true;
}
bool get_fields(Reader& r, DebugReply& b, std::uint32_t) {
  b.status = r.u32();
  b.sid = r.sid();
  b.timeout = r.u32();
  b.nbatch = r.u32();
  return r.name(b.name);
}
bool get_fields(Reader& r, BrwReq& b, std::uint32_t) {
  b.rpyid = r.u64();
  b.bulkid = r.u64();
  b.rw = r.u32();
  b.len = r.u32();
  b.flags = r.u32();
  return true;
}
bool get_fields(Reader& r, BrwReply& b, std::uint32_t) {
  b = BrwReply{r.u32()};
  return true;
}
bool get_fields(Reader& r, PingReq& b, std::uint32_t) {
  b.rpyid = r.u64();
  b.magic = r.u32();
  b.seq = r.u32();
  b.time_sec = r.u64();
  b.time_nsec = r.u64();
  return true;
}
bool get_fields(Reader& r, PingReply& b, std::uint32_t) {
  b.status = r.u32();
  b.magic = r.u32();
  b.seq = r.u32();
  return true;
}
bool get_fields(Reader& r, JoinReq& b, std::uint32_t) {
  b.rpyid = r.u64();
  b.sid = r.sid();
  return r.name(b.group);
}
bool get_fields(Reader& r, JoinReply& b, std::uint32_t) {
  b.status = r.u32();
  b.sid = r.sid();
  b.timeout = r.u32();
  return r.name(b.session);
}

// Body's alternatives are in MsgType order: the body of type I is alternative I.
static_assert(std::variant_size_v<Body> == kMsgTypeCount);
template <std::size_t... I>
bool get_fields_of(std::size_t type, Reader& r, std::uint32_t feats, Body& body, std::index_sequence<I...>) {
  bool named = true;
  (void)((type == I ? (named = get_fields(r, body.emplace<I>(), feats), true) : false) || ...);
  return named;
}

Result<Body> get_body(MsgType type, Reader& r, std::uint32_t feats) {
  Body body;
  if (!get_fields_of(static_cast<std::size_t>(type), r, feats, body,
                     std::make_index_sequence<std::variant_size_v<Body>>{}))
    return bad(std::string(msg_type_name(type)) + ": a name fills its 32 bytes without a NUL");
  return body;
}

}  // namespace

const char* msg_type_name(MsgType t) {
  static constexpr const char* kNames[kMsgTypeCount] = {
      "MKSN_REQST", "MKSN_REPLY", "RMSN_REQST", "RMSN_REPLY", "BATCH_REQST", "BATCH_REPLY",
      "STAT_REQST", "STAT_REPLY", "TEST_REQST", "TEST_REPLY", "DEBUG_REQST", "DEBUG_REPLY",
      "BRW_REQST",  "BRW_REPLY",  "PING_REQST", "PING_REPLY", "JOIN_REQST",  "JOIN_REPLY"};
  auto i = static_cast<std::uint32_t>(t);
  return i < kMsgTypeCount ? kNames[i] : "INVALID";
}

MsgType request_type(Service s) {
  switch (s) {
    case Service::Debug: return MsgType::DebugReq;
    case Service::MakeSession: return MsgType::MksnReq;
    case Service::RemoveSession: return MsgType::RmsnReq;
    case Service::Batch: return MsgType::BatchReq;
    case Service::Test: return MsgType::TestReq;
    case Service::QueryStat: return MsgType::StatReq;
    case Service::Join: return MsgType::JoinReq;
    case Service::Brw: return MsgType::BrwReq;
    case Service::Ping: return MsgType::PingReq;
  }
  return MsgType::DebugReq;
}

void encode(const Message& m, std::span<std::uint8_t, kMsgSize> out) {
  std::memset(out.data(), 0, out.size());
  Writer h(out.data());
  h.u32(kMsgMagic).u32(m.version).u32(static_cast<std::uint32_t>(m.type())).u32(0).u32(0).u32(m.feats);
  Writer w(out.data() + kHeaderSize);
  std::visit([&](const auto& b) { put_body(w, b); }, m.body);
}

std::array<std::uint8_t, kMsgSize> encode(const Message& m) {
  std::array<std::uint8_t, kMsgSize> out;
  encode(m, out);
  return out;
}

Result<Message> decode(std::span<const std::uint8_t> in) {
  if (in.size() != kMsgSize) return bad(std::to_string(in.size()) + " bytes, not " + std::to_string(kMsgSize));
  std::uint32_t magic;
  std::memcpy(&magic, in.data(), 4);
  bool swap = magic != kMsgMagic;
  if (swap && __builtin_bswap32(magic) != kMsgMagic) return bad("bad magic " + std::to_string(magic));
  Reader h(in.data() + 4, swap);
  Message m;
  m.swapped = swap;
  m.version = h.u32();
  std::uint32_t type = h.u32();
  (void)h.u32();  // reserved
  (void)h.u32();
  m.feats = h.u32();
  if (type >= kMsgTypeCount) return bad("unknown type " + std::to_string(type));
  Reader r(in.data() + kHeaderSize, swap);
  auto body = get_body(static_cast<MsgType>(type), r, m.feats);
  if (!body) return body.failure();
  m.body = std::move(*body);
  return m;
}

std::size_t id_list_bytes(std::size_t n) {
  if (n == 0) return 0;
  return (n - 1) / kIdsPerPage * kPageSize + ((n - 1) % kIdsPerPage + 1) * kIdSize;  // to the end of the last id
}

void encode_ids(std::span<const ProcessIdPacked> ids, std::span<std::uint8_t> out) {
  for (std::size_t k = 0; k < ids.size(); ++k) {
    Writer w(out.data() + k / kIdsPerPage * kPageSize + k % kIdsPerPage * kIdSize);
    w.u64(ids[k].nid).u32(ids[k].pid);
  }
}

Result<std::vector<ProcessIdPacked>> decode_ids(std::span<const std::uint8_t> in, std::size_t n, bool swapped) {
  if (in.size() < id_list_bytes(n))
    return bad("a list of " + std::to_string(n) + " ids needs " + std::to_string(id_list_bytes(n)) + " bytes, got " +
               std::to_string(in.size()));
  std::vector<ProcessIdPacked> ids(n);
  for (std::size_t k = 0; k < n; ++k) {
    Reader r(in.data() + k / kIdsPerPage * kPageSize + k % kIdsPerPage * kIdSize, swapped);
    ids[k].nid = r.u64();
    ids[k].pid = r.u32();
    if (!Nid::fits_nid4(ids[k].nid))
      return bad("id " + std::to_string(k) + " is not a classic NID (its top byte is set)");
  }
  return ids;
}

SessionId session_of(const Body& b) {
  return std::visit(
      [](const auto& x) -> SessionId {
        if constexpr (requires { x.sid; }) return x.sid;
        return SessionId::invalid();
      },
      b);
}

std::uint32_t status_of(const Body& b) {
  return std::visit(
      [](const auto& x) -> std::uint32_t {
        if constexpr (requires { x.status; }) return x.status;
        return 0;
      },
      b);
}

}  // namespace lnet::selftest
