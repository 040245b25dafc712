// The loopback LND (0@lo): send hands the header straight to the host's parse with the
// sending message as the driver-private cookie; recv copies from it and finalizes both.
// Registers itself for the lo net type when liblnet is loaded.
#include <lnet/lnd/fragments.hpp>
#include <lnet/lnd/lnd.hpp>

namespace lnet {

namespace {

class LoLnd final : public Lnd {
 public:
  std::uint32_t net_type() const override { return kLoLnd; }

  int startup(NetInterface& ni) override {
    ni.nid = Nid::lo();
    return 0;
  }
  void shutdown(NetInterface&) override {}

  int send(NetInterface& ni, LndMessage& msg) override {
    return ni.host->parse(ni, msg.hdr, msg.hdr.src_nid, &msg, false);
  }

  int recv(NetInterface& ni, void* lnd_private, LndMessage* rx, bool, const iovec* iov, unsigned niov,
           std::uint32_t offset, std::uint32_t mlen, std::uint32_t) override {
    auto* tx = static_cast<LndMessage*>(lnd_private);
    if (rx && mlen > 0) copy_fragments(iov, niov, offset, tx->iov, tx->niov, tx->offset, mlen);
    ni.host->finalize(tx, 0);
    if (rx) ni.host->finalize(rx, 0);
    return 0;
  }
};

const struct Registrar {
  Registrar() {
    register_lnd(kLoLnd, [] { return std::unique_ptr<Lnd>(new LoLnd); });
  }
} registrar;

}  // namespace

}  // namespace lnet
