// The proxy's end of the bridge: connects to an lnetd's UP LND, says HELLO, maps the
// shared region the WELCOME brings, then sends and receives bridge messages. Sending is
// thread-safe; one thread receives.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <lnet/mutex.hpp>
#include <lnet/result.hpp>
#include <lnet/up/bridge.hpp>
#include <lnet/up/region.hpp>

namespace lnet::up {

class BridgeClient {
 public:
  // Connects to the bridge at `path` and waits up to `timeout` for the WELCOME. Fails
  // naming the path: no lnetd there, permission refused, an lnetd of another protocol.
  static Result<std::unique_ptr<BridgeClient>> connect(const std::string& path, std::uint32_t rank,
                                                       std::chrono::milliseconds timeout);
  ~BridgeClient();
  BridgeClient(const BridgeClient&) = delete;
  BridgeClient& operator=(const BridgeClient&) = delete;

  const Welcome& welcome() const { return welcome_; }
  Region& region() { return *region_; }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

  // Sends one message, waiting while the socket is full. -EPIPE/-ECONNRESET: lnetd is gone.
  Status send(const Message& m);
  // The next message, waiting up to `timeout` (-1: for ever; 0: not at all, one system
  // call, and the failure carries no text): -ETIMEDOUT when none came,
  // -ECONNRESET when lnetd closed the bridge, -EPROTO for a message that does not decode.
  Result<Message> receive(int timeout_ms);
  // Shuts the connection down (a blocked receive() returns -ECONNRESET).
  void shutdown();

 private:
  BridgeClient() = default;
  int fd_ = -1;
  std::string path_;
  Welcome welcome_;
  std::unique_ptr<Region> region_;
  Mutex send_mu_;
};

}  // namespace lnet::up
