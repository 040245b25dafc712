// MPI LND peers (one per rank of the communicator, made on first contact), the bulk tags
// used with each, and the request table every MPI operation of the NI is tracked in.
#include <algorithm>

#include "mpi_ni.hpp"

namespace lnet::mpi {

Peer* MpiNi::peer_locked(int rank) {
  auto& slot = peers_[static_cast<std::size_t>(rank)];
  if (!slot) {
    slot = std::make_unique<Peer>();
    slot->rank = rank;
    slot->nid = nid_of(rank);
    slot->tags.reserve(16);
    contacted_.push_back(slot.get());
  }
  return slot.get();
}

Nid MpiNi::nid_of(int rank) const {
  return nids_.empty() ? Nid::make(ni_.nid.net(), static_cast<std::uint32_t>(rank))
                       : nids_[static_cast<std::size_t>(rank)];
}

int MpiNi::rank_of(Nid nid) const {
  if (nid.net() != ni_.nid.net()) return -1;
  if (nids_.empty()) return nid.addr() < static_cast<std::uint32_t>(size_) ? static_cast<int>(nid.addr()) : -1;
  auto it = std::lower_bound(by_nid_.begin(), by_nid_.end(), std::pair<Nid, int>(nid, -1));
  return it != by_nid_.end() && it->first == nid ? it->second : -1;
}

// Payload tags we send are even, GET sinks we post are odd: the two directions of a
// pair never share a tag. A tag is reused only once its transfer has completed on our
// side, which for a synchronous or ready send, or a receive, means it was matched.
std::uint32_t MpiNi::alloc_tag(Peer& p, bool odd) {
  std::uint32_t& next = odd ? p.next_odd : p.next_even;
  for (;;) {
    std::uint32_t t = next;
    next += 2;
    if (next > tag_ub_) next = odd ? 1 : 2;
    if (std::find(p.tags.begin(), p.tags.end(), t) == p.tags.end()) {
      p.tags.push_back(t);
      return t;
    }
  }
}

void MpiNi::free_tag(Peer& p, std::uint32_t tag) {
  auto it = std::find(p.tags.begin(), p.tags.end(), tag);
  if (it != p.tags.end()) {
    *it = p.tags.back();
    p.tags.pop_back();
  }
}

std::uint32_t MpiNi::chunk_for(const Peer& p) const {
  return std::max<std::uint32_t>(1, std::min(opts_.chunk, p.chunk));
}

std::uint8_t MpiNi::take_owed(Peer& p) {
  int c = std::min(p.owed, 255);
  p.owed -= c;
  return static_cast<std::uint8_t>(c);
}

void MpiNi::add_request(MPI_Request r, Owner::Kind kind, void* obj, Clock::time_point due) {
  reqs_.push_back(r);
  owners_.push_back(Owner{kind, obj});
  seen_.push_back(due == Clock::time_point{} ? due : due - std::chrono::seconds(timeout_));
  in_flight_.store(true, std::memory_order_relaxed);
}

}  // namespace lnet::mpi
