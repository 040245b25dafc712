#include <lnet/peer_cred.hpp>

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <vector>

namespace lnet {

namespace {

// The supplementary groups of `uid` as the group database has them.
std::vector<gid_t> database_groups(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || !found) return {};
  int n = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(n));
  while (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
    if (static_cast<std::size_t>(n) <= groups.size()) return {};
    groups.resize(static_cast<std::size_t>(n));
  }
  groups.resize(static_cast<std::size_t>(n));
  return groups;
}

// The peer's supplementary groups as the kernel had them when it connected; nothing
// when the kernel cannot say (then the database decides).
std::optional<std::vector<gid_t>> socket_groups(int fd) {
  std::vector<gid_t> groups(64);
  for (int tries = 0; tries < 4; ++tries) {
    auto len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return groups;
    }
    if (errno != ERANGE) return std::nullopt;
    groups.resize(len / sizeof(gid_t) + 1);
  }
  return std::nullopt;
}

}  // namespace

std::optional<PeerCred> peer_cred(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return std::nullopt;
  return PeerCred{cred.uid, cred.gid, cred.pid};
}

bool peer_in_group(int fd, const PeerCred& c, gid_t group) {
  if (c.gid == group) return true;
  auto groups = socket_groups(fd);
  if (!groups) groups = database_groups(c.uid);
  return std::find(groups->begin(), groups->end(), group) != groups->end();
}

std::optional<gid_t> group_id(const std::string& name) {
  if (name.empty()) return std::nullopt;
  unsigned long n = 0;
  auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
  if (ec == std::errc() && p == name.data() + name.size()) return static_cast<gid_t>(n);
  std::vector<char> buf(16384);
  group g{};
  group* found = nullptr;
  if (getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &found) != 0 || !found) return std::nullopt;
  return found->gr_gid;
}

}  // namespace lnet
