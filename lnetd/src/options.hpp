// lnetd's command line: what it parses and checks before anything starts.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <lnet/log.hpp>
#include <lnet/result.hpp>
#include <lnet/socklnd.hpp>

#include "components.hpp"

namespace lnetd {

inline constexpr const char* kDefaultSocket = "/run/lnet/lnetd.sock";
inline constexpr const char* kDefaultPidFile = "/run/lnet/lnetd.pid";
inline constexpr const char* kSystemConfig = "/etc/lnet.conf";

struct Options {
  std::string config_path;  // empty: /etc/lnet.conf when present, else the built-in default
  bool foreground = false;
  lnet::LogTarget log_target = lnet::LogTarget::Stderr;  // --log-target, else by --foreground
  bool large_nids = false;                               // --large: lnet configure --large before the configuration
  std::string ctl_socket = kDefaultSocket;
  std::optional<gid_t> ctl_gid;   // --ctl-group
  std::optional<gid_t> read_gid;  // --ctl-read-group: the commands that only show
  std::string pid_file = kDefaultPidFile;
  lnet::SocketParams socket;  // LNET_ACCEPT*/LNET_SOCK_* with --port and --accept over them
};

// What main() does after parsing: run, or exit at once with a status (help printed,
// or a bad option reported).
struct Parsed {
  std::optional<Options> options;
  int exit_code = 0;
};

// lnetd's options and each component's (which takes its own values).
Parsed parse_options(int argc, char** argv, const std::vector<std::unique_ptr<Component>>& components);

}  // namespace lnetd
