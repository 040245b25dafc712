// Rank 0's doorbell (lnet-proxy(8), SECURITY): a TCP socket any host that reaches the
// node can connect to. What a stranger can make the proxy do is bounded: open knocks (in
// all, and per source address), the time and bytes a knock may take, and nothing at all
// without the secret that the port file holds (mode 0640, the bridge's group). A knock is
// read as its bytes come, so a slow one never stalls the serving loop.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "proxy.hpp"

namespace lnet::proxy {

namespace mp = lnet::mpi::proxy;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kMaxKnocks = 64;                 // open at once, in all
constexpr std::size_t kMaxKnocksPerSource = 4;         // open at once, from one address
constexpr auto kKnockTime = std::chrono::seconds(10);  // to send the line

}  // namespace

Status ProxyRank::open_doorbell() {
  auto secret = mp::make_secret();
  if (!secret) return secret.failure();
  secret_ = *secret;
  // The UP NI's address is its node's IPv4 (whatever the MPI network's type prints).
  std::uint32_t a = up_->welcome().nid.addr();
  std::string ip = opts_.doorbell_ip.empty() ? std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
                                                   std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255)
                                             : opts_.doorbell_ip;
  auto fd = mp::listen_doorbell(ip, &doorbell_);
  if (!fd) return fd.failure();
  listen_fd_ = *fd;
  return {};
}

Status ProxyRank::write_port_file() {
  const std::string& path = opts_.port_file;
  std::string text = mp::format_port_file({port_, doorbell_, secret_});
  std::string tmpl = path + ".XXXXXX";
  int fd = ::mkstemp(tmpl.data());  // a fresh name, never a link someone left there
  if (fd < 0) return Failure{-errno, "cannot create a file beside " + path + ": " + std::strerror(errno)};
  struct stat bridge {};
  Status s;
  if (::fchmod(fd, 0640) != 0) s = Failure{-errno, "chmod of " + tmpl + ": " + std::strerror(errno)};
  if (s && ::stat(opts_.bridge.c_str(), &bridge) == 0 && bridge.st_gid != ::getegid() &&
      ::fchown(fd, static_cast<uid_t>(-1), bridge.st_gid) != 0)
    s = Failure{-errno, "cannot give " + tmpl + " the bridge's group " + std::to_string(bridge.st_gid) + ": " +
                            std::strerror(errno)};
  if (s && ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    s = Failure{-EIO, "cannot write " + tmpl + ": " + std::strerror(errno)};
  ::close(fd);
  if (s && ::rename(tmpl.c_str(), path.c_str()) != 0)
    s = Failure{-errno, "cannot rename " + tmpl + " to " + path + ": " + std::strerror(errno)};
  if (!s) ::unlink(tmpl.c_str());
  return s;
}

void ProxyRank::take_knock(std::vector<Knock>& knocks) {
  sockaddr_in from{};
  socklen_t len = sizeof from;
  int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;  // (out of descriptors: the next turn tries again; knocks time out meanwhile)
  std::uint32_t source = ntohl(from.sin_addr.s_addr);
  auto same = static_cast<std::size_t>(
      std::count_if(knocks.begin(), knocks.end(), [source](const Knock& k) { return k.source == source; }));
  if (knocks.size() >= kMaxKnocks || same >= kMaxKnocksPerSource) {
    std::uint64_t held = 0;
    if (flood_log_.allow(&held)) {
      char ip[INET_ADDRSTRLEN] = "?";
      inet_ntop(AF_INET, &from.sin_addr, ip, sizeof ip);
      LNET_LOG(Warn, kLogDaemon, "proxy: doorbell: a knock from %s refused: %zu open (%zu from it; at most %zu, %zu)%s",
               ip, knocks.size(), same, kMaxKnocks, kMaxKnocksPerSource,
               held ? (" (and " + std::to_string(held) + " more since the last line)").c_str() : "");
    }
    ::close(fd);
    return;
  }
  knocks.push_back(
      {fd, Clock::now() + std::min<Clock::duration>(kKnockTime, std::chrono::seconds(opts_.timeout)), source, {}});
}

bool ProxyRank::read_knock(Knock& k) {
  char buf[mp::kMaxLine + 1];
  for (;;) {
    ssize_t n = ::recv(k.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) return false;  // it went away (or an error): answered as it stands
    k.line.append(buf, static_cast<std::size_t>(n));
    if (k.line.find('\n') != std::string::npos || k.line.size() > mp::kMaxLine) return false;
  }
}

void ProxyRank::answer_knock(const Knock& k) {
  auto nl = k.line.find('\n');
  auto knock = nl == std::string::npos ? Result<mp::Knock>(Failure{-EPROTO, "doorbell: no complete line"})
                                       : mp::parse_knock(std::string_view(k.line).substr(0, nl + 1));
  std::string why;
  if (!knock)
    why = knock.message();
  else if (knock->kind != mp::Knock::Client)
    why = "a proxy rank's line from a client";
  else if (!mp::same_secret(knock->secret, secret_))
    why = "a knock without this proxy's secret (it is in the port file, for those who may read it)";
  if (why.empty()) return on_client(k.fd, knock->value);
  std::uint64_t held = 0;
  if (knock_log_.allow(&held))
    LNET_LOG(Warn, kLogDaemon, "proxy: doorbell: %s%s", why.c_str(),
             held ? (" (and " + std::to_string(held) + " refused since the last line)").c_str() : "");
  (void)mp::write_line(k.fd, mp::format_answer({mp::Answer::Error, why}), Clock::now() + std::chrono::seconds(1));
}

std::vector<ProxyRank::Knock> ProxyRank::answer_knocks(const std::vector<Knock>& knocks,
                                                       std::span<const pollfd> polled) {
  std::vector<Knock> waiting;
  for (std::size_t i = 0; i < knocks.size(); ++i) {
    Knock k = knocks[i];
    bool more = !polled[i].revents || read_knock(k);
    if (more && Clock::now() < k.deadline) {
      waiting.push_back(std::move(k));
      continue;
    }
    if (!more) answer_knock(k);  // (one that ran out of time is closed without a word)
    ::close(k.fd);
  }
  return waiting;
}

}  // namespace lnet::proxy
