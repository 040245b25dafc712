// The virtual cluster's description: a plain text table of fabrics, nodes and what runs
// on them (cluster(5) in docs/man/lnet-cluster.8.md), parsed and checked as a whole
// before anything is created, and what the cluster tool builds from it: the lnetd
// configuration of each node, the cluster's /etc/hosts, hostfiles per role and a plan
// that tests/cluster/cluster.sh sources.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <lnet/nid.hpp>
#include <lnet/result.hpp>

namespace lnet::cluster {

enum Role : unsigned { kLogin = 1, kCompute = 2, kServer = 4, kRouter = 8 };

struct Fabric {
  std::string name;  // as written: the nodes' interface on it has this name
  NetId net;         // its name's, unless net= says: tcp, tcpN, or the MPI network (mpi, gni...)
  std::uint32_t base = 0;
  int prefix = 24;
  int line = 0;
  // The MPI fabric: its net is the MPI network (mpi, or a kernel type a site chose).
  bool is_mpi() const { return mpi_net_type(net.type()); }
};

struct Address {
  std::size_t fabric = 0;  // index into Description::fabrics
  std::uint32_t ip = 0;
};

struct Node {
  std::string name;
  unsigned roles = 0;
  std::vector<Address> addrs;  // in the order written (a kernel node's eth0, eth1...)
  int slots = 1;               // MPI slots (compute: 2 unless given)
  bool lnetd = false;          // server or router, unless lnetd= says otherwise
  bool kernel = false;         // kind=kernel: a kernel LNet node (a qemu guest of the kit)
  int line = 0;
  bool has(Role r) const { return (roles & r) != 0; }
  // The node's address on `fabric`, or 0.
  std::uint32_t ip_on(std::size_t fabric) const;
};

struct Route {
  std::size_t node = 0;
  NetId net;
  std::vector<std::size_t> gateways;  // nodes
  std::vector<std::uint32_t> gateway_ips;
  std::vector<NetId> gateway_nets;  // the net each gateway is reached on
  int line = 0;
};

struct Daemon {
  std::size_t node = 0;
  std::string command;  // {NODE.FABRIC} already replaced by addresses
  int line = 0;
};

// A standing lnet-proxy job (mode 1c): one rank per node, in this order. A job on one
// node is launched from that node, one spanning nodes from the login node.
struct ProxyJob {
  std::string name;  // its first node's
  std::vector<std::size_t> nodes;
  std::vector<std::string> args;  // its options (after "--")
  int line = 0;
};

struct Description {
  std::string name;
  std::vector<Fabric> fabrics;
  std::vector<Node> nodes;
  std::vector<Route> routes;
  std::vector<Daemon> daemons;
  std::vector<ProxyJob> proxies;                      // the standing proxy jobs
  std::vector<std::pair<std::string, long>> globals;  // lnetd global tunables, every lnetd
  int login = -1;                                     // the login node, if any
  int mpi_fabric = -1;                                // the mpi fabric, if any
};

// What the host itself calls the local host: its name and the names its /etc/hosts maps
// to loopback addresses. A node of that name would make MPI launch it locally.
struct HostFacts {
  std::string hostname;
  std::vector<std::string> loopback_names;
  // Reads gethostname() and `etc_hosts` (an /etc/hosts format file; missing is fine).
  static HostFacts read(const std::string& etc_hosts = "/etc/hosts");
};

inline constexpr std::size_t kMaxNodes = 64;
inline constexpr std::size_t kMaxFabrics = 8;
inline constexpr std::size_t kMaxText = 64 * 1024;

// Parses a description; `source` names it in messages ("FILE:LINE: why"). `name`
// overrides the cluster line (empty: the cluster line, else "lc").
Result<Description> parse(std::string_view text, const std::string& source, const HostFacts& host,
                          const std::string& name = "");

std::string ip_string(std::uint32_t ip);
std::string role_names(unsigned roles);
// The lnetd configuration (lnetctl export's YAML) of a node that runs lnetd.
std::string lnetd_yaml(const Description& d, const Node& n);
// A kernel node's configuration: what its lnetctl imports at boot (its NICs are eth0,
// eth1... in the order of its addresses), and the modprobe.conf of its modules (the
// router buffers of a router, the description's globals the kernel takes as module
// parameters).
std::string kernel_yaml(const Description& d, const Node& n);
std::string kernel_modprobe(const Description& d, const Node& n);
// The LNet net of each NIC of a kernel node, comma-separated (the kit's KN_NET).
std::string kernel_nets(const Description& d, const Node& n);
// The cluster's /etc/hosts: every node by its first address on the mpi fabric, else its
// first address.
std::string hosts_file(const Description& d);
// Open MPI's hostfile ("c1 slots=2") or MPICH's ("c1:2") of the nodes with role `r`.
std::string hostfile(const Description& d, Role r, bool mpich);
// Bash assignments (CL_* variables) the cluster tool sources.
std::string shell_plan(const Description& d);

}  // namespace lnet::cluster
