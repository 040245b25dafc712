#include <selftest/console.hpp>

#include <algorithm>
#include <cerrno>
#include <set>

#include <selftest/brw.hpp>

namespace lnet::selftest {
namespace {

using Clock = std::chrono::steady_clock;

std::pair<std::uint64_t, Pid> key_of(const ProcessId& id) { return {id.nid.value(), id.pid}; }

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

std::string list_ids(const std::vector<ProcessId>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size() && i < 8; ++i) s += (i ? ", " : "") + ids[i].to_string();
  if (ids.size() > 8) s += ", ... (" + std::to_string(ids.size()) + " in all)";
  return s;
}

}  // namespace

const char* node_state_name(NodeState s) {
  switch (s) {
    case NodeState::Active: return "Active";
    case NodeState::Busy: return "Busy";
    case NodeState::Down: return "Down";
    default: return "Unknown";
  }
}

Console::Console(RpcNode& rpc, Nid self) : rpc_(rpc), self_(self) {
  pinger_ = std::thread([this] { keep_alive(); });
}

Console::~Console() {
  if (serving_join_) rpc_.unserve(Service::Join);
  {
    std::lock_guard g(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  pinger_.join();
}

Status Console::serve_join(unsigned buffers) {
  serving_join_ = true;
  return rpc_.serve(
      Service::Join, buffers,
      [this](const RpcNode::Request& r, std::shared_ptr<RpcNode::Responder> resp) { resp->reply(join(r)); });
}

// A node asks to join a group: the kernel console's checks, in its order.
Message Console::join(const RpcNode::Request& r) {
  const auto& q = std::get<JoinReq>(r.msg.body);
  std::lock_guard g(mu_);
  JoinReply a;
  Message m{kMsgVersion, session_ ? session_->info.feats : kFeatsMask, {}};
  if (session_) {
    a.sid = session_->info.sid;
    a.timeout = static_cast<std::uint32_t>(session_->info.timeout.count());
    a.session = session_->info.name;
  }
  auto answer = [&](std::uint32_t status) {
    a.status = status;
    m.body = a;
    return m;
  };
  if (!session_) return answer(kStatusEsrch);
  if (r.msg.feats != session_->info.feats) return answer(kStatusEproto);
  if (!q.sid.is_invalid() && q.sid != session_->info.sid) return answer(kStatusEbusy);
  if (q.group.empty()) return answer(kStatusEinval);
  Group& grp = groups_[q.group];  // made if new
  if (grp.tests) return answer(kStatusEbusy);
  for (auto& n : grp.nodes)
    if (n->id == r.peer) return answer(kStatusEexist);
  auto n = node_locked(r.peer);
  n->state = NodeState::Active;
  n->timeout = session_->info.timeout;
  n->last_reply = Clock::now();
  grp.nodes.push_back(n);
  return answer(0);
}

Message Console::header(Body b) const {
  Message m;
  m.version = kMsgVersion;
  m.feats = session_ ? session_->info.feats : kFeatsMask;
  m.body = std::move(b);
  return m;
}

// ---------------------------------------------------------------- transactions

std::vector<NodeReply> Console::transact(const std::vector<ProcessId>& nodes, Service s, const Build& build,
                                         std::chrono::seconds timeout, const BulkOf& bulk) {
  struct Wait {
    std::mutex m;
    std::condition_variable cv;
    std::size_t left = 0;
    std::vector<NodeReply> out;
    std::vector<bool> done;
  };
  auto w = std::make_shared<Wait>();
  w->left = nodes.size();
  w->out.resize(nodes.size());
  w->done.assign(nodes.size(), false);
  for (std::size_t i = 0; i < nodes.size(); ++i) w->out[i].id = nodes[i];
  std::vector<std::uint64_t> ids(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    ids[i] = rpc_.call(nodes[i], s, build(nodes[i], i), bulk ? bulk(i) : std::nullopt, [w, i](Result<Message> r) {
      std::lock_guard g(w->m);
      if (w->done[i]) return;
      w->done[i] = true;
      if (r) {
        w->out[i].status = status_of(r->body);
        w->out[i].msg = std::move(*r);
      } else {
        w->out[i].rc = r.code();
      }
      if (--w->left == 0) w->cv.notify_all();
    });
  }
  std::vector<std::size_t> late;
  {
    std::unique_lock lk(w->m);
    w->cv.wait_until(lk, Clock::now() + timeout, [&] { return w->left == 0; });
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (!w->done[i]) late.push_back(i);
  }
  for (std::size_t i : late) rpc_.abort(ids[i]);  // its buffers are gone when this returns
  std::vector<NodeReply> out;
  {
    std::lock_guard g(w->m);
    for (std::size_t i : late) w->out[i].rc = -ETIMEDOUT;
    out = w->out;
  }
  for (const NodeReply& r : out) note_reply(r.id, r);
  return out;
}

void Console::note_reply(const ProcessId& id, const NodeReply& r) {
  std::lock_guard g(mu_);
  auto n = node_locked(id);
  if (r.rc != 0) {
    // No answer within the transaction, or none possible: the node is down. (The kernel
    // marks only the first down; a node whose requests cannot even be sent is no more up.)
    if (r.rc == -ETIMEDOUT || r.rc == -EHOSTUNREACH || r.rc == -ECONNREFUSED || r.rc == -ECONNRESET ||
        r.rc == -ENETUNREACH || r.rc == -EIO || r.rc == -ENOTCONN || r.rc == -ESHUTDOWN)
      n->state = NodeState::Down;
    return;
  }
  n->last_reply = Clock::now();
  SessionId sid = session_of(r.msg.body);
  if (sid.is_invalid())
    n->state = NodeState::Unknown;
  else if (session_ && sid == session_->info.sid)
    n->state = NodeState::Active;
  else
    n->state = NodeState::Busy;
  if (const auto* mk = std::get_if<MksnReply>(&r.msg.body); mk && r.status == 0)
    n->timeout = std::chrono::seconds(mk->timeout);
  if (const auto* dbg = std::get_if<DebugReply>(&r.msg.body); dbg && r.status == 0)
    n->timeout = std::chrono::seconds(dbg->timeout);
}

std::shared_ptr<Console::Node> Console::node_locked(const ProcessId& id) {
  auto& n = nodes_[key_of(id)];
  if (!n) {
    n = std::make_shared<Node>();
    n->id = id;
  }
  return n;
}

NodeState Console::state(const ProcessId& id) {
  std::lock_guard g(mu_);
  auto it = nodes_.find(key_of(id));
  return it == nodes_.end() ? NodeState::Unknown : it->second->state;
}

std::vector<ProcessId> Console::not_active(const std::vector<ProcessId>& ids) {
  std::lock_guard g(mu_);
  std::vector<ProcessId> out;
  for (const auto& id : ids)
    if (node_locked(id)->state != NodeState::Active) out.push_back(id);
  return out;
}

// ---------------------------------------------------------------- session

Status Console::check_key_locked(std::uint32_t key) {
  if (!session_) return Failure{-ESRCH, "no session (lst new_session makes one)"};
  if (session_->info.key != key)
    return Failure{-EACCES, "the session belongs to LST_SESSION=" + std::to_string(session_->info.key) +
                                ", not to LST_SESSION=" + std::to_string(key)};
  session_->last_command = Clock::now();
  return {};
}

Status Console::check_key(std::uint32_t key) {
  std::lock_guard g(mu_);
  return check_key_locked(key);
}

Status Console::new_session(const std::string& name, std::uint32_t key, std::chrono::seconds timeout, bool force) {
  std::lock_guard c(cmd_);
  std::vector<ProcessId> active;
  SessionInfo old;
  {
    std::lock_guard g(mu_);
    if (session_ && !force)
      return Failure{-EEXIST, "session '" + session_->info.name + "' exists (lst end_session, or --force)"};
    if (name.size() >= kNameSize) return Failure{-EINVAL, "session name longer than 31 bytes: " + name};
    if (session_) {
      old = session_->info;
      end_locked(&active);
    }
  }
  // The old session leaves its nodes.
  transact(
      active, Service::RemoveSession,
      [&](const ProcessId&, std::size_t) {
        return Message{kMsgVersion, old.feats, RmsnReq{0, old.sid}};
      },
      kTransTimeout);
  std::lock_guard g(mu_);
  nodes_.clear();
  Session s;
  s.info.name = name;
  s.info.key = key;
  s.info.timeout = timeout.count() > 0 ? timeout : kConsoleTimeout;
  s.info.force = force;  // MKSN takes nodes from other consoles' sessions
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  s.info.sid = SessionId{self_.value(), static_cast<std::int64_t>(ms.count())};
  s.last_command = Clock::now();
  session_ = s;
  batches_["batch"] = Batch{BatchId{++next_bid_}, {}};  // the default batch
  return {};
}

void Console::end_locked(std::vector<ProcessId>* active) {
  for (auto& [k, n] : nodes_)
    if (n->state == NodeState::Active) active->push_back(n->id);
  session_.reset();
  nodes_.clear();
  groups_.clear();
  batches_.clear();
}

Status Console::end_session(std::uint32_t key) {
  std::lock_guard c(cmd_);
  std::vector<ProcessId> active;
  SessionId sid;
  std::uint32_t feats = kFeatsMask;
  {
    std::lock_guard g(mu_);
    if (Status st = check_key_locked(key); !st) return st;
    sid = session_->info.sid;
    feats = session_->info.feats;
  }
  // RMSN while the nodes still count as the session's, then forget them.
  {
    std::vector<ProcessId> targets;
    {
      std::lock_guard g(mu_);
      for (auto& [k, n] : nodes_)
        if (n->state == NodeState::Active) targets.push_back(n->id);
    }
    transact(
        targets, Service::RemoveSession,
        [&](const ProcessId&, std::size_t) {
          return Message{kMsgVersion, feats, RmsnReq{0, sid}};
        },
        kTransTimeout);
  }
  std::lock_guard g(mu_);
  end_locked(&active);
  return {};
}

Result<Console::SessionInfo> Console::session(std::uint32_t key) {
  std::lock_guard g(mu_);
  if (Status st = check_key_locked(key); !st) return st.failure();
  SessionInfo i = session_->info;
  i.nodes = nodes_.size();
  return i;
}

Result<Console::SessionInfo> Console::session_info() {
  std::lock_guard g(mu_);
  if (!session_) return Failure{-ESRCH, "no session (lst new_session makes one)"};
  SessionInfo i = session_->info;
  i.nodes = nodes_.size();
  return i;
}

// ---------------------------------------------------------------- groups

Result<std::vector<NodeStatus>> Console::add_group(const std::string& name, const std::vector<ProcessId>& ids) {
  std::lock_guard c(cmd_);
  {
    std::lock_guard g(mu_);
    if (!session_) return Failure{-ESRCH, "no session"};
    if (name.empty() || name.size() >= kNameSize) return Failure{-EINVAL, "bad group name '" + name + "'"};
    Group& grp = groups_[name];
    std::set<std::pair<std::uint64_t, Pid>> have;
    for (auto& n : grp.nodes) have.insert(key_of(n->id));
    for (const auto& id : ids) {
      if (!have.insert(key_of(id)).second) continue;  // already in: as the kernel, no error for the whole add
      grp.nodes.push_back(node_locked(id));
    }
  }
  return refresh_group_unlocked(name);
}

Result<std::vector<NodeStatus>> Console::refresh_group(const std::string& name) {
  std::lock_guard c(cmd_);
  return refresh_group_unlocked(name);
}

Result<std::vector<NodeStatus>> Console::refresh_group_unlocked(const std::string& name) {
  std::vector<ProcessId> ids;
  SessionInfo info;
  {
    std::lock_guard g(mu_);
    if (!session_) return Failure{-ESRCH, "no session"};
    auto it = groups_.find(name);
    if (it == groups_.end()) return Failure{-ENOENT, "no group '" + name + "'"};
    for (auto& n : it->second.nodes) ids.push_back(n->id);
    info = session_->info;
  }
  // MKSN to the nodes that are not active yet.
  auto replies = transact(
      not_active(ids), Service::MakeSession,
      [&](const ProcessId&, std::size_t) {
        return Message{kMsgVersion, info.feats, MksnReq{0, info.sid, info.force ? 1u : 0u, info.name}};
      },
      kTransTimeout);
  std::map<std::pair<std::uint64_t, Pid>, const NodeReply*> by_id;
  for (const auto& r : replies) by_id[key_of(r.id)] = &r;
  std::vector<NodeStatus> out;
  std::lock_guard g(mu_);
  for (const auto& id : ids) {
    NodeStatus st{id, node_locked(id)->state};
    if (auto it = by_id.find(key_of(id)); it != by_id.end()) {
      st.rc = it->second->rc;
      st.status = it->second->status;
    }
    out.push_back(st);
  }
  return out;
}

bool Console::has_group(const std::string& name) {
  std::lock_guard g(mu_);
  return groups_.count(name) > 0;
}

Status Console::del_group(const std::string& name) {
  std::lock_guard c(cmd_);
  std::vector<ProcessId> drop;
  SessionInfo info;
  {
    std::lock_guard g(mu_);
    if (!session_) return Failure{-ESRCH, "no session"};
    auto it = groups_.find(name);
    if (it == groups_.end()) return Failure{-ENOENT, "no group '" + name + "'"};
    if (it->second.tests) return Failure{-EBUSY, "group '" + name + "' is used by a test"};
    for (auto& n : it->second.nodes) drop.push_back(n->id);
    groups_.erase(it);
    info = session_->info;
    // Nodes still in another group stay in the session.
    for (auto& [gname, grp] : groups_)
      for (auto& n : grp.nodes) std::erase(drop, n->id);
    std::erase_if(drop, [&](const ProcessId& id) { return node_locked(id)->state != NodeState::Active; });
  }
  transact(
      drop, Service::RemoveSession,
      [&](const ProcessId&, std::size_t) {
        return Message{kMsgVersion, info.feats, RmsnReq{0, info.sid}};
      },
      kTransTimeout);
  std::lock_guard g(mu_);
  for (const auto& id : drop) nodes_.erase(key_of(id));
  return {};
}

Status Console::clean_group(const std::string& name, NodeState state) {
  std::lock_guard c(cmd_);
  std::lock_guard g(mu_);
  auto it = groups_.find(name);
  if (it == groups_.end()) return Failure{-ENOENT, "no group '" + name + "'"};
  if (it->second.tests) return Failure{-EBUSY, "group '" + name + "' is used by a test"};
  std::erase_if(it->second.nodes, [&](const std::shared_ptr<Node>& n) { return n->state == state; });
  return {};
}

Status Console::remove_nodes(const std::string& name, const std::vector<ProcessId>& ids) {
  std::lock_guard c(cmd_);
  std::lock_guard g(mu_);
  auto it = groups_.find(name);
  if (it == groups_.end()) return Failure{-ENOENT, "no group '" + name + "'"};
  if (it->second.tests) return Failure{-EBUSY, "group '" + name + "' is used by a test"};
  for (const auto& id : ids) {
    auto before = it->second.nodes.size();
    std::erase_if(it->second.nodes, [&](const std::shared_ptr<Node>& n) { return n->id == id; });
    if (it->second.nodes.size() == before) return Failure{-ENOENT, id.to_string() + " is not in group " + name};
  }
  return {};
}

std::vector<std::string> Console::groups() {
  std::lock_guard g(mu_);
  std::vector<std::string> out;
  for (auto& [name, grp] : groups_) out.push_back(name);
  return out;
}

Result<std::vector<NodeStatus>> Console::group_nodes(const std::string& name) {
  std::lock_guard g(mu_);
  auto it = groups_.find(name);
  if (it == groups_.end()) return Failure{-ENOENT, "no group '" + name + "'"};
  std::vector<NodeStatus> out;
  for (auto& n : it->second.nodes) out.push_back({n->id, n->state});
  return out;
}

Result<std::vector<ProcessId>> Console::resolve(const std::vector<std::string>& groups,
                                                const std::vector<ProcessId>& ids) {
  std::lock_guard g(mu_);
  std::vector<ProcessId> out;
  std::set<std::pair<std::uint64_t, Pid>> seen;
  for (const auto& name : groups) {
    auto it = groups_.find(name);
    if (it == groups_.end()) return Failure{-ENOENT, "no group '" + name + "'"};
    for (auto& n : it->second.nodes)
      if (seen.insert(key_of(n->id)).second) out.push_back(n->id);
  }
  for (const auto& id : ids)
    if (seen.insert(key_of(id)).second) out.push_back(id);
  return out;
}

// ---------------------------------------------------------------- batches and tests

Status Console::add_batch(const std::string& name) {
  std::lock_guard c(cmd_);
  std::lock_guard g(mu_);
  if (!session_) return Failure{-ESRCH, "no session"};
  if (name.empty() || name.size() >= kNameSize) return Failure{-EINVAL, "bad batch name '" + name + "'"};
  if (batches_.count(name)) return Failure{-EEXIST, "batch '" + name + "' exists"};
  batches_[name] = Batch{BatchId{++next_bid_}, {}};
  return {};
}

std::vector<std::string> Console::batches() {
  std::lock_guard g(mu_);
  std::vector<std::string> out;
  for (auto& [name, b] : batches_) out.push_back(name);
  return out;
}

Result<std::vector<Console::TestInfo>> Console::batch_tests(const std::string& batch) {
  std::lock_guard g(mu_);
  auto it = batches_.find(batch);
  if (it == batches_.end()) return Failure{-ENOENT, "no batch '" + batch + "'"};
  std::vector<TestInfo> out;
  for (std::size_t i = 0; i < it->second.tests.size(); ++i) {
    const Test& t = it->second.tests[i];
    out.push_back({static_cast<unsigned>(i + 1), t.spec, t.clients, t.servers});
  }
  return out;
}

Result<unsigned> Console::add_test(const std::string& batch, const TestSpec& t, std::vector<NodeReply>* failed) {
  std::lock_guard c(cmd_);
  std::vector<ProcessId> clients, servers;
  SessionInfo info;
  BatchId bid;
  {
    std::lock_guard g(mu_);
    if (!session_) return Failure{-ESRCH, "no session"};
    auto b = batches_.find(batch);
    if (b == batches_.end()) return Failure{-ENOENT, "no batch '" + batch + "'"};
    auto from = groups_.find(t.from), to = groups_.find(t.to);
    if (from == groups_.end()) return Failure{-ENOENT, "no group '" + t.from + "' (--from)"};
    if (to == groups_.end()) return Failure{-ENOENT, "no group '" + t.to + "' (--to)"};
    for (auto& n : from->second.nodes) clients.push_back(n->id);
    for (auto& n : to->second.nodes) servers.push_back(n->id);
    bid = b->second.bid;
    info = session_->info;
  }
  if (clients.empty() || servers.empty()) return Failure{-EINVAL, "an empty group"};
  if (t.concurrency == 0 || t.concurrency > kMaxConcur)
    return Failure{-EINVAL, "concurrency " + std::to_string(t.concurrency) + " not in 1..1024"};
  if (t.dist == 0 || t.span == 0) return Failure{-EINVAL, "--distribute needs two positive numbers"};
  if (t.span > servers.size())
    return Failure{-EINVAL, "--distribute span " + std::to_string(t.span) + " is more than the " +
                                std::to_string(servers.size()) + " nodes of " + t.to};
  if (t.service == Service::Brw && (t.size == 0 || t.size > kMaxPayload || t.offset % 8 != 0))
    return Failure{-EINVAL, "brw size must be 1..1M and off= a multiple of 8"};
  std::vector<ProcessId> all = servers;
  all.insert(all.end(), clients.begin(), clients.end());
  if (auto down = not_active(all); !down.empty())
    return Failure{-ENETDOWN,
                   "nodes not active: " + list_ids(down) + " (lst list_group --all; lst update_group --refresh)"};

  auto params = [&]() -> TestParams {
    if (t.service == Service::Ping) return PingParams{};
    auto opc = static_cast<std::uint32_t>(t.op), flags = static_cast<std::uint32_t>(t.check);
    if (info.feats & kFeatBulkLen)
      return BulkParamsV1{static_cast<std::uint16_t>(opc), static_cast<std::uint16_t>(flags), t.size,
                          t.offset};  // the client's and the server's offset alike, as lst sets them
    return BulkParamsV0{opc, static_cast<std::uint32_t>(ceil_div(t.size, kPageSize)), flags};
  };
  // Servers first, with a hint of how many RPCs they will see.
  std::size_t ndist = ceil_div(clients.size(), t.dist), nspan = ceil_div(servers.size(), t.span);
  auto hint =
      static_cast<std::uint32_t>(std::min<std::size_t>(ceil_div(ndist, nspan) * t.dist * t.concurrency, 0xFFFFFFFEu));
  auto base = [&](bool client) {
    TestReq q;
    q.sid = info.sid;
    q.bid = bid;
    q.service = static_cast<std::uint32_t>(t.service);
    q.concur = t.concurrency;
    q.is_client = client ? 1 : 0;
    q.stop_onerr = 1;
    q.params = params();
    return q;
  };
  auto report = [&](const std::vector<NodeReply>& rs) {
    bool bad = false;
    for (const auto& r : rs)
      if (r.rc != 0 || r.status != 0) {
        bad = true;
        if (failed) failed->push_back(r);
      }
    return bad;
  };
  auto srv = transact(
      servers, Service::Test,
      [&](const ProcessId&, std::size_t) {
        TestReq q = base(false);
        q.loop = hint;
        return Message{kMsgVersion, info.feats, q};
      },
      kTransTimeout);
  if (report(srv)) return Failure{-EIO, "the servers of " + t.to + " did not all take the test"};
  // Each client gets its window of servers as the request's bulk.
  std::vector<std::vector<std::uint8_t>> lists(clients.size());
  for (std::size_t i = 0; i < clients.size(); ++i) {
    std::vector<ProcessIdPacked> ids;
    for (std::size_t k : distribute_window(i, t.dist, t.span, servers.size()))
      ids.push_back({servers[k].nid.value(), servers[k].pid});
    lists[i].resize(id_list_bytes(ids.size()));
    encode_ids(ids, lists[i]);
  }
  auto cli = transact(
      clients, Service::Test,
      [&](const ProcessId&, std::size_t) {
        TestReq q = base(true);
        q.loop = t.loop;
        q.ndest = t.span;
        return Message{kMsgVersion, info.feats, q};
      },
      kTransTimeout,
      [&](std::size_t i) {
        return std::optional<RpcNode::Bulk>(RpcNode::Bulk{lists[i], false});
      });
  if (report(cli)) return Failure{-EIO, "the clients of " + t.from + " did not all take the test"};
  std::lock_guard g(mu_);
  auto b = batches_.find(batch);
  if (b == batches_.end()) return Failure{-ENOENT, "batch '" + batch + "' went away"};
  b->second.tests.push_back(Test{t, clients, servers});
  if (auto it = groups_.find(t.from); it != groups_.end()) ++it->second.tests;
  if (auto it = groups_.find(t.to); it != groups_.end()) ++it->second.tests;
  return static_cast<unsigned>(b->second.tests.size());
}

Result<Console::BatchNodes> Console::batch_nodes(const std::string& batch, unsigned test, bool servers) {
  std::lock_guard g(mu_);
  if (!session_) return Failure{-ESRCH, "no session"};
  auto b = batches_.find(batch);
  if (b == batches_.end()) return Failure{-ENOENT, "no batch '" + batch + "'"};
  if (test > b->second.tests.size())
    return Failure{-ENOENT, "batch '" + batch + "' has no test " + std::to_string(test)};
  BatchNodes out{{}, session_->info, b->second.bid, b->second.tests.size()};
  std::set<std::pair<std::uint64_t, Pid>> seen;
  for (std::size_t i = 0; i < b->second.tests.size(); ++i) {
    if (test != 0 && i + 1 != test) continue;
    const Test& t = b->second.tests[i];
    for (auto& id : servers ? t.servers : t.clients)
      if (seen.insert(key_of(id)).second) out.nodes.push_back(id);
  }
  return out;
}

Result<std::vector<NodeReply>> Console::batch_op(const BatchNodes& bn, BatchOp op, std::uint32_t testidx,
                                                 std::uint32_t arg, std::chrono::seconds timeout) {
  return transact(
      bn.nodes, Service::Batch,
      [&](const ProcessId&, std::size_t) {
        return Message{kMsgVersion, bn.info.feats,
                       BatchReq{0, bn.info.sid, bn.bid, static_cast<std::uint32_t>(op), testidx, arg}};
      },
      timeout);
}

Result<std::vector<NodeReply>> Console::run_batch(const std::string& batch, std::chrono::seconds timeout) {
  std::lock_guard c(cmd_);
  auto bn = batch_nodes(batch, 0, false);
  if (!bn) return bn.failure();
  if (bn->tests == 0) return Failure{-EINVAL, "batch '" + batch + "' has no test (lst add_test)"};
  if (auto down = not_active(bn->nodes); !down.empty())
    return Failure{-ENETDOWN, "nodes not active: " + list_ids(down)};
  // The node ignores the timeout RUN carries, as the kernel's does.
  return batch_op(*bn, BatchOp::Run, 0, static_cast<std::uint32_t>(timeout.count()), kTransTimeout);
}

Result<std::vector<NodeReply>> Console::stop_batch(const std::string& batch, bool force) {
  std::lock_guard c(cmd_);
  auto bn = batch_nodes(batch, 0, false);
  if (!bn) return bn.failure();
  auto down = not_active(bn->nodes);  // skipped: they run nothing of this session
  std::erase_if(bn->nodes, [&](const ProcessId& id) { return std::find(down.begin(), down.end(), id) != down.end(); });
  return batch_op(*bn, BatchOp::Stop, 0, force ? 1u : 0u, kTransTimeout);
}

Result<std::vector<NodeReply>> Console::query_batch(const std::string& batch, unsigned test, bool server,
                                                    std::chrono::seconds timeout) {
  std::lock_guard c(cmd_);
  auto bn = batch_nodes(batch, test, server);
  if (!bn) return bn.failure();
  return batch_op(*bn, BatchOp::Query, test, 0, timeout);
}

// ---------------------------------------------------------------- watching

// DEBUG and STAT: one request, the same to every node, with the session's id.
template <typename Req>
std::vector<NodeReply> Console::ask_all(const std::vector<ProcessId>& nodes, Service s, std::chrono::seconds timeout) {
  std::lock_guard c(cmd_);
  Message m;
  {
    std::lock_guard g(mu_);
    m = header(Req{0, session_ ? session_->info.sid : SessionId::invalid(), 0});
  }
  return transact(
      nodes, s, [&](const ProcessId&, std::size_t) { return m; }, timeout);
}

std::vector<NodeReply> Console::ping(const std::vector<ProcessId>& nodes, std::chrono::seconds timeout) {
  return ask_all<DebugReq>(nodes, Service::Debug, timeout);
}

std::vector<NodeReply> Console::stat(const std::vector<ProcessId>& nodes, std::chrono::seconds timeout) {
  return ask_all<StatReq>(nodes, Service::QueryStat, timeout);
}

// Every kPingInterval: a DEBUG to each active node not heard from for half its session
// timeout (so its session does not expire), and the end of a session no command has
// used for its timeout.
void Console::keep_alive() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    wake_.wait_for(lk, kPingInterval, [&] { return stopping_; });
    if (stopping_) return;
    if (!session_) continue;
    auto now = Clock::now();
    SessionInfo info = session_->info;
    bool idle = now - session_->last_command > info.timeout;
    std::vector<ProcessId> due;
    for (auto& [k, n] : nodes_)
      if (n->state == NodeState::Active && (idle || now - n->last_reply >= n->timeout / 2)) due.push_back(n->id);
    lk.unlock();
    if (idle) {
      std::lock_guard c(cmd_);
      transact(
          due, Service::RemoveSession,
          [&](const ProcessId&, std::size_t) {
            return Message{kMsgVersion, info.feats, RmsnReq{0, info.sid}};
          },
          kTransTimeout);
      std::lock_guard g(mu_);
      if (session_ && session_->info.sid == info.sid) {
        std::vector<ProcessId> ignored;
        end_locked(&ignored);
      }
    } else if (!due.empty()) {
      transact(
          due, Service::Debug,
          [&](const ProcessId&, std::size_t) {
            return Message{kMsgVersion, info.feats, DebugReq{0, info.sid, 0}};
          },
          kTransTimeout);
    }
    lk.lock();
  }
}

}  // namespace lnet::selftest
