// Response tracking (lnet-facts §5.1): an MD awaiting the ACK or REPLY of its request is
// on its CPT's deadline list, earliest first; the monitor expires what is past due.
#include "portals/portal_table.hpp"

#include <lnet/mutex.hpp>

namespace lnet::portals {

void PortalTable::rsp_attach(Res& r, LibMd* md, std::int64_t deadline) {
  if (md->rsp_deadline) rsp_detach(r, md);
  md->rsp_deadline = deadline;
  // Deadlines mostly grow: the place is found from the tail.
  LibMd* before = r.rsp_tail;
  while (before && before->rsp_deadline > deadline) before = before->rsp_prev;
  md->rsp_prev = before;
  md->rsp_next = before ? before->rsp_next : r.rsp_head;
  (md->rsp_next ? md->rsp_next->rsp_prev : r.rsp_tail) = md;
  (before ? before->rsp_next : r.rsp_head) = md;
  ++r.rsp_count;
}

void PortalTable::rsp_detach(Res& r, LibMd* md) {
  if (!md->rsp_deadline) return;
  (md->rsp_prev ? md->rsp_prev->rsp_next : r.rsp_head) = md->rsp_next;
  (md->rsp_next ? md->rsp_next->rsp_prev : r.rsp_tail) = md->rsp_prev;
  md->rsp_prev = md->rsp_next = nullptr;
  md->rsp_deadline = 0;
  --r.rsp_count;
}

void PortalTable::expire_responses(std::int64_t now, Completer& c, const std::function<void(Nid)>& expired) {
  for (unsigned cpt = 0; cpt < cpts_.count(); ++cpt) {
    Res& r = res_[cpt];
    for (;;) {
      r.lock.lock();  // unlink_md_locked releases it
      LibMd* md = r.rsp_head;
      if (!md || md->rsp_deadline > now) {
        r.lock.unlock();
        break;
      }
      Nid hop(md->rsp_next_hop.load(std::memory_order_relaxed));
      // Unlinked, as LNet unlinks an MD whose response timed out: a late response finds
      // no MD. Its event (UNLINK, or the in-flight SEND's) comes after `expired` has run.
      unlink_md_locked(r, md, c, [&] { expired(hop); });
    }
  }
}

std::int64_t PortalTable::next_response_deadline() const {
  std::int64_t first = 0;
  for (unsigned cpt = 0; cpt < cpts_.count(); ++cpt) {
    MutexLock g(res_[cpt].lock);
    if (const LibMd* md = res_[cpt].rsp_head; md && (first == 0 || md->rsp_deadline < first)) first = md->rsp_deadline;
  }
  return first;
}

std::size_t PortalTable::tracked_responses() const {
  std::size_t n = 0;
  for (unsigned cpt = 0; cpt < cpts_.count(); ++cpt) {
    MutexLock g(res_[cpt].lock);
    n += res_[cpt].rsp_count;
  }
  return n;
}

}  // namespace lnet::portals
