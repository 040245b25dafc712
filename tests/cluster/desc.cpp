// Parsing and checking a virtual cluster's description, and what is built from it (see
// desc.hpp). Every check names the line; nothing is created from a description that
// fails one.
#include "desc.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <fstream>
#include <sstream>

#include <lnet/dlc.hpp>

namespace lnet::cluster {

namespace {

constexpr std::string_view kKeywords = "cluster, fabric, node, route, proxy, daemon, global";

struct RoleName {
  Role role;
  std::string_view name;
};
constexpr std::array<RoleName, 4> kRoles{
    {{kLogin, "login"}, {kCompute, "compute"}, {kServer, "server"}, {kRouter, "router"}}};

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

// Whitespace-separated words up to a '#' that starts a word.
std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size() || line[i] == '#') break;
    std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    out.push_back(line.substr(start, i - start));
  }
  return out;
}

// The rest of the line after `n` words, comment and trailing blanks removed.
std::string_view rest_after(std::string_view line, std::size_t n) {
  std::size_t i = 0;
  for (std::size_t w = 0; w < n; ++w) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
  }
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  std::string_view r = line.substr(i);
  // A comment starts with a '#' at the start of a word.
  for (std::size_t k = 0; k < r.size(); ++k)
    if (r[k] == '#' && (k == 0 || r[k - 1] == ' ' || r[k - 1] == '\t')) {
      r = r.substr(0, k);
      break;
    }
  while (!r.empty() && (r.back() == ' ' || r.back() == '\t')) r.remove_suffix(1);
  return r;
}

bool parse_uint(std::string_view s, unsigned long max, unsigned long* out) {
  if (s.empty() || s.size() > 10) return false;
  unsigned long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v > max) return false;
  *out = v;
  return true;
}

bool parse_ipv4(std::string_view s, std::uint32_t* out) {
  auto parts = split(s, '.');
  if (parts.size() != 4) return false;
  std::uint32_t ip = 0;
  for (auto p : parts) {
    unsigned long v = 0;
    if (p.size() > 3 || !parse_uint(p, 255, &v)) return false;
    ip = (ip << 8) | static_cast<std::uint32_t>(v);
  }
  *out = ip;
  return true;
}

std::uint32_t mask_of(int prefix) { return prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix); }

// Node names: a host name MPI and namespaces can carry as is. Cluster names have no '-':
// a cluster's namespaces are lc-CLUSTER (its fabrics) and lc-CLUSTER-NODE.
bool good_name(std::string_view s, std::size_t max, bool dash = true) {
  if (s.empty() || s.size() > max || !(s[0] >= 'a' && s[0] <= 'z') || s.back() == '-') return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (dash && c == '-'); });
}

std::string q(std::string_view s) { return "'" + std::string(s) + "'"; }

class Parser {
 public:
  Parser(const std::string& source, const HostFacts& host) : source_(source), host_(host) {}

  Result<Description> run(std::string_view text, const std::string& name) {
    if (text.size() > kMaxText)
      return Failure{-EFBIG, source_ + ": longer than " + std::to_string(kMaxText) + " bytes"};
    if (text.find('\0') != std::string_view::npos) return Failure{-EINVAL, source_ + ": not a text file (a NUL byte)"};
    int lineno = 0;
    for (std::string_view line : split(text, '\n')) {
      ++lineno;
      line_ = lineno;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      auto w = words(line);
      if (w.empty()) continue;
      Status s = statement(w, line);
      if (!s) return Failure{s.code(), where() + s.message()};
    }
    line_ = 0;
    if (Status s = finish(name); !s) return Failure{s.code(), source_ + ": " + s.message()};
    return std::move(d_);
  }

 private:
  std::string where() const { return source_ + ":" + std::to_string(line_) + ": "; }
  static Failure bad(std::string why) { return Failure{-EINVAL, std::move(why)}; }

  Status statement(const std::vector<std::string_view>& w, std::string_view line) {
    std::string_view k = w[0];
    if (k == "cluster") return cluster(w);
    if (k == "fabric") return fabric(w);
    if (k == "node") return node(w);
    if (k == "route") return route(w);
    if (k == "proxy") return proxy(w);
    if (k == "daemon") return daemon(w, line);
    if (k == "global") return global(w);
    return bad("unknown keyword " + q(k) + " (" + std::string(kKeywords) + ")");
  }

  Status cluster(const std::vector<std::string_view>& w) {
    if (w.size() != 2) return bad("usage: cluster NAME");
    if (cluster_line_) return bad("a second cluster line (the first is line " + std::to_string(cluster_line_) + ")");
    if (!good_name(w[1], 12, false))
      return bad("bad cluster name " + q(w[1]) + ": 1 to 12 of a-z and 0-9, starting with a letter");
    d_.name = std::string(w[1]);
    cluster_line_ = line_;
    return {};
  }

  // fabric NAME SUBNET [net=NET]: NET defaults to NAME. Two fabrics of one tcp net give
  // a node on both two NIs in it (multi-rail); one fabric carries the MPI network.
  Status fabric(const std::vector<std::string_view>& w) {
    if (w.size() != 3 && w.size() != 4)
      return bad(
          "usage: fabric NAME SUBNET [net=NET] (e.g. fabric tcp0 10.90.1.0/24, fabric mpi 10.90.0.0/24 net=gni)");
    if (d_.fabrics.size() == kMaxFabrics) return bad("more than " + std::to_string(kMaxFabrics) + " fabrics");
    std::string_view name = w[1];
    if (name.size() > 15 || !good_name(name, 15))
      return bad("bad fabric name " + q(name) + ": 1 to 15 of a-z, 0-9 and '-', starting with a letter");
    std::string_view net_text = name;
    if (w.size() == 4) {
      if (!w[3].starts_with("net=")) return bad("bad " + q(w[3]) + ": net=NET (the fabric's LNet network)");
      net_text = w[3].substr(4);
    }
    auto net = NetId::parse(net_text);
    if (!net || net->is_any())
      return bad("fabric " + q(name) + " names no network (" + q(net_text) +
                 "): give net=NET, a tcp network (tcp, tcp0, tcp1...) or the MPI network (mpi, or gni, kfi...)");
    if (net->type() == kO2ibLnd) return bad("not supported yet: fabric " + q(name) + " (o2ib: no RDMA device here)");
    if (net->type() != kSockLnd && !mpi_net_type(net->type()))
      return bad("fabric " + q(name) + " carries " + net->to_string() +
                 ": a fabric carries a tcp network (tcp, tcp0, tcp1...) or the MPI network (mpi, or a type the "
                 "kernel names that nothing here drives: gni, gip, ptlf, kfi, efa, bxi3f)");
    for (const Fabric& f : d_.fabrics) {
      if (f.is_mpi() && mpi_net_type(net->type()))
        return bad("a second MPI fabric " + q(name) + " (fabric " + q(f.name) + " of line " + std::to_string(f.line) +
                   " is one)");
    }
    auto slash = w[2].find('/');
    std::uint32_t ip = 0;
    unsigned long prefix = 0;
    if (slash == std::string_view::npos || !parse_ipv4(w[2].substr(0, slash), &ip) ||
        !parse_uint(w[2].substr(slash + 1), 32, &prefix))
      return bad("bad subnet " + q(w[2]) + ": an IPv4 network and prefix length, e.g. 10.90.1.0/24");
    if (prefix < 8 || prefix > 30) return bad("bad subnet " + q(w[2]) + ": the prefix length must be 8..30");
    int len = static_cast<int>(prefix);
    if (ip & ~mask_of(len))
      return bad("bad subnet " + q(w[2]) + ": host bits are set (the network is " + ip_string(ip & mask_of(len)) + "/" +
                 std::to_string(len) + ")");
    std::uint32_t top = ip >> 24;
    if (top == 0 || top == 127 || top >= 224 || (ip >> 16) == 0xA9FE)
      return bad("bad subnet " + q(w[2]) + ": not a unicast network a fabric can use (0/8, 127/8, 169.254/16, 224/3)");
    for (const Fabric& f : d_.fabrics) {
      std::uint32_t m = mask_of(std::min(f.prefix, len));
      if ((f.base & m) == (ip & m))
        return bad("subnet " + std::string(w[2]) + " overlaps fabric " + q(f.name) + "'s " + ip_string(f.base) + "/" +
                   std::to_string(f.prefix) + " (line " + std::to_string(f.line) + ")");
    }
    Fabric f;
    f.name = std::string(name);
    f.net = *net;
    f.base = ip;
    f.prefix = len;
    f.line = line_;
    if (f.is_mpi()) d_.mpi_fabric = static_cast<int>(d_.fabrics.size());
    d_.fabrics.push_back(std::move(f));
    return {};
  }

  int fabric_index(std::string_view name) const {
    for (std::size_t i = 0; i < d_.fabrics.size(); ++i)
      if (d_.fabrics[i].name == name) return static_cast<int>(i);
    return -1;
  }
  int node_index(std::string_view name) const {
    for (std::size_t i = 0; i < d_.nodes.size(); ++i)
      if (d_.nodes[i].name == name) return static_cast<int>(i);
    return -1;
  }

  Status check_node_name(std::string_view name) const {
    if (!good_name(name, 15))
      return bad("bad node name " + q(name) + ": 1 to 15 of a-z, 0-9 and '-', starting with a letter");
    std::string why;
    // Host names are compared as resolvers do: without regard to case.
    auto lower = [](std::string v) {
      for (char& c : v) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      return v;
    };
    std::string host = lower(host_.hostname), short_host = host.substr(0, host.find('.'));
    auto loopback = [&] {
      for (const std::string& l : host_.loopback_names)
        if (lower(l) == name) return true;
      return false;
    };
    if (name == "localhost" || name.starts_with("localhost") || name.starts_with("ip6-"))
      why = "it is the local host's name";
    else if (!host.empty() && (name == host || name == short_host))
      why = "it is this machine's host name";
    else if (loopback())
      why = "/etc/hosts maps it to a loopback address";
    if (!why.empty())
      return bad("node name " + q(name) + " would resolve to the local host (" + why +
                 "): MPI would start its ranks here instead of on the node");
    return {};
  }

  Status node(const std::vector<std::string_view>& w) {
    if (w.size() < 3)
      return bad("usage: node NAME ROLE[,ROLE...] FABRIC=HOST... [slots=N] [lnetd=yes|no] [kind=namespace|kernel]");
    if (w.size() == 3) return bad("node " + q(w[1]) + " is on no fabric (give FABRIC=HOST, e.g. mpi=11)");
    if (d_.nodes.size() == kMaxNodes) return bad("more than " + std::to_string(kMaxNodes) + " nodes");
    Node n;
    n.name = std::string(w[1]);
    n.line = line_;
    if (Status s = check_node_name(n.name); !s) return s;
    if (int other = node_index(n.name); other >= 0)
      return bad("node " + q(n.name) + " is already defined on line " + std::to_string(d_.nodes[other].line));
    for (std::string_view r : split(w[2], ',')) {
      auto it = std::find_if(kRoles.begin(), kRoles.end(), [&](const RoleName& x) { return x.name == r; });
      if (it == kRoles.end())
        return bad("unknown role " + q(r) + " of node " + q(n.name) + " (login, compute, server, router)");
      n.roles |= it->role;
    }
    bool slots_given = false;
    int lnetd = -1;
    for (std::size_t i = 3; i < w.size(); ++i) {
      std::size_t eq = w[i].find('=');
      if (eq == std::string_view::npos || eq == 0)
        return bad("bad " + q(w[i]) +
                   ": FABRIC=HOST (e.g. mpi=11 or mpi=10.90.0.11), slots=N, lnetd=yes|no or kind=namespace|kernel");
      std::string_view key = w[i].substr(0, eq), value = w[i].substr(eq + 1);
      if (key == "slots") {
        unsigned long v = 0;
        if (!parse_uint(value, 64, &v) || v == 0) return bad("bad slots " + q(value) + " (1..64)");
        n.slots = static_cast<int>(v);
        slots_given = true;
        continue;
      }
      if (key == "lnetd") {
        if (value != "yes" && value != "no") return bad("bad lnetd " + q(value) + " (yes or no)");
        lnetd = value == "yes";
        continue;
      }
      if (key == "kind") {
        if (value != "namespace" && value != "kernel") return bad("bad kind " + q(value) + " (namespace or kernel)");
        n.kernel = value == "kernel";
        continue;
      }
      int f = fabric_index(key);
      if (f < 0)
        return bad("unknown fabric " + q(key) + " of node " + q(n.name) +
                   " (fabric lines come before the nodes on them; options are slots=, lnetd= and kind=)");
      const Fabric& fab = d_.fabrics[static_cast<std::size_t>(f)];
      if (n.ip_on(static_cast<std::size_t>(f))) return bad("node " + q(n.name) + " is on fabric " + q(key) + " twice");
      std::uint32_t host_max = ~mask_of(fab.prefix);
      std::uint32_t ip = 0;
      unsigned long v = 0;
      if (parse_uint(value, host_max, &v)) {
        ip = fab.base | static_cast<std::uint32_t>(v);
      } else if (!parse_ipv4(value, &ip)) {
        return bad("bad address " + q(value) + " on fabric " + q(key) + ": a host number (1.." +
                   std::to_string(host_max - 1) + ") or an IPv4 address in " + ip_string(fab.base) + "/" +
                   std::to_string(fab.prefix));
      }
      if ((ip & mask_of(fab.prefix)) != fab.base)
        return bad("address " + ip_string(ip) + " of node " + q(n.name) + " is not in fabric " + q(key) + "'s " +
                   ip_string(fab.base) + "/" + std::to_string(fab.prefix));
      std::uint32_t host = ip & host_max;
      if (host == 0 || host == host_max)
        return bad("address " + ip_string(ip) + " of node " + q(n.name) + " is fabric " + q(key) + "'s " +
                   (host == 0 ? "network" : "broadcast") + " address");
      for (const Node& o : d_.nodes)
        if (o.ip_on(static_cast<std::size_t>(f)) == ip)
          return bad("address " + ip_string(ip) + " of node " + q(n.name) + " is already that of node " + q(o.name) +
                     " (line " + std::to_string(o.line) + ")");
      n.addrs.push_back({static_cast<std::size_t>(f), ip});
    }
    if (n.addrs.empty()) return bad("node " + q(n.name) + " is on no fabric (give FABRIC=HOST, e.g. mpi=11)");
    bool on_mpi = d_.mpi_fabric >= 0 && n.ip_on(static_cast<std::size_t>(d_.mpi_fabric));
    if ((n.has(kCompute) || n.has(kLogin)) && !on_mpi)
      return bad("node " + q(n.name) + " is a " + (n.has(kCompute) ? "compute" : "login") +
                 " node but not on the mpi fabric (MPI jobs reach it there)");
    if (n.has(kLogin) && d_.login >= 0)
      return bad("a second login node " + q(n.name) + " (node " + q(d_.nodes[static_cast<std::size_t>(d_.login)].name) +
                 " is one)");
    if (n.kernel)
      if (Status s = check_kernel_node(n, lnetd, slots_given); !s) return s;
    if (!slots_given && n.has(kCompute)) n.slots = 2;
    n.lnetd = !n.kernel && (lnetd >= 0 ? lnetd == 1 : n.has(kServer) || n.has(kRouter));
    if (n.has(kRouter) && !n.lnetd && !n.kernel)
      return bad("router " + q(n.name) + " with lnetd=no: a router forwards in its lnetd");
    if (n.has(kRouter) && nets_of(n) < 2)
      return bad("router " + q(n.name) + " is on " + std::to_string(nets_of(n)) +
                 " LNet network: a router joins two or more (tcp fabrics, and mpi through the UP LND)");
    if (n.has(kLogin)) d_.login = static_cast<int>(d_.nodes.size());
    d_.nodes.push_back(std::move(n));
    return {};
  }

  // A kernel node (a guest of ../shared/kernel-lnet) is a server or a router of tcp
  // networks: the kernel has no MPI and cannot be on the MPI network.
  Status check_kernel_node(const Node& n, int lnetd, bool slots_given) const {
    if (n.has(kCompute) || n.has(kLogin))
      return bad("kernel node " + q(n.name) + " is a " + (n.has(kCompute) ? "compute" : "login") +
                 " node: a kernel node is a server or a router (no MPI runs there)");
    if (lnetd == 1) return bad("kernel node " + q(n.name) + " with lnetd=yes: its LNet is the kernel's");
    if (slots_given) return bad("kernel node " + q(n.name) + " with slots=: no MPI job runs there");
    for (const Address& a : n.addrs)
      if (d_.fabrics[a.fabric].is_mpi())
        return bad("kernel node " + q(n.name) + " is on the MPI fabric " + q(d_.fabrics[a.fabric].name) +
                   ": the kernel has no MPI network (it routes to it through an lnetd router)");
    if (n.addrs.size() > 4) return bad("kernel node " + q(n.name) + " is on more than 4 fabrics (its NICs)");
    return {};
  }

  // The LNet networks of the node (two fabrics of one net are one network).
  int nets_of(const Node& n) const {
    std::vector<NetId> nets;
    for (const Address& a : n.addrs) {
      const Fabric& f = d_.fabrics[a.fabric];
      if ((!f.is_mpi() || n.lnetd) && std::find(nets.begin(), nets.end(), f.net) == nets.end()) nets.push_back(f.net);
    }
    return static_cast<int>(nets.size());
  }

  // The node's LNet networks (an mpi NI when it runs lnetd on the mpi fabric).
  bool has_net(const Node& n, NetId net) const {
    for (const Address& a : n.addrs)
      if (d_.fabrics[a.fabric].net == net && (!d_.fabrics[a.fabric].is_mpi() || n.lnetd)) return true;
    return false;
  }

  // A node with an LNet of its own: its lnetd, or a kernel node's (`kernel` allows it).
  Result<std::size_t> lnetd_node(std::string_view name, const char* what, bool kernel = false) const {
    int i = node_index(name);
    if (i < 0) return bad(std::string(what) + " " + q(name) + " is not a node defined above");
    const Node& n = d_.nodes[static_cast<std::size_t>(i)];
    if (n.kernel && !kernel) return bad(std::string(what) + " " + q(name) + " is a kernel node (it runs no lnetd)");
    if (!n.lnetd && !n.kernel)
      return bad(std::string(what) + " " + q(name) + " runs no lnetd (it is not a server or router, or has lnetd=no)");
    return static_cast<std::size_t>(i);
  }

  Status route(const std::vector<std::string_view>& w) {
    if (w.size() < 4) return bad("usage: route NODE NET GATEWAY... (e.g. route s1 mpi r1 r2)");
    auto node = lnetd_node(w[1], "node", true);
    if (!node) return node.failure();
    const Node& n = d_.nodes[*node];
    auto net = NetId::parse(w[2]);
    if (!net) return bad("bad network " + q(w[2]) + ": " + net.message());
    bool known = std::any_of(d_.fabrics.begin(), d_.fabrics.end(), [&](const Fabric& f) { return f.net == *net; });
    if (!known) return bad("network " + q(w[2]) + " is no fabric's of this cluster");
    if (has_net(n, *net)) return bad("node " + q(n.name) + " is on " + net->to_string() + " itself: no route needed");
    Route r;
    r.node = *node;
    r.net = *net;
    r.line = line_;
    for (std::size_t i = 3; i < w.size(); ++i) {
      auto gw = lnetd_node(w[i], "gateway", true);
      if (!gw) return gw.failure();
      const Node& g = d_.nodes[*gw];
      if (!g.has(kRouter)) return bad("gateway " + q(g.name) + " is not a router (its lnetd does not forward)");
      if (std::find(r.gateways.begin(), r.gateways.end(), *gw) != r.gateways.end())
        return bad("gateway " + q(g.name) + " is named twice");
      std::uint32_t ip = 0;
      NetId via;
      for (const Address& a : n.addrs) {
        const Fabric& f = d_.fabrics[a.fabric];
        if (!f.is_mpi() && g.ip_on(a.fabric)) {
          ip = g.ip_on(a.fabric);
          via = f.net;
          break;
        }
      }
      if (!ip) return bad("gateway " + q(g.name) + " shares no tcp fabric with node " + q(n.name));
      r.gateways.push_back(*gw);
      r.gateway_ips.push_back(ip);
      r.gateway_nets.push_back(via);
    }
    for (const Route& o : d_.routes)
      if (o.node == r.node && o.net == r.net)
        return bad("a second route of " + q(n.name) + " to " + net->to_string() + " (line " + std::to_string(o.line) +
                   "): name every gateway on one line");
    d_.routes.push_back(std::move(r));
    return {};
  }

  Status proxy(const std::vector<std::string_view>& w) {
    if (w.size() < 2) return bad("usage: proxy NODE... [-- LNET-PROXY-OPTION...] (a standing lnet-proxy job)");
    ProxyJob job;
    job.line = line_;
    for (std::size_t i = 1; i < w.size(); ++i) {
      if (w[i] == "--") {
        for (++i; i < w.size(); ++i) job.args.emplace_back(w[i]);
        break;
      }
      auto node = lnetd_node(w[i], "proxy node");
      if (!node) return node.failure();
      if (d_.mpi_fabric < 0 || !d_.nodes[*node].ip_on(static_cast<std::size_t>(d_.mpi_fabric)))
        return bad("proxy node " + q(w[i]) + " is not on the mpi fabric (its lnetd's UP LND serves the proxy there)");
      if (std::find(job.nodes.begin(), job.nodes.end(), *node) != job.nodes.end())
        return bad("proxy node " + q(w[i]) + " is named twice");
      job.nodes.push_back(*node);
    }
    if (job.nodes.empty()) return bad("usage: proxy NODE... [-- LNET-PROXY-OPTION...]: no node");
    job.name = d_.nodes[job.nodes.front()].name;
    for (const ProxyJob& o : d_.proxies)
      if (o.name == job.name)
        return bad("a second proxy job first on node " + q(job.name) + " (line " + std::to_string(o.line) +
                   "): jobs are named by their first node");
    d_.proxies.push_back(std::move(job));
    return {};
  }

  Status daemon(const std::vector<std::string_view>& w, std::string_view line) {
    if (w.size() < 3) return bad("usage: daemon NODE COMMAND... (started at up and after a reboot)");
    int node = node_index(w[1]);
    if (node < 0) return bad("node " + q(w[1]) + " is not a node defined above");
    if (d_.nodes[static_cast<std::size_t>(node)].kernel)
      return bad("node " + q(w[1]) + " is a kernel node: it runs no daemon of this project");
    std::string_view cmd = rest_after(line, 2);
    std::string out;
    for (std::size_t i = 0; i < cmd.size(); ++i) {
      char c = cmd[i];
      if (static_cast<unsigned char>(c) < 0x20 && c != '\t') return bad("a control character in the command");
      if (c != '{') {
        out += c;
        continue;
      }
      std::size_t end = cmd.find('}', i);
      if (end == std::string_view::npos) return bad("an unclosed '{' in the command ({NODE.FABRIC} is an address)");
      std::string_view ref = cmd.substr(i + 1, end - i - 1);
      std::size_t dot = ref.find('.');
      int rn = dot == std::string_view::npos ? -1 : node_index(ref.substr(0, dot));
      int rf = dot == std::string_view::npos ? -1 : fabric_index(ref.substr(dot + 1));
      std::uint32_t ip =
          rn >= 0 && rf >= 0 ? d_.nodes[static_cast<std::size_t>(rn)].ip_on(static_cast<std::size_t>(rf)) : 0;
      if (!ip)
        return bad("{" + std::string(ref) + "} is no address: {NODE.FABRIC} of a node defined above on that fabric");
      out += ip_string(ip);
      i = end;
    }
    d_.daemons.push_back({static_cast<std::size_t>(node), out, line_});
    return {};
  }

  Status global(const std::vector<std::string_view>& w) {
    if (w.size() != 3) return bad("usage: global TUNABLE VALUE (every lnetd's, e.g. global router_ping_timeout 2)");
    std::string key(w[1]);
    for (const auto& g : d_.globals)
      if (g.first == key) return bad("global " + q(key) + " is set twice");
    long value = 0;
    auto [p, ec] = std::from_chars(w[2].data(), w[2].data() + w[2].size(), value);
    if (ec != std::errc() || p != w[2].data() + w[2].size() ||
        !std::all_of(key.begin(), key.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; }))
      return bad("bad global " + q(key) + " " + q(w[2]) + ": a tunable name and a whole number");
    // lnetd's own reader says whether it takes it.
    auto cfg = dlc::parse_config("global:\n    " + key + ": " + std::to_string(value) + "\n");
    if (!cfg) return bad("global " + q(key) + ": " + cfg.message());
    d_.globals.emplace_back(key, value);
    return {};
  }

  Status finish(const std::string& name) {
    if (!name.empty()) {
      if (!good_name(name, 12, false))
        return bad("bad cluster name " + q(name) + ": 1 to 12 of a-z and 0-9, starting with a letter");
      d_.name = name;
    }
    if (d_.name.empty()) d_.name = "lc";
    if (d_.nodes.empty()) return bad("no nodes (node NAME ROLE FABRIC=HOST)");
    for (const ProxyJob& j : d_.proxies)
      if (j.nodes.size() > 1 && d_.login < 0)
        return bad("the proxy job of line " + std::to_string(j.line) +
                   " spans nodes: it needs a login node to run its mpirun from");
    return {};
  }

  std::string source_;
  const HostFacts& host_;
  Description d_;
  int line_ = 0, cluster_line_ = 0;
};

std::string yaml_global(const Description& d) {
  std::string out;
  if (d.globals.empty()) return out;
  out += "global:\n";
  for (const auto& [k, v] : d.globals) out += "    " + k + ": " + std::to_string(v) + "\n";
  return out;
}

std::string sh_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

}  // namespace

std::uint32_t Node::ip_on(std::size_t fabric) const {
  for (const Address& a : addrs)
    if (a.fabric == fabric) return a.ip;
  return 0;
}

HostFacts HostFacts::read(const std::string& etc_hosts) {
  HostFacts h;
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) == 0) h.hostname = buf;
  std::ifstream f(etc_hosts);
  std::string line;
  while (std::getline(f, line)) {
    auto w = words(line);
    if (w.size() < 2) continue;
    std::uint32_t ip = 0;
    bool loop = (parse_ipv4(w[0], &ip) && (ip >> 24) == 127) || w[0] == "::1";
    if (!loop) continue;
    for (std::size_t i = 1; i < w.size(); ++i) h.loopback_names.emplace_back(w[i]);
  }
  return h;
}

Result<Description> parse(std::string_view text, const std::string& source, const HostFacts& host,
                          const std::string& name) {
  return Parser(source, host).run(text, name);
}

std::string ip_string(std::uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 255) + "." + std::to_string((ip >> 8) & 255) +
         "." + std::to_string(ip & 255);
}

std::string role_names(unsigned roles) {
  std::string out;
  for (const RoleName& r : kRoles)
    if (roles & r.role) out += (out.empty() ? "" : ",") + std::string(r.name);
  return out;
}

std::string lnetd_yaml(const Description& d, const Node& n) {
  std::ostringstream y;
  y << "# lnetd of node " << n.name << " (" << role_names(n.roles)
    << "), made by the cluster tool from the description\n";
  y << "net:\n";
  for (const Address& a : n.addrs) {
    const Fabric& f = d.fabrics[a.fabric];
    y << "    - net type: " << f.net.to_string() << "\n      local NI(s):\n";
    if (f.is_mpi())
      y << "        - nid: " << Nid::make(f.net, a.ip).to_string() << "\n";  // the UP LND's NI
    else
      y << "        - interfaces:\n              0: " << f.name << "\n";
  }
  bool routes = false;
  for (const Route& r : d.routes) {
    if (&d.nodes[r.node] != &n) continue;
    if (!routes) y << "route:\n";
    routes = true;
    for (std::size_t i = 0; i < r.gateways.size(); ++i)
      y << "    - net: " << r.net.to_string() << "\n      gateway: " << ip_string(r.gateway_ips[i]) << "@"
        << r.gateway_nets[i].to_string() << "\n";
  }
  if (n.has(kRouter)) y << "routing:\n    enable: 1\n";
  y << yaml_global(d);
  y << "selftest: enable\n";
  return y.str();
}

// The description's globals the kernel's lnetctl does not take (module parameters of lnet).
bool kernel_module_global(std::string_view key) {
  return key == "alive_router_check_interval" || key == "router_ping_timeout";
}

std::string kernel_yaml(const Description& d, const Node& n) {
  std::ostringstream y;
  y << "# kernel node " << n.name << " (" << role_names(n.roles)
    << "): what its lnetctl imports at boot, made by the cluster tool from the description\n";
  y << "net:\n";
  for (std::size_t i = 0; i < n.addrs.size(); ++i)
    y << "    - net type: " << d.fabrics[n.addrs[i].fabric].net.to_string()
      << "\n      local NI(s):\n        - interfaces:\n              0: eth" << i << "\n";
  bool routes = false;
  for (const Route& r : d.routes) {
    if (&d.nodes[r.node] != &n) continue;
    if (!routes) y << "route:\n";
    routes = true;
    for (std::size_t i = 0; i < r.gateways.size(); ++i)
      y << "    - net: " << r.net.to_string() << "\n      gateway: " << ip_string(r.gateway_ips[i]) << "@"
        << r.gateway_nets[i].to_string() << "\n";
  }
  if (n.has(kRouter)) y << "routing:\n    enable: 1\n";
  bool global = false;
  for (const auto& [k, v] : d.globals) {
    if (kernel_module_global(k)) continue;
    if (!global) y << "global:\n";
    global = true;
    y << "    " << k << ": " << v << "\n";
  }
  return y.str();
}

std::string kernel_modprobe(const Description& d, const Node& n) {
  std::string lnet;
  for (const auto& [k, v] : d.globals)
    if (kernel_module_global(k)) lnet += " " + k + "=" + std::to_string(v);
  // A router's buffers within a small guest (the default pools take more than 1 GiB).
  if (n.has(kRouter)) lnet += " tiny_router_buffers=512 small_router_buffers=1024 large_router_buffers=128";
  std::string out = "# kernel node " + n.name + ": its modules' parameters, made by the cluster tool\n";
  if (!lnet.empty()) out += "options lnet" + lnet + "\n";
  return out;
}

std::string kernel_nets(const Description& d, const Node& n) {
  std::string out;
  for (const Address& a : n.addrs) out += (out.empty() ? "" : ",") + d.fabrics[a.fabric].net.to_string();
  return out;
}

std::string hosts_file(const Description& d) {
  std::string out = "# /etc/hosts of virtual cluster " + d.name +
                    "'s nodes\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
  for (const Node& n : d.nodes) {
    std::uint32_t ip = d.mpi_fabric >= 0 ? n.ip_on(static_cast<std::size_t>(d.mpi_fabric)) : 0;
    if (!ip) ip = n.addrs.front().ip;
    out += ip_string(ip) + "\t" + n.name + "\n";
  }
  return out;
}

std::string hostfile(const Description& d, Role r, bool mpich) {
  std::string out;
  for (const Node& n : d.nodes)  // MPI's hosts: a kernel node runs no MPI
    if (n.has(r) && !n.kernel) out += n.name + (mpich ? ":" : " slots=") + std::to_string(n.slots) + "\n";
  return out;
}

std::string shell_plan(const Description& d) {
  std::ostringstream s;
  auto list = [&](const char* var, auto&& items) {
    s << var << "=(";
    bool first = true;
    for (const auto& i : items) {
      s << (first ? "" : " ") << sh_quote(i);
      first = false;
    }
    s << ")\n";
  };
  s << "# The plan of virtual cluster " << d.name << " (lnet-cluster-plan): sourced by cluster.sh\n";
  s << "CL_NAME=" << sh_quote(d.name) << "\n";
  std::vector<std::string> fabrics, nodes, jobs, dnode, dcmd;
  for (const Fabric& f : d.fabrics) fabrics.push_back(f.name);
  for (const Node& n : d.nodes) nodes.push_back(n.name);
  for (const ProxyJob& j : d.proxies) jobs.push_back(j.name);
  for (const Daemon& x : d.daemons) {
    dnode.push_back(d.nodes[x.node].name);
    dcmd.push_back(x.command);
  }
  list("CL_FABRICS", fabrics);
  list("CL_NODES", nodes);
  list("CL_PROXY_JOBS", jobs);
  list("CL_DAEMON_NODE", dnode);
  list("CL_DAEMON_CMD", dcmd);
  s << "declare -gA CL_SUBNET=(";
  for (const Fabric& f : d.fabrics) s << " [" << f.name << "]=" << ip_string(f.base) << "/" << f.prefix;
  s << " )\ndeclare -gA CL_ROLES=(";
  for (const Node& n : d.nodes) s << " [" << n.name << "]=" << role_names(n.roles);
  s << " )\ndeclare -gA CL_LNETD=(";
  for (const Node& n : d.nodes) s << " [" << n.name << "]=" << (n.lnetd ? 1 : 0);
  s << " )\ndeclare -gA CL_KIND=(";
  for (const Node& n : d.nodes) s << " [" << n.name << "]=" << (n.kernel ? "kernel" : "namespace");
  s << " )\ndeclare -gA CL_KNET=(";
  for (const Node& n : d.nodes)
    if (n.kernel) s << " [" << n.name << "]=" << kernel_nets(d, n);
  s << " )\ndeclare -gA CL_SLOTS=(";
  for (const Node& n : d.nodes) s << " [" << n.name << "]=" << n.slots;
  s << " )\n# FABRIC=ADDRESS/PREFIX of each node, in the order written\ndeclare -gA CL_ADDRS=(";
  for (const Node& n : d.nodes) {
    std::string a;
    for (const Address& x : n.addrs)
      a += (a.empty() ? "" : " ") + d.fabrics[x.fabric].name + "=" + ip_string(x.ip) + "/" +
           std::to_string(d.fabrics[x.fabric].prefix);
    s << " [" << n.name << "]=" << sh_quote(a);
  }
  s << " )\n";
  // Each proxy job's nodes and options, as words a shell splits back.
  s << "declare -gA CL_PROXY_NODES=(";
  for (const ProxyJob& j : d.proxies) {
    std::string n;
    for (std::size_t p : j.nodes) n += (n.empty() ? "" : " ") + d.nodes[p].name;
    s << " [" << j.name << "]=" << sh_quote(n);
  }
  s << " )\ndeclare -gA CL_PROXY_ARGS=(";
  for (const ProxyJob& j : d.proxies) {
    std::string a;
    for (const std::string& x : j.args) a += (a.empty() ? "" : " ") + sh_quote(x);
    s << " [" << j.name << "]=" << sh_quote(a);
  }
  s << " )\n";
  s << "CL_LOGIN=" << (d.login >= 0 ? d.nodes[static_cast<std::size_t>(d.login)].name : "") << "\n";
  if (d.mpi_fabric >= 0) {
    const Fabric& f = d.fabrics[static_cast<std::size_t>(d.mpi_fabric)];
    s << "CL_MPI_FABRIC=" << f.name << "\nCL_MPI_SUBNET=" << ip_string(f.base) << "/" << f.prefix << "\n";
  } else {
    s << "CL_MPI_FABRIC=\nCL_MPI_SUBNET=\n";
  }
  return s.str();
}

}  // namespace lnet::cluster
