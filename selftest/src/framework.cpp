#include <selftest/framework.hpp>

namespace lnet::selftest {
namespace {

SessionId sid_of(const Body& b) {
  return std::visit(
      [](const auto& x) -> SessionId {
        if constexpr (requires { x.sid; }) return x.sid;
        return SessionId::invalid();
      },
      b);
}

LnetCounters lnet_counters(const Counters& c) {
  LnetCounters l;
  l.msgs_alloc = static_cast<std::uint32_t>(c.msgs_alloc);
  l.msgs_max = static_cast<std::uint32_t>(c.msgs_max);
  l.errors = static_cast<std::uint32_t>(c.errors);
  l.send_count = static_cast<std::uint32_t>(c.send_count);
  l.recv_count = static_cast<std::uint32_t>(c.recv_count);
  l.route_count = static_cast<std::uint32_t>(c.route_count);
  l.drop_count = static_cast<std::uint32_t>(c.drop_count);
  l.send_length = c.send_length;
  l.recv_length = c.recv_length;
  l.route_length = c.route_length;
  l.drop_length = c.drop_length;
  return l;
}

}  // namespace

Framework::Framework(RpcNode& rpc, std::chrono::seconds session_timeout) : rpc_(rpc), timeout_(session_timeout) {}

Status Framework::start(unsigned buffers) {
  auto serve = [&](Service s, Message (Framework::*answer)(const Message&)) {
    return rpc_.serve(s, buffers, [this, answer](const RpcNode::Request& r, std::shared_ptr<RpcNode::Responder> resp) {
      resp->reply((this->*answer)(r.msg));
    });
  };
  for (auto [s, f] : {std::pair{Service::MakeSession, &Framework::make_session},
                      std::pair{Service::RemoveSession, &Framework::remove_session},
                      std::pair{Service::Debug, &Framework::query}, std::pair{Service::QueryStat, &Framework::stat}})
    if (Status st = serve(s, f); !st) return st;
  return {};
}

void Framework::expire_locked(Clock::time_point now, bool touch) {
  if (session_ && timeout_.count() > 0 && now - session_->last > timeout_) session_.reset();
  if (session_ && touch) session_->last = now;  // every framework RPC keeps it alive
}

bool Framework::feats_differ_locked(const Message& req) const { return session_ && req.feats != session_->info.feats; }

Message Framework::reply_to(const Message& req, const std::optional<Session>& s, std::uint32_t status) {
  Message m;
  m.version = kMsgVersion;
  m.feats = s ? s->info.feats : kFeatsMask;
  SessionId sid = s ? s->info.sid : SessionId::invalid();
  switch (req.type()) {
    case MsgType::MksnReq:
      m.body = MksnReply{status, sid, static_cast<std::uint32_t>(timeout_.count()), s ? s->info.name : ""};
      break;
    case MsgType::RmsnReq: m.body = RmsnReply{status, sid}; break;
    case MsgType::DebugReq:
      m.body = DebugReply{status, sid, static_cast<std::uint32_t>(timeout_.count()), 0, s ? s->info.name : ""};
      break;
    default: m.body = StatReply{status, sid, {}, {}, {}}; break;
  }
  return m;
}

Message Framework::make_session(const Message& req) {
  const auto& q = std::get<MksnReq>(req.body);
  std::lock_guard g(mu_);
  auto now = Clock::now();
  expire_locked(now, true);
  if (req.feats & ~kFeatsMask) {
    Message m = reply_to(req, session_, kStatusEproto);
    std::get<MksnReply>(m.body).sid = SessionId::invalid();
    return m;
  }
  if (q.sid.is_invalid()) return reply_to(req, session_, kStatusEinval);
  if (session_ && session_->info.sid == q.sid) {
    ++session_->refs;  // the same console again
    return reply_to(req, session_, 0);
  }
  if (session_ && !q.force) return reply_to(req, session_, kStatusEbusy);  // carries the other's name
  session_ = Session{{q.sid, q.name, req.feats}, 1, now, now};
  return reply_to(req, session_, 0);
}

Message Framework::remove_session(const Message& req) {
  const auto& q = std::get<RmsnReq>(req.body);
  std::lock_guard g(mu_);
  expire_locked(Clock::now(), true);
  if (q.sid.is_invalid()) return reply_to(req, session_, kStatusEinval);
  if (!session_) return reply_to(req, session_, kStatusEsrch);
  if (feats_differ_locked(req)) return reply_to(req, session_, kStatusEproto);
  if (session_->info.sid != q.sid) return reply_to(req, session_, kStatusEbusy);
  if (--session_->refs == 0) session_.reset();
  return reply_to(req, session_, 0);
}

Message Framework::query(const Message& req) {
  std::lock_guard g(mu_);
  expire_locked(Clock::now(), true);
  if (req.feats & ~kFeatsMask) return reply_to(req, std::nullopt, kStatusEproto);
  return reply_to(req, session_, session_ ? 0 : kStatusEsrch);  // the sid is not compared
}

Message Framework::stat(const Message& req) {
  SessionId sid = sid_of(req.body);
  std::lock_guard g(mu_);
  auto now = Clock::now();
  expire_locked(now, true);
  if (sid.is_invalid()) return reply_to(req, session_, kStatusEinval);
  if (!session_ || session_->info.sid != sid) return reply_to(req, session_, kStatusEsrch);
  if (feats_differ_locked(req)) return reply_to(req, session_, kStatusEproto);
  Message m = reply_to(req, session_, 0);
  auto& r = std::get<StatReply>(m.body);
  r.fw.running_ms = static_cast<std::uint32_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now - session_->started).count());
  r.fw.active_batches = active_batches_;
  r.fw.zombie_sessions = zombies_;
  r.fw.brw_errors = brw_errors_;
  r.fw.ping_errors = ping_errors_;
  r.rpc = rpc_.counters();
  r.lnet = lnet_counters(rpc_.lnet().counters());
  return m;
}

std::optional<Framework::SessionInfo> Framework::session() {
  std::lock_guard g(mu_);
  expire_locked(Clock::now(), false);
  if (!session_) return std::nullopt;
  return session_->info;
}

FwCounters Framework::fw_counters() {
  std::lock_guard g(mu_);
  FwCounters c;
  c.zombie_sessions = zombies_;
  c.brw_errors = brw_errors_;
  c.ping_errors = ping_errors_;
  c.active_batches = active_batches_;
  return c;
}

}  // namespace lnet::selftest
