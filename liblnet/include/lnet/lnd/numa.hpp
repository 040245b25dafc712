// What the kernel says about NUMA nodes and network devices, read from sysfs: the node of
// an interface's device, the node of a set of CPUs, the distances between nodes. The root
// is LNET_SYSFS_ROOT when set (tests give a tree of their own), else /sys.
#pragma once

#include <sched.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lnet {

// "/sys", or LNET_SYSFS_ROOT.
std::string sysfs_root();
// LNET_SYSFS_ROOT, or empty when it is not set (the socket LND then asks the kernel for
// link speeds, SIOCETHTOOL: a process that entered a network namespace with `nsenter
// --net` sees another namespace's /sys/class/net).
std::string sysfs_root_set();
// The first whole number in `<root>/<path>`, if the file exists and starts with one.
std::optional<long> sysfs_number(std::string_view path);

// The NUMA node of interface `ifname`'s device (class/net/IF/device/numa_node); -1 when
// the interface has no device (veth, lo, a bridge) or the kernel does not know it.
int interface_numa_node(std::string_view ifname);
// The CPUs of node `node` (devices/system/node/nodeN/cpulist); empty when unknown.
std::vector<int> numa_node_cpus(int node);
// The node every CPU of `cpus` belongs to; -1 when they span nodes or none is known.
int cpus_numa_node(const cpu_set_t& cpus);
// The node of the CPUs this thread may run on (its affinity), as cpus_numa_node.
int affinity_numa_node();
// The distances from `node` to every node (devices/system/node/nodeN/distance: 10 to
// itself, larger further away); empty when unknown.
std::vector<int> numa_distances(int node);
// The nodes sysfs lists (devices/system/node/nodeN), ascending.
std::vector<int> numa_nodes();
// For each node n (the index), the distance from n to `node`, as selection weighs a device
// on `node` for a thread on n; a device on no known node (-1) counts as far as the
// furthest node from n. Distances sysfs does not give are the kernel's defaults (10 on
// the node, 20 off it). Empty when sysfs lists no node.
std::vector<int> numa_distances_to(int node);

}  // namespace lnet
