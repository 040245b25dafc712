#include "link_watch.hpp"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <lnet/log.hpp>
#include <lnet/result.hpp>

namespace lnet::sock {

LinkWatch::~LinkWatch() {
  if (thread_.joinable()) {
    std::uint64_t one = 1;
    (void)!write(wake_, &one, sizeof one);
    thread_.join();
  }
  if (nl_ >= 0) close(nl_);
  if (wake_ >= 0) close(wake_);
}

bool LinkWatch::start() {
  nl_ = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
  sockaddr_nl a{};
  a.nl_family = AF_NETLINK;
  a.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
  if (nl_ < 0 || bind(nl_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    LNET_LOG(Warn, kLogLnd, "no netlink socket (%s): NIs do not follow their interfaces' links",
             errno_string(errno).c_str());
    return false;
  }
  wake_ = eventfd(0, EFD_CLOEXEC);
  if (wake_ < 0) return false;
  thread_ = std::thread([this] { loop(); });
  return true;
}

void LinkWatch::loop() {
  pollfd fds[2] = {{nl_, POLLIN, 0}, {wake_, POLLIN, 0}};
  alignas(nlmsghdr) char buf[16384];
  for (;;) {
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;  // stopping
    if (!(fds[0].revents & (POLLIN | POLLERR))) continue;
    // Drain the batch (an overrun, ENOBUFS, also means something changed), then look.
    while (recv(nl_, buf, sizeof buf, 0) > 0 || errno == ENOBUFS) {
    }
    changed_();
  }
}

bool link_is_up(const std::string& ifname, const IpAddr& ip) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return true;  // nothing to watch
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;
  ifreq r{};
  std::memcpy(r.ifr_name, ifname.c_str(), ifname.size());
  bool up = ioctl(fd, SIOCGIFFLAGS, &r) == 0 && (r.ifr_flags & IFF_UP) && (r.ifr_flags & IFF_RUNNING);
  close(fd);
  return up && (ip.any() || interface_holds(ifname, ip));
}

}  // namespace lnet::sock
