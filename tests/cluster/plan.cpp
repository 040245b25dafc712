// lnet-cluster-plan: checks a virtual cluster's description and writes what the cluster
// tool builds from it (desc.hpp). Used by tests/cluster/cluster.sh; on its own it checks
// a description and prints what it describes.
//   lnet-cluster-plan [--name NAME] [--etc-hosts FILE] [--out DIR] DESCRIPTION
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "desc.hpp"

namespace {

using namespace lnet::cluster;

void usage(FILE* f) {
  std::fprintf(f,
               "usage: lnet-cluster-plan [--name NAME] [--etc-hosts FILE] [--out DIR] DESCRIPTION\n"
               "  Checks a virtual cluster's description (lnet-cluster(8)): every error names its line and\n"
               "  nothing is written. With --out, writes into DIR (which must exist): plan.sh, hosts,\n"
               "  hostfile.ROLE and hostfile-mpich.ROLE, and nodes/NODE/lnet.conf for every node that runs\n"
               "  lnetd or is a kernel node (with its modprobe.conf). Without it, prints the nodes. --name\n"
               "  overrides the cluster line; --etc-hosts is the file whose loopback names a node may not\n"
               "  take (default /etc/hosts).\n");
}

bool write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  if (f << text && f.flush()) return true;
  std::fprintf(stderr, "lnet-cluster-plan: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
  return false;
}

bool write_all(const Description& d, const std::string& dir) {
  bool ok = write(dir + "/plan.sh", shell_plan(d)) && write(dir + "/hosts", hosts_file(d));
  for (auto [role, name] :
       {std::pair{kCompute, "compute"}, {kServer, "server"}, {kRouter, "router"}, {kLogin, "login"}}) {
    ok = ok && write(dir + "/hostfile." + name, hostfile(d, role, false)) &&
         write(dir + "/hostfile-mpich." + name, hostfile(d, role, true));
  }
  if (ok && ::mkdir((dir + "/nodes").c_str(), 0755) != 0 && errno != EEXIST) ok = false;
  for (const Node& n : d.nodes) {
    std::string nd = dir + "/nodes/" + n.name;
    if (ok && ::mkdir(nd.c_str(), 0755) != 0 && errno != EEXIST) {
      std::fprintf(stderr, "lnet-cluster-plan: cannot create %s: %s\n", nd.c_str(), std::strerror(errno));
      return false;
    }
    if (ok && n.lnetd) ok = write(nd + "/lnet.conf", lnetd_yaml(d, n));
    if (ok && n.kernel)
      ok = write(nd + "/lnet.conf", kernel_yaml(d, n)) && write(nd + "/modprobe.conf", kernel_modprobe(d, n));
  }
  return ok;
}

void print(const Description& d) {
  std::printf("cluster %s: %zu node(s), %zu fabric(s)\n", d.name.c_str(), d.nodes.size(), d.fabrics.size());
  for (const Node& n : d.nodes) {
    std::printf("  %-12s %-20s", n.name.c_str(), role_names(n.roles).c_str());
    for (const Address& a : n.addrs) std::printf(" %s=%s", d.fabrics[a.fabric].name.c_str(), ip_string(a.ip).c_str());
    if (n.lnetd) std::printf("  lnetd");
    if (n.kernel) std::printf("  kernel");
    std::printf("\n");
  }
  for (const ProxyJob& j : d.proxies) {
    std::printf("  proxy job %s:", j.name.c_str());
    for (std::size_t p : j.nodes) std::printf(" %s", d.nodes[p].name.c_str());
    std::printf(" (launched from %s)\n",
                j.nodes.size() == 1 ? j.name.c_str() : d.nodes[static_cast<std::size_t>(d.login)].name.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string name, etc_hosts = "/etc/hosts", out, path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    }
    if ((a == "--name" || a == "--etc-hosts" || a == "--out") && i + 1 < argc) {
      (a == "--name" ? name : a == "--out" ? out : etc_hosts) = argv[++i];
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "lnet-cluster-plan: unknown option '%s' (--help)\n", a.c_str());
      return 2;
    } else if (path.empty()) {
      path = a;
    } else {
      std::fprintf(stderr, "lnet-cluster-plan: one description only ('%s' and '%s')\n", path.c_str(), a.c_str());
      return 2;
    }
  }
  if (path.empty()) {
    usage(stderr);
    return 2;
  }
  std::ifstream f(path);
  if (!f) {
    std::fprintf(stderr, "lnet-cluster-plan: cannot read %s: %s\n", path.c_str(), std::strerror(errno));
    return 2;
  }
  std::stringstream text;
  text << f.rdbuf();
  auto d = parse(text.str(), path, HostFacts::read(etc_hosts), name);
  if (!d) {
    std::fprintf(stderr, "%s\n", d.message().c_str());
    return 1;
  }
  if (out.empty()) {
    print(*d);
    return 0;
  }
  return write_all(*d, out) ? 0 : 1;
}
