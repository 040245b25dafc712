// The bridge protocol's codecs: a 16-byte frame header, then a fixed body per type (an
// ERROR's text and an inline PARSE's payload are the variable parts).
#include <lnet/lnd/byteorder.hpp>
#include <lnet/lnd/lnd.hpp>
#include <lnet/up/bridge.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace lnet::up {

namespace {

// Body sizes; an ERROR's is the minimum (its text follows).
constexpr std::size_t kHelloSize = 16;
constexpr std::size_t kWelcomeSize = 32 + 4 * kMaxNets;
constexpr std::size_t kPidNewSize = 16;
constexpr std::size_t kPidRegisterSize = 16;
constexpr std::size_t kPidReleaseSize = 16;
constexpr std::size_t kPidReplySize = 24;
constexpr std::size_t kParseSize = 24 + kHeaderSize;
constexpr std::size_t kRecvSize = 40 + kHeaderSize;
constexpr std::size_t kDoneSize = 24;
constexpr std::size_t kSendSize = 56 + kHeaderSize;
constexpr std::size_t kNotifySize = 16;
constexpr std::size_t kErrorSize = 8;
constexpr std::size_t kMemReleaseSize = 8;
static_assert(kFrameHdrSize + kErrorSize + kMaxErrorText <= kMaxFrame);
static_assert(kFrameHdrSize + kSendSize <= kMaxFrame);
static_assert(kFrameHdrSize + kParseSize + kMaxInline <= kMaxFrame);

// The bytes of a PARSE's inline payload.
std::size_t inline_size(const Parse& p) {
  return (p.flags & kParseInline) ? std::min<std::size_t>(p.hdr.payload_length, kMaxInline) : 0;
}

std::size_t body_size(Type t) {
  switch (t) {
    case Type::Hello: return kHelloSize;
    case Type::Welcome: return kWelcomeSize;
    case Type::PidNew: return kPidNewSize;
    case Type::PidRegister: return kPidRegisterSize;
    case Type::PidRelease: return kPidReleaseSize;
    case Type::PidReply: return kPidReplySize;
    case Type::Parse: return kParseSize;
    case Type::Recv: return kRecvSize;
    case Type::RecvDone: return kDoneSize;
    case Type::Send: return kSendSize;
    case Type::SendDone: return kDoneSize;
    case Type::Notify: return kNotifySize;
    case Type::Error: return kErrorSize;
    case Type::MemRelease: return kMemReleaseSize;
  }
  return 0;
}

// liblnet's byte cursors (little-endian) with the bridge's own fields: NIDs, LNet
// headers, descriptor references. The body was zeroed first, so skipped padding stays 0.
struct Writer {
  wire::ByteWriter w;
  Writer& u32(std::uint32_t v) { return put(v); }
  Writer& i32(std::int32_t v) { return put(static_cast<std::uint32_t>(v)); }
  Writer& u64(std::uint64_t v) { return put(v); }
  Writer& nid(Nid n) { return put(n.value()); }
  Writer& pad(std::size_t n) {
    w.skip(n);
    return *this;
  }
  Writer& hdr(const Header& h) {
    encode_header(h, std::span<std::uint8_t, kHeaderSize>(w.pos(), kHeaderSize));
    return pad(kHeaderSize);
  }
  Writer& desc(DescRef d) { return u32(d.index).u32(d.gen); }
  Writer& bytes(const void* src, std::size_t n) {
    w.bytes(src, n);
    return *this;
  }

 private:
  Writer& put(std::uint32_t v) {
    w.u32(v);
    return *this;
  }
  Writer& put(std::uint64_t v) {
    w.u64(v);
    return *this;
  }
};

struct Reader {
  wire::ByteReader r;
  Reader& u32(std::uint32_t& v) { return get(v); }
  Reader& i32(std::int32_t& v) {
    v = r.i32();
    return *this;
  }
  Reader& u64(std::uint64_t& v) { return get(v); }
  Reader& nid(Nid& n) {
    std::uint64_t v = r.u64();
    n = Nid::fits_nid4(v) ? Nid(v) : Nid::any();  // top byte set: no NID (the body's checks refuse ANY)
    return *this;
  }
  Reader& pad(std::size_t n) {
    r.skip(n);
    return *this;
  }
  bool hdr(Header& h) {
    int rc = decode_header(std::span<const std::uint8_t>(r.pos(), kHeaderSize), h);
    r.skip(kHeaderSize);
    return rc == 0;
  }
  Reader& desc(DescRef& d) { return u32(d.index).u32(d.gen); }
  void bytes(void* dst, std::size_t n) { r.bytes(dst, n); }
  const std::uint8_t* pos() const { return r.pos(); }

 private:
  Reader& get(std::uint32_t& v) {
    v = r.u32();
    return *this;
  }
  Reader& get(std::uint64_t& v) {
    v = r.u64();
    return *this;
  }
};

Failure bad(Type t, const std::string& why) {
  return Failure{-EPROTO, std::string("bad bridge message ") + type_name(t) + ": " + why};
}

// One writer and one reader per body, in wire order; a reader checks what it read.

void put(Writer& w, const Hello& b) { w.u32(b.version).u32(b.rank).u64(b.os_pid); }
Result<Message> read_hello(Reader& r) {
  Hello b;
  r.u32(b.version).u32(b.rank).u64(b.os_pid);
  return Message{b};
}

void put(Writer& w, const Welcome& b) {
  w.nid(b.nid).u32(b.pid).u32(b.nnets).u64(b.region_size).u32(b.max_payload).pad(4);
  for (std::size_t i = 0; i < kMaxNets; ++i) w.u32(i < b.nnets ? b.nets[i].value() : 0);
}
Result<Message> read_welcome(Reader& r, Type t) {
  Welcome b;
  r.nid(b.nid).u32(b.pid).u32(b.nnets).u64(b.region_size).u32(b.max_payload).pad(4);
  if (b.nnets > kMaxNets) return bad(t, std::to_string(b.nnets) + " nets (at most 16)");
  for (NetId& n : b.nets) {
    std::uint32_t v;
    r.u32(v);
    n = NetId(v);
  }
  return Message{b};
}

void put(Writer& w, const PidNew& b) { w.u64(b.cookie).u32(b.ranks).pad(4); }
Result<Message> read_pid_new(Reader& r) {
  PidNew b;
  r.u64(b.cookie).u32(b.ranks).pad(4);
  return Message{b};
}

// PID_REGISTER (with the ranks) and PID_RELEASE (padding there).
void put(Writer& w, const PidRegister& b) { w.u64(b.cookie).u32(b.pid).u32(b.ranks); }
void put(Writer& w, const PidRelease& b) { w.u64(b.cookie).u32(b.pid).pad(4); }
Result<Message> read_pid(Reader& r, Type t) {
  std::uint64_t cookie;
  Pid pid;
  std::uint32_t ranks;
  r.u64(cookie).u32(pid).u32(ranks);
  if (t == Type::PidRegister) return Message{PidRegister{cookie, pid, ranks}};
  return Message{PidRelease{cookie, pid}};
}

void put(Writer& w, const PidReply& b) { w.u64(b.cookie).i32(b.status).u32(b.pid).nid(b.nid); }
Result<Message> read_pid_reply(Reader& r, Type t) {
  PidReply b;
  r.u64(b.cookie).i32(b.status).u32(b.pid).nid(b.nid);
  if (b.status > 0) return bad(t, "positive status " + std::to_string(b.status));
  return Message{b};
}

void put(Writer& w, const Parse& b) {
  w.u64(b.cookie).u32(b.pid).u32(b.flags).nid(b.from).hdr(b.hdr).bytes(b.data, inline_size(b));
}
Result<Message> read_parse(Reader& r, Type t, std::size_t body_len) {
  Parse b;
  r.u64(b.cookie).u32(b.pid).u32(b.flags).nid(b.from);
  if (b.flags & ~(kParseRdma | kParseInline)) return bad(t, "unknown flags " + std::to_string(b.flags));
  if (b.flags == (kParseRdma | kParseInline)) return bad(t, "an optimised GET cannot be inline");
  if (!r.hdr(b.hdr)) return bad(t, "an LNet header that does not decode");
  std::size_t n = body_len - kParseSize;
  if (!(b.flags & kParseInline) && n) return bad(t, std::to_string(n) + " bytes after the header, not inline");
  if ((b.flags & kParseInline) && n != b.hdr.payload_length)
    return bad(t, "an inline payload of " + std::to_string(n) + " bytes for a header of " +
                      std::to_string(b.hdr.payload_length));
  r.bytes(b.data, n);
  return Message{b};
}

// A RECV's flags, before the rest is read (the body's size depends on them).
constexpr std::size_t kRecvFlagsAt = 8 + 8 + 4;  // after cookie, desc, status

void put(Writer& w, const Recv& b) {
  w.u64(b.cookie).desc(b.desc).i32(b.status).u32(b.flags).u64(b.offset).u32(b.mlen).u32(b.rlen);
  if (b.flags & kRecvSource) w.hdr(b.hdr);
}
Result<Message> read_recv(Reader& r, Type t) {
  Recv b;
  r.u64(b.cookie).desc(b.desc).i32(b.status).u32(b.flags).u64(b.offset).u32(b.mlen).u32(b.rlen);
  if (b.flags & ~(kRecvDelayed | kRecvSource)) return bad(t, "unknown flags " + std::to_string(b.flags));
  if (b.status > 0) return bad(t, "positive status " + std::to_string(b.status));
  if (b.status == 0 && !(b.flags & kRecvSource) && b.mlen > b.rlen)
    return bad(t, "mlen " + std::to_string(b.mlen) + " beyond rlen " + std::to_string(b.rlen));
  if ((b.flags & kRecvSource) && !r.hdr(b.hdr)) return bad(t, "a REPLY header that does not decode");
  return Message{b};
}

// RECV_DONE and SEND_DONE.
template <class B>
void put_done(Writer& w, const B& b) {
  w.desc(b.desc).i32(b.status).u32(b.health).u32(b.flags).pad(4);
}
void put(Writer& w, const RecvDone& b) { put_done(w, b); }
void put(Writer& w, const SendDone& b) { put_done(w, b); }
Result<Message> read_done(Reader& r, Type t) {
  DescRef d;
  std::int32_t status;
  std::uint32_t health, flags;
  r.desc(d).i32(status).u32(health).u32(flags).pad(4);
  if (status > 0) return bad(t, "positive status " + std::to_string(status));
  if (health > static_cast<std::uint32_t>(HealthStatus::NetworkTimeout))
    return bad(t, "health status " + std::to_string(health) + " unknown");
  std::uint32_t known = t == Type::RecvDone ? kDoneKept : 0;
  if (flags & ~known) return bad(t, "unknown flags " + std::to_string(flags));
  if ((flags & kDoneKept) && status == 0) return bad(t, "kept memory with status 0 (kept is for failures only)");
  if (t == Type::RecvDone) return Message{RecvDone{d, status, health, flags}};
  return Message{SendDone{d, status, health, flags}};
}

void put(Writer& w, const MemRelease& b) { w.desc(b.desc); }
Result<Message> read_mem_release(Reader& r) {
  MemRelease b;
  r.desc(b.desc);
  return Message{b};
}

void put(Writer& w, const Send& b) {
  w.desc(b.desc).u32(b.pid).pad(4).nid(b.target.nid).u32(b.target.pid).u32(b.len).nid(b.next_hop).u64(b.offset);
  w.hdr(b.hdr);
}
Result<Message> read_send(Reader& r, Type t) {
  Send b;
  r.desc(b.desc).u32(b.pid).pad(4).nid(b.target.nid).u32(b.target.pid).u32(b.len).nid(b.next_hop).u64(b.offset);
  if (!r.hdr(b.hdr)) return bad(t, "an LNet header that does not decode");
  return Message{b};
}

void put(Writer& w, const Notify& b) { w.u32(b.pid).u32(b.alive ? 1 : 0).nid(b.peer); }
Result<Message> read_notify(Reader& r, Type t) {
  Notify b;
  std::uint32_t alive;
  r.u32(b.pid).u32(alive).nid(b.peer);
  if (alive > 1) return bad(t, "alive " + std::to_string(alive) + " (0 or 1)");
  b.alive = alive == 1;
  return Message{b};
}

void put(Writer& w, const Error& b) {
  std::size_t n = std::min(b.text.size(), kMaxErrorText);
  w.i32(b.code).u32(static_cast<std::uint32_t>(n)).bytes(b.text.data(), n);
}
Result<Message> read_error(Reader& r, Type t, std::size_t body_len) {
  Error b;
  std::uint32_t n;
  r.i32(b.code).u32(n);
  if (n > kMaxErrorText) return bad(t, "text of " + std::to_string(n) + " bytes (at most 240)");
  if (n != body_len - kErrorSize)
    return bad(t, "text of " + std::to_string(n) + " bytes in a body of " + std::to_string(body_len));
  b.text.assign(reinterpret_cast<const char*>(r.pos()), n);
  return Message{b};
}

void write_body(const Message& m, Writer& w) {
  std::visit([&w](const auto& b) { put(w, b); }, m);
}

Result<Message> read_body(Type t, Reader& r, std::size_t body_len) {
  switch (t) {
    case Type::Hello: return read_hello(r);
    case Type::Welcome: return read_welcome(r, t);
    case Type::PidNew: return read_pid_new(r);
    case Type::PidRegister:
    case Type::PidRelease: return read_pid(r, t);
    case Type::PidReply: return read_pid_reply(r, t);
    case Type::Parse: return read_parse(r, t, body_len);
    case Type::Recv: return read_recv(r, t);
    case Type::RecvDone:
    case Type::SendDone: return read_done(r, t);
    case Type::Send: return read_send(r, t);
    case Type::Notify: return read_notify(r, t);
    case Type::Error: return read_error(r, t, body_len);
    case Type::MemRelease: return read_mem_release(r);
  }
  return bad(t, "unknown type");
}

}  // namespace

const char* type_name(Type t) {
  switch (t) {
    case Type::Hello: return "HELLO";
    case Type::Welcome: return "WELCOME";
    case Type::PidNew: return "PID_NEW";
    case Type::PidRegister: return "PID_REGISTER";
    case Type::PidRelease: return "PID_RELEASE";
    case Type::PidReply: return "PID_REPLY";
    case Type::Parse: return "PARSE";
    case Type::Recv: return "RECV";
    case Type::RecvDone: return "RECV_DONE";
    case Type::Send: return "SEND";
    case Type::SendDone: return "SEND_DONE";
    case Type::Notify: return "NOTIFY";
    case Type::Error: return "ERROR";
    case Type::MemRelease: return "MEM_RELEASE";
  }
  return "?";
}

long send_frame(int sock, std::span<const std::uint8_t> frame, int fd, int flags) {
  iovec iov{const_cast<std::uint8_t*>(frame.data()), frame.size()};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (fd >= 0) {
    mh.msg_control = ctl;
    mh.msg_controllen = sizeof ctl;
    cmsghdr* cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  }
  return sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
}

long receive_frame(int sock, std::span<std::uint8_t> buf, int* fd, int flags) {
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = ctl;
  mh.msg_controllen = sizeof ctl;
  long n = recvmsg(sock, &mh, flags | MSG_TRUNC | MSG_CMSG_CLOEXEC);
  *fd = -1;
  if (n < 0) return n;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) std::memcpy(fd, CMSG_DATA(cm), sizeof(int));
  return n;
}

Type type_of(const Message& m) { return static_cast<Type>(m.index() + 1); }

std::size_t encode(const Message& m, std::span<std::uint8_t, kMaxFrame> out) {
  Type t = type_of(m);
  std::size_t body = body_size(t);
  if (const Error* e = std::get_if<Error>(&m)) body += std::min(e->text.size(), kMaxErrorText);
  if (const Recv* r = std::get_if<Recv>(&m); r && !(r->flags & kRecvSource)) body -= kHeaderSize;
  if (const Parse* p = std::get_if<Parse>(&m)) body += inline_size(*p);
  std::size_t len = kFrameHdrSize + body;
  std::memset(out.data(), 0, len);
  // The frame header: magic, version, type, length (header included), reserved (0).
  wire::ByteWriter hdr(out.data());
  hdr.u32(kBridgeMagic).u16(kBridgeVersion).u16(static_cast<std::uint16_t>(t));
  hdr.u32(static_cast<std::uint32_t>(len)).u32(0);
  Writer w{hdr};
  write_body(m, w);
  return len;
}

Result<Message> decode(std::span<const std::uint8_t> in) {
  if (in.size() < kFrameHdrSize)
    return Failure{-EPROTO, "bad bridge message: " + std::to_string(in.size()) + " bytes, shorter than a header"};
  wire::ByteReader hdr(in.data());
  std::uint32_t magic = hdr.u32();
  std::uint16_t version = hdr.u16(), type = hdr.u16();
  std::uint32_t len = hdr.u32(), reserved = hdr.u32();
  if (magic != kBridgeMagic) return Failure{-EPROTO, "bad bridge message: magic " + std::to_string(magic)};
  if (version != kBridgeVersion)
    return Failure{-EPROTO, "bad bridge message: version " + std::to_string(version) + " (this side speaks " +
                                std::to_string(kBridgeVersion) + ")"};
  if (type < static_cast<std::uint16_t>(Type::Hello) || type > static_cast<std::uint16_t>(Type::MemRelease))
    return Failure{-EPROTO, "bad bridge message: unknown type " + std::to_string(type)};
  Type t = static_cast<Type>(type);
  if (len != in.size())
    return bad(t, "frame length " + std::to_string(len) + " but " + std::to_string(in.size()) + " bytes arrived");
  if (reserved != 0) return bad(t, "reserved field " + std::to_string(reserved));
  std::size_t body_len = in.size() - kFrameHdrSize;
  std::size_t want = body_size(t);
  if (t == Type::Recv) {
    // A RECV carries the REPLY's header only with kRecvSource.
    if (body_len < want - kHeaderSize) return bad(t, "body of " + std::to_string(body_len) + " bytes");
    std::uint32_t flags = wire::ByteReader(hdr.pos() + kRecvFlagsAt).u32();
    if (body_len != ((flags & kRecvSource) ? want : want - kHeaderSize))
      return bad(t, "body of " + std::to_string(body_len) + " bytes for flags " + std::to_string(flags));
  } else if (t == Type::Parse) {
    // An inline payload follows the header (its length checked against the header's).
    if (body_len < want || body_len > want + kMaxInline)
      return bad(t, "body of " + std::to_string(body_len) + " bytes (" + std::to_string(want) + " to " +
                        std::to_string(want + kMaxInline) + " expected)");
  } else if (t == Type::Error ? body_len < want : body_len != want) {
    return bad(t, "body of " + std::to_string(body_len) + " bytes (" + std::to_string(want) + " expected)");
  }
  Reader r{hdr};
  return read_body(t, r, body_len);
}

}  // namespace lnet::up
