// Fuzz target: every text parser of identifiers and ranges (NIDs, nets, process ids,
// NID range lists, selection matchers, networks strings, fault rule lists, NID lists,
// CPT lists, ip2nets strings). What parses prints back to text that parses to the same
// value; a NID list expands to at most its limit of NIDs, each of which matches the list.
#include <cstdlib>
#include <string_view>

#include <lnet/config.hpp>
#include <lnet/fault.hpp>
#include <lnet/nid.hpp>
#include <lnet/nid_range.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view s(reinterpret_cast<const char*>(data), size);
  if (auto n = lnet::Nid::parse(s); n) {
    auto back = lnet::Nid::parse(n->to_string());
    if (!back || *back != *n) std::abort();
  }
  if (auto n = lnet::NetId::parse(s); n) {
    auto back = lnet::NetId::parse(n->to_string());
    if (!back || *back != *n) std::abort();
  }
  if (auto p = lnet::ProcessId::parse(s); p) {
    auto back = lnet::ProcessId::parse(p->to_string());
    if (!back || !(*back == *p)) std::abort();
  }
  if (auto l = lnet::NidRangeList::parse(s); l) {
    auto back = lnet::NidRangeList::parse(l->to_string());
    if (!back || back->to_string() != l->to_string()) std::abort();
  }
  if (auto m = lnet::NidMatcher::parse(s); m) {
    auto back = lnet::NidMatcher::parse(m->to_string());
    if (!back || back->to_string() != m->to_string()) std::abort();
  }
  (void)lnet::Config::parse_networks(s);
  if (auto nids = lnet::expand_nid_list(s, 128); nids) {
    if (nids->empty() || nids->size() > 128) std::abort();
    for (lnet::Nid n : *nids)
      if (auto back = lnet::Nid::parse(n.to_string()); !back || *back != n) std::abort();
  }
  if (auto cpts = lnet::parse_cpt_list(s); cpts && cpts->size() > 128) std::abort();
  static const std::vector<lnet::HostInterface> host = {{"eth0", 0x0a000005, true, false},
                                                        {"ib0", 0xc0a80107, true, false}};
  if (auto nets = lnet::ip2nets_to_networks(s, host); nets)
    if (!lnet::Config::parse_networks(*nets)) std::abort();
  if (auto rules = lnet::FaultRule::parse_list(s); rules) {
    for (const lnet::FaultRule& r : *rules) {
      auto back = lnet::FaultRule::from_fields(r.delay, r.to_fields());
      if (!back || !(*back == r)) std::abort();
    }
  }
  return 0;
}
