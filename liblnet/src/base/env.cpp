// The registry of environment variables: every EnvVar adds itself when it is made (at
// static initialisation of the code that declares it); reading parses on demand.
#include <lnet/env.hpp>
#include <lnet/mutex.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/text.hpp"

namespace lnet {

namespace {

struct Registry {
  Mutex mutex;
  std::vector<const EnvVar*> vars LNET_GUARDED_BY(mutex);
};

Registry& registry() {
  static Registry* r = new Registry;  // any static initialiser may register
  return *r;
}

std::string quoted(const char* v) { return std::string("'") + v + "'"; }

// A whole number, with an optional sign and surrounding blanks, nothing else.
bool parse_long(std::string_view s, long* out) {
  s = text::trim(s);
  if (s.empty()) return false;
  std::string copy(s);
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(copy.c_str(), &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

}  // namespace

EnvVar::EnvVar(const char* name, const char* default_value, const char* description)
    : name_(name), default_(default_value), description_(description) {
  Registry& r = registry();
  MutexLock g(r.mutex);
  r.vars.push_back(this);
}

const char* EnvVar::value() const {
  if (!name_) return nullptr;  // read before its declaration ran (static initialisation)
  const char* v = std::getenv(name_);
  return v && *v ? v : nullptr;
}

Result<long> EnvVar::number(long lo, long hi) const {
  const char* v = value();
  long x = 0;
  if (!parse_long(v ? v : default_, &x) || x < lo || x > hi) {
    return Failure{-EINVAL, std::string(name_) + "=" + quoted(v ? v : default_) + " is not a number in " +
                                std::to_string(lo) + ".." + std::to_string(hi)};
  }
  return x;
}

Result<bool> EnvVar::flag() const {
  auto n = number(0, 1);
  if (!n) return n.failure();
  return *n == 1;
}

Result<std::size_t> EnvVar::choice(std::initializer_list<std::string_view> words) const {
  const char* v = value();
  std::string_view s = text::trim(v ? v : default_);
  std::size_t i = 0;
  std::string list;
  for (std::string_view w : words) {
    if (s == w) return i;
    list += (i ? (i + 1 == words.size() ? " or " : ", ") : "") + std::string(w);
    ++i;
  }
  return Failure{-EINVAL, std::string(name_) + "=" + quoted(v ? v : default_) + " is not " + list};
}

std::vector<const EnvVar*> env_vars() {
  Registry& r = registry();
  std::vector<const EnvVar*> out;
  {
    MutexLock g(r.mutex);
    out = r.vars;
  }
  std::sort(out.begin(), out.end(),
            [](const EnvVar* a, const EnvVar* b) { return std::strcmp(a->name(), b->name()) < 0; });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const EnvVar* a, const EnvVar* b) { return std::strcmp(a->name(), b->name()) == 0; }),
            out.end());
  return out;
}

std::string env_help() {
  std::string out;
  for (const EnvVar* v : env_vars()) {
    out += std::string(v->name()) + "\n    " + v->description() + "\n    default: \"" + v->default_value() + "\"";
    if (const char* cur = v->value()) out += ", now: \"" + std::string(cur) + "\"";
    out += "\n";
  }
  return out;
}

}  // namespace lnet
