// A hostile proxy for the bridge tests: connects to a running lnetd's bridge and sends
// what a broken or malicious proxy would, checking that every bad message is refused
// with an ERROR and that lnetd closes a connection that keeps at it.
//   bridge_probe garbage PATH   packets that are no frame, before any HELLO: ERRORs, then
//                               the connection closed
//   bridge_probe forged PATH    well-formed messages with a pid this connection did not
//                               register, descriptors out of range or stale, a length
//                               over the limit, a bad frame length, an oversized packet:
//                               each refused, and the connection still serves PID_NEW
//   bridge_probe uid PATH UID   connects as UID (run as root): closed without a WELCOME
//   bridge_probe hold PATH N    a greedy proxy (bench/flood_bench.sh): registers an
//                               application and sends N pings of lnetd (optimised GETs)
//                               whose RECV it never answers, then holds them until
//                               stdin closes; prints how many lnetd took and dropped
// Prints one line per check; exit status 0 when lnetd behaved, 1 when it did not, 2 on
// bad usage.
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <lnet/up/bridge.hpp>
#include <lnet/up/client.hpp>
#include <lnet/wire.hpp>

using namespace lnet;
using namespace lnet::up;
using namespace std::chrono_literals;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) ++failures;
}

int raw_connect(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::fprintf(stderr, "bridge_probe: cannot connect to %s: %s\n", path.c_str(), std::strerror(errno));
    std::exit(1);
  }
  timeval tv{10, 0};  // no answer within 10 s is a failure, not a hang
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

int garbage(const std::string& path) {
  int fd = raw_connect(path);
  const std::uint8_t junk[17] = {'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1', '.', '0', '\r', '\n', 0};
  // One packet at a time, its answer read before the next: a socket closed with unread
  // packets would reset the connection, and the answers queued here would be lost.
  int errors = 0, sent = 0;
  bool closed = false;
  while (sent < 100 && !closed) {
    if (::send(fd, junk, sizeof junk, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof junk)) {
      closed = errno == EPIPE || errno == ECONNRESET;
      break;
    }
    ++sent;
    std::uint8_t buf[kMaxFrame];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      closed = n == 0 || errno == ECONNRESET;
      break;
    }
    auto m = decode(std::span<const std::uint8_t>(buf, static_cast<std::size_t>(n)));
    if (m && type_of(*m) == up::Type::Error) ++errors;
  }
  if (!closed) {  // the last ERROR may have come before the close
    std::uint8_t buf[kMaxFrame];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    closed = n == 0 || (n < 0 && errno == ECONNRESET);
  }
  ::close(fd);
  check(errors >= 1,
        "garbage answered with " + std::to_string(errors) + " ERROR(s) (" + std::to_string(sent) + " packets sent)");
  check(closed, "the connection closed after repeated garbage");
  return failures ? 1 : 0;
}

Header put_header(Nid src, Pid src_pid, std::uint32_t len) {
  Header h;
  h.src_nid = src;
  h.src_pid = src_pid;
  h.dest_pid = kPidLustre;
  h.type = MsgType::Put;
  h.payload_length = len;
  h.msg.put.ack_wmd = WireHandle::none();
  h.msg.put.ptl_index = 40;
  return h;
}

// The next ERROR's text ("" when none came within 10 s).
std::string next_error(BridgeClient& c) {
  for (;;) {
    auto m = c.receive(10000);
    if (!m) return "";
    if (const up::Error* e = std::get_if<up::Error>(&*m)) return e->text;
  }
}

int forged(const std::string& path) {
  auto c = BridgeClient::connect(path, 99, 10s);
  if (!c) {
    std::fprintf(stderr, "bridge_probe: %s\n", c.message().c_str());
    return 1;
  }
  BridgeClient& b = **c;
  Nid peer = Nid::make(b.welcome().nid.net(), 0);
  Pid foreign = kPidUserFlag | 424242;
  auto refused = [&](const Message& m, const char* expect, const std::string& what) {
    if (Status s = b.send(m); !s) return check(false, what + ": " + s.message());
    std::string text = next_error(b);
    check(text.find(expect) != std::string::npos, what + " -> '" + text + "'");
  };
  refused(Parse{1, foreign, 0, peer, put_header(peer, foreign, 8)}, "did not register",
          "PARSE for a pid this proxy did not register");
  refused(PidRelease{2, foreign}, "did not register", "PID_RELEASE of a pid this proxy did not register");
  refused(Notify{foreign, peer, false}, "did not register", "NOTIFY for a pid this proxy did not register");
  refused(RecvDone{DescRef{1u << 30, 1}, 0, 0}, "descriptor", "RECV_DONE for a descriptor out of range");
  refused(SendDone{DescRef{0, 0xdeadbeef}, 0, 0}, "descriptor", "SEND_DONE for a stale descriptor");
  refused(Send{}, "lnetd's to send", "SEND, which only lnetd sends");

  // Its own pid, then a PARSE over the payload limit and one claiming another source.
  if (Status s = b.send(PidNew{7, 2}); !s) return check(false, "PID_NEW: " + s.message()), 1;
  Pid own = 0;
  for (;;) {
    auto m = b.receive(10000);
    if (!m) return check(false, "no PID_REPLY: " + m.message()), 1;
    if (const PidReply* r = std::get_if<PidReply>(&*m)) {
      own = r->pid;
      break;
    }
  }
  check(own & kPidUserFlag, "PID_NEW still served after refusals");
  refused(Parse{3, own, 0, peer, put_header(peer, own, 64u << 20)}, "payload", "PARSE of a 64 MiB payload");
  refused(Parse{4, own, 0, peer, put_header(peer, foreign, 8)}, "a message from", "PARSE naming another source pid");

  // Frames that do not decode: a length field that lies, a packet over the limit.
  std::uint8_t frame[kMaxFrame];
  std::size_t len = encode(PidNew{8, 2}, std::span<std::uint8_t, kMaxFrame>(frame, kMaxFrame));
  frame[8] ^= 0x40;  // the frame length
  (void)!::send(b.fd(), frame, len, MSG_NOSIGNAL);
  std::string text = next_error(b);
  check(!text.empty(), "a frame whose length field lies -> '" + text + "'");
  std::vector<std::uint8_t> big(4096, 0x5a);
  (void)!::send(b.fd(), big.data(), big.size(), MSG_NOSIGNAL);
  text = next_error(b);
  check(text.find("4096 bytes") != std::string::npos, "a 4096-byte packet -> '" + text + "'");
  if (Status s = b.send(PidRelease{9, own}); !s) check(false, "PID_RELEASE of its own pid: " + s.message());
  return failures ? 1 : 0;
}

int other_uid(const std::string& path, int uid) {
  pid_t child = ::fork();
  if (child < 0) return 1;
  if (child == 0) {
    if (::setgid(static_cast<gid_t>(uid)) != 0 || ::setuid(static_cast<uid_t>(uid)) != 0) _exit(3);
    int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) _exit(4);
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::uint8_t hello[kMaxFrame];
    std::size_t n = encode(Hello{}, std::span<std::uint8_t, kMaxFrame>(hello, kMaxFrame));
    (void)!::send(fd, hello, n, MSG_NOSIGNAL);
    std::uint8_t buf[kMaxFrame];
    ssize_t got = ::recv(fd, buf, sizeof buf, 0);
    _exit(got == 0 || (got < 0 && errno == ECONNRESET) ? 0 : got > 0 ? 1 : 5);  // closed, no WELCOME
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const char* what = code == 0   ? " closed without a WELCOME"
                     : code == 1 ? " was answered"
                     : code == 3 ? " could not be assumed (run as root)"
                     : code == 4 ? " could not connect (the socket's or directory's mode)"
                                 : " got no answer and no close within 10 s";
  check(code == 0, "uid " + std::to_string(uid) + what);
  return failures ? 1 : 0;
}

}  // namespace

int hold(const std::string& path, long n) {
  auto c = BridgeClient::connect(path, 0, 5s);
  if (!c) {
    std::fprintf(stderr, "bridge_probe: %s\n", c.message().c_str());
    return 1;
  }
  BridgeClient& b = **c;
  if (!b.send(PidNew{1, 1})) return 1;
  auto r = b.receive(5000);
  if (!r || type_of(*r) != Type::PidReply) return 1;
  Pid pid = std::get<PidReply>(*r).pid;
  Nid rank0 = Nid::make(b.welcome().nid.net(), 0);
  Header h;
  h.dest_nid = b.welcome().nid;
  h.src_nid = rank0;
  h.dest_pid = kPidLustre;
  h.src_pid = pid;
  h.type = MsgType::Get;
  h.msg.get.return_wmd = WireHandle{1, 1};
  h.msg.get.ptl_index = 0;  // the ping portal and its match bits
  h.msg.get.match_bits = kPingMatchBits;
  h.msg.get.sink_length = 4096;
  long taken = 0, dropped = 0;
  for (long i = 0; i < n; ++i) {
    while (!b.send(Parse{static_cast<std::uint64_t>(i + 1), pid, kParseRdma, rank0, h}))
      std::this_thread::sleep_for(1ms);
    while (auto m = b.receive(0)) {
      if (type_of(*m) != Type::Recv) continue;
      (std::get<Recv>(*m).status == 0 ? taken : dropped)++;
    }
  }
  for (auto until = std::chrono::steady_clock::now() + 5s;
       taken + dropped < n && std::chrono::steady_clock::now() < until;)
    if (auto m = b.receive(100); m && type_of(*m) == Type::Recv) (std::get<Recv>(*m).status == 0 ? taken : dropped)++;
  // What lnetd did not drop it holds: answered (a RECV written) or waiting (for a bounce
  // buffer, say).
  std::printf("held: of %ld messages lnetd holds %ld (%ld answered), dropped %ld\n", n, n - dropped, taken, dropped);
  std::fflush(stdout);
  char c1;
  while (::read(0, &c1, 1) > 0) {
  }
  return 0;
}

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 1 && (a[0] == "--help" || a[0] == "-h")) {
    std::printf("usage: bridge_probe garbage|forged PATH | bridge_probe uid PATH UID | bridge_probe hold PATH N\n");
    return 0;
  }
  if (a.size() == 2 && a[0] == "garbage") return garbage(a[1]);
  if (a.size() == 2 && a[0] == "forged") return forged(a[1]);
  if (a.size() == 3 && a[0] == "uid") return other_uid(a[1], std::atoi(a[2].c_str()));
  if (a.size() == 3 && a[0] == "hold") return hold(a[1], std::atol(a[2].c_str()));
  std::fprintf(stderr, "bridge_probe: bad arguments (--help)\n");
  return 2;
}
