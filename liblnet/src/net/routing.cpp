// Route snapshots and router buffer pools.
#include "net/routing.hpp"

#include <algorithm>
#include <cerrno>

namespace lnet::net {

void Routes::publish(std::unique_ptr<RouteTable> t) {
  cur_.store(t.get(), std::memory_order_release);
  all_.push_back(std::move(t));  // old snapshots stay valid for readers still using them
}

Status Routes::add(const RouteConfig& r) {
  const RouteTable* cur = table();
  for (std::size_t i = 0; cur && i < cur->routes.size(); ++i) {
    if (cur->routes[i].cfg.net == r.net && cur->routes[i].cfg.gateway == r.gateway)
      return Failure{-EEXIST, "route to " + r.net.to_string() + " via " + r.gateway.to_string() + " exists"};
  }
  auto next = cur ? std::make_unique<RouteTable>(*cur) : std::make_unique<RouteTable>();
  next->routes.push_back(RouteEntry{r, std::make_shared<RouteState>()});
  publish(std::move(next));
  return {};
}

bool Routes::del(NetId net, Nid gateway) {
  const RouteTable* cur = table();
  if (!cur) return false;
  auto next = std::make_unique<RouteTable>(*cur);
  auto& v = next->routes;
  std::size_t before = v.size();
  v.erase(std::remove_if(
              v.begin(), v.end(),
              [&](const RouteEntry& e) { return e.cfg.net == net && (gateway.is_any() || e.cfg.gateway == gateway); }),
          v.end());
  if (v.size() == before) return false;
  publish(std::move(next));
  return true;
}

std::vector<RouteConfig> Routes::configs() const {
  std::vector<RouteConfig> out;
  if (const RouteTable* t = table())
    for (const auto& e : t->routes) out.push_back(e.cfg);
  return out;
}

RouterBuffers::RouterBuffers(unsigned ncpts)
    : ncpts_(ncpts), pools_(std::make_unique<RtrPool[]>(static_cast<std::size_t>(ncpts) * kNumPools)) {}

void RouterBuffers::resize(const BufferConfig& b, bool reset_min) {
  const int want[kNumPools] = {b.tiny, b.small, b.large};
  for (unsigned c = 0; c < ncpts_; ++c) {
    for (int k = 0; k < kNumPools; ++k) {
      RtrPool& p = pool(c, k);
      // Each CPT gets its share of the total, at least one buffer.
      int n = std::max(want[k] / static_cast<int>(ncpts_), 1);
      p.npages = kRtrPoolPages[k];
      p.credits += n - p.nbuffers;
      p.nbuffers = n;
      p.min_credits = reset_min ? p.credits : std::min(p.min_credits, p.credits);
    }
  }
}

RtrBuffer* RouterBuffers::take(RtrPool& pool, int kind) {
  RtrBuffer* b = pool.free;
  if (b) {
    pool.free = b->next;
  } else {
    pool.all.push_back(std::make_unique<RtrBuffer>());
    b = pool.all.back().get();
    std::size_t size = static_cast<std::size_t>(kRtrPoolPages[kind]) * kRtrPageSize;
    char* data = nullptr;
    if (size && memory_) data = static_cast<char*>(memory_->allocate(size));
    if (size && !data) {
      b->owned = std::make_unique<char[]>(size);
      data = b->owned.get();
    }
    b->iov = iovec{data, size};
  }
  b->next = nullptr;
  return b;
}

void RouterBuffers::give(RtrPool& pool, RtrBuffer* b) {
  b->next = pool.free;
  pool.free = b;
}

RouterPoolInfo RouterBuffers::info(unsigned cpt, int kind) const {
  const RtrPool& p = pool(cpt, kind);
  return RouterPoolInfo{kRtrPoolPages[kind], p.nbuffers, p.credits, p.min_credits};
}

}  // namespace lnet::net
