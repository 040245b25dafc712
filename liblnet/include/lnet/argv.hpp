// A guard for command lines read with Boost.Program_options: its error messages fill in
// %placeholders% (%canonical_option%, %original_token%, %value%, ...) until none is left,
// so an argument that itself holds one ("--%original_token%", "--port %value%") makes the
// message never end and the tool spin. The tools refuse such an argument before Boost
// sees it (found by fuzz_xfer_args).
#pragma once

#include <cctype>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace lnet {

// Whether `arg` holds a %name% (letters and underscores between two '%').
inline bool has_placeholder(std::string_view arg) {
  for (std::size_t at = arg.find('%'); at != std::string_view::npos; at = arg.find('%', at + 1)) {
    std::size_t i = at + 1;
    while (i < arg.size() && (std::islower(static_cast<unsigned char>(arg[i])) || arg[i] == '_')) ++i;
    if (i > at + 1 && i < arg.size() && arg[i] == '%') return true;
  }
  return false;
}

// The error for the first argument (after argv[0] when `skip_first`) that holds one.
template <class Args>
std::optional<std::string> placeholder_argument(const Args& args, bool skip_first) {
  bool first = true;
  for (const auto& a : args) {
    if (std::exchange(first, false) && skip_first) continue;
    if (has_placeholder(a)) return "bad argument '" + std::string(a) + "': no argument may hold a %name%";
  }
  return std::nullopt;
}

}  // namespace lnet
