// The multi-rail selection criteria, as pure comparisons: which local NI and which peer
// NI to send on (the order of lnet_get_best_ni / lnet_select_peer_ni).
#pragma once

#include <climits>
#include <cstdint>

namespace lnet::select {

inline constexpr std::uint32_t kNoPriority = UINT_MAX;  // LNET_MAX_SELECTION_PRIORITY

// What decides between two local NIs, in this order: not in fatal error, higher health,
// lower selection priority, lower device priority, shorter NUMA distance (distances
// below numa_range count as equal), more tx credits, then the lower round-robin sequence.
struct LocalNiScore {
  bool fatal = false;
  int health = 1000;
  std::uint32_t priority = kNoPriority;
  int dev_prio = 0;
  int numa_distance = 0;
  int credits = 0;
  std::uint32_t seq = 0;
};

// Between two peer NIs: higher health, lower selection priority, on the preferred list
// of the chosen local NI, more tx credits, then the lower round-robin sequence.
struct PeerNiScore {
  int health = 1000;
  std::uint32_t priority = kNoPriority;
  bool preferred = false;
  int credits = 0;
  std::uint32_t seq = 0;
};

// -1: a is better, 1: b is better, 0: equal on every criterion.
int compare_local_ni(const LocalNiScore& a, const LocalNiScore& b, int numa_range);
int compare_peer_ni(const PeerNiScore& a, const PeerNiScore& b);

// Index of the best of n candidates (-1 if n == 0); score(i) gives candidate i's score.
// Ties keep the earlier candidate.
template <class ScoreFn>
int best_local_ni(int n, ScoreFn&& score, int numa_range) {
  int best = -1;
  LocalNiScore bs;
  for (int i = 0; i < n; ++i) {
    LocalNiScore s = score(i);
    if (best < 0 || compare_local_ni(s, bs, numa_range) < 0) {
      best = i;
      bs = s;
    }
  }
  return best;
}

template <class ScoreFn>
int best_peer_ni(int n, ScoreFn&& score) {
  int best = -1;
  PeerNiScore bs;
  for (int i = 0; i < n; ++i) {
    PeerNiScore s = score(i);
    if (best < 0 || compare_peer_ni(s, bs) < 0) {
      best = i;
      bs = s;
    }
  }
  return best;
}

}  // namespace lnet::select
