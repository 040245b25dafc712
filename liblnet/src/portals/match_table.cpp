// Portals matching (the rules of lnet_try_match_md) and the match-entry list/hash.
#include "portals/match_table.hpp"

#include <algorithm>

namespace lnet::portals {

MatchResult try_match(LibMe* me, const MatchInfo& info) {
  // The rules are a conjunction; the ME's own fields are checked before touching the MD.
  MatchResult r;
  if (((me->match_bits ^ info.match_bits) & ~me->ignore_bits) != 0) return r;
  if (me->match_id.pid != kPidAny && me->match_id.pid != info.initiator.pid) return r;
  if (!me->match_id.nid.is_any() && me->match_id.nid != info.initiator.nid &&
      (info.source.is_any() || me->match_id.nid != info.source)) {
    return r;
  }
  LibMd* md = me->md;
  if (md == nullptr || md->exhausted()) return r;
  if ((md->options & info.op) == 0) return r;

  std::uint32_t offset = (md->options & kMdManageRemote) ? info.roffset : md->offset;
  std::uint32_t avail = offset <= md->length ? md->length - offset : 0;
  if (md->options & kMdMaxSize) avail = std::min(avail, static_cast<std::uint32_t>(md->max_size));

  r.me = me;
  r.md = md;
  r.offset = offset;
  if (info.rlength <= avail) {
    r.mlength = info.rlength;
  } else if (md->options & kMdTruncate) {
    r.mlength = avail;
  } else {
    r.status = MatchStatus::Drop;  // too big for this MD and no truncation allowed
    return r;
  }
  r.status = MatchStatus::Ok;
  return r;
}

bool commit_match(const MatchResult& r) {
  LibMd* md = r.md;
  if (md->threshold != kMdThreshInf) md->threshold--;
  if (!(md->options & kMdManageRemote)) md->offset = r.offset + r.mlength;
  md->refcount++;
  return md->auto_unlink && md->exhausted();
}

void MatchTable::List::push_back(LibMe* me) {
  me->next = nullptr;
  me->prev = tail;
  if (tail)
    tail->next = me;
  else
    head = me;
  tail = me;
}

void MatchTable::List::push_front(LibMe* me) {
  me->prev = nullptr;
  me->next = head;
  if (head)
    head->prev = me;
  else
    tail = me;
  head = me;
}

void MatchTable::List::unlink(LibMe* me) {
  if (me->prev)
    me->prev->next = me->next;
  else
    head = me->next;
  if (me->next)
    me->next->prev = me->prev;
  else
    tail = me->prev;
  me->prev = me->next = nullptr;
}

MatchTable::MatchTable(bool hashed) : hashed_(hashed) {
  if (hashed_) buckets_.resize(16, nullptr);
}

void MatchTable::bucket_append(LibMe*& head, LibMe* me) {
  me->next = nullptr;
  if (!head) {
    me->prev = nullptr;
    head = me;
    return;
  }
  LibMe* last = head;
  while (last->next) last = last->next;
  last->next = me;
  me->prev = last;
}

void MatchTable::bucket_unlink(LibMe*& head, LibMe* me) {
  if (me->prev)
    me->prev->next = me->next;
  else
    head = me->next;
  if (me->next) me->next->prev = me->prev;
  me->prev = me->next = nullptr;
}

void MatchTable::insert_tail(LibMe* me) {
  if (hashed_) {
    if (count_ >= buckets_.size()) grow();
    bucket_append(bucket_of(me->match_id.nid), me);
  } else {
    list_.push_back(me);
  }
  ++count_;
}

void MatchTable::insert_head(LibMe* me) {
  list_.push_front(me);
  ++count_;
}

void MatchTable::insert_before(LibMe* pos, LibMe* me) {
  me->next = pos;
  me->prev = pos->prev;
  if (pos->prev)
    pos->prev->next = me;
  else
    list_.head = me;
  pos->prev = me;
  ++count_;
}

void MatchTable::insert_after(LibMe* pos, LibMe* me) {
  me->prev = pos;
  me->next = pos->next;
  if (pos->next)
    pos->next->prev = me;
  else
    list_.tail = me;
  pos->next = me;
  ++count_;
}

void MatchTable::remove(LibMe* me) {
  if (hashed_)
    bucket_unlink(bucket_of(me->match_id.nid), me);
  else
    list_.unlink(me);
  --count_;
}

void MatchTable::grow() {
  // Rehash in posting order so MEs of one NID keep their relative order.
  std::vector<LibMe*> old(buckets_.size() * 2, nullptr);
  old.swap(buckets_);
  for (LibMe* head : old) {
    for (LibMe* me = head; me;) {
      LibMe* next = me->next;
      bucket_append(bucket_of(me->match_id.nid), me);
      me = next;
    }
  }
}

MatchResult MatchTable::match_in(LibMe* head, const MatchInfo& info) {
  for (LibMe* me = head; me; me = me->next) {
    MatchResult r = try_match(me, info);
    if (r.status != MatchStatus::None) return r;
  }
  return {};
}

MatchResult MatchTable::match(const MatchInfo& info, Nid key) {
  return match_in(hashed_ ? bucket_of(key) : list_.head, info);
}

}  // namespace lnet::portals
