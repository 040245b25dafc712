// Match cost of an incoming PUT on an RDMA portal holding N match entries posted for N
// distinct peers: hashed on the peer NID (what RDMA portals do) against the ordered list
// scan (what request portals do), for N = 10, 1000 and 100000. "random" draws the sender
// uniformly from the N peers (cold caches at large N); "same" repeats one sender.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "portals/match_table.hpp"
#include "ratio_reporter.hpp"

namespace {

using namespace lnet;
using namespace lnet::portals;

struct Table {
  std::vector<std::unique_ptr<LibMe>> mes;
  std::vector<std::unique_ptr<LibMd>> mds;
  std::unique_ptr<MatchTable> table;
  std::vector<char> buf = std::vector<char>(4096);

  Table(std::size_t n, bool hashed) : table(std::make_unique<MatchTable>(hashed)) {
    // Post in a shuffled order, as replies from many servers would be.
    std::vector<std::uint32_t> order(n);
    for (std::uint32_t i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937(42));
    for (std::uint32_t i : order) {
      auto md = std::make_unique<LibMd>();
      md->start = buf.data();
      md->length = static_cast<std::uint32_t>(buf.size());
      md->iov_inline = iovec{buf.data(), buf.size()};
      md->iov = &md->iov_inline;
      md->niov = 1;
      md->threshold = kMdThreshInf;
      md->options = kMdOpPut;
      auto me = std::make_unique<LibMe>();
      me->match_id = ProcessId{peer(i), kPidLustre};
      me->match_bits = 0x1000 + i;
      me->md = md.get();
      md->me = me.get();
      table->insert_tail(me.get());
      mes.push_back(std::move(me));
      mds.push_back(std::move(md));
    }
  }
  static Nid peer(std::uint32_t i) { return Nid::make(NetId::make(kMpiLnd, 0), i + 1); }
};

MatchInfo info_for(std::uint32_t i) {
  MatchInfo info;
  info.initiator = ProcessId{Table::peer(i), kPidLustre};
  info.op = kMdOpPut;
  info.portal = 52;
  info.match_bits = 0x1000 + i;
  info.rlength = 4096;
  return info;
}

void run(benchmark::State& state, bool hashed, bool random) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Table t(n, hashed);
  std::vector<MatchInfo> infos;
  std::mt19937 rng(7);
  for (int i = 0; i < 4096; ++i) {
    auto who = random ? static_cast<std::uint32_t>(rng() % n) : static_cast<std::uint32_t>(n / 2);
    infos.push_back(info_for(who));
  }
  std::size_t k = 0;
  for (auto _ : state) {
    const MatchInfo& info = infos[k++ & 4095];
    MatchResult r = t.table->match(info, info.initiator.nid);
    if (r.status != MatchStatus::Ok) state.SkipWithError("no match");
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_MatchHashRandom(benchmark::State& s) { run(s, true, true); }
void BM_MatchListRandom(benchmark::State& s) { run(s, false, true); }
void BM_MatchHashSame(benchmark::State& s) { run(s, true, false); }
void BM_MatchListSame(benchmark::State& s) { run(s, false, false); }

BENCHMARK(BM_MatchHashRandom)->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK(BM_MatchListRandom)->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK(BM_MatchHashSame)->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK(BM_MatchListSame)->Arg(10)->Arg(1000)->Arg(100000);

}  // namespace

int main(int argc, char** argv) {
  return lnet::bench::run_with_ratios(
      argc, argv,
      {
          {"hash 100000 / hash 10 (random peer)", "BM_MatchHashRandom/100000", "BM_MatchHashRandom/10"},
          {"hash 100000 / hash 10 (same peer)", "BM_MatchHashSame/100000", "BM_MatchHashSame/10"},
          {"hash 1000 / hash 10 (random peer)", "BM_MatchHashRandom/1000", "BM_MatchHashRandom/10"},
          {"list 100000 / hash 100000 (random peer)", "BM_MatchListRandom/100000", "BM_MatchHashRandom/100000"},
          {"list 100000 / hash 100000 (same peer)", "BM_MatchListSame/100000", "BM_MatchHashSame/100000"},
          {"list 1000 / hash 1000 (random peer)", "BM_MatchListRandom/1000", "BM_MatchHashRandom/1000"},
      });
}
