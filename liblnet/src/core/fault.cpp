// Fault rules (lnet-facts §10): matching, when a rule fires (one at a random place in each
// window of `rate` matches, or at a random second of each `interval`, or with `random`
// half the time, or always with drop_all), and the counters `fault ... show` prints.
#include "core/fault.hpp"

#include <bit>

#include <lnet/log.hpp>

#include "base/clock.hpp"

namespace lnet::core {

namespace {

unsigned portal_of(const Header& h) {
  if (h.type == MsgType::Put) return h.msg.put.ptl_index;
  if (h.type == MsgType::Get) return h.msg.get.ptl_index;
  return 64;  // ACK and REPLY have none
}

}  // namespace

void FaultTable::start_window(Rule& r, std::int64_t now) {
  const FaultRule& f = r.info.rule;
  if (f.rate) r.fire_at = r.info.count + rng_() % f.rate;
  if (f.interval) {
    r.fire_time = now + static_cast<std::int64_t>(rng_() % f.interval) * kNsPerSec;
    r.time_base = now + std::int64_t{f.interval} * kNsPerSec;
  }
}

bool FaultTable::decide(Rule& r, std::int64_t now) {
  const FaultRule& f = r.info.rule;
  std::uint64_t seen = r.info.count++;
  if (f.drop_all) return true;
  if (f.interval) {
    if (f.random) return rng_() % 2 == 0;
    if (now < r.fire_time) return false;
    // The next one at a random second of the next window.
    if (now > r.time_base) r.time_base = now;
    r.fire_time = r.time_base + static_cast<std::int64_t>(rng_() % f.interval) * kNsPerSec;
    r.time_base += std::int64_t{f.interval} * kNsPerSec;
    return true;
  }
  bool fire = seen == r.fire_at;
  if (r.info.count % f.rate == 0) r.fire_at = r.info.count + rng_() % f.rate;
  return fire;
}

bool FaultTable::fires(Rule& r, std::int64_t now, MsgType type) {
  if (!decide(r, now)) return false;
  switch (type) {
    case MsgType::Put: ++r.info.put; break;
    case MsgType::Ack: ++r.info.ack; break;
    case MsgType::Get: ++r.info.get; break;
    case MsgType::Reply: ++r.info.reply; break;
    case MsgType::Hello: break;
  }
  ++r.info.fired;
  return true;
}

void FaultTable::refresh_flags() {
  bool rx = !delay_.empty(), tx = false;
  for (const Rule& r : drop_) (r.info.rule.health_errors ? tx : rx) = true;
  rx_.store(rx, std::memory_order_relaxed);
  tx_.store(tx, std::memory_order_relaxed);
}

Status FaultTable::add(const FaultRule& rule) {
  if (Status s = rule.check(); !s) return s;
  MutexLock g(mutex_);
  Rule r;
  r.info.rule = rule;
  start_window(r, steady_now_ns());
  (rule.delay ? delay_ : drop_).push_back(r);
  refresh_flags();
  return {};
}

int FaultTable::del(bool delay, Nid source, Nid dest) {
  MutexLock g(mutex_);
  auto& rules = delay ? delay_ : drop_;
  std::size_t before = rules.size();
  std::erase_if(rules, [&](const Rule& r) {
    return (source.is_any() || r.info.rule.source == source) && (dest.is_any() || r.info.rule.dest == dest);
  });
  refresh_flags();
  return static_cast<int>(before - rules.size());
}

void FaultTable::reset(bool delay) {
  MutexLock g(mutex_);
  std::int64_t now = steady_now_ns();
  for (Rule& r : delay ? delay_ : drop_) {
    FaultRule rule = r.info.rule;
    r.info = FaultRuleInfo{};
    r.info.rule = rule;
    start_window(r, now);
  }
}

std::vector<FaultRuleInfo> FaultTable::list(bool delay) const {
  MutexLock g(mutex_);
  std::vector<FaultRuleInfo> out;
  for (const Rule& r : delay ? delay_ : drop_) out.push_back(r.info);
  return out;
}

FaultTable::Verdict FaultTable::on_receive(const Header& h, Nid local, unsigned* latency) {
  unsigned portal = portal_of(h);
  std::int64_t now = steady_now_ns();
  MutexLock g(mutex_);
  for (Rule& r : drop_) {
    if (r.info.rule.health_errors || !r.info.rule.matches(h.src_nid, h.dest_nid, local, h.type, portal)) continue;
    if (fires(r, now, h.type)) return Verdict::Drop;
  }
  for (Rule& r : delay_) {
    if (!r.info.rule.matches(h.src_nid, h.dest_nid, local, h.type, portal)) continue;
    if (fires(r, now, h.type)) {
      *latency = r.info.rule.latency;
      return Verdict::Delay;
    }
  }
  return Verdict::Pass;
}

std::optional<HealthStatus> FaultTable::on_send(const Header& h, Nid local) {
  unsigned portal = portal_of(h);
  std::int64_t now = steady_now_ns();
  MutexLock g(mutex_);
  for (Rule& r : drop_) {
    std::uint32_t mask = r.info.rule.health_errors;
    if (!mask || !r.info.rule.matches(h.src_nid, h.dest_nid, local, h.type, portal)) continue;
    if (!fires(r, now, h.type)) continue;
    // One of the rule's statuses (bits 1..NetworkTimeout), at random; "random": any.
    constexpr unsigned kLast = static_cast<unsigned>(HealthStatus::NetworkTimeout);
    constexpr std::uint32_t kEvery = ((1u << (kLast + 1)) - 1) & ~1u;
    std::uint32_t statuses = mask == kFaultAnyHealthError ? kEvery : mask & kEvery;
    for (auto pick = rng_() % static_cast<unsigned>(std::popcount(statuses)); pick > 0; --pick)
      statuses &= statuses - 1;  // drop the lowest set bit
    return static_cast<HealthStatus>(std::countr_zero(statuses));
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- acting on messages

bool Faults::on_send(msg::Message* msg) {
  std::optional<HealthStatus> h = rules.on_send(msg->hdr, msg->txni->nid);
  if (!h) return false;
  // A drop rule with health errors: the send fails as a driver would fail it.
  msg->health = *h;
  host_.finalize(msg, -EIO);
  return true;
}

bool Faults::on_receive(net::Ni& ni, const Header& hdr, Nid from, void* lnd_private, bool rdma_req) {
  unsigned latency = 0;
  switch (rules.on_receive(hdr, ni.nid, &latency)) {
    case FaultTable::Verdict::Pass: return false;
    case FaultTable::Verdict::Drop: host_.drop_payload(ni, cpts_.of_nid(from), hdr, lnd_private, false); return true;
    case FaultTable::Verdict::Delay: {
      std::int64_t release = steady_now_ns() + std::int64_t{latency} * kNsPerSec;
      {
        MutexLock g(mutex_);
        held_.emplace(release, Held{&ni, hdr, from, lnd_private, rdma_req});
      }
      health_.wake_now();  // it may be asleep until later than this release
      return true;
    }
  }
  return false;
}

std::int64_t Faults::release(std::int64_t now, bool discard) {
  for (;;) {
    Held h;
    {
      MutexLock g(mutex_);
      auto it = held_.begin();
      if (it == held_.end()) return 0;
      if (!discard && it->first > now) return it->first;
      h = it->second;
      held_.erase(it);
    }
    if (discard)
      host_.drop_payload(*h.ni, cpts_.of_nid(h.from), h.hdr, h.lnd_private, true);
    else
      (void)host_.parse_received(*h.ni, h.hdr, h.from, h.lnd_private, h.rdma_req, true);
  }
}

}  // namespace lnet::core
