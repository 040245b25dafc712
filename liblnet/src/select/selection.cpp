// Comparison of selection candidates; the core walks its NIs and peer NIs with these.
#include "select/selection.hpp"

#include <algorithm>

namespace lnet::select {

namespace {
template <class T>
int cmp_less_better(T a, T b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}
}  // namespace

int compare_local_ni(const LocalNiScore& a, const LocalNiScore& b, int numa_range) {
  if (a.fatal != b.fatal) return a.fatal ? 1 : -1;
  if (int c = cmp_less_better(b.health, a.health)) return c;
  if (int c = cmp_less_better(a.priority, b.priority)) return c;
  if (int c = cmp_less_better(a.dev_prio, b.dev_prio)) return c;
  if (int c = cmp_less_better(std::max(a.numa_distance, numa_range), std::max(b.numa_distance, numa_range))) return c;
  if (int c = cmp_less_better(b.credits, a.credits)) return c;
  return cmp_less_better(a.seq, b.seq);
}

int compare_peer_ni(const PeerNiScore& a, const PeerNiScore& b) {
  if (int c = cmp_less_better(b.health, a.health)) return c;
  if (int c = cmp_less_better(a.priority, b.priority)) return c;
  if (a.preferred != b.preferred) return a.preferred ? -1 : 1;
  if (int c = cmp_less_better(b.credits, a.credits)) return c;
  return cmp_less_better(a.seq, b.seq);
}

}  // namespace lnet::select
