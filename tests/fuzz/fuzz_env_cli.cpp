// Fuzz target: what a local user types. The input is words separated by NUL bytes:
//   - words of the form LNET_<NAME>=<value> go into the environment, which liblnet then
//     reads (Config::from_env: the globals, logging, fault rules; SocketParams::from_env:
//     the socket LND's variables). A bad value must be refused with an error naming the
//     variable, never crash, throw or be taken half.
//   - the other words are an lnetctl command line (a command of the table and its
//     options, as lnetctl parses them with Boost.Program_options), turned into the
//     control socket's request, which must encode and decode back to itself; a command
//     that only shows runs against a live instance (lo only).
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cli/cli.hpp>
#include <lnet/dlc.hpp>
#include <lnet/lnet.hpp>

namespace po = boost::program_options;

namespace {

lnet::Instance& instance() {
  static std::unique_ptr<lnet::Instance> i = [] {
    lnet::set_log_level(lnet::LogLevel::Error);
    auto r = lnet::Instance::create(lnet::Config{}, lnet::kPidLustre);
    if (!r) std::abort();
    return std::move(*r);
  }();
  return *i;
}

void check_env(const std::vector<std::string>& vars) {
  for (const std::string& v : vars) {
    auto eq = v.find('=');
    ::setenv(v.substr(0, eq).c_str(), v.substr(eq + 1).c_str(), 1);
  }
  auto c = lnet::Config::from_env();
  if (!c && c.message().find("LNET_") == std::string::npos) std::abort();  // the variable is named
  auto s = lnet::SocketParams::from_env();
  if (!s && s.message().find("LNET_") == std::string::npos) std::abort();
  for (const std::string& v : vars) ::unsetenv(v.substr(0, v.find('=')).c_str());
}

void check_command(const std::vector<std::string>& words) {
  // The command: the longest run of leading words that names one ("net show", "set").
  const lnet::dlc::CommandSpec* spec = nullptr;
  std::size_t used = 0;
  std::string name;
  for (std::size_t n = 0; n < words.size() && n < 3; ++n) {
    name += (n ? " " : "") + words[n];
    if (const auto* s = lnet::dlc::find_command(name)) {
      spec = s;
      used = n + 1;
    }
  }
  if (!spec) return;
  std::vector<std::string> rest(words.begin() + static_cast<long>(used), words.end());
  po::options_description opts, hidden, all;
  po::positional_options_description pos;
  lnet::cli::describe(*spec, opts, hidden, pos);
  all.add(opts).add(hidden);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(rest).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error&) {
    return;  // lnetctl says why and exits 2
  }
  lnet::dlc::Request req;
  req.command = spec->name;
  lnet::cli::to_args(vm, req);
  std::string text = lnet::dlc::encode_request(req);
  auto back = lnet::dlc::decode_request(text);
  if (!back || lnet::dlc::encode_request(*back) != text) std::abort();
  std::string command = spec->name;
  bool shows = !spec->changes && command != "ping" && command != "discover" && command != "import";
  if (shows) (void)lnet::dlc::execute(instance(), *back);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> vars, words;
  std::string all(reinterpret_cast<const char*>(data), size);
  std::size_t at = 0;
  while (at <= all.size()) {
    std::size_t end = all.find('\0', at);
    if (end == std::string::npos) end = all.size();
    std::string w = all.substr(at, end - at);
    if (w.rfind("LNET_", 0) == 0 && w.find('=') != std::string::npos && w.find('=') > 5)
      vars.push_back(w);
    else if (!w.empty())
      words.push_back(w);
    at = end + 1;
  }
  if (!vars.empty()) check_env(vars);
  if (!words.empty()) check_command(words);
  return 0;
}
