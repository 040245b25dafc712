// Names of the verbs layer's statuses and events (verbs.hpp), for log lines.
#include "verbs.hpp"

namespace lnet::o2ib {

const char* wc_status_name(WcStatus s) {
  switch (s) {
    case WcStatus::Success: return "success";
    case WcStatus::Flushed: return "flushed";
    case WcStatus::RemoteAccess: return "remote access error";
    case WcStatus::RetryExceeded: return "retries exceeded";
    case WcStatus::LocalProtection: return "local protection error";
    case WcStatus::LocalLength: return "local length error";
  }
  return "?";
}

const char* cm_event_name(CmEventKind k) {
  switch (k) {
    case CmEventKind::ConnectRequest: return "CONNECT_REQUEST";
    case CmEventKind::Established: return "ESTABLISHED";
    case CmEventKind::Rejected: return "REJECTED";
    case CmEventKind::Unreachable: return "UNREACHABLE";
    case CmEventKind::Disconnected: return "DISCONNECTED";
  }
  return "?";
}

}  // namespace lnet::o2ib
