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

  // Reads LNET_ACCEPT, LNET_ACCEPT_PORT, LNET_ACCEPT_TIMEOUT, LNET_ACCEPT_BACKLOG and
  // LNET_SOCK_<FIELD> for the fields above (LNET_SOCK_TIMEOUT, LNET_SOCK_KEEPALIVE,
  // LNET_SOCK_KEEPALIVE_IDLE, ..._COUNT, ..._INTVL, LNET_SOCK_TYPED_CONNS,
  // LNET_SOCK_MIN_BULK, LNET_SOCK_TX_BUFFER_SIZE, LNET_SOCK_RX_BUFFER_SIZE,
  // LNET_SOCK_NAGLE, LNET_SOCK_ENABLE_CSUM, LNET_SOCK_MIN_RECONNECTMS,
  // LNET_SOCK_MAX_RECONNECTMS, LNET_SOCK_NSCHEDS) over the defaults; fails naming the
  // variable and value. privileged_ports is not a variable: it follows the uid.
  static Result<SocketParams> from_env();
};

// The parameters socket LNDs started from now on use (default: SocketParams::from_env()).
void set_socket_params(const SocketParams& p);
SocketParams socket_params();

const char* accept_mode_name(AcceptMode m);

}  // namespace lnet
