// Self-test's RPC layer over liblnet (docs/design/selftest-wire.md §4.1): a request is a
// 160-byte PUT (no ACK) to the service's lazy request portal with the service id as
// match bits; the reply is a 160-byte PUT to portal 52 with the rpyid the request
// carried; bulk data moves on portal 52 with the bulkid, driven by the server (a GET
// when it is the sink, a PUT when it is the source) before it replies. Ids come from one
// counter seeded with the seconds << 48. Everything completes through MD events: no
// thread blocks in a handler.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include <lnet/lnet.hpp>
#include <selftest/wire.hpp>

namespace lnet::selftest {

class RpcNode {
 public:
  // The node's RPCs time out after `rpc_timeout` (the kernel's default is 64 s). The
  // instance must outlive the node.
  explicit RpcNode(Instance& lnet, std::chrono::milliseconds rpc_timeout = std::chrono::seconds(64));
  // Stops serving; calls still waiting complete with -ESHUTDOWN.
  ~RpcNode();
  RpcNode(const RpcNode&) = delete;
  RpcNode& operator=(const RpcNode&) = delete;

  // ---- server side ----
  struct Request {
    ProcessId peer;  // who sent it (its replies and bulk go there)
    Message msg;
  };
  // How a handler answers a request, now or later (from any thread).
  class Responder {
   public:
    virtual ~Responder() = default;
    virtual void reply(Message m) = 0;  // its type is the request's reply type
    // Moves the client's bulk into `buf` (server_is_source false: a GET) or `buf` into it
    // (true: a PUT), then calls then(status); `buf` must live until then.
    virtual void bulk(std::span<std::uint8_t> buf, bool server_is_source, std::function<void(int)> then) = 0;
    virtual void drop() = 0;  // no reply: the client times out
  };
  using Handler = std::function<void(const Request&, std::shared_ptr<Responder>)>;
  // Posts `buffers` request buffers for the service and calls `h` for each request that
  // decodes as the service's request type; others are dropped (counted as errors). A
  // request of another version is answered EPROTO without calling `h`.
  Status serve(Service s, unsigned buffers, Handler h);
  // Stops calling the service's handler: its requests are dropped from now on; returns
  // once no call of the handler is running (not to be called from one). For owners of
  // handlers that go away before the node.
  void unserve(Service s);

  // ---- client side ----
  struct Bulk {
    std::span<std::uint8_t> buf;  // must live until the call completes
    bool client_is_sink = false;  // the server PUTs into it (BRW read, the TEST id list: false)
  };
  using Callback = std::function<void(Result<Message>)>;
  // Sends `req` to the service at `peer` (its rpyid and bulkid are set here) and calls
  // `done` once with the reply, or with -ETIMEDOUT (no reply within the timeout),
  // -EBADMSG (not a reply of the expected type) or the send's error. Returns the call's
  // rpyid, which names it to abort().
  std::uint64_t call(ProcessId peer, Service s, Message req, std::optional<Bulk> bulk, Callback done);
  // Completes the call now with -EINTR if it has not completed (its buffers are unlinked).
  void abort(std::uint64_t rpyid);

  RpcCounters counters() const;
  std::uint64_t next_id();
  Instance& lnet();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace lnet::selftest
