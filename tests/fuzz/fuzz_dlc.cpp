// Fuzz target: the YAML readers of lnetd and lnetctl (configuration documents, control
// socket requests and responses). A document that parses prints back (config_to_yaml)
// to one that parses to the same document; a request or response that decodes encodes
// to text that decodes and encodes back to the same text. Bad input must fail with an error, never crash or throw.
#include <cstdlib>
#include <string_view>

#include <lnet/dlc.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view s(reinterpret_cast<const char*>(data), size);
  if (auto cfg = lnet::dlc::parse_config(s); cfg) {
    std::string text = lnet::dlc::config_to_yaml(*cfg, true);
    auto back = lnet::dlc::parse_config(text);
    if (!back || lnet::dlc::config_to_yaml(*back, true) != text) std::abort();
  }
  // Encoding may normalise (yaml-cpp replaces bytes that are not UTF-8), so the property
  // is that what we encode decodes and encodes to the same text.
  if (auto r = lnet::dlc::decode_request(s); r) {
    std::string text = lnet::dlc::encode_request(*r);
    auto back = lnet::dlc::decode_request(text);
    if (!back || lnet::dlc::encode_request(*back) != text) std::abort();
  }
  if (auto r = lnet::dlc::decode_response(s); r) {
    std::string text = lnet::dlc::encode_response(*r);
    auto back = lnet::dlc::decode_response(text);
    if (!back || lnet::dlc::encode_response(*back) != text) std::abort();
  }
  return 0;
}
