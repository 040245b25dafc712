// Fuzz target: the virtual cluster's description (tests/cluster/desc.hpp). Bad input
// fails with a message naming the source, never a crash; a description that parses
// builds lnetd configurations that lnetd's own reader takes, and a plan whose lines all
// end.
#include <cstdlib>
#include <string_view>

#include <lnet/dlc.hpp>

#include "desc.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lnet::cluster;
  static const HostFacts host{"fuzzhost", {"localhost", "fuzzhost"}};
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto d = parse(text, "f", host);
  if (!d) {
    if (d.message().rfind("f:", 0) != 0) std::abort();
    return 0;
  }
  for (const Node& n : d->nodes)
    if (n.lnetd && !lnet::dlc::parse_config(lnetd_yaml(*d, n))) std::abort();
  std::string plan = shell_plan(*d);
  if (plan.empty() || plan.back() != '\n') std::abort();
  (void)hosts_file(*d);
  return 0;
}
