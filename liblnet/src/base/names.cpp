// Printable names of status values.
#include <cstring>

#include <lnet/lnd/lnd.hpp>
#include <lnet/result.hpp>

namespace lnet {

std::string errno_string(int code) {
  if (code < 0) code = -code;
  char buf[128];
  return strerror_r(code, buf, sizeof buf);  // GNU: returns the message
}

const char* health_status_name(HealthStatus s) {
  switch (s) {
    case HealthStatus::Ok: return "OK";
    case HealthStatus::LocalInterrupt: return "LOCAL_INTERRUPT";
    case HealthStatus::LocalDropped: return "LOCAL_DROPPED";
    case HealthStatus::LocalAborted: return "LOCAL_ABORTED";
    case HealthStatus::LocalNoRoute: return "LOCAL_NO_ROUTE";
    case HealthStatus::LocalError: return "LOCAL_ERROR";
    case HealthStatus::LocalTimeout: return "LOCAL_TIMEOUT";
    case HealthStatus::RemoteError: return "REMOTE_ERROR";
    case HealthStatus::RemoteDropped: return "REMOTE_DROPPED";
    case HealthStatus::RemoteTimeout: return "REMOTE_TIMEOUT";
    case HealthStatus::NetworkTimeout: return "NETWORK_TIMEOUT";
  }
  return "<unknown>";
}

}  // namespace lnet
