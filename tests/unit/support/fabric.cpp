// The in-process test fabric and its driver.
#include "support/fabric.hpp"

#include <cstring>

#include <lnet/lnd/numa.hpp>

namespace lnet::test {

namespace {

// What a receiver's recv() gets as the driver cookie: the sending message (and the host
// to finalize it on), or raw injected bytes.
struct TxRef {
  LndMessage* tx = nullptr;
  LndHost* host = nullptr;
  std::vector<std::uint8_t> raw;
  LndMessage* reply = nullptr;  // optimised GET: the initiator's REPLY (tx is the GET)
};

class FabricLnd final : public Lnd {
 public:
  std::uint32_t net_type() const override { return kGniLnd; }
  int startup(NetInterface& ni) override { return Fabric::instance().attach(ni); }
  void shutdown(NetInterface& ni) override { Fabric::instance().detach(ni); }
  int send(NetInterface& ni, LndMessage& msg) override { return Fabric::instance().send(ni, msg); }
  int recv(NetInterface& ni, void* priv, LndMessage* rx, bool, const iovec* iov, unsigned niov, std::uint32_t offset,
           std::uint32_t mlen, std::uint32_t) override {
    return Fabric::instance().recv(ni, priv, rx, iov, niov, offset, mlen);
  }
};

}  // namespace

Fabric& Fabric::instance() {
  static Fabric f;
  return f;
}

void Fabric::install() {
  register_lnd(kGniLnd, [] { return std::unique_ptr<Lnd>(new FabricLnd); });
  // A driver with no LND tunables of its own: without this, gni (a type an MPI network
  // can have) would take the mpi type's.
  register_lnd_tunables(kGniLnd, {});
}

int Fabric::attach(NetInterface& ni) {
  if (ni.nid.is_any()) return -EINVAL;  // the fabric needs NetConfig::nid
  // A device on an interface, as the socket LND finds it (tests give a sysfs of their own).
  if (!ni.config.interfaces.empty()) ni.numa_node = interface_numa_node(ni.config.interfaces.front());
  std::lock_guard g(mutex_);
  if (nis_.count(ni.nid)) return -EADDRINUSE;
  nis_[ni.nid] = &ni;
  return 0;
}

void Fabric::detach(NetInterface& ni) {
  // A driver going down completes everything it still holds for that NI, once no other
  // instance's thread (a discovery push, say) is still delivering into it.
  std::vector<Held> mine;
  {
    std::unique_lock g(mutex_);
    nis_.erase(ni.nid);
    failing_.erase(ni.nid);  // a failure set on an NI lasts while it is attached
    idle_.wait(g, [&] { return busy_[&ni] == 0; });
    busy_.erase(&ni);
    for (auto it = held_.begin(); it != held_.end();) {
      if (it->src == &ni) {
        mine.push_back(*it);
        it = held_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Held& h : mine) {
    h.msg->health = HealthStatus::LocalAborted;
    ni.host->finalize(h.msg, -ESHUTDOWN);
  }
}

void Fabric::hold(bool on) {
  std::lock_guard g(mutex_);
  hold_ = on;
}

std::size_t Fabric::pending() {
  std::lock_guard g(mutex_);
  return held_.size();
}

std::vector<SentRecord> Fabric::sent() {
  std::lock_guard g(mutex_);
  return sent_;
}

bool Fabric::memory_alive(Nid nid, std::uint64_t memory) {
  NetInterface* ni = nullptr;
  {
    std::lock_guard g(mutex_);
    auto it = nis_.find(nid);
    if (it != nis_.end()) ni = it->second;
  }
  return ni && ni->host->memory_alive(memory);
}

void Fabric::clear_sent() {
  std::lock_guard g(mutex_);
  sent_.clear();
}

std::size_t Fabric::discarded() {
  std::lock_guard g(mutex_);
  return discarded_;
}

void Fabric::rdma_get(bool on) {
  std::lock_guard g(mutex_);
  rdma_get_ = on;
}

void Fabric::fail(Nid nid, std::optional<HealthStatus> health) {
  std::lock_guard g(mutex_);
  if (health)
    failing_[nid] = *health;
  else
    failing_.erase(nid);
}

void Fabric::link(Nid nid, bool up) {
  NetInterface* ni = nullptr;
  {
    std::lock_guard g(mutex_);
    auto it = nis_.find(nid);
    if (it != nis_.end()) ni = it->second;
  }
  if (ni) ni->host->link_state(*ni, up);
}

int Fabric::send(NetInterface& ni, LndMessage& msg) {
  {
    std::unique_lock g(mutex_);
    sent_.push_back({ni.nid, msg.next_hop, msg.hdr.type, msg.hdr, msg.memory, ni.host->memory_alive(msg.memory)});
    auto f = failing_.find(ni.nid);
    if (f == failing_.end()) f = failing_.find(msg.next_hop);
    if (f != failing_.end()) {
      msg.health = f->second;
      g.unlock();
      ni.host->finalize(&msg, -EIO);
      return 0;
    }
    if (hold_) {
      held_.push_back({&ni, &msg});
      return 0;
    }
  }
  return deliver(&ni, &msg);
}

int Fabric::deliver(NetInterface* src, LndMessage* msg) {
  NetInterface* dst;
  {
    std::lock_guard g(mutex_);
    auto it = nis_.find(msg->next_hop);
    dst = it == nis_.end() ? nullptr : it->second;
    if (dst) ++busy_[dst];  // detach(dst) waits for this delivery
  }
  if (!dst) return -EHOSTUNREACH;
  struct Done {
    Fabric* f;
    NetInterface* dst;
    ~Done() {
      std::lock_guard g(f->mutex_);
      if (--f->busy_[dst] == 0) f->idle_.notify_all();
    }
  } done{this, dst};
  auto* ref = new TxRef{msg, src->host, {}};
  bool rdma = false;
  {
    std::lock_guard g(mutex_);
    rdma = rdma_get_;
  }
  if (rdma && msg->hdr.type == MsgType::Get && msg->hdr.src_nid == src->nid && msg->next_hop == msg->target.nid) {
    ref->reply = src->host->create_reply(*src, *msg);
    rdma = ref->reply != nullptr;
  } else {
    rdma = false;
  }
  int rc = dst->host->parse(*dst, msg->hdr, src->nid, ref, rdma);
  if (rc < 0) {
    if (ref->reply) {
      ref->reply->health = HealthStatus::RemoteDropped;
      src->host->finalize(ref->reply, rc);
    }
    delete ref;
  }
  return rc;
}

bool Fabric::deliver_one() {
  Held h;
  {
    std::lock_guard g(mutex_);
    if (held_.empty()) return false;
    h = held_.front();
    held_.pop_front();
  }
  if (int rc = deliver(h.src, h.msg); rc < 0) {
    h.msg->health = HealthStatus::RemoteDropped;
    h.src->host->finalize(h.msg, rc);
  }
  return true;
}

void Fabric::deliver_all() {
  while (deliver_one()) {
  }
}

int Fabric::recv(NetInterface& ni, void* priv, LndMessage* rx, const iovec* iov, unsigned niov, std::uint32_t offset,
                 std::uint32_t mlen) {
  auto* ref = static_cast<TxRef*>(priv);
  if (ref->reply) {
    // Optimised GET: rx is the target's REPLY, iov its source; the GET's sink gets it.
    LndMessage* get = ref->tx;
    if (rx) {
      copy_fragments(get->iov, get->niov, get->offset, iov, niov, offset, mlen);
      ref->host->set_reply_length(*ref->reply, mlen);
    }
    ref->host->finalize(get, 0);
    ref->host->finalize(ref->reply, rx ? 0 : -ENODATA);
    delete ref;
    if (rx) ni.host->finalize(rx, 0);
    return 0;
  }
  if (rx && mlen > 0) {
    if (ref->tx) {
      copy_fragments(iov, niov, offset, ref->tx->iov, ref->tx->niov, ref->tx->offset, mlen);
    } else {
      copy_to_fragments(iov, niov, offset, ref->raw.data(),
                        std::min<std::uint32_t>(mlen, static_cast<std::uint32_t>(ref->raw.size())));
    }
  }
  if (!rx) {
    std::lock_guard g(mutex_);
    ++discarded_;
  }
  if (ref->tx) ref->host->finalize(ref->tx, 0);
  delete ref;
  if (rx) ni.host->finalize(rx, 0);
  return 0;
}

int Fabric::inject(Nid dst, const Header& hdr, Nid from, std::vector<std::uint8_t> payload) {
  NetInterface* ni;
  {
    std::lock_guard g(mutex_);
    auto it = nis_.find(dst);
    if (it == nis_.end()) return -EHOSTUNREACH;
    ni = it->second;
  }
  auto* ref = new TxRef{nullptr, nullptr, std::move(payload)};
  int rc = ni->host->parse(*ni, hdr, from, ref, false);
  if (rc < 0) delete ref;
  return rc;
}

Config fabric_config(std::initializer_list<std::uint32_t> addrs, unsigned net, NetTunables t, unsigned ncpts) {
  Fabric::install();
  Config cfg;
  cfg.ncpts = ncpts;
  // Tests of the other features count their messages exactly: no discovery rounds in
  // between (discovery_test turns it on).
  cfg.globals.discovery = 0;
  for (std::uint32_t a : addrs) {
    NetConfig nc;
    nc.net = NetId::make(kGniLnd, net);
    nc.nid = Nid::make(nc.net, a);
    nc.tunables = t;
    cfg.nets.push_back(nc);
  }
  return cfg;
}

}  // namespace lnet::test
