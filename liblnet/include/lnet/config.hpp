// The configuration object a process brings up its networks from, and the LNET_*
// environment variables it can be read from (one table, listed by tools' --env).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <lnet/nid.hpp>
#include <lnet/result.hpp>

namespace lnet {

// Per-network tunables (defaults of the real LNet).
struct NetTunables {
  int peer_timeout = 180;
  int peer_credits = 8;
  int peer_buffer_credits = 0;
  int credits = 256;
  friend bool operator==(const NetTunables&, const NetTunables&) = default;
};

// Driver tunables of a network ("lnd tunables" in lnetctl YAML).
struct LndTunables {
  int conns_per_peer = 0;  // socket LND: bulk connections per peer (0: automatic, 1)
  int timeout = 0;         // seconds before a stuck connection is closed (0: driver default)
  int tos = -1;            // IP type of service (-1: leave alone)
  friend bool operator==(const LndTunables&, const LndTunables&) = default;
};

// One network interface to bring up ("tcp1(eth2)[0,1]").
struct NetConfig {
  NetId net;
  std::vector<std::string> interfaces;
  std::vector<unsigned> cpts;  // CPTs the NI serves; empty: all
  std::optional<Nid> nid;      // an explicit NID instead of one derived by the driver
  NetTunables tunables;
  LndTunables lnd_tunables;
};

struct Config {
  // Networks besides 0@lo, which always exists.
  std::vector<NetConfig> nets;
  // CPU partitions (lock and queue shards); 0: one per online CPU, at most 8.
  unsigned ncpts = 0;

  // Reads the LNET_* variables of env_vars(); fails naming the variable and the bad value.
  static Result<Config> from_env();
  // Parses an LNET_NETWORKS / "networks=" string: "tcp0(eth0,eth1)[0,1], o2ib1, mpi".
  static Result<std::vector<NetConfig>> parse_networks(std::string_view text, const NetTunables& defaults = {});
};

struct EnvVar {
  const char* name;
  const char* default_value;
  const char* description;
};

// Every environment variable liblnet reads.
std::span<const EnvVar> env_vars();
// A printable table of env_vars() with the current values (for --env).
std::string env_help();

}  // namespace lnet
