#include <lnet/env.hpp>
#include <lnet/lnd/numa.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace lnet {

namespace {

EnvVar kSysfsRoot("LNET_SYSFS_ROOT", "/sys",
                  "where sysfs is read from: NUMA nodes, devices' nodes, and (when set) link speeds for tcp "
                  "conns_per_peer 0, else asked of the kernel (SIOCETHTOOL)");

std::string read_line(std::string_view path) {
  std::ifstream in(sysfs_root() + "/" + std::string(path));
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

// "0-3,8,10-11" -> 0 1 2 3 8 10 11; empty on anything else.
std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> out;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    int lo = 0, hi = 0;
    char dash = 0;
    std::istringstream p(part);
    if (!(p >> lo)) return {};
    hi = lo;
    if (p >> dash && (dash != '-' || !(p >> hi))) return {};
    if (lo < 0 || hi < lo || hi - lo > 65536) return {};
    for (int c = lo; c <= hi; ++c) out.push_back(c);
  }
  return out;
}

}  // namespace

std::string sysfs_root() {
  const char* v = kSysfsRoot.value();
  return v ? v : kSysfsRoot.default_value();
}

std::string sysfs_root_set() {
  const char* v = kSysfsRoot.value();
  return v ? v : "";
}

std::optional<long> sysfs_number(std::string_view path) {
  std::string line = read_line(path);
  char* end = nullptr;
  long v = std::strtol(line.c_str(), &end, 10);
  if (line.empty() || end == line.c_str()) return std::nullopt;
  return v;
}

int interface_numa_node(std::string_view ifname) {
  if (ifname.empty() || ifname.find('/') != std::string_view::npos || ifname == "." || ifname == "..") return -1;
  auto node = sysfs_number("class/net/" + std::string(ifname) + "/device/numa_node");
  return node && *node >= 0 && *node < 65536 ? static_cast<int>(*node) : -1;
}

std::vector<int> numa_node_cpus(int node) {
  if (node < 0) return {};
  return parse_cpu_list(read_line("devices/system/node/node" + std::to_string(node) + "/cpulist"));
}

int cpus_numa_node(const cpu_set_t& cpus) {
  int count = CPU_COUNT(&cpus);
  if (count == 0) return -1;
  for (int node : numa_nodes()) {
    int inside = 0;
    for (int c : numa_node_cpus(node))
      if (c < CPU_SETSIZE && CPU_ISSET(c, &cpus)) ++inside;
    if (inside == count) return node;
    if (inside > 0) return -1;  // spans this node and another
  }
  return -1;
}

std::vector<int> numa_nodes() {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(sysfs_root() + "/devices/system/node", ec)) {
    std::string name = e.path().filename().string();
    if (name.size() > 4 && name.size() < 10 && name.rfind("node", 0) == 0 &&
        name.find_first_not_of("0123456789", 4) == std::string::npos)
      out.push_back(std::atoi(name.c_str() + 4));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> numa_distances_to(int node) {
  constexpr int kLocal = 10, kRemote = 20;  // the kernel's LOCAL_DISTANCE, REMOTE_DISTANCE
  std::vector<int> nodes = numa_nodes();
  if (nodes.empty() || nodes.back() > 4095) return {};
  std::vector<int> out(static_cast<std::size_t>(nodes.back()) + 1, 0);
  for (int n : nodes) {
    std::vector<int> row = numa_distances(n);
    int& d = out[static_cast<std::size_t>(n)];
    if (node < 0)
      d = row.empty() ? kLocal : *std::max_element(row.begin(), row.end());
    else
      d = static_cast<std::size_t>(node) < row.size() ? row[static_cast<std::size_t>(node)]
                                                      : (n == node ? kLocal : kRemote);
  }
  return out;
}

int affinity_numa_node() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0) return -1;
  return cpus_numa_node(cpus);
}

std::vector<int> numa_distances(int node) {
  if (node < 0) return {};
  std::istringstream in(read_line("devices/system/node/node" + std::to_string(node) + "/distance"));
  std::vector<int> out;
  for (int d; in >> d;) out.push_back(d);
  return out;
}

}  // namespace lnet
