// A driver's own counter (stats show's "lnd statistics"), ~0 when it has none of that name.
#pragma once

#include <string>

#include <lnet/lnet.hpp>

namespace lnet::test {

inline std::uint64_t lnd_counter(Instance& i, const std::string& name, const std::string& driver = "tcp") {
  for (const LndCounters& d : i.control().lnd_counters())
    if (d.driver == driver)
      for (const auto& [n, v] : d.counters)
        if (n == name) return v;
  return ~0ULL;
}

}  // namespace lnet::test
