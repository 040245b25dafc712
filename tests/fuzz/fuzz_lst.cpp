// Fuzz target: lst command lines, as the control socket hands them to lnetd's console.
// Each input is up to 16 lines of words run through lst's user half and its console
// half against a real console whose own node serves the framework (on the test
// fabric; other nodes do not exist, so their RPCs fail at once). Whatever the words,
// commands answer or fail with a message, and everything shuts down.
#include <cstdio>
#include <string>
#include <vector>

#include <selftest/framework.hpp>
#include <selftest/lst.hpp>
#include <selftest/services.hpp>

#include "support/fabric.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lnet;
  using namespace lnet::selftest;
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)lst::parse_ids(text.substr(0, text.find('\n')));

  std::vector<std::vector<std::string>> lines;
  std::size_t at = 0;
  while (at <= text.size() && lines.size() < 16) {
    std::size_t nl = text.find('\n', at);
    std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? text.size() + 1 : nl + 1;
    std::vector<std::string> words;
    std::size_t p = 0;
    while (p < line.size()) {
      std::size_t q = line.find(' ', p);
      if (q == std::string::npos) q = line.size();
      if (q > p) words.push_back(line.substr(p, q - p));
      p = q + 1;
    }
    if (words.empty()) continue;
    // stat and query --loop sleep between rounds; many units of 1 MiB would only
    // measure the fuzzer's memory.
    bool skip = words[0] == "stat" || words[0] == "query";
    for (const auto& w : words) skip = skip || w.rfind("--concurrency", 0) == 0 || w.rfind("--distribute", 0) == 0;
    if (!skip) lines.push_back(std::move(words));
  }
  if (lines.empty()) return 0;

  auto lnet = Instance::create(test::fabric_config({1}), kPidLustre);
  if (!lnet) std::abort();
  {
    RpcNode rpc(**lnet, std::chrono::seconds(2));
    Framework fw(rpc);
    TestServices services(rpc);
    if (!fw.start(4) || !services.start(4)) std::abort();
    Console console(rpc, Nid::make(NetId::make(kGniLnd, 0), 1));
    std::FILE* sink = std::fopen("/dev/null", "w");
    for (const auto& words : lines)
      (void)lst::run(words, [&](const dlc::Request& r) { return lst::execute(console, r); }, 7, {sink, sink});
    (void)console.end_session(7);
    std::fclose(sink);
  }
  return 0;
}
