// lst's user half, shared by its files: the command line (lst_user.cpp), each
// command's output (lst_print.cpp), and `stat` in rounds (lst_stat.cpp).
#pragma once

#include <cstdint>
#include <string>

#include <yaml-cpp/yaml.h>

#include <lnet/dlc.hpp>
#include <selftest/lst.hpp>

namespace lnet::selftest::lst::user {

// A field of the console's answer, or `dflt` when it is missing or does not convert.
template <typename T>
T get(const YAML::Node& n, const char* key, T dflt = T()) {
  try {
    return n[key] ? n[key].as<T>() : dflt;
  } catch (const YAML::Exception&) {
    return dflt;
  }
}

// Option `name` as a number; `dflt` when it is missing, negative or not a number.
std::uint32_t number_or(const dlc::Request& r, const char* name, std::uint32_t dflt);

// lst's exit statuses: a command that failed (lst's -1), a usage (its CMD_HELP), an
// add_group that added no node.
inline constexpr int kExitFailed = 255;
inline constexpr int kExitUsage = 4;
inline constexpr int kExitNoneAdded = 254;

// A refusal of the console's, as lst prints it; the exit status.
int print_failure(Io io, const std::string& cmd, const dlc::Response& r);

// Each command's output on success, as lst prints it; the exit status (kStopped: a
// query found the batch stopped on every node).
inline constexpr int kStopped = -1;
int print(const std::string& cmd, const dlc::Request& req, const YAML::Node& doc, Io io);

// `lst stat` (its options checked): rounds of counters, printed as rates; the exit status.
int run_stat(const dlc::Request& req, const Exec& exec, Io io);

}  // namespace lnet::selftest::lst::user
