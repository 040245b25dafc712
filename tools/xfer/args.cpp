// lnet-xfer's command line (Boost.Program_options): every bad option or value is a
// failure naming it, never an exit (fuzz_xfer_args runs it).
#include <cerrno>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <boost/program_options.hpp>

#include <lnet/argv.hpp>

#include "xfer.hpp"

namespace po = boost::program_options;

namespace lnet::xfer {

namespace {

constexpr const char* kUsage =
    "usage: lnet-xfer serve  [--nid NID]... [--route NET@GW]... [--buffer BYTES] [--portal N] [--pid PID]\n"
    "                        [--peer NID --peer-nid NID...]\n"
    "       lnet-xfer ping   [--nid NID]... --peer NID [--count N] [--timeout S]\n"
    "       lnet-xfer put|get [--nid NID]... --peer NID [--sizes LIST] [--count N] [--depth N] [--check]\n"
    "                        [--offset BYTES] [--bits B] [--timeout S]\n"
    "       lnet-xfer check  [--nid NID]... --peer NID [--sizes LIST] [--bits B]\n"
    "       lnet-xfer stream [--nid NID]... --peer NID [--size BYTES] [--seconds S] [--stop-file F] [--rule-file F]\n"
    "       lnet-xfer --help | --version\n\n"
    "A server that exposes a buffer on an LNet portal (serve), and a client that pings it,\n"
    "PUTs to it (each with an ACK) and GETs from it, printing rates and latencies. Each run\n"
    "brings up its own LNet with the NIs of --nid (else LNET_NETWORKS / LNET_IP2NETS) and\n"
    "the LNET_* tunables (lnet(3)). Exit status: 0 all went well, 1 something failed, 2\n"
    "bad usage. See lnet-xfer(1).\n";

// Which modes take which option (the rest refuse it, naming it).
const std::map<std::string, std::set<std::string>> kModes = {
    {"serve", {"nid", "route", "peer", "peer-nid", "buffer", "portal", "pid"}},
    {"ping", {"nid", "route", "peer", "peer-nid", "pid", "count", "timeout"}},
    {"put",
     {"nid", "route", "peer", "peer-nid", "pid", "portal", "sizes", "size", "count", "depth", "check", "offset", "bits",
      "timeout"}},
    {"check", {"nid", "route", "peer", "peer-nid", "pid", "portal", "sizes", "offset", "bits", "timeout"}},
    {"stream",
     {"nid", "route", "peer", "peer-nid", "pid", "portal", "size", "offset", "bits", "timeout", "seconds", "stop-file",
      "rule-file"}},
};

struct BadUsage {
  std::string why;
};

[[noreturn]] void bad(const std::string& why) { throw BadUsage{why}; }

// A number in min..max, with an optional binary suffix (K, M, G) when `sized`.
unsigned long long number(const std::string& option, const std::string& v, unsigned long long max, bool sized,
                          unsigned long long min = 0) {
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v.c_str(), &end, 0);
  unsigned long long unit = 1;
  if (sized && end && *end && !end[1]) {
    switch (*end) {
      case 'k':
      case 'K':
        unit = 1ULL << 10;
        ++end;
        break;
      case 'm':
      case 'M':
        unit = 1ULL << 20;
        ++end;
        break;
      case 'g':
      case 'G':
        unit = 1ULL << 30;
        ++end;
        break;
      default: break;
    }
  }
  if (v.empty() || v[0] == '-' || *end || errno || n > max / unit || n * unit > max || n * unit < min)
    bad("bad value '" + v + "' for --" + option + " (" + std::to_string(min) + ".." + std::to_string(max) + ")");
  return n * unit;
}

std::vector<std::uint32_t> parse_sizes(const std::string& option, const std::string& v) {
  std::vector<std::uint32_t> out;
  std::size_t p = 0;
  for (;;) {
    std::size_t c = v.find(',', p);
    out.push_back(static_cast<std::uint32_t>(number(option, v.substr(p, c - p), kMaxPayload, true)));
    if (c == std::string::npos) return out;
    p = c + 1;
  }
}

Nid parse_nid(const std::string& option, const std::string& v) {
  auto n = Nid::parse(v);
  if (!n || n->is_any()) bad("bad NID '" + v + "' for --" + option + (n ? "" : ": " + n.message()));
  return *n;
}

std::pair<NetId, Nid> parse_route(const std::string& v) {
  std::size_t at = v.find('@');
  auto net = NetId::parse(v.substr(0, at));
  auto gw = Nid::parse(at == std::string::npos ? "" : v.substr(at + 1));
  if (!net || !gw) bad("bad --route '" + v + "' (NET@GATEWAY_NID, e.g. tcp1@10.0.0.1@tcp)");
  return {*net, *gw};
}

po::options_description options() {
  po::options_description o("options");
  o.add_options()("help,h", "this text")("version", "the version")(
      "nid", po::value<std::vector<std::string>>()->value_name("NID"), "a local NI (repeat for multi-rail)")(
      "route", po::value<std::vector<std::string>>()->value_name("NET@GW"), "NET@GW: reach NET through gateway GW")(
      "peer", po::value<std::string>()->value_name("NID"), "the server's NID")(
      "peer-nid", po::value<std::vector<std::string>>()->value_name("NID"),
      "another NID of the server (one multi-rail peer)")("pid", po::value<std::string>()->value_name("PID"),
                                                         "the server's pid (default 12345)")(
      "portal", po::value<std::string>()->value_name("N"), "the server's portal (default 40)")(
      "buffer", po::value<std::string>()->value_name("BYTES"), "serve: buffer bytes (default 2M)")(
      "sizes", po::value<std::string>()->value_name("LIST"),
      "transfer sizes, comma-separated, K/M suffixes, at most 1M")(
      "size", po::value<std::string>()->value_name("BYTES"), "one transfer size")(
      "count", po::value<std::string>()->value_name("N"), "operations per size (ping: pings)")(
      "depth", po::value<std::string>()->value_name("N"), "operations in flight (default 1)")(
      "check", po::bool_switch(), "check every byte")("offset", po::value<std::string>()->value_name("BYTES"),
                                                      "where in the server's buffer (default 0)")(
      "bits", po::value<std::string>()->value_name("B"), "match bits (default 0)")(
      "timeout", po::value<std::string>()->value_name("S"), "seconds an operation or ping may take")(
      "seconds", po::value<std::string>()->value_name("S"), "stream: stop after S seconds (default 300)")(
      "stop-file", po::value<std::string>()->value_name("F"), "stream: stop when F exists")(
      "rule-file", po::value<std::string>()->value_name("F"), "stream: selection rules to apply when F appears");
  return o;
}

// Defaults that depend on the mode.
void mode_defaults(Args& a) {
  if (a.sizes.empty()) {
    if (a.mode == "check")
      a.sizes = {0, 1, 4096, 1U << 20};
    else if (a.mode == "stream")
      a.sizes = {4096};
    else
      a.sizes = {8, 4096, 1U << 20};
  }
  if (a.count == 0) a.count = a.mode == "ping" ? 1 : 10;
}

void take(Args& a, const po::variables_map& vm) {
  auto str = [&](const char* k) { return vm[k].as<std::string>(); };
  auto num = [&](const char* k, unsigned long long max, bool sized = false, unsigned long long min = 0) {
    return number(k, str(k), max, sized, min);
  };
  if (vm.count("nid"))
    for (const std::string& v : vm["nid"].as<std::vector<std::string>>()) a.nids.push_back(parse_nid("nid", v));
  if (vm.count("route"))
    for (const std::string& v : vm["route"].as<std::vector<std::string>>()) a.routes.push_back(parse_route(v));
  if (vm.count("peer")) a.peer = parse_nid("peer", str("peer"));
  if (vm.count("peer-nid"))
    for (const std::string& v : vm["peer-nid"].as<std::vector<std::string>>())
      a.peer_nids.push_back(parse_nid("peer-nid", v));
  if (vm.count("pid")) a.pid = static_cast<Pid>(num("pid", 0x7fffffff));
  if (vm.count("portal")) a.portal = static_cast<unsigned>(num("portal", 63));
  if (vm.count("buffer")) a.buffer = num("buffer", 1ULL << 31, true);
  if (vm.count("sizes") && vm.count("size")) bad("give --sizes or --size, not both");
  if (vm.count("sizes")) a.sizes = parse_sizes("sizes", str("sizes"));
  if (vm.count("size")) a.sizes = {static_cast<std::uint32_t>(num("size", kMaxPayload, true))};
  if (vm.count("count")) a.count = static_cast<unsigned>(num("count", 1000000000, false, 1));
  if (vm.count("depth")) a.depth = static_cast<unsigned>(num("depth", 64, false, 1));
  a.check = vm["check"].as<bool>();
  if (vm.count("offset")) a.offset = static_cast<std::uint32_t>(num("offset", 0xffffffffULL, true));
  if (vm.count("bits")) a.bits = num("bits", ~0ULL);
  if (vm.count("timeout")) a.timeout = static_cast<int>(num("timeout", 86400));
  if (vm.count("seconds")) a.seconds = static_cast<int>(num("seconds", 86400 * 365));
  if (vm.count("stop-file")) a.stop_file = str("stop-file");
  if (vm.count("rule-file")) a.rule_file = str("rule-file");
}

Args parse_checked(int argc, const char* const* argv) {
  if (auto e = placeholder_argument(std::vector<std::string_view>(argv, argv + argc), true)) bad(*e);
  po::variables_map vm;
  try {
    po::options_description all = options();
    all.add_options()("mode", po::value<std::string>());
    po::positional_options_description pos;
    pos.add("mode", 1);
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
  } catch (const po::error& e) {
    bad(e.what());
  }
  Args a;
  if (vm.count("help") || vm.count("version")) {
    a.help = vm.count("help") > 0;
    a.version = !a.help;
    return a;
  }
  if (!vm.count("mode")) bad("give a mode: serve, ping, put, get, check or stream");
  a.mode = vm["mode"].as<std::string>();
  auto mode = kModes.find(a.mode == "get" ? "put" : a.mode);
  if (mode == kModes.end()) bad("unknown mode '" + a.mode + "' (serve, ping, put, get, check, stream)");
  for (const auto& [name, value] : vm)
    if (name != "mode" && !value.defaulted() && !mode->second.count(name))
      bad("--" + name + " does not apply to " + a.mode);
  take(a, vm);
  if (a.mode != "serve" && !a.peer) bad(a.mode + " needs --peer");
  if (a.mode == "stream" && a.depth != 1) bad("stream runs one round at a time");
  mode_defaults(a);
  return a;
}

}  // namespace

Result<Args> parse_args(int argc, const char* const* argv) {
  try {
    return parse_checked(argc, argv);
  } catch (const BadUsage& b) {
    return Failure{-EINVAL, b.why};
  }
}

std::string usage() {
  std::ostringstream out;
  out << kUsage << "\n" << options();
  return out.str();
}

}  // namespace lnet::xfer
