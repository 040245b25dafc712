// The socket LND's view of its interfaces' links (lnet-facts: an NI whose interface goes
// down, loses its carrier or its address is down until it comes back): a thread asleep on
// a NETLINK_ROUTE socket subscribed to link and address changes, which calls back on
// each batch of them; the check of one interface.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "ip_addr.hpp"

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
// or unknown) and, when `ip` is set, still holds that address (interface_holds,
// ip_addr.hpp: an explicit NID on `lo` may not).
bool link_is_up(const std::string& ifname, const IpAddr& ip);

}  // namespace lnet::sock
