#include <selftest/services.hpp>

#include <vector>

#include <selftest/brw.hpp>

namespace lnet::selftest {
namespace {

std::uint64_t swap64(std::uint64_t v) { return __builtin_bswap64(v); }

constexpr std::size_t kPoolKeep = 64;  // free buffers kept (64 MiB at most)

}  // namespace

TestServices::~TestServices() {
  if (!serving_) return;
  rpc_.unserve(Service::Ping);
  rpc_.unserve(Service::Brw);
}

std::shared_ptr<std::uint8_t> TestServices::buffer() {
  std::unique_ptr<std::uint8_t[]> b;
  {
    std::lock_guard g(shared_->mu);
    if (!shared_->free.empty()) {
      b = std::move(shared_->free.back());
      shared_->free.pop_back();
    }
  }
  if (!b) b = std::make_unique_for_overwrite<std::uint8_t[]>(kMaxPayload);
  return std::shared_ptr<std::uint8_t>(b.release(), [pool = shared_](std::uint8_t* p) {
    std::unique_ptr<std::uint8_t[]> back(p);
    std::lock_guard g(pool->mu);
    if (pool->free.size() < kPoolKeep) pool->free.push_back(std::move(back));
  });
}

Status TestServices::start(unsigned buffers) {
  if (Status s = rpc_.serve(Service::Ping, buffers, [this](const auto& r, auto resp) { ping(r, resp); }); !s) return s;
  serving_ = true;
  return rpc_.serve(Service::Brw, buffers, [this](const auto& r, auto resp) { brw(r, resp); });
}

void TestServices::ping(const RpcNode::Request& r, const std::shared_ptr<RpcNode::Responder>& resp) {
  const auto& q = std::get<PingReq>(r.msg.body);
  if (q.magic != kPingTestMagic) {  // dropped: the client times out, as with the kernel
    shared_->ping_errors.fetch_add(1);
    resp->drop();
    return;
  }
  bool unknown = (r.msg.feats & ~kFeatsMask) != 0;
  if (unknown) shared_->ping_errors.fetch_add(1);
  resp->reply(Message{kMsgVersion, unknown ? kFeatsMask : r.msg.feats,
                      PingReply{unknown ? kStatusEproto : 0, kPingTestMagic, q.seq}});
}

void TestServices::brw(const RpcNode::Request& r, const std::shared_ptr<RpcNode::Responder>& resp) {
  const auto& q = std::get<BrwReq>(r.msg.body);
  auto answer = [&](std::uint32_t status, std::uint32_t feats) {
    if (status) shared_->brw_errors.fetch_add(1);
    resp->reply(Message{kMsgVersion, feats, BrwReply{status}});
  };
  if ((q.rw != static_cast<std::uint32_t>(BrwOp::Read) && q.rw != static_cast<std::uint32_t>(BrwOp::Write)) ||
      q.flags < static_cast<std::uint32_t>(BrwCheck::None) || q.flags > static_cast<std::uint32_t>(BrwCheck::Discard))
    return answer(kStatusEinval, r.msg.feats);
  if (r.msg.feats & ~kFeatsMask) return answer(kStatusEproto, kFeatsMask);
  // Without BULK_LEN the length is whole pages.
  if (!(r.msg.feats & kFeatBulkLen) && q.len % kPageSize != 0) return answer(kStatusEinval, r.msg.feats);
  if (q.len == 0 || q.len > kMaxPayload) return answer(kStatusEinval, r.msg.feats);
  bool write = q.rw == static_cast<std::uint32_t>(BrwOp::Write);
  auto check = static_cast<BrwCheck>(q.flags);
  // The server's bulk starts at offset 0 of its first page: the request carries none.
  auto mem = buffer();
  std::span<std::uint8_t> buf(mem.get(), q.len);
  brw_fill(buf, 0, check, write ? kBrwPoison : kBrwMagic);
  std::uint32_t feats = r.msg.feats;
  bool swapped = r.msg.swapped;
  resp->bulk(buf, !write, [shared = shared_, mem, buf, resp, write, check, feats, swapped](int status) {
    if (status != 0) {  // the bulk failed: no reply (the kernel drops the RPC)
      shared->brw_errors.fetch_add(1);
      resp->drop();
      return;
    }
    // The client wrote the pattern in its byte order.
    if (write && !brw_check(buf, 0, check, swapped ? swap64(kBrwMagic) : kBrwMagic)) {
      shared->brw_errors.fetch_add(1);
      resp->reply(Message{kMsgVersion, feats, BrwReply{kStatusEbadmsg}});
      return;
    }
    resp->reply(Message{kMsgVersion, feats, BrwReply{0}});
  });
}

}  // namespace lnet::selftest
