// The environment variables of liblnet and its drivers. Each is declared once, as a
// namespace-scope EnvVar next to the code that reads it; declaring it registers it, so
// a program's --env lists every variable of the code it links, with its current value.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <lnet/result.hpp>

namespace lnet {

class EnvVar {
 public:
  // The strings must live for the whole process (literals).
  EnvVar(const char* name, const char* default_value, const char* description);
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

  const char* name() const { return name_; }
  const char* default_value() const { return default_; }
  const char* description() const { return description_; }
  // What the environment holds, or nullptr when the variable is unset or empty.
  const char* value() const;

  // The value (or the default when unset) as a whole number in [lo, hi]. A failure names
  // the variable, what it holds and the range: "LNET_SOCK_TIMEOUT='x' is not a number in 1..3600".
  Result<long> number(long lo, long hi) const;
  // 0 or 1.
  Result<bool> flag() const;
  // The index of the value (or of the default) among `words`; a failure lists them.
  Result<std::size_t> choice(std::initializer_list<std::string_view> words) const;

 private:
  const char* name_;
  const char* default_;
  const char* description_;
};

// Every variable declared in this process, by name.
std::vector<const EnvVar*> env_vars();
// A printable table of them with their defaults and current values (for --env).
std::string env_help();

}  // namespace lnet
