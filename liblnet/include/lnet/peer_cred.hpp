// Who is at the other end of a Unix-domain socket, for the daemons' access checks (the
// control socket, the bridge): its credentials as the kernel recorded them at connect
// time (SO_PEERCRED) and its groups, the supplementary ones included (SO_PEERGROUPS; the
// group database when the kernel cannot say), however many it has.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace lnet {

struct PeerCred {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
};

std::optional<PeerCred> peer_cred(int fd);
// Whether the peer on `fd` (credentials `c`) is in `group`.
bool peer_in_group(int fd, const PeerCred& c, gid_t group);
// A group named or numbered ("lnet", "4242"): its gid, or nothing when there is none.
std::optional<gid_t> group_id(const std::string& name);

}  // namespace lnet
