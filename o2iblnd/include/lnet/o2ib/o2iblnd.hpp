// The o2ib LND: ko2iblnd's protocol (docs/design/o2iblnd.md) over an RDMA device through
// rdma-core, or over any other verbs Provider (the tests' fake device). One NI per device
// address: its NID is the address on the o2ib net, as ko2iblnd forms it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <lnet/config.hpp>
#include <lnet/lnd/lnd.hpp>

namespace lnet::o2ib {

class Provider;

// Opens the device that has IPv4 address `ip` (host order) for one NI.
using ProviderFactory = std::function<Result<std::unique_ptr<Provider>>(std::uint32_t ip)>;

// The o2ib net type's tunables ("lnd tunables" in lnetctl YAML), as ko2iblnd names them.
std::vector<LndTunableSpec> o2ib_tunables();

// A driver whose NIs open their device with `open` (default: rdma-core's).
std::shared_ptr<Lnd> make_o2ib_lnd(ProviderFactory open = {});

// Registers the driver (rdma-core's) and its tunables for the o2ib net type in this
// process: lnetd calls it once at start.
void register_o2ib_lnd();

}  // namespace lnet::o2ib
