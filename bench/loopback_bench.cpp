// Loopback PUT with its event on one thread: message rate and per-message latency of
// lnet::Instance::put() to 0@lo (target event delivered, initiator's SEND event
// delivered), next to memcpy of the same payload measured in the same run.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include <lnet/lnet.hpp>

#include "ratio_reporter.hpp"

namespace {

using namespace lnet;

struct Loopback {
  std::unique_ptr<Instance> lnet;
  std::vector<char> target = std::vector<char>(1 << 20);
  std::vector<char> source = std::vector<char>(1 << 20, 'x');
  long events = 0;
  ProcessId self;
  Loopback() {
    Config cfg;
    cfg.ncpts = 1;
    lnet = std::move(Instance::create(cfg, 7).value());
    self = ProcessId{Nid::lo(), 7};
    auto me = lnet->me_attach(6, ProcessId::any(), 1, 0, Unlink::Unlink, InsPos::After).value();
    MdDesc d;
    d.start = target.data();
    d.length = target.size();
    d.options = kMdOpPut | kMdManageRemote;
    d.handler = [this](const Event& e) { events += e.type == EventType::Put; };
    (void)lnet->md_attach(me, d, Unlink::Retain).value();
  }
};

// PUT of `size` bytes from one source MD reused for every message (threshold infinite,
// SEND event delivered to its handler).
void BM_LoopbackPut(benchmark::State& state) {
  static Loopback lb;
  auto size = static_cast<std::size_t>(state.range(0));
  long sends = 0;
  MdDesc s;
  s.start = lb.source.data();
  s.length = size;
  s.handler = [&sends](const Event&) { ++sends; };
  MdHandle md = lb.lnet->md_bind(s, Unlink::Retain).value();
  long before = lb.events;
  for (auto _ : state) {
    if (lb.lnet->put(Nid::any(), md, AckReq::NoAck, lb.self, 6, 1, 0, 0) != 0) state.SkipWithError("put failed");
  }
  if (lb.events - before != state.iterations() || sends != state.iterations()) state.SkipWithError("lost events");
  (void)lb.lnet->md_unlink(md);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * size));
}

// The same with a fresh MD bound (and auto-unlinked) per message, as LNet users do.
void BM_LoopbackPutBindEach(benchmark::State& state) {
  static Loopback lb;
  auto size = static_cast<std::size_t>(state.range(0));
  long sends = 0;
  MdDesc s;
  s.start = lb.source.data();
  s.length = size;
  s.threshold = 1;
  s.handler = [&sends](const Event&) { ++sends; };
  for (auto _ : state) {
    auto md = lb.lnet->md_bind(s, Unlink::Unlink);
    if (!md || lb.lnet->put(Nid::any(), *md, AckReq::NoAck, lb.self, 6, 1, 0, 0) != 0)
      state.SkipWithError("put failed");
  }
  if (sends != state.iterations()) state.SkipWithError("lost events");
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// Baseline: copying the payload (what loopback delivery must do at the least).
void BM_Memcpy(benchmark::State& state) {
  auto size = static_cast<std::size_t>(state.range(0));
  std::vector<char> a(size, 'x'), b(size);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), size);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * size));
}

BENCHMARK(BM_LoopbackPut)->Arg(8)->Arg(4096)->Arg(1 << 20);
BENCHMARK(BM_LoopbackPutBindEach)->Arg(8);
BENCHMARK(BM_Memcpy)->Arg(8)->Arg(4096)->Arg(1 << 20);

}  // namespace

int main(int argc, char** argv) {
  return lnet::bench::run_with_ratios(
      argc, argv,
      {
          {"PUT+events 8 B / memcpy 8 B", "BM_LoopbackPut/8", "BM_Memcpy/8"},
          {"PUT+events 4 KiB / memcpy 4 KiB", "BM_LoopbackPut/4096", "BM_Memcpy/4096"},
          {"PUT+events 1 MiB / memcpy 1 MiB", "BM_LoopbackPut/1048576", "BM_Memcpy/1048576"},
          {"bind+PUT+events 8 B / PUT+events 8 B", "BM_LoopbackPutBindEach/8", "BM_LoopbackPut/8"},
      });
}
