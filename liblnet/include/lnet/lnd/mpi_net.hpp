// The mpi net type's LND tunables. Two drivers serve that net type (the MPI LND in an
// application, the UP LND in lnetd); both declare this one list, so whichever is loaded
// the DLC reads and prints the same keys.
#pragma once

#include <vector>

#include <lnet/config.hpp>
#include <lnet/nid.hpp>

namespace lnet {

inline std::vector<LndTunableSpec> mpi_net_tunables() {
  return {{"timeout", 0, 3600, 0, true, "seconds a transfer may take (lnd_timeout)"}};
}

}  // namespace lnet
