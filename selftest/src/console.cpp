#include <selftest/console.hpp>

#include <algorithm>
#include <cerrno>
#include <set>

#include <selftest/brw.hpp>

namespace lnet::selftest {
namespace {

using Clock = std::chrono::steady_clock;

std::pair<std::uint64_t, Pid> key_of(const ProcessId& id) { return {id.nid.value(), id.pid}; }

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
  if (grp.seq == 0) grp.seq = ++next_group_;
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
  if (self_.is_large())
    return Failure{-EOPNOTSUPP, "not supported yet: a console on a large NID (" + self_.to_string() +
                                    "): the self-test wire carries 64-bit NIDs"};
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
  for (const ProcessId& id : ids)
    if (id.nid.is_large())
      return Failure{-EOPNOTSUPP, "not supported yet: " + id.nid.to_string() +
                                      " in a group (the self-test wire carries 64-bit NIDs)"};
  std::lock_guard c(cmd_);
  {
    std::lock_guard g(mu_);
    if (!session_) return Failure{-ESRCH, "no session"};
    if (name.empty() || name.size() >= kNameSize) return Failure{-EINVAL, "bad group name '" + name + "'"};
    Group& grp = groups_[name];
    if (grp.seq == 0) grp.seq = ++next_group_;
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
  std::vector<std::pair<std::uint64_t, std::string>> made;
  for (auto& [name, grp] : groups_) made.emplace_back(grp.seq, name);
  std::sort(made.begin(), made.end());
  std::vector<std::string> out;
  for (auto& [seq, name] : made) out.push_back(name);
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

}  // namespace lnet::selftest
