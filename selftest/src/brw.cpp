#include <selftest/brw.hpp>

#include <algorithm>
#include <cstring>

namespace lnet::selftest {
namespace {

// Calls f(fragment) for each page fragment of buf.
template <typename Span, typename F>
void each_fragment(Span buf, std::size_t page_offset, F f) {
  std::size_t at = 0, first = kPageSize - page_offset % kPageSize;
  while (at < buf.size()) {
    std::size_t len = std::min(buf.size() - at, at == 0 ? first : kPageSize);
    f(buf.subspan(at, len));
    at += len;
  }
}

}  // namespace

void brw_fill(std::span<std::uint8_t> buf, std::size_t page_offset, BrwCheck check, std::uint64_t magic) {
  if (check != BrwCheck::Simple && check != BrwCheck::Full) return;
  each_fragment(buf, page_offset, [&](std::span<std::uint8_t> f) {
    if (f.size() < 8) return;
    if (check == BrwCheck::Full) {
      for (std::size_t i = 0; i + 8 <= f.size(); i += 8) std::memcpy(f.data() + i, &magic, 8);
      return;
    }
    std::memcpy(f.data(), &magic, 8);
    if (f.size() > 8) std::memcpy(f.data() + f.size() - 8, &magic, 8);
  });
}

bool brw_check(std::span<const std::uint8_t> buf, std::size_t page_offset, BrwCheck check, std::uint64_t magic) {
  if (check != BrwCheck::Simple && check != BrwCheck::Full) return true;
  bool ok = true;
  auto word_ok = [&](const std::uint8_t* p) { return std::memcmp(p, &magic, 8) == 0; };
  each_fragment(buf, page_offset, [&](std::span<const std::uint8_t> f) {
    if (!ok || f.size() < 8) return;
    if (check == BrwCheck::Full) {
      for (std::size_t i = 0; ok && i + 8 <= f.size(); i += 8) ok = word_ok(f.data() + i);
      return;
    }
    ok = word_ok(f.data()) && (f.size() <= 8 || word_ok(f.data() + f.size() - 8));
  });
  return ok;
}

std::vector<std::size_t> distribute_window(std::size_t idx, unsigned dist, unsigned span, std::size_t n) {
  std::vector<std::size_t> out;
  if (dist == 0 || span == 0 || span > n) return out;
  std::size_t start = (idx / dist) * span % n;
  for (std::size_t k = 0; k < span; ++k) out.push_back((start + k) % n);
  return out;
}

std::optional<NodeRates> node_rates(const FwCounters& fw0, const LnetCounters& ln0, const FwCounters& fw1,
                                    const LnetCounters& ln1, double unit) {
  if (fw1.running_ms <= fw0.running_ms) return std::nullopt;
  double dt = (fw1.running_ms - fw0.running_ms) / 1000.0;
  // Counters wrap as the kernel's u32 do: the difference is taken modulo their width.
  NodeRates r;
  r.recv_rate = static_cast<std::uint32_t>(ln1.recv_count - ln0.recv_count) / dt;
  r.send_rate = static_cast<std::uint32_t>(ln1.send_count - ln0.send_count) / dt;
  r.recv_bw = static_cast<double>(ln1.recv_length - ln0.recv_length) / unit / dt;
  r.send_bw = static_cast<double>(ln1.send_length - ln0.send_length) / unit / dt;
  return r;
}

GroupRates group_rates(std::span<const NodeRates> nodes) {
  GroupRates g;
  g.nodes = nodes.size();
  if (nodes.empty()) return g;
  auto column = [&](double NodeRates::*field) {
    Column c;
    c.min = c.max = nodes[0].*field;
    double sum = 0;
    for (const NodeRates& n : nodes) {
      sum += n.*field;
      c.min = std::min(c.min, n.*field);
      c.max = std::max(c.max, n.*field);
    }
    c.avg = sum / static_cast<double>(nodes.size());
    return c;
  };
  g.recv_rate = column(&NodeRates::recv_rate);
  g.send_rate = column(&NodeRates::send_rate);
  g.recv_bw = column(&NodeRates::recv_bw);
  g.send_bw = column(&NodeRates::send_bw);
  return g;
}

}  // namespace lnet::selftest
