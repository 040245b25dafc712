// lst: LNet self-test's user interface. Talks to the console in lnetd over its control
// socket (--socket, else $LNET_CTL_SOCKET, else /run/lnet/lnetd.sock); LST_SESSION
// names the user's session, as with the real lst.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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
    } else if (args[i] == "--help" || args[i] == "-h") {
      selftest::lst::usage(stdout);
      return 0;
    } else if (args[i] == "--list-commands") {
      for (const auto& c : selftest::lst::commands()) std::printf("%s\n", c.name);
      return 0;
    } else {
      break;
    }
  }
  if (i >= args.size()) {
    selftest::lst::usage(stderr);
    return 2;
  }
  std::optional<std::uint32_t> key;
  if (const char* k = std::getenv("LST_SESSION"); k && *k) {  // (empty: not set)
    char* end = nullptr;
    errno = 0;
    unsigned long v = std::strtoul(k, &end, 10);
    if (errno || end == k || *end || v > 0xFFFFFFFFul) {
      std::fprintf(stderr, "Can't find env LST_SESSION or value is not valid (LST_SESSION='%s' is not a number)\n", k);
      return 2;
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
  return selftest::lst::run(std::vector<std::string>(args.begin() + static_cast<long>(i), args.end()), exec, key);
}
