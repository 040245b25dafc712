// lst's console half, shared by its files: the commands' handlers (lst_commands.cpp),
// what their arguments mean (lst_args.cpp) and the table that checks a request and
// dispatches it to one (lst_table.cpp).
#pragma once

#include <cstdint>
#include <string>

#include <lnet/dlc.hpp>
#include <selftest/console.hpp>
#include <selftest/lst.hpp>

namespace lnet::selftest::lst::detail {

// One request in a handler: the console, the request, the pid rule of its node lists,
// and the session key it came with (0 for show_session without one).
struct Call {
  Console& c;
  const dlc::Request& req;
  const PidDefault& dflt;
  std::uint32_t key;
};
using Handler = dlc::Response (*)(const Call&);

dlc::Response fail(int rc, const std::string& what);
dlc::Response fail(const Failure& f);
Result<std::uint32_t> number(const std::string& text, const char* what, std::uint32_t lo, std::uint32_t hi);
// add_test's test: ping or brw and its parameters, --loop, --concurrency, --distribute,
// --from and --to.
Result<TestSpec> test_spec(const dlc::Request& r);

// The commands, by lst's names (stat also serves show_error).
dlc::Response new_session(const Call& k);
dlc::Response show_session(const Call& k);
dlc::Response end_session(const Call& k);
dlc::Response add_group(const Call& k);
dlc::Response update_group(const Call& k);
dlc::Response list_group(const Call& k);
dlc::Response del_group(const Call& k);
dlc::Response add_batch(const Call& k);
dlc::Response add_test(const Call& k);
dlc::Response run(const Call& k);
dlc::Response stop(const Call& k);
dlc::Response query(const Call& k);
dlc::Response list_batch(const Call& k);
dlc::Response ping(const Call& k);
dlc::Response stat(const Call& k);

}  // namespace lnet::selftest::lst::detail
