// `lst`, the self-test user interface, in two halves that meet in a request/response
// pair (the control socket's <lnet/dlc.hpp> shapes): the console's half runs a command
// on a Console and answers YAML; the user's half parses an lst command line, sends it
// (to lnetd's control socket, or straight to a console in the same process), runs
// `stat` in rounds, and prints what the real lst prints — or CSV / YAML.
#pragma once

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <lnet/dlc.hpp>
#include <selftest/console.hpp>

namespace lnet::selftest::lst {

// The lst commands and their options (names as lst has them: "new_session", ...).
const std::vector<dlc::CommandSpec>& commands();
const dlc::CommandSpec* find(std::string_view name);

// The prefix of lst's requests on a control socket: "lst new_session", ...
inline constexpr std::string_view kPrefix = "lst ";

// Node lists as lst takes them: NIDs and NID ranges ("192.168.0.[1-4]@tcp",
// "[0-7]@mpi"), each optionally with a pid ("12345-10.0.0.1@tcp", "U42-[0-3]@mpi").
// Without one, a NID on `job_net` gets `job_pid` (an MPI job's processes), any other
// pid 12345.
struct PidDefault {
  std::optional<NetId> job_net;
  Pid job_pid = kPidLustre;
};
Result<std::vector<ProcessId>> parse_ids(std::string_view text, const PidDefault& dflt = {});

// The console's half: runs `req` (command "lst NAME") on `console`.
dlc::Response execute(Console& console, const dlc::Request& req, const PidDefault& dflt = {});

// The user's half. `argv` is the command and its options ("stat", "--count", "2",
// "clients"); `key` is LST_SESSION. Returns the exit status.
using Exec = std::function<dlc::Response(const dlc::Request&)>;
struct Io {
  std::FILE* out = stdout;
  std::FILE* err = stderr;
};
int run(const std::vector<std::string>& argv, const Exec& exec, std::optional<std::uint32_t> key, Io io = {});
void usage(std::FILE* out);

}  // namespace lnet::selftest::lst
