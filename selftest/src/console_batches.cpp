// The console's batches and tests (add, run, stop, query) and its watching of the nodes
// (ping, stat, keep-alive): the half of Console that drives tests once groups exist.
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

// A test's parameters as its TEST requests carry them (brw's in the form the session's
// features say).
TestParams params_of(const TestSpec& t, std::uint32_t feats) {
  if (t.service == Service::Ping) return PingParams{};
  auto opc = static_cast<std::uint32_t>(t.op), flags = static_cast<std::uint32_t>(t.check);
  if (feats & kFeatBulkLen)
    return BulkParamsV1{static_cast<std::uint16_t>(opc), static_cast<std::uint16_t>(flags), t.size,
                        t.offset};  // the client's and the server's offset alike, as lst sets them
  return BulkParamsV0{opc, static_cast<std::uint32_t>(ceil_div(t.size, kPageSize)), flags};
}

// What add_test checks of a test before asking its nodes (their states aside).
Status check_test(const TestSpec& t, std::size_t clients, std::size_t servers) {
  if (clients == 0 || servers == 0) return Failure{-EINVAL, "an empty group"};
  if (t.concurrency == 0 || t.concurrency > kMaxConcur)
    return Failure{-EINVAL, "concurrency " + std::to_string(t.concurrency) + " not in 1..1024"};
  if (t.dist == 0 || t.span == 0) return Failure{-EINVAL, "--distribute needs two positive numbers"};
  if (t.span > servers)
    return Failure{-EINVAL, "--distribute span " + std::to_string(t.span) + " is more than the " +
                                std::to_string(servers) + " nodes of " + t.to};
  if (t.service == Service::Brw && (t.size == 0 || t.size > kMaxPayload || t.offset % 8 != 0))
    return Failure{-EINVAL, "brw size must be 1..1M and off= a multiple of 8"};
  return {};
}

// The RPCs each server will see: a hint in its TEST request.
std::uint32_t server_hint(const TestSpec& t, std::size_t clients, std::size_t servers) {
  std::size_t ndist = ceil_div(clients, t.dist), nspan = ceil_div(servers, t.span);
  return static_cast<std::uint32_t>(
      std::min<std::size_t>(ceil_div(ndist, nspan) * t.dist * t.concurrency, 0xFFFFFFFEu));
}

// Each client's window of servers, as the id list its TEST request carries as bulk.
std::vector<std::vector<std::uint8_t>> server_lists(const TestSpec& t, std::size_t clients,
                                                    const std::vector<ProcessId>& servers) {
  std::vector<std::vector<std::uint8_t>> lists(clients);
  for (std::size_t i = 0; i < clients; ++i) {
    std::vector<ProcessIdPacked> ids;
    for (std::size_t k : distribute_window(i, t.dist, t.span, servers.size()))
      ids.push_back({servers[k].nid.value(), servers[k].pid});
    lists[i].resize(id_list_bytes(ids.size()));
    encode_ids(ids, lists[i]);
  }
  return lists;
}

// True when a node refused (each such reply added to `failed`, when given).
bool refused(const std::vector<NodeReply>& rs, std::vector<NodeReply>* failed) {
  bool bad = false;
  for (const auto& r : rs)
    if (r.rc != 0 || r.status != 0) {
      bad = true;
      if (failed) failed->push_back(r);
    }
  return bad;
}

}  // namespace

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
  std::vector<std::pair<std::uint64_t, std::string>> made;
  for (auto& [name, b] : batches_) made.emplace_back(b.bid.id, name);
  std::sort(made.begin(), made.end());
  std::vector<std::string> out;
  for (auto& [id, name] : made) out.push_back(name);
  return out;
}

void Console::set_running(const std::string& batch, bool running) {
  std::lock_guard g(mu_);
  if (auto it = batches_.find(batch); it != batches_.end()) it->second.running = running;
}

Result<bool> Console::batch_running(const std::string& batch) {
  std::lock_guard g(mu_);
  auto it = batches_.find(batch);
  if (it == batches_.end()) return Failure{-ENOENT, "no batch '" + batch + "'"};
  return it->second.running;
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

Result<Console::TestNodes> Console::test_nodes(const std::string& batch, const TestSpec& t) {
  TestNodes n;
  {
    std::lock_guard g(mu_);
    if (!session_) return Failure{-ESRCH, "no session"};
    auto b = batches_.find(batch);
    if (b == batches_.end()) return Failure{-ENOENT, "no batch '" + batch + "'"};
    auto from = groups_.find(t.from), to = groups_.find(t.to);
    if (from == groups_.end()) return Failure{-ENOENT, "no group '" + t.from + "' (--from)"};
    if (to == groups_.end()) return Failure{-ENOENT, "no group '" + t.to + "' (--to)"};
    for (auto& x : from->second.nodes) n.clients.push_back(x->id);
    for (auto& x : to->second.nodes) n.servers.push_back(x->id);
    n.bid = b->second.bid;
    n.info = session_->info;
  }
  if (Status s = check_test(t, n.clients.size(), n.servers.size()); !s) return s.failure();
  std::vector<ProcessId> all = n.servers;
  all.insert(all.end(), n.clients.begin(), n.clients.end());
  if (auto down = not_active(all); !down.empty())
    return Failure{-ENETDOWN,
                   "nodes not active: " + list_ids(down) + " (lst list_group --all; lst update_group --refresh)"};
  return n;
}

Status Console::install_test(const TestNodes& n, const TestSpec& t, std::vector<NodeReply>* failed) {
  auto base = [&](bool client) {
    TestReq q;
    q.sid = n.info.sid;
    q.bid = n.bid;
    q.service = static_cast<std::uint32_t>(t.service);
    q.concur = t.concurrency;
    q.is_client = client ? 1 : 0;
    q.stop_onerr = 1;
    q.params = params_of(t, n.info.feats);
    return q;
  };
  // Servers first, with a hint of how many RPCs they will see.
  std::uint32_t hint = server_hint(t, n.clients.size(), n.servers.size());
  auto srv = transact(
      n.servers, Service::Test,
      [&](const ProcessId&, std::size_t) {
        TestReq q = base(false);
        q.loop = hint;
        return Message{kMsgVersion, n.info.feats, q};
      },
      kTransTimeout);
  if (refused(srv, failed)) return Failure{-EIO, "the servers of " + t.to + " did not all take the test"};
  // Each client gets its window of servers as the request's bulk.
  std::vector<std::vector<std::uint8_t>> lists = server_lists(t, n.clients.size(), n.servers);
  auto cli = transact(
      n.clients, Service::Test,
      [&](const ProcessId&, std::size_t) {
        TestReq q = base(true);
        q.loop = t.loop;
        q.ndest = t.span;
        return Message{kMsgVersion, n.info.feats, q};
      },
      kTransTimeout,
      [&](std::size_t i) {
        return std::optional<RpcNode::Bulk>(RpcNode::Bulk{lists[i], false});
      });
  if (refused(cli, failed)) return Failure{-EIO, "the clients of " + t.from + " did not all take the test"};
  return {};
}

Result<unsigned> Console::add_test(const std::string& batch, const TestSpec& t, std::vector<NodeReply>* failed) {
  std::lock_guard c(cmd_);
  auto n = test_nodes(batch, t);
  if (!n) return n.failure();
  if (Status s = install_test(*n, t, failed); !s) return s.failure();
  std::lock_guard g(mu_);
  auto b = batches_.find(batch);
  if (b == batches_.end()) return Failure{-ENOENT, "batch '" + batch + "' went away"};
  b->second.tests.push_back(Test{t, n->clients, n->servers});
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
  auto r = batch_op(*bn, BatchOp::Run, 0, static_cast<std::uint32_t>(timeout.count()), kTransTimeout);
  if (r) set_running(batch, true);
  return r;
}

Result<std::vector<NodeReply>> Console::stop_batch(const std::string& batch, bool force) {
  std::lock_guard c(cmd_);
  auto bn = batch_nodes(batch, 0, false);
  if (!bn) return bn.failure();
  auto down = not_active(bn->nodes);  // skipped: they run nothing of this session
  std::erase_if(bn->nodes, [&](const ProcessId& id) { return std::find(down.begin(), down.end(), id) != down.end(); });
  auto r = batch_op(*bn, BatchOp::Stop, 0, force ? 1u : 0u, kTransTimeout);
  set_running(batch, false);
  return r;
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
