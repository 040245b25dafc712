// Fuzz target: lnet-xfer's command line (tools/xfer/args.cpp). The input is the
// arguments, one per line. Bad arguments fail with a message, never a crash or an exit;
// what parses is within the bounds the modes rely on.
#include <cstdlib>
#include <string>
#include <vector>

#include "xfer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lnet;
  std::vector<std::string> words{"lnet-xfer"};
  std::string word;
  for (std::size_t i = 0; i < size && words.size() < 64; ++i) {
    char c = static_cast<char>(data[i]);
    if (c == '\n') {
      words.push_back(word);
      word.clear();
    } else if (c != '\0') {
      word += c;
    }
  }
  if (!word.empty()) words.push_back(word);
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  auto a = xfer::parse_args(static_cast<int>(argv.size()), argv.data());
  if (!a) {
    if (a.message().empty() || a.code() != -EINVAL) std::abort();
    return 0;
  }
  if (a->help || a->version) return 0;
  if (a->sizes.empty() || a->count < 1 || a->depth < 1 || a->depth > 64 || a->portal > 63) std::abort();
  for (std::uint32_t s : a->sizes)
    if (s > kMaxPayload) std::abort();
  if (a->mode != "serve" && !a->peer) std::abort();
  return 0;
}
