// lst: LNet self-test's user interface. Talks to the console in lnetd over its control
// socket (--socket, else $LNET_CTL_SOCKET, else /run/lnet/lnetd.sock); LST_SESSION
// names the user's session, as with the real lst.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <cli/cli.hpp>
#include <selftest/lst.hpp>

using namespace lnet;

int main(int argc, char** argv) {
  std::string socket_path = std::getenv("LNET_CTL_SOCKET") ? std::getenv("LNET_CTL_SOCKET") : "/run/lnet/lnetd.sock";
  std::vector<std::string> args(argv + 1, argv + argc);
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    if (args[i] == "--socket" && i + 1 < args.size()) {
      socket_path = args[++i];
    } else if (args[i].rfind("--socket=", 0) == 0) {
      socket_path = args[i].substr(9);
    } else {
      break;
    }
  }
  std::optional<std::uint32_t> key;
  if (const char* k = std::getenv("LST_SESSION"); k && *k) {  // (empty: not set)
    char* end = nullptr;
    errno = 0;
    unsigned long v = std::strtoul(k, &end, 10);
    if (errno || end == k || *end || v > 0xFFFFFFFFul) {
      std::fprintf(stderr, "Can't find env LST_SESSION or value is not valid (LST_SESSION='%s' is not a number)\n", k);
      return 255;  // as lst
    }
    key = static_cast<std::uint32_t>(v);
  }
  auto exec = [&](const dlc::Request& req) -> dlc::Response {
    dlc::Response resp;
    // (Reported as not connected: the console's own errnos have lst's words.)
    if (int rc = cli::talk(socket_path, req, resp))
      return {-ENOTCONN,
              "cannot reach lnetd at " + socket_path + ": " + std::strerror(-rc) +
                  (rc == -ENOENT || rc == -ECONNREFUSED ? " (is lnetd running? --socket or LNET_CTL_SOCKET)" : "") +
                  "\n"};
    return resp;
  };
  if (i < args.size())
    return selftest::lst::run(std::vector<std::string>(args.begin() + static_cast<long>(i), args.end()), exec, key);
  // No command: interactive, as lst: a command a line (a prompt when the input is a
  // terminal) until quit, exit or the end of the input; the status is the last one's.
  const bool tty = isatty(STDIN_FILENO) != 0;
  int rc = 0;
  std::string line;
  for (;;) {
    if (tty) std::fputs("lst > ", stdout), std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    std::istringstream words(line);
    std::vector<std::string> cmd{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
    if (cmd.empty()) continue;
    if (cmd[0] == "quit" || cmd[0] == "exit") break;
    rc = selftest::lst::run(cmd, exec, key);
    std::fflush(stdout);
  }
  if (tty) std::fputs("\n", stdout);
  return rc;
}
