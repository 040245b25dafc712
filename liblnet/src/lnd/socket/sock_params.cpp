// The socket LND's parameters: ksocklnd's and the acceptor's module parameters as LNET_* variables.
#include "sock_lnd.hpp"

#include <lnet/lnd/numa.hpp>

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <string>

#include <lnet/env.hpp>
#include <lnet/log.hpp>
#include <lnet/mutex.hpp>

namespace lnet {

namespace {

Mutex g_params_mutex;
std::unique_ptr<SocketParams> g_params LNET_GUARDED_BY(g_params_mutex);

// The module parameters of the kernel's acceptor and ksocklnd, as variables.
const EnvVar kAccept{"LNET_ACCEPT", "secure",
                     "tcp: accept connections from secure (privileged ports only) | all | none"};
const EnvVar kAcceptPort{"LNET_ACCEPT_PORT", "988", "tcp: port the acceptor listens on and connections go to"};
const EnvVar kAcceptTimeout{"LNET_ACCEPT_TIMEOUT", "5", "tcp: seconds a connecting peer has to identify itself"};
const EnvVar kAcceptBacklog{"LNET_ACCEPT_BACKLOG", "127", "tcp: listen() backlog"};
const EnvVar kTimeout{"LNET_SOCK_TIMEOUT", "50",
                      "tcp: seconds before a stuck connection is closed and its messages fail (0: LNet's "
                      "lnd_timeout, derived from transaction_timeout and retry_count)"};
const EnvVar kKeepalive{"LNET_SOCK_KEEPALIVE", "30", "tcp: seconds of silence before a keepalive NOOP (0: none)"};
const EnvVar kTypedConns{"LNET_SOCK_TYPED_CONNS", "1",
                         "tcp: 1 = CONTROL, BULK_IN and BULK_OUT connections per peer; 0 = one"};
const EnvVar kNscheds{"LNET_SOCK_NSCHEDS", "1", "tcp: epoll I/O threads"};
const EnvVar kKeepaliveIdle{"LNET_SOCK_KEEPALIVE_IDLE", "30", "tcp: TCP keepalive idle seconds"};
const EnvVar kKeepaliveCount{"LNET_SOCK_KEEPALIVE_COUNT", "5", "tcp: TCP keepalive probes"};
const EnvVar kKeepaliveIntvl{"LNET_SOCK_KEEPALIVE_INTVL", "5", "tcp: seconds between TCP keepalive probes"};
const EnvVar kMinBulk{"LNET_SOCK_MIN_BULK", "1024", "tcp: messages this big or bigger go on the BULK connections"};
const EnvVar kTxBufferSize{"LNET_SOCK_TX_BUFFER_SIZE", "0", "tcp: SO_SNDBUF bytes (0: system default)"};
const EnvVar kRxBufferSize{"LNET_SOCK_RX_BUFFER_SIZE", "0", "tcp: SO_RCVBUF bytes (0: system default)"};
const EnvVar kNagle{"LNET_SOCK_NAGLE", "0", "tcp: 1 = leave Nagle's algorithm on"};
const EnvVar kEnableCsum{"LNET_SOCK_ENABLE_CSUM", "0", "tcp: 1 = checksum messages (protocol V2 connections only)"};
const EnvVar kMinReconnectms{"LNET_SOCK_MIN_RECONNECTMS", "1000",
                             "tcp: first reconnect delay in ms (doubles up to the max)"};
const EnvVar kMaxReconnectms{"LNET_SOCK_MAX_RECONNECTMS", "60000", "tcp: longest reconnect delay in ms"};
const EnvVar kMaxHandshakes{"LNET_SOCK_MAX_HANDSHAKES", "1024",
                            "tcp: accepted connections still in their handshake at once (beyond, closed)"};
const EnvVar kMaxHandshakesPerIp{"LNET_SOCK_MAX_HANDSHAKES_PER_IP", "64",
                                 "tcp: of those, from one address (a flood from one host leaves room for others)"};
const EnvVar kPeerIdle{"LNET_SOCK_PEER_IDLE", "60",
                       "tcp: seconds a peer with no connection and nothing queued is remembered"};

// The link speed of `dev` in Mb/s as the kernel's ethtool call gives it (what ksocklnd
// asks), in the network namespace of this process; -1 when unknown or loopback.
long ethtool_speed(const std::string& dev) {
  if (dev.size() >= IFNAMSIZ) return -1;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, dev.data(), dev.size());
  long speed = -1;
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0 && !(ifr.ifr_flags & IFF_LOOPBACK)) {
    ethtool_cmd cmd{};
    cmd.cmd = ETHTOOL_GSET;
    ifr.ifr_data = reinterpret_cast<char*>(&cmd);
    if (ioctl(fd, SIOCETHTOOL, &ifr) == 0) {
      std::uint32_t v = ethtool_cmd_speed(&cmd);
      if (v > 0 && v < 0x7fffffffU) speed = static_cast<long>(v);  // SPEED_UNKNOWN is -1
    }
  }
  ::close(fd);
  return speed;
}

// The first word of a sysfs attribute file, or nothing.
std::string read_word(const std::string& path) {
  std::ifstream in(path);
  std::string w;
  if (!(in >> w)) return {};
  return w;
}

}  // namespace

const char* accept_mode_name(AcceptMode m) {
  switch (m) {
    case AcceptMode::Secure: return "secure";
    case AcceptMode::All: return "all";
    case AcceptMode::None: return "none";
  }
  return "?";
}

Result<SocketParams> SocketParams::from_env() {
  SocketParams p;
  auto accept = kAccept.choice({"secure", "all", "none"});
  if (!accept) return accept.failure();
  p.accept = static_cast<AcceptMode>(*accept);
  struct Int {
    const EnvVar& var;
    int* field;
    int lo, hi;
  } ints[] = {
      {kAcceptPort, &p.port, 1, 65535},
      {kAcceptTimeout, &p.accept_timeout, 1, 3600},
      {kAcceptBacklog, &p.accept_backlog, 1, 65535},
      {kTimeout, &p.timeout, 0, 3600},
      {kKeepalive, &p.keepalive, 0, 3600},
      {kNscheds, &p.nscheds, 1, 64},
      {kKeepaliveIdle, &p.keepalive_idle, 1, 32767},
      {kKeepaliveCount, &p.keepalive_count, 1, 127},
      {kKeepaliveIntvl, &p.keepalive_intvl, 1, 32767},
      {kMinBulk, &p.min_bulk, 0, 1 << 20},
      {kTxBufferSize, &p.tx_buffer_size, 0, 1 << 30},
      {kRxBufferSize, &p.rx_buffer_size, 0, 1 << 30},
      {kMinReconnectms, &p.min_reconnectms, 1, 3600000},
      {kMaxReconnectms, &p.max_reconnectms, 1, 3600000},
      {kMaxHandshakes, &p.max_handshakes, 1, 1 << 20},
      {kMaxHandshakesPerIp, &p.max_handshakes_per_ip, 1, 1 << 20},
      {kPeerIdle, &p.peer_idle, 0, 86400},
  };
  for (auto& i : ints) {
    auto r = i.var.number(i.lo, i.hi);
    if (!r) return r.failure();
    *i.field = static_cast<int>(*r);
  }
  struct Flag {
    const EnvVar& var;
    bool* field;
  } flags[] = {{kTypedConns, &p.typed_conns}, {kNagle, &p.nagle}, {kEnableCsum, &p.enable_csum}};
  for (auto& f : flags) {
    auto r = f.var.flag();
    if (!r) return r.failure();
    *f.field = *r;
  }
  p.sysfs_root = sysfs_root_set();
  if (p.min_reconnectms > p.max_reconnectms)
    return Failure{-EINVAL, "LNET_SOCK_MIN_RECONNECTMS (" + std::to_string(p.min_reconnectms) +
                                ") is above LNET_SOCK_MAX_RECONNECTMS (" + std::to_string(p.max_reconnectms) + ")"};
  return p;
}

int conns_per_peer_for_speed(long mbps) {
  if (mbps <= 0) return 1;  // unknown: one of each, as ksocklnd
  long gbps = std::max(mbps, 1000L) / 1000;
  int cpp = (std::bit_width(static_cast<unsigned long>(gbps)) - 1) / 2 + 1;
  return std::min(cpp, kMaxConnsPerPeer);
}

long link_speed_mbps(const std::string& ifname, const std::string& sysfs_root) {
  if (ifname.empty() || ifname.find('/') != std::string::npos) return -1;
  std::string dev = ifname.substr(0, ifname.find(':'));  // an alias (eth0:1) is its device's
  if (sysfs_root.empty()) return ethtool_speed(dev);
  std::string dir = sysfs_root + "/class/net/" + dev + "/";
  std::string flags = read_word(dir + "flags");
  if (!flags.empty()) {
    try {
      if (std::stoul(flags, nullptr, 16) & IFF_LOOPBACK) return -1;  // ksocklnd never asks loopback
    } catch (const std::exception&) {
      return -1;
    }
  }
  std::string speed = read_word(dir + "speed");  // EINVAL to read when the driver does not know
  try {
    std::size_t used = 0;
    long v = std::stol(speed, &used);
    return used == speed.size() && v > 0 ? v : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

void set_socket_params(const SocketParams& p) {
  MutexLock g(g_params_mutex);
  g_params = std::make_unique<SocketParams>(p);
}

SocketParams socket_params() {
  MutexLock g(g_params_mutex);
  if (g_params) return *g_params;
  auto p = SocketParams::from_env();
  if (!p) {
    LNET_LOG(Error, kLogLnd, "%s; using the defaults", p.message().c_str());
    return SocketParams{};
  }
  return *p;
}

}  // namespace lnet
