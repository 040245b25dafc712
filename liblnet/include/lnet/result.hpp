// Error values of the C++ API: negative errno codes inside, an Error exception at the
// edges, Result<T> for calls that return a value or a failure with its reason, and
// Status for calls that return nothing but may fail.
#pragma once

#include <cerrno>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace lnet {

// A failure: a negative errno (the LNet convention) and a message naming the cause.
struct Failure {
  int code = -EINVAL;
  std::string message;
};

// Thrown by the outer C++ API (configuration, CLI edges, Result::value() on a failure).
class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  explicit Error(const Failure& f) : Error(f.code, f.message) {}
  // Negative errno.
  int code() const noexcept { return code_; }

 private:
  int code_;
};

// The text of a negative or positive errno ("No such file or directory").
std::string errno_string(int code);

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit on purpose
  Result(Failure failure) : v_(std::move(failure)) {}  // NOLINT
  static Result fail(int code, std::string message) { return Failure{code, std::move(message)}; }

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  // The value; throws Error when this holds a failure.
  T& value() & {
    if (!ok()) throw Error(std::get<1>(v_));
    return std::get<0>(v_);
  }
  const T& value() const& {
    if (!ok()) throw Error(std::get<1>(v_));
    return std::get<0>(v_);
  }
  T&& value() && {
    if (!ok()) throw Error(std::get<1>(v_));
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // Negative errno of the failure, 0 on success.
  int code() const noexcept { return ok() ? 0 : std::get<1>(v_).code; }
  const std::string& message() const {
    static const std::string empty;
    return ok() ? empty : std::get<1>(v_).message;
  }
  const Failure& failure() const { return std::get<1>(v_); }

 private:
  std::variant<T, Failure> v_;
};

// The outcome of a call that returns nothing: ok, or a Failure with its reason.
class [[nodiscard]] Status {
 public:
  Status() = default;                                        // ok
  Status(Failure failure) : failure_(std::move(failure)) {}  // NOLINT: implicit on purpose
  static Status fail(int code, std::string message) { return Failure{code, std::move(message)}; }

  bool ok() const noexcept { return failure_.code == 0; }
  explicit operator bool() const noexcept { return ok(); }
  // Negative errno of the failure, 0 on success.
  int code() const noexcept { return failure_.code; }
  const std::string& message() const noexcept { return failure_.message; }
  const Failure& failure() const noexcept { return failure_; }
  // Throws Error when this holds a failure (for the edges: tools, tests).
  void or_throw() const {
    if (!ok()) throw Error(failure_);
  }

 private:
  Failure failure_{0, {}};  // code 0: ok
};

}  // namespace lnet
