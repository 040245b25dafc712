// lnetd's components: what it runs beside liblnet. A component hands drivers to the
// instance, runs a service on it, or both; it adds its own command-line options, serves
// its own control-socket commands and reports its own counters. components.cpp makes
// them, one line each: main() and the option parser name none of them.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <boost/program_options.hpp>

#include <lnet/dlc.hpp>
#include <lnet/lnd/lnd.hpp>
#include <lnet/lnet.hpp>

namespace lnetd {

class Component {
 public:
  virtual ~Component() = default;
  // Its options, added to lnetd's; then what was given, checked (false after logging
  // what is wrong with a value).
  virtual void add_options(boost::program_options::options_description& opts) { (void)opts; }
  virtual bool take_options(const boost::program_options::variables_map& vm) {
    (void)vm;
    return true;
  }
  // The drivers it hands to Instance::create.
  virtual std::vector<std::shared_ptr<lnet::Lnd>> drivers() { return {}; }
  // Starts it on the configured instance; `cfg` is the startup configuration (the keys
  // that are the daemon's own, such as `selftest:`, are read here).
  virtual lnet::Status start(lnet::Instance& lnet, const lnet::dlc::SystemConfig& cfg) {
    (void)lnet;
    (void)cfg;
    return {};
  }
  // After a command that may have changed the configuration (and once after start).
  virtual void changed(lnet::Instance& lnet) { (void)lnet; }
  // A control-socket request that is one of its commands; nullopt when it is not.
  virtual std::optional<lnet::dlc::Response> handle(const lnet::dlc::Request& req) {
    (void)req;
    return std::nullopt;
  }
  // A service's counters for `lnetctl stats show` (a driver's own: Lnd::counters()).
  virtual std::vector<lnet::dlc::DriverCounters> service_stats() { return {}; }
  // Stops what start() started; the instance is still up.
  virtual void stop() {}
};

// Every component of this lnetd, in the order they start (and stop in reverse).
std::vector<std::unique_ptr<Component>> make_components();

}  // namespace lnetd
