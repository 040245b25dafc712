// For libraries that bring up the Instance the classic C API (lnet.h) then uses, as
// lnet_mpi_init does: the C calls act on an instance the library owns.
#pragma once

#include <lnet/api.hpp>

namespace lnet::capi {

// Makes `lnet` the C API's instance, as if LNetNIInit had brought it up (LNetNIInit
// then only counts uses). -EALREADY when the C API has one. The caller keeps ownership.
int attach(Instance* lnet);
// Forgets it (and the C API's event queues); call before destroying the instance.
void detach();

}  // namespace lnet::capi
