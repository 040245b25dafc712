#include <lnet/up/client.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lnet::up {

namespace {

int wait_readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    int n = poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    return n == 0 ? -ETIMEDOUT : 0;
  }
}

}  // namespace

Result<std::unique_ptr<BridgeClient>> BridgeClient::connect(const std::string& path, std::uint32_t rank,
                                                            std::chrono::milliseconds timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    return Failure{-ENAMETOOLONG, "bridge socket path '" + path + "' is empty or longer than 107 bytes"};
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  std::unique_ptr<BridgeClient> c(new BridgeClient());
  c->path_ = path;
  c->fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (c->fd_ < 0) return Failure{-errno, "socket: " + errno_string(errno)};
  if (::connect(c->fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    return Failure{-e, "cannot connect to the lnetd bridge " + path + ": " + errno_string(e) +
                           (e == ENOENT || e == ECONNREFUSED ? " (is lnetd running with an mpi net?)" : "")};
  }
  Hello h;
  h.rank = rank;
  h.os_pid = static_cast<std::uint64_t>(getpid());
  if (Status s = c->send(h); !s) return Failure{s.code(), "HELLO to the bridge " + path + ": " + s.message()};
  if (int rc = wait_readable(c->fd_, static_cast<int>(timeout.count())); rc < 0)
    return Failure{rc, "no WELCOME from the bridge " + path + ": " + errno_string(rc)};
  std::uint8_t buf[kMaxFrame + 1];
  int passed = -1;
  long n = receive_frame(c->fd_, buf, &passed, 0);
  if (n <= 0) {
    if (passed >= 0) ::close(passed);
    return Failure{-ECONNRESET, "the bridge " + path + " closed the connection (is this user permitted?)"};
  }
  auto m = decode(std::span<const std::uint8_t>(buf, std::min(static_cast<std::size_t>(n), sizeof buf)));
  if (!m || !std::holds_alternative<Welcome>(*m)) {
    if (passed >= 0) ::close(passed);
    std::string why = !m ? m.message()
                         : (std::holds_alternative<Error>(*m) ? std::get<Error>(*m).text
                                                              : std::string(type_name(type_of(*m))) + " instead");
    return Failure{-EPROTO, "the bridge " + path + " did not welcome us: " + why};
  }
  c->welcome_ = std::get<Welcome>(*m);
  if (passed < 0) return Failure{-EPROTO, "the bridge " + path + " sent no shared region"};
  auto region = Region::attach(passed, c->welcome_.region_size);
  if (!region) return Failure{region.code(), "the bridge " + path + ": " + region.message()};
  c->region_ = std::move(*region);
  return c;
}

BridgeClient::~BridgeClient() {
  if (fd_ >= 0) ::close(fd_);
}

Status BridgeClient::send(const Message& m) {
  std::uint8_t frame[kMaxFrame];
  std::size_t len = encode(m, std::span<std::uint8_t, kMaxFrame>(frame, kMaxFrame));
  MutexLock g(send_mu_);
  for (;;) {
    ssize_t n = ::send(fd_, frame, len, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(len)) return {};
    if (n < 0 && errno == EINTR) continue;
    int e = n < 0 ? errno : EIO;
    return Failure{-e, std::string(type_name(type_of(m))) + " to the bridge " + path_ + ": " + errno_string(e)};
  }
}

Result<Message> BridgeClient::receive(int timeout_ms) {
  if (timeout_ms != 0)
    if (int rc = wait_readable(fd_, timeout_ms); rc < 0) return Failure{rc, errno_string(rc)};
  std::uint8_t buf[kMaxFrame + 1];
  int passed = -1;
  long n = receive_frame(fd_, buf, &passed, timeout_ms == 0 ? MSG_DONTWAIT : 0);
  if (n < 0 && timeout_ms == 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Failure{-ETIMEDOUT, {}};
  if (passed >= 0) ::close(passed);
  if (n == 0) return Failure{-ECONNRESET, "lnetd closed the bridge " + path_};
  if (n < 0) return Failure{-errno, "the bridge " + path_ + ": " + errno_string(errno)};
  if (static_cast<std::size_t>(n) > kMaxFrame)
    return Failure{-EPROTO, "a " + std::to_string(n) + "-byte packet from the bridge " + path_};
  return decode(std::span<const std::uint8_t>(buf, static_cast<std::size_t>(n)));
}

void BridgeClient::shutdown() { (void)::shutdown(fd_, SHUT_RDWR); }

}  // namespace lnet::up
