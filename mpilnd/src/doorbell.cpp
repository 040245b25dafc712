// The proxy's doorbell sockets (lnet/mpi_proxy.hpp): TCP, one line at a time, every
// wait bounded by a deadline.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include <lnet/mpi_proxy.hpp>

namespace lnet::mpi::proxy {

namespace {

int ms_left(Deadline d) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - std::chrono::steady_clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits for `events` on fd until the deadline: 0, -ETIMEDOUT, or -errno.
int wait_for(int fd, short events, Deadline d) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, ms_left(d));
    if (n > 0) return 0;
    if (n == 0) return -ETIMEDOUT;
    if (errno != EINTR) return -errno;
  }
}

Failure sys_failure(const std::string& what, int err) { return Failure{-err, what + ": " + std::strerror(err)}; }

Result<sockaddr_in> parse_addr(std::string_view addr) {
  auto colon = addr.rfind(':');
  if (colon == std::string_view::npos) return Failure{-EINVAL, "doorbell '" + std::string(addr) + "': no ':<port>'"};
  std::string ip(addr.substr(0, colon));
  std::string_view port_text = addr.substr(colon + 1);
  unsigned port = 0;
  auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (ec != std::errc() || p != port_text.data() + port_text.size() || port == 0 || port > 65535)
    return Failure{-EINVAL, "doorbell '" + std::string(addr) + "': bad port"};
  if (inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1)
    return Failure{-EINVAL, "doorbell '" + std::string(addr) + "': not an IPv4 address"};
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  return sa;
}

}  // namespace

Result<int> listen_doorbell(const std::string& ip, std::string* addr) {
  auto sa = parse_addr(ip + ":1");
  if (!sa) return sa.failure();
  sa->sin_port = 0;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return sys_failure("doorbell socket", errno);
  socklen_t len = sizeof *sa;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&*sa), sizeof *sa) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&*sa), &len) != 0) {
    int err = errno;
    ::close(fd);
    return sys_failure("doorbell on " + ip, err);
  }
  *addr = ip + ":" + std::to_string(ntohs(sa->sin_port));
  return fd;
}

Result<int> dial_doorbell(std::string_view addr, Deadline deadline) {
  auto sa = parse_addr(addr);
  if (!sa) return sa.failure();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return sys_failure("doorbell socket", errno);
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&*sa), sizeof *sa) == 0 ? 0 : errno;
  if (rc == EINPROGRESS) {
    rc = -wait_for(fd, POLLOUT, deadline);
    socklen_t len = sizeof rc;
    if (rc == 0 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &len) != 0) rc = errno;
  }
  if (rc != 0) {
    ::close(fd);
    if (rc == ETIMEDOUT) return Failure{-ETIMEDOUT, "the proxy's doorbell " + std::string(addr) + " does not answer"};
    return sys_failure("the proxy's doorbell " + std::string(addr), rc);
  }
  return fd;
}

Status write_line(int fd, std::string_view line, Deadline deadline) {
  while (!line.empty()) {
    ssize_t n = ::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      line.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return sys_failure("doorbell write", errno);
    if (int rc = wait_for(fd, POLLOUT, deadline); rc < 0) return Failure{rc, "doorbell write: timed out"};
  }
  return {};
}

Result<std::string> read_line(int fd, Deadline deadline) {
  std::string line;
  while (line.size() < kMaxLine) {
    char c;
    ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
    if (n == 1) {
      line.push_back(c);
      if (c == '\n') return line;
      continue;
    }
    if (n == 0) return Failure{-ECONNRESET, "doorbell: the other end closed the connection"};
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return sys_failure("doorbell read", errno);
    if (int rc = wait_for(fd, POLLIN, deadline); rc < 0)
      return Failure{rc, rc == -ETIMEDOUT ? "doorbell: no answer in time" : "doorbell read failed"};
  }
  return Failure{-EPROTO, "doorbell: a line longer than " + std::to_string(kMaxLine) + " bytes"};
}

}  // namespace lnet::mpi::proxy
