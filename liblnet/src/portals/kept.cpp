// MDs kept past their message for a driver whose network may still write into them
// (LndHost::keep_memory): a reference of their own, as a message in flight has.
#include "portals/portal_table.hpp"

#include <lnet/mutex.hpp>

namespace lnet::portals {

std::uintptr_t PortalTable::md_keep(LibMd* md) {
  MutexLock g(res_[md->cpt].lock);
  md->refcount++;
  return reinterpret_cast<std::uintptr_t>(md);
}

void PortalTable::md_release(std::uintptr_t token, Completer& c) {
  auto* md = reinterpret_cast<LibMd*>(token);
  Res& r = res_[md->cpt];
  r.lock.lock();  // retire_idle_locked releases it
  md->refcount--;
  if (md->refcount == 0 && !md->dead && (md->zombie || (md->auto_unlink && md->exhausted()))) {
    retire_idle_locked(r, md, c);
    return;
  }
  r.lock.unlock();
}

}  // namespace lnet::portals
