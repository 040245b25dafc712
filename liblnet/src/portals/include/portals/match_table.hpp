// A portal's match entries on one CPT: an ordered list (request portals, wildcard MEs) or
// a hash on the match NID (RDMA portals, unique MEs), so matching an incoming message
// costs the same with 10 or 100 000 MEs posted for distinct peers.
#pragma once

#include <cstddef>
#include <vector>

#include "portals/lib_md.hpp"

namespace lnet::portals {

class MatchTable {
 public:
  explicit MatchTable(bool hashed = false);
  bool hashed() const { return hashed_; }
  std::size_t size() const { return count_; }

  void insert_tail(LibMe* me);
  void insert_head(LibMe* me);                // list only
  void insert_before(LibMe* pos, LibMe* me);  // list only
  void insert_after(LibMe* pos, LibMe* me);   // list only
  void remove(LibMe* me);

  // First ME/MD that matches, in posting order; a hashed table looks only at the MEs
  // posted for `key`. A Drop result ends the search.
  MatchResult match(const MatchInfo& info, Nid key);

 private:
  struct List {
    LibMe* head = nullptr;
    LibMe* tail = nullptr;
    void push_back(LibMe* me);
    void push_front(LibMe* me);
    void unlink(LibMe* me);
  };
  // Buckets hold only the head (8 bytes each) so 100 000 MEs need a 1 MiB array.
  LibMe*& bucket_of(Nid nid) { return buckets_[std::hash<Nid>{}(nid) & (buckets_.size() - 1)]; }
  static void bucket_append(LibMe*& head, LibMe* me);
  static void bucket_unlink(LibMe*& head, LibMe* me);
  static MatchResult match_in(LibMe* head, const MatchInfo& info);
  void grow();

  bool hashed_;
  std::size_t count_ = 0;
  List list_;
  std::vector<LibMe*> buckets_;
};

}  // namespace lnet::portals
