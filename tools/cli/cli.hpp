// What the command-line tools share: options of a command table (<lnet/dlc.hpp>) for
// Boost.Program_options, the request built from what was parsed, and a call to a
// daemon's control socket.
#pragma once

#include <string>

#include <boost/program_options.hpp>

#include <lnet/dlc.hpp>

namespace lnet::cli {

// The options of `spec`; positionals go in `hidden` and `pos` (the last one repeats).
void describe(const dlc::CommandSpec& spec, boost::program_options::options_description& opts,
              boost::program_options::options_description& hidden,
              boost::program_options::positional_options_description& pos);
// Every parsed option but --help, as the request's args.
void to_args(const boost::program_options::variables_map& vm, dlc::Request& req);
// Sends `req` to the control socket at `path` and reads the response: 0 or -errno.
int talk(const std::string& path, const dlc::Request& req, dlc::Response& resp);

}  // namespace lnet::cli
