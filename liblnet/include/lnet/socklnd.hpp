// Process-wide parameters of the socket LND (the kernel's ksocklnd and acceptor module
// parameters), read from LNET_* environment variables or set before an instance starts.
#pragma once

#include <string>

#include <lnet/result.hpp>

namespace lnet {

enum class AcceptMode { Secure, All, None };  // accept=secure|all|none

struct SocketParams {
  int port = 988;  // accept_port (connections are made to this port too)
  AcceptMode accept = AcceptMode::Secure;
  int accept_timeout = 5;  // seconds for a connecting peer to say who it is
  int accept_backlog = 127;
  int timeout = 50;         // sock_timeout: seconds before a stuck connection is closed
  int keepalive = 30;       // seconds of silence before a keepalive NOOP
  int keepalive_idle = 30;  // TCP keepalive
  int keepalive_count = 5;
  int keepalive_intvl = 5;
  bool typed_conns = true;  // CONTROL + BULK_IN + BULK_OUT (else one ANY, protocol V2)
  int min_bulk = 1024;      // messages this big or bigger go on the bulk connection
  int tx_buffer_size = 0;   // SO_SNDBUF (0: system default)
  int rx_buffer_size = 0;   // SO_RCVBUF
  bool nagle = false;
  bool enable_csum = false;  // send CRC32 checksums (protocol V2 only)
  int min_reconnectms = 1000;
  int max_reconnectms = 60000;
  int nscheds = 1;               // epoll I/O threads
  bool privileged_ports = true;  // connect from ports 1023..512 when allowed to
  // What an outsider can make us hold (docs/design/threats.md): accepted connections
  // still in their handshake (beyond, new ones are closed at once), and how long a peer
  // with no connection and nothing queued keeps its entry.
  int max_handshakes = 1024;
  int max_handshakes_per_ip = 64;  // of them from one address (a flood from one host leaves room for others)
  int peer_idle = 60;              // seconds
  // Where link speeds are read for conns_per_peer 0: a sysfs tree (ROOT/class/net/IF/
  // speed), or empty: the kernel is asked (SIOCETHTOOL), which is right in whatever
  // network namespace the process runs (its /sys may be another namespace's).
  std::string sysfs_root;

  // Reads LNET_ACCEPT, LNET_ACCEPT_PORT, LNET_ACCEPT_TIMEOUT, LNET_ACCEPT_BACKLOG and
  // LNET_SOCK_<FIELD> for the fields above (LNET_SOCK_TIMEOUT, LNET_SOCK_KEEPALIVE,
  // LNET_SOCK_KEEPALIVE_IDLE, ..._COUNT, ..._INTVL, LNET_SOCK_TYPED_CONNS,
  // LNET_SOCK_MIN_BULK, LNET_SOCK_TX_BUFFER_SIZE, LNET_SOCK_RX_BUFFER_SIZE,
  // LNET_SOCK_NAGLE, LNET_SOCK_ENABLE_CSUM, LNET_SOCK_MIN_RECONNECTMS,
  // LNET_SOCK_MAX_RECONNECTMS, LNET_SOCK_NSCHEDS, LNET_SOCK_MAX_HANDSHAKES,
  // LNET_SOCK_MAX_HANDSHAKES_PER_IP, LNET_SOCK_PEER_IDLE) and LNET_SYSFS_ROOT over the defaults;
  // fails naming the variable and value. privileged_ports is not a variable: it follows
  // the uid.
  static Result<SocketParams> from_env();
};

// The parameters socket LNDs started from now on use (default: SocketParams::from_env()).
void set_socket_params(const SocketParams& p);
SocketParams socket_params();

const char* accept_mode_name(AcceptMode m);

// Highest conns_per_peer (connections of each bulk type per peer) an NI takes.
inline constexpr int kMaxConnsPerPeer = 127;
// ksocklnd's automatic conns_per_peer for a link of `mbps` Mb/s: ilog2(Gb/s) / 2 + 1,
// a link below 1 Gb/s counting as 1 Gb/s; 1 when the speed is unknown (<= 0).
int conns_per_peer_for_speed(long mbps);
// The speed of interface `ifname` in Mb/s: from <sysfs_root>/class/net/<ifname>/speed, or
// with an empty root from the kernel (SIOCETHTOOL); -1 when unknown (no such interface,
// a negative or unreadable value) or for a loopback interface.
long link_speed_mbps(const std::string& ifname, const std::string& sysfs_root);

}  // namespace lnet
