// Google Benchmark console output plus a closing table of ratios between our path and
// the baseline measured in the same run (the machines are noisy; ratios travel well).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace lnet::bench {

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  struct Pair {
    std::string label;
    std::string ours;      // benchmark name (as printed)
    std::string baseline;  // benchmark name
  };

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      std::string name = r.run_type == Run::RT_Aggregate ? r.run_name.str() : r.benchmark_name();
      ns_[name] = r.GetAdjustedRealTime() * to_ns(r.time_unit);
    }
  }

  // Prints "label: ours X ns, baseline Y ns, ratio ours/baseline" for each pair found.
  void print(const std::vector<Pair>& pairs) const {
    std::printf("\n# ratios (time per operation, median where repeated)\n");
    std::printf("# %-44s %14s %14s %10s\n", "comparison", "ours ns", "baseline ns", "ratio");
    for (const Pair& p : pairs) {
      auto a = ns_.find(p.ours), b = ns_.find(p.baseline);
      if (a == ns_.end() || b == ns_.end()) continue;
      std::printf("  %-44s %14.1f %14.1f %10.3f\n", p.label.c_str(), a->second, b->second, a->second / b->second);
    }
  }

 private:
  static double to_ns(benchmark::TimeUnit u) {
    switch (u) {
      case benchmark::kNanosecond: return 1;
      case benchmark::kMicrosecond: return 1e3;
      case benchmark::kMillisecond: return 1e6;
      case benchmark::kSecond: return 1e9;
    }
    return 1;
  }
  std::map<std::string, double> ns_;
};

// main() of a benchmark program: runs the selected benchmarks, then prints the ratios.
inline int run_with_ratios(int argc, char** argv, const std::vector<RatioReporter::Pair>& pairs) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  rep.print(pairs);
  benchmark::Shutdown();
  return 0;
}

}  // namespace lnet::bench
