// The socket LND's view of its interfaces' links (lnet-facts: an NI whose interface goes
// down, loses its carrier or its address is down until it comes back): a thread asleep on
// a NETLINK_ROUTE socket subscribed to link and address changes, which calls back on
// each batch of them; the check of one interface.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

namespace lnet::sock {

class LinkWatch {
 public:
  explicit LinkWatch(std::function<void()> changed) : changed_(std::move(changed)) {}
  ~LinkWatch();
  LinkWatch(const LinkWatch&) = delete;
  LinkWatch& operator=(const LinkWatch&) = delete;
  // Subscribes and starts the thread; false (logged) when the kernel gives no netlink
  // socket: links are then not watched.
  bool start();

 private:
  void loop();
  std::function<void()> changed_;
  int nl_ = -1;
  int wake_ = -1;
  std::thread thread_;
};

// Whether interface `ifname` is up with a carrier (IFF_UP and IFF_RUNNING: operstate up
// or unknown) and, when `ip` (host order) is not 0, still holds that IPv4 address.
bool link_is_up(const std::string& ifname, std::uint32_t ip);
// Whether interface `ifname` holds IPv4 address `ip` (an explicit NID on `lo` may not).
bool interface_holds(const std::string& ifname, std::uint32_t ip);

}  // namespace lnet::sock
