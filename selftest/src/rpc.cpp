// Self-test RPCs on liblnet's MDs and MEs: request buffers reposted as they fill, one
// reply MD (and maybe a bulk MD) per call, completion by events, and a timer thread for
// calls whose reply does not come.
#include <selftest/rpc.hpp>

#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <ctime>
#include <map>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

namespace lnet::selftest {
namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::array<std::uint8_t, kMsgSize>;

template <std::size_t... I>
Body body_of_index(std::size_t i, std::index_sequence<I...>) {
  Body b;
  (void)((i == I ? (b = Body(std::in_place_index<I>), true) : false) || ...);
  return b;
}
// A default body of the given type.
Body default_body(MsgType t) {
  return body_of_index(static_cast<std::size_t>(t), std::make_index_sequence<std::variant_size_v<Body>>{});
}

std::uint64_t rpyid_of(const Body& b) {
  return std::visit(
      [](const auto& x) -> std::uint64_t {
        if constexpr (requires { x.rpyid; }) return x.rpyid;
        return 0;
      },
      b);
}
std::uint64_t bulkid_of(const Body& b) {
  return std::visit(
      [](const auto& x) -> std::uint64_t {
        if constexpr (requires { x.bulkid; }) return x.bulkid;
        return 0;
      },
      b);
}
void set_ids(Body& b, std::uint64_t rpyid, std::uint64_t bulkid) {
  std::visit(
      [&](auto& x) {
        if constexpr (requires { x.rpyid; }) x.rpyid = rpyid;
        if constexpr (requires { x.bulkid; }) x.bulkid = bulkid;
      },
      b);
}
void set_status(Body& b, std::uint32_t status) {
  std::visit(
      [&](auto& x) {
        if constexpr (requires { x.status; }) x.status = status;
      },
      b);
}

}  // namespace

struct RpcNode::Impl : std::enable_shared_from_this<Impl> {
  Impl(Instance& l, std::chrono::milliseconds t) : lnet(l), timeout(t) {}

  Instance& lnet;
  std::chrono::milliseconds timeout;
  std::atomic<std::uint64_t> ids{static_cast<std::uint64_t>(std::time(nullptr)) << 48};
  std::atomic<bool> stopping{false};
  std::atomic<std::uint32_t> errors{0}, sent{0}, rcvd{0}, dropped{0}, expired{0};
  std::atomic<std::uint64_t> bulk_get{0}, bulk_put{0};

  struct Slot {
    Service service;
    Bytes buf{};
    MeHandle me;
  };
  struct Call {
    std::uint64_t rpyid = 0;
    MdHandle reply_md, bulk_md;
    bool has_bulk = false, replied = false, bulk_done = false, finished = false;
    int bulk_status = 0;
    Bytes reply{}, request{};
    std::optional<Message> answer;
    Callback done;
    Clock::time_point deadline;
  };

  std::mutex mutex;
  std::map<Service, Handler> handlers;
  std::map<Service, unsigned> in_handler;  // calls of each service's handler running now
  std::condition_variable handler_done;
  // A slot's buffer lives as long as its MD (the MD's handler holds it): a PUT still being
  // delivered into it when the node stops writes to memory that is still there.
  std::vector<std::shared_ptr<Slot>> slots;
  std::map<std::uint64_t, std::shared_ptr<Call>> calls;  // by rpyid
  std::condition_variable timer_cv;
  std::thread timer;

  // ---------------------------------------------------------------- server

  int post(const std::shared_ptr<Slot>& slot) {
    auto me = lnet.me_attach(request_portal(slot->service), ProcessId::any(), static_cast<std::uint64_t>(slot->service),
                             0, Unlink::Unlink, InsPos::After);
    if (!me) return me.code();
    MdDesc d;
    d.start = slot->buf.data();
    d.length = slot->buf.size();
    d.threshold = 1;
    d.options = kMdOpPut;
    std::weak_ptr<Impl> self = weak_from_this();
    d.handler = [self, slot](const Event& ev) {
      if (auto s = self.lock()) s->on_request(slot, ev);
    };  // holds the slot until the MD is gone
    auto md = lnet.md_attach(*me, d, Unlink::Unlink);
    if (!md) {
      (void)lnet.me_unlink(*me);
      return md.code();
    }
    slot->me = *me;
    return 0;
  }

  void on_request(const std::shared_ptr<Slot>& slot, const Event& ev) {
    if (ev.type != EventType::Put) return;
    Bytes copy = slot->buf;
    std::uint32_t mlength = ev.mlength;
    int status = ev.status;
    if (!stopping.load()) (void)post(slot);  // the buffer goes back at once
    rcvd.fetch_add(1);
    if (status != 0 || mlength != kMsgSize) {
      errors.fetch_add(1);
      return;
    }
    auto m = decode(copy);
    if (!m || m->type() != request_type(slot->service)) {
      errors.fetch_add(1);  // not what this service takes: dropped, as the kernel does
      return;
    }
    Handler h;
    {
      std::lock_guard g(mutex);
      h = handlers[slot->service];
      if (h) ++in_handler[slot->service];
    }
    if (!h) {
      dropped.fetch_add(1);  // no longer served
      return;
    }
    // unserve() waits for this call to return.
    struct Leave {
      Impl& i;
      Service s;
      ~Leave() {
        std::lock_guard g(i.mutex);
        if (--i.in_handler[s] == 0) i.handler_done.notify_all();
      }
    } leave{*this, slot->service};
    auto r = std::make_shared<ServerCall>(shared_from_this(), ev.initiator, *m);
    if (m->version != kMsgVersion) {
      Message reply{kMsgVersion, m->feats, default_body(reply_type(m->type()))};
      set_status(reply.body, kStatusEproto);
      r->reply(std::move(reply));
      return;
    }
    h(Request{ev.initiator, *m}, r);
  }

  struct ServerCall : Responder {
    ServerCall(std::shared_ptr<Impl> i, ProcessId p, const Message& req)
        : impl(std::move(i)), peer(p), rpyid(rpyid_of(req.body)), bulkid(bulkid_of(req.body)) {}
    std::shared_ptr<Impl> impl;
    ProcessId peer;
    std::uint64_t rpyid, bulkid;
    std::atomic<bool> answered{false};

    void reply(Message m) override {
      if (answered.exchange(true)) return;
      auto buf = std::make_shared<Bytes>(encode(m));
      MdDesc d;
      d.start = buf->data();
      d.length = buf->size();
      d.threshold = 1;
      std::shared_ptr<Impl> i = impl;
      d.handler = [buf, i](const Event& ev) {
        if (ev.type == EventType::Send && ev.status != 0) i->errors.fetch_add(1);
      };
      auto md = impl->lnet.md_bind(d, Unlink::Unlink);
      if (!md || impl->lnet.put(Nid::any(), *md, AckReq::NoAck, peer, kRdmaPortal, rpyid, 0, 0) != 0) {
        if (md) (void)impl->lnet.md_unlink(*md);
        impl->errors.fetch_add(1);
      }
    }
    void bulk(std::span<std::uint8_t> buf, bool server_is_source, std::function<void(int)> then) override {
      auto fired = std::make_shared<std::atomic<bool>>(false);
      MdDesc d;
      d.start = buf.data();
      d.length = buf.size();
      d.threshold = server_is_source ? 1 : 2;  // PUT: SEND; GET: SEND and REPLY
      std::shared_ptr<Impl> i = impl;
      d.handler = [i, fired, then, server_is_source](const Event& ev) {
        // A GET ends with its REPLY, a failed SEND, or an UNLINK (no REPLY in time).
        bool last = server_is_source ? ev.type == EventType::Send
                                     : ev.type == EventType::Reply || ev.type == EventType::Unlink ||
                                           (ev.type == EventType::Send && ev.status != 0);
        if (!last || fired->exchange(true)) return;
        int status = ev.type == EventType::Unlink ? -ETIMEDOUT : ev.status;
        if (status == 0) (server_is_source ? i->bulk_put : i->bulk_get).fetch_add(ev.mlength);
        if (status != 0) i->errors.fetch_add(1);
        then(status);
      };
      auto md = impl->lnet.md_bind(d, Unlink::Unlink);
      int rc = md ? (server_is_source ? impl->lnet.put(Nid::any(), *md, AckReq::NoAck, peer, kRdmaPortal, bulkid, 0, 0)
                                      : impl->lnet.get(Nid::any(), *md, peer, kRdmaPortal, bulkid, 0))
                  : md.code();
      if (rc != 0) {
        if (md) (void)impl->lnet.md_unlink(*md);
        if (!fired->exchange(true)) then(rc);
      }
    }
    void drop() override {
      if (!answered.exchange(true)) impl->dropped.fetch_add(1);
    }
  };

  // ---------------------------------------------------------------- client

  void finish(const std::shared_ptr<Call>& c, Result<Message> r) {
    {
      std::lock_guard g(mutex);
      if (c->finished) return;
      c->finished = true;
      calls.erase(c->rpyid);
    }
    (void)lnet.md_unlink(c->reply_md);  // -ENOENT when used up
    if (c->has_bulk) (void)lnet.md_unlink(c->bulk_md);
    c->done(std::move(r));
  }

  void on_reply(const std::shared_ptr<Call>& c, MsgType expect, const Event& ev) {
    if (ev.type != EventType::Put) return;
    Result<Message> r = Failure{-EBADMSG, "no reply"};
    {
      std::lock_guard g(mutex);
      if (c->finished) return;
      c->replied = true;
      auto m = ev.status != 0 ? Result<Message>(Failure{ev.status, "reply failed"})
                              : decode(std::span(c->reply).first(ev.mlength));
      if (m && m->type() != expect)
        m = Failure{-EBADMSG, std::string("a ") + msg_type_name(m->type()) + " for a " +
                                  msg_type_name(static_cast<MsgType>(static_cast<std::uint32_t>(expect) - 1))};
      if (!m) {
        r = Failure{-EBADMSG, m.message()};
      } else {
        c->answer = *m;
        // With a bulk, the reply ends the call once the bulk has moved, or at once when
        // it says the server will not move it.
        if (c->has_bulk && !c->bulk_done && status_of(m->body) == 0) return;
        r = *m;
      }
    }
    finish(c, std::move(r));
  }

  void on_bulk(const std::shared_ptr<Call>& c, const Event& ev) {
    if (ev.type != EventType::Put && ev.type != EventType::Get) return;
    std::optional<Message> answer;
    {
      std::lock_guard g(mutex);
      if (c->finished) return;
      c->bulk_done = true;
      c->bulk_status = ev.status;
      if (!c->replied) return;
      answer = c->answer;
    }
    if (answer) finish(c, *answer);
  }

  // A call's steps after it is listed: its reply's MD, its bulk's, its request. Each
  // failure says what could not be done; call() reports it.
  // An ME for `bits` on the RDMA portal with one MD over `buf` (threshold 1); `what`
  // names it in the failure.
  Result<MdHandle> post_one(std::uint64_t bits, std::span<std::uint8_t> buf, unsigned options, EventHandler handler,
                            const char* what) {
    auto me = lnet.me_attach(kRdmaPortal, ProcessId::any(), bits, 0, Unlink::Unlink, InsPos::After);
    if (!me) return Failure{me.code(), std::string("cannot post the ") + what};
    MdDesc d;
    d.start = buf.data();
    d.length = buf.size();
    d.threshold = 1;
    d.options = options;
    d.handler = std::move(handler);
    auto md = lnet.md_attach(*me, d, Unlink::Unlink);
    if (!md) {
      (void)lnet.me_unlink(*me);
      return Failure{md.code(), std::string("cannot post the ") + what};
    }
    return *md;
  }

  Status post_reply(const std::shared_ptr<Call>& c, MsgType expect) {
    std::weak_ptr<Impl> self = weak_from_this();
    auto md = post_one(
        c->rpyid, c->reply, kMdOpPut,
        [self, c, expect](const Event& ev) {
          if (auto s = self.lock()) s->on_reply(c, expect, ev);
        },
        "reply buffer");
    if (!md) return md.failure();
    c->reply_md = *md;
    return {};
  }

  Status post_bulk(const std::shared_ptr<Call>& c, Bulk& bulk, std::uint64_t bulkid) {
    std::weak_ptr<Impl> self = weak_from_this();
    auto md = post_one(
        bulkid, bulk.buf, bulk.client_is_sink ? kMdOpPut : kMdOpGet,
        [self, c](const Event& ev) {
          if (auto s = self.lock()) s->on_bulk(c, ev);
        },
        "bulk buffer");
    if (!md) return md.failure();
    c->bulk_md = *md;
    return {};
  }

  Status send_request(const std::shared_ptr<Call>& c, ProcessId peer, Service service) {
    MdDesc qd;
    qd.start = c->request.data();
    qd.length = c->request.size();
    qd.threshold = 1;
    std::weak_ptr<Impl> self = weak_from_this();
    qd.handler = [self, c](const Event& ev) {
      auto s = self.lock();
      if (!s || ev.type != EventType::Send) return;
      if (ev.status == 0) {
        s->sent.fetch_add(1);
      } else {
        s->errors.fetch_add(1);
        s->finish(c, Failure{ev.status, "the request could not be sent"});
      }
    };
    auto qmd = lnet.md_bind(qd, Unlink::Unlink);
    if (!qmd) return Failure{qmd.code(), "cannot bind the request"};
    if (int rc = lnet.put(Nid::any(), *qmd, AckReq::NoAck, peer, request_portal(service),
                          static_cast<std::uint64_t>(service), 0, 0)) {
      (void)lnet.md_unlink(*qmd);
      return Failure{rc, "cannot send the request"};
    }
    return {};
  }

  void timer_loop() {
    std::unique_lock lk(mutex);
    while (!stopping.load()) {
      auto next = Clock::time_point::max();
      std::vector<std::shared_ptr<Call>> late;
      auto now = Clock::now();
      for (auto& [id, c] : calls) {
        if (c->deadline <= now)
          late.push_back(c);
        else
          next = std::min(next, c->deadline);
      }
      if (!late.empty()) {
        lk.unlock();
        for (auto& c : late) {
          expired.fetch_add(1);
          finish(c, Failure{-ETIMEDOUT, "no reply within " + std::to_string(timeout.count()) + " ms"});
        }
        lk.lock();
        continue;
      }
      if (next == Clock::time_point::max())
        timer_cv.wait(lk);
      else
        timer_cv.wait_until(lk, next);
    }
  }
};

RpcNode::RpcNode(Instance& lnet, std::chrono::milliseconds rpc_timeout)
    : impl_(std::make_shared<Impl>(lnet, rpc_timeout)) {
  impl_->timer = std::thread([i = impl_.get()] { i->timer_loop(); });
}

RpcNode::~RpcNode() {
  Impl& i = *impl_;
  std::vector<std::shared_ptr<Impl::Call>> waiting;
  {
    std::lock_guard g(i.mutex);
    i.stopping.store(true);
    for (auto& [id, c] : i.calls) waiting.push_back(c);
  }
  i.timer_cv.notify_all();
  i.timer.join();
  for (auto& s : i.slots) (void)i.lnet.me_unlink(s->me);
  for (auto& c : waiting) i.finish(c, Failure{-ESHUTDOWN, "the self-test node is stopping"});
}

Status RpcNode::serve(Service s, unsigned buffers, Handler h) {
  Impl& i = *impl_;
  if (int rc = i.lnet.set_lazy_portal(request_portal(s))) return Failure{rc, "cannot make the request portal lazy"};
  std::vector<std::shared_ptr<Impl::Slot>> fresh;
  {
    std::lock_guard g(i.mutex);
    i.handlers[s] = std::move(h);
    for (unsigned k = 0; k < buffers; ++k) {
      i.slots.push_back(std::make_shared<Impl::Slot>());
      i.slots.back()->service = s;
      fresh.push_back(i.slots.back());
    }
  }
  for (const auto& slot : fresh)
    if (int rc = i.post(slot)) return Failure{rc, "cannot post a request buffer"};
  return {};
}

void RpcNode::unserve(Service s) {
  std::unique_lock g(impl_->mutex);
  impl_->handlers.erase(s);
  impl_->handler_done.wait(g, [&] { return impl_->in_handler[s] == 0; });
}

void RpcNode::abort(std::uint64_t rpyid) {
  Impl& i = *impl_;
  std::shared_ptr<Impl::Call> c;
  {
    std::lock_guard g(i.mutex);
    auto it = i.calls.find(rpyid);
    if (it == i.calls.end()) return;
    c = it->second;
  }
  i.finish(c, Failure{-EINTR, "aborted"});
}

std::uint64_t RpcNode::call(ProcessId peer, Service service, Message req, std::optional<Bulk> bulk, Callback done) {
  Impl& i = *impl_;
  auto c = std::make_shared<Impl::Call>();
  c->rpyid = next_id();
  std::uint64_t bulkid = bulk ? next_id() : 0;
  set_ids(req.body, c->rpyid, bulkid);
  c->request = encode(req);
  c->done = std::move(done);
  c->deadline = Clock::now() + i.timeout;
  c->has_bulk = bulk.has_value();
  bool wake_timer = false;
  {
    std::lock_guard g(i.mutex);
    if (i.stopping.load()) {
      c->finished = true;
      c->done(Failure{-ESHUTDOWN, "the self-test node is stopping"});
      return c->rpyid;
    }
    // The timer sleeps until the earliest deadline; as every call waits as long, a new
    // call only needs to wake it when nothing was waiting.
    wake_timer = i.calls.empty();
    i.calls[c->rpyid] = c;
  }
  // The reply's MD, then the bulk's, then the request.
  Status s = i.post_reply(c, reply_type(req.type()));
  if (s && bulk) s = i.post_bulk(c, *bulk, bulkid);
  if (s) s = i.send_request(c, peer, service);
  if (!s) {
    i.errors.fetch_add(1);
    i.finish(c, Failure{s.code(), s.message() + " for a " + msg_type_name(req.type())});
  }
  // A call made while this one was waiting did not wake the timer: this one has to, failed or not.
  if (wake_timer) i.timer_cv.notify_all();
  return c->rpyid;
}

RpcCounters RpcNode::counters() const {
  const Impl& i = *impl_;
  RpcCounters c;
  c.errors = i.errors.load();
  c.rpcs_sent = i.sent.load();
  c.rpcs_rcvd = i.rcvd.load();
  c.rpcs_dropped = i.dropped.load();
  c.rpcs_expired = i.expired.load();
  c.bulk_get = i.bulk_get.load();
  c.bulk_put = i.bulk_put.load();
  return c;
}

std::uint64_t RpcNode::next_id() { return impl_->ids.fetch_add(1) + 1; }

Instance& RpcNode::lnet() { return impl_->lnet; }

}  // namespace lnet::selftest
