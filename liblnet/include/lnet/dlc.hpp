// Dynamic LNet configuration (the "DLC"): the configuration of a running instance in the
// YAML schema of `lnetctl export`/`import`, and the lnetctl commands a control socket
// carries (request: a command and its arguments; response: status and YAML).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <lnet/api.hpp>
#include <lnet/config.hpp>
#include <lnet/result.hpp>

namespace lnet::dlc {

// Everything `export --backup` writes and `import` reads.
// `selftest:` of a daemon's configuration: `enable`, or a mapping of enable (0/1),
// session_timeout and rpc_timeout (seconds; the selftest module's parameters).
struct SelftestConfig {
  bool enable = false;
  unsigned session_timeout = 100;
  unsigned rpc_timeout = 64;
};

// `ping:` or `discover:` of a document: what `import --exec` runs.
struct ExecSection {
  bool discover = false;
  std::vector<ProcessId> targets;
  std::optional<int> timeout_ms;  // ping: default 1000
  std::optional<Nid> source;      // ping: the local NID to ping from
  bool force = false;             // discover: a full round even if discovered
};

// Limits of one document: the NIDs of a peer (LNet's LNET_MAX_NIDS_PER_PEER), and peers.
inline constexpr std::size_t kMaxNidsPerPeer = 128;
inline constexpr std::size_t kMaxImportPeers = 100000;

struct SystemConfig {
  std::optional<SelftestConfig> selftest;  // a daemon's option: lnetctl import refuses it
  std::vector<NetConfig> nets;
  std::vector<RouteConfig> routes;
  std::vector<PeerConfig> peers;
  std::optional<bool> routing;
  std::optional<BufferConfig> buffers;
  std::optional<GlobalTunables> global;
  // The global tunables a parsed document names, in its order: an import sets those and
  // leaves the others as they are (`global` shows them over the defaults).
  std::vector<std::pair<std::string, long>> global_keys;
  std::vector<Ip2netsRule> ip2nets;  // resolved against the host's interfaces when applied
  std::vector<ExecSection> exec;     // import --exec
  std::vector<UdspRule> udsp;
  std::vector<FaultRule> faults;  // `fault:` {drop: [...], delay: [...]}
  // What the document carries that is accepted but takes no effect, one line each (legacy
  // spellings, tunables of drivers this build does not have): the importer shows them.
  std::vector<std::string> warnings;
};

// Parses a document in the lnetctl YAML schema (net, route, peer, routing, buffers,
// global, udsp). Keys lnetctl prints for show (statistics, state, ...) are accepted and
// ignored; anything else, and every bad value, fails with the key and its line.
Result<SystemConfig> parse_config(std::string_view yaml);
// The document of `export` (`backup`: only what configures, no runtime state).
std::string config_to_yaml(const SystemConfig& cfg, bool backup);
// The configuration of a running instance.
SystemConfig export_config(Instance& lnet);

// Merge is lnetd's reload: what the instance has already (an NI on the same net with the
// same NID or interfaces, a route to the same net through the same gateway, a peer with
// all the NIDs named, the same selection or fault rule) is left as it is, not changed;
// the rest is added as by Add. The global tunables, buffers and routing are set.
enum class ImportMode { Add, Del, Show, Merge };
// Applies a parsed document; all of it or nothing (what was applied is undone when a
// later part fails). For Show, *shown gets the current state of the items named; for
// Merge, one line per item left as it was.
Status apply_config(Instance& lnet, const SystemConfig& cfg, ImportMode mode, std::string* shown = nullptr);

// ---- commands of the control socket ----

struct Request {
  std::string command;                                   // "net show", "route add", ...
  std::map<std::string, std::vector<std::string>> args;  // option name -> values
  std::string body;                                      // import: the YAML document
  const std::string* arg(const std::string& name) const;
  bool flag(const std::string& name) const { return args.count(name) > 0; }
};

struct Response {
  Response() = default;
  Response(int status, std::string output, std::vector<std::string> warned = {})
      : rc(status), text(std::move(output)), warnings(std::move(warned)) {}
  int rc = 0;                         // 0 or a negative errno
  std::string text;                   // YAML: the output, or an error block
  std::vector<std::string> warnings;  // shown apart from the output (lnetctl: on stderr)
};

// What a daemon offers beyond the instance itself.
// Counters of a service the daemon runs, by name, in the order shown (a driver's own come
// through Control::lnd_counters()).
using DriverCounters = LndCounters;

struct Hooks {
  std::function<Status()> configure;    // lnet configure --all
  std::function<Status()> unconfigure;  // lnet unconfigure
  // stats show: blocks of the daemon's services ("selftest statistics"), by name.
  std::function<std::vector<DriverCounters>()> service_stats;
};

// One option of a command, as lnetctl parses it and the daemon checks it.
struct OptionSpec {
  enum class Kind {
    Flag,        // --name
    Value,       // --name VALUE
    Values,      // --name VALUE, repeatable and comma lists
    Level,       // --name [LEVEL] (verbose: 1 when given bare)
    Positional,  // the command's words after its options (the last one repeats)
  };
  const char* name;
  char short_name;  // 0: none
  Kind kind;
  const char* help;
  // Non-null: the real lnetctl has this option, this build does not take it yet; the
  // daemon refuses it with "not supported yet: --name (why)".
  const char* unsupported = nullptr;
};

struct CommandSpec {
  const char* name;     // "net add"
  const char* summary;  // one line, for --help and --list-commands
  bool changes;         // changes the configuration (a daemon runs those one at a time)
  std::vector<OptionSpec> options;
};

// Every command execute() knows, with its options.
const std::vector<CommandSpec>& commands();
const CommandSpec* find_command(std::string_view name);
// Runs a command. Options the command does not have, or does not take yet, are refused.
Response execute(Instance& lnet, const Request& req, const Hooks& hooks = {});

std::string encode_request(const Request& r);
Result<Request> decode_request(std::string_view text);
std::string encode_response(const Response& r);
Result<Response> decode_response(std::string_view text);

// Length-prefixed frames (4-byte little-endian length, at most 16 MiB) on a stream socket.
inline constexpr std::size_t kMaxFrame = 16u << 20;
int write_frame(int fd, std::string_view payload);
// -EPROTO: a length above kMaxFrame; -ECONNRESET: closed before a whole frame.
int read_frame(int fd, std::string& out);

}  // namespace lnet::dlc
