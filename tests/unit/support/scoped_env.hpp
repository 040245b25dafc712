// Test helper: environment variables set for a scope (what is read meanwhile sees them),
// unset at its end, so that the tests run after in the same process do not.
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <utility>
#include <vector>

namespace lnet::test {

class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      ::setenv(name, value, 1);
      names_.push_back(name);
    }
  }
  ~ScopedEnv() {
    for (const char* name : names_) ::unsetenv(name);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<const char*> names_;
};

}  // namespace lnet::test
