// Fuzz target: the o2ib LND's messages and rejects (o2iblnd/src/wire.cpp). The first byte
// picks the negotiated fragment limit; the rest is what arrived. Bad input fails with
// -EPROTO and a message, never a crash or a read outside the buffer; what decodes
// re-encodes to a message that decodes to the same fields.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <lnet/o2ib/wire.hpp>

namespace {

using namespace lnet::o2ib;

// Encodes `m` again from its decoded fields (little-endian, no checksum).
std::vector<std::uint8_t> reencode(const Msg& m) {
  std::vector<std::uint8_t> out(kMsgSize, 0);
  std::vector<RdmaFrag> frags;
  for (std::uint32_t i = 0; i < m.rd_nfrags; ++i) frags.push_back(m.frag(i));
  std::size_t nob = 0;
  switch (m.h.type) {
    case MsgType::ConnReq:
    case MsgType::ConnAck: nob = put_conn_params(out, m.params); break;
    case MsgType::Noop: nob = put_noop(out); break;
    case MsgType::Immediate:
      std::memcpy(out.data() + kImmediatePayloadOffset, m.payload.data(), m.payload.size());
      nob = put_immediate(out, m.lnet, m.payload.size());
      break;
    case MsgType::PutReq: nob = put_put_req(out, m.lnet, m.cookie); break;
    case MsgType::PutAck: nob = put_put_ack(out, m.src_cookie, m.cookie, m.rd_key, frags); break;
    case MsgType::GetReq: nob = put_get_req(out, m.lnet, m.cookie, m.rd_key, frags); break;
    case MsgType::PutNak:
    case MsgType::PutDone:
    case MsgType::GetDone: nob = put_completion(out, m.cookie, m.status); break;
  }
  MsgHeader h = m.h;
  h.nob = static_cast<std::uint32_t>(nob);
  finish(out, h, true);
  out.resize(nob);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  unsigned max_frags = 1 + data[0] % kMaxFrags;
  std::vector<std::uint8_t> in(data + 1, data + size);  // exactly what arrived: reads past it are caught
  auto r = unpack_reject(in);
  if (!r && (r.code() != -EPROTO || r.message().empty())) std::abort();
  auto m = unpack(in, max_frags);
  if (!m) {
    if (m.code() != -EPROTO || m.message().empty()) std::abort();
    return 0;
  }
  if (m->h.nob > in.size() || m->h.nob < min_size(m->h.type) || m->rd_nfrags > max_frags) std::abort();
  std::vector<std::uint8_t> again = reencode(*m);
  auto d = unpack(again, max_frags);
  if (!d || d->h.type != m->h.type || d->h.nob != again.size() || d->cookie != m->cookie ||
      d->src_cookie != m->src_cookie || d->status != m->status || d->params != m->params ||
      d->rd_nfrags != m->rd_nfrags || d->payload.size() != m->payload.size())
    std::abort();
  for (std::uint32_t i = 0; i < m->rd_nfrags; ++i)
    if (!(d->frag(i) == m->frag(i))) std::abort();
  return 0;
}
