#include <selftest/framework.hpp>

#include <cerrno>
#include <ctime>
#include <future>
#include <new>

#include <selftest/brw.hpp>

namespace lnet::selftest {
namespace {

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

// What the units of all tests may hold in bulk buffers at once.
constexpr std::size_t kMaxUnitBytes = std::size_t{2} << 30;

// Set while this thread sends a unit's RPC: a completion that comes inside the send (a
// driver that delivers at once, a send that fails) hands the unit's next RPC to the
// runner instead of recursing, and never keeps the thread that sent it.
thread_local bool t_in_issue = false;

}  // namespace

// A client test has `concur` units per destination; a unit sends its RPCs one after the
// other, `loop` of them or until stopped.
struct Framework::Unit {
  ProcessId dest;
  std::vector<std::uint8_t> buf;  // the brw bulk, reused by every RPC of the unit
  std::uint32_t left = 0;         // RPCs still to send (kLoopForever: no end)
  std::uint32_t seq = 0;          // the ping in flight
  std::atomic<std::uint64_t> rpyid{0};
};

// One test of a batch.
struct Framework::Test : std::enable_shared_from_this<Test> {
  Test(Framework& f, std::shared_ptr<Tally> t) : fw(f), rpc(f.rpc_), tally(std::move(t)) {}

  Framework& fw;
  RpcNode& rpc;
  std::shared_ptr<Tally> tally;
  Service service = Service::Ping;
  bool is_client = false, stop_onerr = false;
  std::uint32_t loop = 1, concur = 1, feats = 0;
  BrwOp op = BrwOp::Read;
  BrwCheck check = BrwCheck::None;
  std::uint32_t len = 0, off = 0;
  std::vector<std::unique_ptr<Unit>> units;
  std::mutex state;  // orders RUN and STOP
  std::atomic<bool> stopping{false};
  std::atomic<bool> aborting{false};     // a forced stop: RPCs in flight are aborted
  std::atomic<std::uint32_t> active{0};  // units running

  // Both are called without the framework's lock: a unit that ends takes it.
  void run() {
    {
      std::lock_guard g(state);
      if (!is_client || units.empty() || active.load() != 0) return;  // running: RUN changes nothing
      stopping.store(false);
      aborting.store(false);
      if (service == Service::Ping) fw.ping_seq_.store(0);
      for (auto& u : units) u->left = loop;
      active.store(static_cast<std::uint32_t>(units.size()));
    }
    for (auto& u : units) fw.post(shared_from_this(), *u);  // the runner starts them
  }

  void stop(bool abort) {
    {
      std::lock_guard g(state);
      if (abort) aborting.store(true);
      stopping.store(true);
    }
    if (abort)
      for (auto& u : units) rpc.abort(u->rpyid.load());
  }

  void issue(Unit& u) {
    if (stopping.load()) return finish(u);
    Message m;
    m.feats = feats;
    std::optional<RpcNode::Bulk> bulk;
    if (service == Service::Ping) {
      timespec ts{};
      clock_gettime(CLOCK_REALTIME, &ts);
      u.seq = fw.ping_seq_.fetch_add(1);
      m.body = PingReq{0, kPingTestMagic, u.seq, static_cast<std::uint64_t>(ts.tv_sec),
                       static_cast<std::uint64_t>(ts.tv_nsec)};
    } else {
      bool write = op == BrwOp::Write;
      brw_fill(u.buf, off % kPageSize, check, write ? kBrwMagic : kBrwPoison);
      m.body = BrwReq{0, 0, static_cast<std::uint32_t>(op), len, static_cast<std::uint32_t>(check)};
      bulk = RpcNode::Bulk{u.buf, !write};
    }
    auto self = shared_from_this();
    bool outer = !t_in_issue;
    t_in_issue = true;
    std::uint64_t id =
        rpc.call(u.dest, service, std::move(m), bulk, [self, &u](Result<Message> r) { self->done(u, std::move(r)); });
    if (outer) t_in_issue = false;
    // The id of the unit's latest RPC (ids only grow; its completion may already have
    // sent the next one from another thread).
    for (std::uint64_t seen = u.rpyid.load(); seen < id && !u.rpyid.compare_exchange_weak(seen, id);) {
    }
    // A forced STOP that came while this RPC was being sent missed it. A plain STOP lets
    // it finish, as every other RPC in flight: aborting it would count an error.
    if (aborting.load()) rpc.abort(id);
  }

  bool passed(const Unit& u, const Result<Message>& r) const {
    if (!r) return false;
    if (service == Service::Ping) {
      const auto& p = std::get<PingReply>(r->body);  // its status is not checked, as the kernel's
      return p.magic == kPingTestMagic && p.seq == u.seq;
    }
    if (std::get<BrwReply>(r->body).status != 0) return false;
    if (op == BrwOp::Write) return true;
    // The server wrote the pattern in its byte order.
    return brw_check(u.buf, off % kPageSize, check, r->swapped ? __builtin_bswap64(kBrwMagic) : kBrwMagic);
  }

  void done(Unit& u, Result<Message> r) {
    bool ok = passed(u, r);
    if (!ok) (service == Service::Ping ? tally->ping_errors : tally->brw_errors).fetch_add(1);
    if (loop != kLoopForever) --u.left;
    if (stopping.load() || u.left == 0 || (!ok && stop_onerr)) return finish(u);
    if (t_in_issue)
      fw.post(shared_from_this(), u);
    else
      issue(u);
  }

  void finish(Unit&) { fw.unit_finished(*this); }
};

Framework::Ended::~Ended() {
  for (auto& s : sessions)
    for (auto& [id, b] : s->batches)
      for (auto& t : b.tests) t->stop(true);
}

Framework::Framework(RpcNode& rpc, std::chrono::seconds session_timeout) : rpc_(rpc), timeout_(session_timeout) {
  runner_ = std::thread([this] { run_units(); });
}

void Framework::post(std::shared_ptr<Test> t, Unit& u) {
  bool wake = false;
  {
    std::lock_guard g(run_mu_);
    wake = runq_.empty() && std::this_thread::get_id() != runner_.get_id();
    runq_.emplace_back(std::move(t), &u);
  }
  if (wake) run_cv_.notify_one();
}

void Framework::run_units() {
  std::unique_lock lk(run_mu_);
  for (;;) {
    run_cv_.wait(lk, [&] { return run_stop_ || !runq_.empty(); });
    if (runq_.empty()) return;  // stopping, and nothing left to start
    auto [t, u] = std::move(runq_.front());
    runq_.pop_front();
    lk.unlock();
    t->issue(*u);
    t.reset();  // not under run_mu_: it may be the test's last reference
    lk.lock();
  }
}

Framework::~Framework() {
  for (Service s : served_) rpc_.unserve(s);
  std::vector<std::shared_ptr<Test>> tests;
  {
    std::lock_guard g(mu_);
    auto collect = [&](const std::shared_ptr<Session>& s) {
      if (!s) return;
      for (auto& [id, b] : s->batches) tests.insert(tests.end(), b.tests.begin(), b.tests.end());
    };
    collect(session_);
    for (auto& z : zombies_) collect(z);
  }
  for (auto& t : tests) t->stop(true);
  {
    std::unique_lock lk(mu_);
    idle_.wait(lk, [&] {
      if (adding_ != 0) return false;
      for (auto& t : tests)
        if (t->active.load() != 0) return false;
      return true;
    });
  }
  {
    std::lock_guard g(run_mu_);
    run_stop_ = true;
  }
  run_cv_.notify_one();
  runner_.join();
}

Status Framework::start(unsigned buffers) {
  using Responder = std::shared_ptr<RpcNode::Responder>;
  auto serve = [&](Service s, RpcNode::Handler h) {
    served_.push_back(s);
    return rpc_.serve(s, buffers, std::move(h));
  };
  for (const auto& sf :
       {std::pair{Service::MakeSession, &Framework::make_session},
        std::pair{Service::RemoveSession, &Framework::remove_session}, std::pair{Service::Debug, &Framework::query},
        std::pair{Service::QueryStat, &Framework::stat}}) {
    auto answer = sf.second;  // (a structured binding cannot be captured before C++20's P1091 in clang 14)
    if (Status st = serve(sf.first, [this, answer](const RpcNode::Request& r,
                                                   Responder resp) { resp->reply((this->*answer)(r.msg)); });
        !st)
      return st;
  }
  if (Status st = serve(Service::Batch,
                        [this](const RpcNode::Request& r, Responder resp) {
                          if (auto m = batch(r.msg))
                            resp->reply(std::move(*m));
                          else
                            resp->drop();
                        });
      !st)
    return st;
  return serve(Service::Test, [this](const RpcNode::Request& r, Responder resp) { add_test(r, resp); });
}

bool Framework::batch_active(const Batch& b) {
  for (auto& t : b.tests)
    if (t->active.load() != 0) return true;
  return false;
}

void Framework::end_locked(Ended& ended) {
  if (!session_) return;
  bool running = false;
  for (auto& [id, b] : session_->batches) running = running || batch_active(b);
  if (running) zombies_.push_back(session_);
  ended.sessions.push_back(std::move(session_));
  session_.reset();
  sessions_ended_.fetch_add(1);
}

void Framework::expire_locked(Clock::time_point now, bool touch, Ended& ended) {
  if (session_ && timeout_.count() > 0 && now - session_->last > timeout_) end_locked(ended);
  if (session_ && touch) session_->last = now;  // every framework RPC keeps it alive
}

void Framework::unit_finished(Test& t) {
  std::lock_guard g(mu_);
  if (t.active.fetch_sub(1) == 1) idle_.notify_all();
}

bool Framework::feats_differ_locked(const Message& req) const { return session_ && req.feats != session_->info.feats; }

Message Framework::reply_to(const Message& req, const std::shared_ptr<Session>& s, std::uint32_t status) {
  if (status != 0) rejected_.fetch_add(1);
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
    case MsgType::BatchReq: m.body = BatchReply{status, sid, 0, 0}; break;
    case MsgType::TestReq: m.body = TestReply{status, sid}; break;
    default: m.body = StatReply{status, sid, {}, {}, {}}; break;
  }
  return m;
}

Message Framework::make_session(const Message& req) {
  const auto& q = std::get<MksnReq>(req.body);
  Ended ended;
  std::lock_guard g(mu_);
  auto now = Clock::now();
  expire_locked(now, true, ended);
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
  end_locked(ended);
  session_ = std::make_shared<Session>();
  session_->info = {q.sid, q.name, req.feats};
  session_->started = session_->last = now;
  return reply_to(req, session_, 0);
}

Message Framework::remove_session(const Message& req) {
  const auto& q = std::get<RmsnReq>(req.body);
  Ended ended;
  std::lock_guard g(mu_);
  expire_locked(Clock::now(), true, ended);
  if (q.sid.is_invalid()) return reply_to(req, session_, kStatusEinval);
  if (!session_) return reply_to(req, session_, kStatusEsrch);
  if (feats_differ_locked(req)) return reply_to(req, session_, kStatusEproto);
  if (session_->info.sid != q.sid) return reply_to(req, session_, kStatusEbusy);
  if (--session_->refs == 0) end_locked(ended);
  return reply_to(req, session_, 0);
}

Message Framework::query(const Message& req) {
  Ended ended;
  std::lock_guard g(mu_);
  expire_locked(Clock::now(), true, ended);
  if (req.feats & ~kFeatsMask) return reply_to(req, nullptr, kStatusEproto);
  return reply_to(req, session_, session_ ? 0 : kStatusEsrch);  // the sid is not compared
}

Message Framework::stat(const Message& req) {
  SessionId sid = session_of(req.body);
  Ended ended;
  std::lock_guard g(mu_);
  auto now = Clock::now();
  expire_locked(now, true, ended);
  if (sid.is_invalid()) return reply_to(req, session_, kStatusEinval);
  if (!session_ || session_->info.sid != sid) return reply_to(req, session_, kStatusEsrch);
  if (feats_differ_locked(req)) return reply_to(req, session_, kStatusEproto);
  Message m = reply_to(req, session_, 0);
  auto& r = std::get<StatReply>(m.body);
  r.fw = fw_counters_locked();
  r.fw.running_ms = static_cast<std::uint32_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now - session_->started).count());
  r.rpc = rpc_.counters();
  r.lnet = lnet_counters(rpc_.lnet().counters());
  return m;
}

std::optional<Message> Framework::batch(const Message& req) {
  const auto& q = std::get<BatchReq>(req.body);
  Ended ended;
  std::vector<std::shared_ptr<Test>> tests;
  bool run = false, abort = false;
  Message m;
  {
    std::lock_guard g(mu_);
    expire_locked(Clock::now(), true, ended);
    if (feats_differ_locked(req)) return reply_to(req, session_, kStatusEproto);
    if (!session_ || session_->info.sid != q.sid) return reply_to(req, session_, kStatusEsrch);
    auto it = session_->batches.find(q.bid.id);
    if (it == session_->batches.end()) return reply_to(req, session_, kStatusEnoent);
    Batch& b = it->second;
    m = reply_to(req, session_, 0);
    auto& r = std::get<BatchReply>(m.body);
    switch (static_cast<BatchOp>(q.opc)) {
      case BatchOp::Run:
        tests = b.tests;  // started below, unlocked: a unit may end at once
        run = true;
        break;
      case BatchOp::Stop:
        tests = b.tests;  // stopped below, unlocked: aborting completes RPCs here
        abort = q.arg != 0;
        break;
      case BatchOp::Query:
        if (q.testidx > static_cast<std::uint32_t>(INT32_MAX)) return reply_to(req, session_, kStatusEinval);
        if (q.testidx == 0) {
          for (auto& t : b.tests) r.active += t->active.load() != 0 ? 1 : 0;
        } else if (q.testidx > b.tests.size()) {
          return reply_to(req, session_, kStatusEnoent);
        } else {
          r.active = b.tests[q.testidx - 1]->active.load();
        }
        return m;
      default: return std::nullopt;
    }
  }
  for (auto& t : tests) run ? t->run() : t->stop(abort);
  return m;
}

std::uint32_t Framework::make_test(const Message& req, std::shared_ptr<Test>& out) {
  const auto& q = std::get<TestReq>(req.body);
  auto t = std::make_shared<Test>(*this, session_->tally);
  t->service = static_cast<Service>(q.service);
  t->is_client = q.is_client != 0;
  t->stop_onerr = q.stop_onerr != 0;
  t->loop = q.loop;
  t->concur = q.concur;
  t->feats = req.feats;
  if (t->is_client && t->service == Service::Brw) {
    std::uint32_t opc = 0, flags = 0;
    if (const auto* v1 = std::get_if<BulkParamsV1>(&q.params)) {
      opc = v1->opc;
      flags = v1->flags;
      t->len = v1->len;
      t->off = v1->offset;
    } else if (const auto* v0 = std::get_if<BulkParamsV0>(&q.params)) {
      opc = v0->opc;
      flags = v0->flags;
      if (v0->npg > kMaxPayload / kPageSize) return kStatusEinval;
      t->len = static_cast<std::uint32_t>(v0->npg * kPageSize);
    } else {
      return kStatusEinval;
    }
    if (t->off % 8 != 0 || t->len == 0 || t->len > kMaxPayload ||
        (opc != static_cast<std::uint32_t>(BrwOp::Read) && opc != static_cast<std::uint32_t>(BrwOp::Write)) ||
        flags < static_cast<std::uint32_t>(BrwCheck::None) || flags > static_cast<std::uint32_t>(BrwCheck::Discard))
      return kStatusEinval;
    t->op = static_cast<BrwOp>(opc);
    t->check = static_cast<BrwCheck>(flags);
  }
  out = std::move(t);
  return 0;
}

std::uint32_t Framework::install_locked(const Message& req, std::shared_ptr<Test> t) {
  const auto& q = std::get<TestReq>(req.body);
  if (!session_ || session_->info.sid != q.sid) return kStatusEnoent;
  if (feats_differ_locked(req)) return kStatusEproto;
  Batch& b = session_->batches[q.bid.id];  // made on demand
  b.bid = q.bid;
  if (batch_active(b)) return kStatusEbusy;
  t->tally = session_->tally;
  b.tests.push_back(std::move(t));
  return 0;
}

// A TEST request checked and its test made (a server's installed at once): 0, or the
// status that refuses it.
std::uint32_t Framework::admit_test(const Message& req, std::shared_ptr<Test>& t) {
  const auto& q = std::get<TestReq>(req.body);
  if (q.loop == 0 || q.concur == 0 || q.sid.is_invalid() || q.ndest > kMaxNdests || (q.is_client && q.ndest == 0) ||
      q.concur > kMaxConcur || q.service >= kServiceMax || q.service < kFrameworkServiceMax + 1)
    return kStatusEinval;
  Ended ended;
  std::lock_guard g(mu_);
  expire_locked(Clock::now(), true, ended);
  std::uint32_t st = 0;
  if (feats_differ_locked(req))
    st = kStatusEproto;
  else if (!session_ || session_->info.sid != q.sid)
    st = kStatusEnoent;
  else if (auto it = session_->batches.find(q.bid.id); it != session_->batches.end() && batch_active(it->second))
    st = kStatusEbusy;
  else
    st = make_test(req, t);
  if (st == 0 && !t->is_client) st = install_locked(req, t);  // a server test only tells how busy it will be
  return st;
}

void Framework::add_test(const RpcNode::Request& r, const std::shared_ptr<RpcNode::Responder>& resp) {
  std::shared_ptr<Test> t;
  if (std::uint32_t st = admit_test(r.msg, t); st != 0 || !t->is_client) {
    Message m;
    {
      std::lock_guard g(mu_);
      m = reply_to(r.msg, session_, st);
    }
    return resp->reply(std::move(m));
  }
  // The destination list comes from the console as the request's bulk.
  auto ids = std::make_shared<std::vector<std::uint8_t>>(id_list_bytes(std::get<TestReq>(r.msg.body).ndest));
  Message req = r.msg;
  {
    std::lock_guard g(mu_);
    ++adding_;  // the destructor waits for the bulk (LNet ends it, at worst by its timeout)
  }
  resp->bulk(*ids, false, [this, ids, req, t, resp](int status) { dests_arrived(status, *ids, req, t, *resp); });
}

void Framework::dests_arrived(int status, std::span<const std::uint8_t> ids, const Message& req,
                              const std::shared_ptr<Test>& t, RpcNode::Responder& resp) {
  if (status != 0) {
    resp.drop();  // as a failed bulk drops any RPC
  } else {
    std::uint32_t got = make_units(*t, ids, std::get<TestReq>(req.body), req.swapped);
    Message m;
    {
      std::lock_guard g(mu_);
      if (got == 0) got = install_locked(req, t);
      m = reply_to(req, session_, got);
    }
    resp.reply(std::move(m));
  }
  std::lock_guard g(mu_);
  if (--adding_ == 0) idle_.notify_all();
}

std::uint32_t Framework::make_units(Test& t, std::span<const std::uint8_t> ids, const TestReq& q, bool swapped) {
  auto dests = decode_ids(ids, q.ndest, swapped);
  if (!dests) return kStatusEinval;
  if (static_cast<std::size_t>(t.len) * q.ndest * q.concur > kMaxUnitBytes) return kStatusEnomem;
  try {
    for (const auto& d : *dests)
      for (std::uint32_t k = 0; k < q.concur; ++k) {
        auto u = std::make_unique<Unit>();
        u->dest = ProcessId{Nid(d.nid), d.pid};
        u->buf.resize(t.service == Service::Brw ? t.len : 0);
        t.units.push_back(std::move(u));
      }
  } catch (const std::bad_alloc&) {
    return kStatusEnomem;
  }
  return 0;
}

Status Framework::join(ProcessId console, const std::string& group) {
  if (group.empty() || group.size() >= kNameSize) return Failure{-EINVAL, "bad group name '" + group + "'"};
  {
    Ended ended;
    std::lock_guard g(mu_);
    expire_locked(Clock::now(), false, ended);
    if (session_) return Failure{-EBUSY, "this node is in session '" + session_->info.name + "' already"};
  }
  std::promise<Result<Message>> done;
  rpc_.call(console, Service::Join, Message{kMsgVersion, kFeatsMask, JoinReq{0, SessionId::invalid(), group}},
            std::nullopt, [&](Result<Message> r) { done.set_value(std::move(r)); });
  auto r = done.get_future().get();
  if (!r) return Failure{r.code(), "no answer from the console " + console.to_string() + ": " + r.message()};
  const auto& a = std::get<JoinReply>(r->body);
  if (a.status != 0)
    return Failure{-static_cast<int>(a.status), "the console " + console.to_string() + " refused to join '" + group +
                                                    "': " + errno_string(-static_cast<int>(a.status))};
  if (r->feats != kFeatsMask) return Failure{-EPROTO, "the console's session has features we do not speak"};
  Ended ended;
  std::lock_guard g(mu_);
  if (session_) return Failure{-EBUSY, "a console made a session here meanwhile"};
  auto now = Clock::now();
  session_ = std::make_shared<Session>();
  session_->info = {a.sid, a.session, r->feats};
  session_->started = session_->last = now;
  return {};
}

std::optional<Framework::SessionInfo> Framework::session() {
  Ended ended;
  std::lock_guard g(mu_);
  expire_locked(Clock::now(), false, ended);
  if (!session_) return std::nullopt;
  return session_->info;
}

FwCounters Framework::fw_counters() {
  std::lock_guard g(mu_);
  return fw_counters_locked();
}

FwCounters Framework::fw_counters_locked() {
  FwCounters c;
  std::erase_if(zombies_, [](const std::shared_ptr<Session>& s) {
    for (auto& [id, b] : s->batches)
      if (batch_active(b)) return false;
    return true;
  });
  c.zombie_sessions = static_cast<std::uint32_t>(zombies_.size());
  if (session_) {
    c.brw_errors = session_->tally->brw_errors.load();
    c.ping_errors = session_->tally->ping_errors.load();
    for (auto& [id, b] : session_->batches) c.active_batches += batch_active(b) ? 1 : 0;
  }
  return c;
}

}  // namespace lnet::selftest
