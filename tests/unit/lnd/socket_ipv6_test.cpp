// The socket LND on IPv6 (large NIDs): an NI on ::1 listens there and answers a peer's
// version-2 acceptor request and V4 HELLO in V4; a V3 HELLO, or a V4 one naming a classic
// NID, is refused on IPv6 and counted. (Two hosts talking IPv6 end to end:
// tests/integration/ipv6.sh, in namespaces.)
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include <lnet/dlc.hpp>
#include <lnet/lnet.hpp>

#include "lnd/socket/sock_wire.hpp"
#include "support/lnd_counter.hpp"

namespace lnet {
namespace {

constexpr int kPort = 12991;       // one test process binds [::1] on it
constexpr int kLargePort = 12992;  // and another, in parallel, on this one
const Nid kLocal = *Nid::parse("::1@tcp");

std::uint64_t counter(Instance& i, const std::string& name) { return test::lnd_counter(i, name); }

// A connection to [::1]:kPort that sends `out` and reads until the server hangs up or
// `want` bytes came (5 s at most): what it answered.
std::vector<std::uint8_t> exchange(const std::vector<std::uint8_t>& out, std::size_t want) {
  std::vector<std::uint8_t> in;
  int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 to{};
  to.sin6_family = AF_INET6;
  to.sin6_addr = in6addr_loopback;
  to.sin6_port = htons(kPort);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ADD_FAILURE() << "connect to [::1]:" << kPort << ": " << std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return in;
  }
  EXPECT_EQ(::send(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (in.size() < want && std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    std::uint8_t buf[256];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.insert(in.end(), buf, buf + n);
  }
  ::close(fd);
  return in;
}

std::vector<std::uint8_t> request(const sock::Hello& h) {
  std::vector<std::uint8_t> out(sock::kConnReqV2Size);
  sock::encode_connreq_v2(kLocal, std::span<std::uint8_t, sock::kConnReqV2Size>(out.data(), out.size()));
  auto hello = sock::encode_hello(h);
  out.insert(out.end(), hello.begin(), hello.end());
  return out;
}

sock::Hello decode(const std::vector<std::uint8_t>& in) {
  EXPECT_GE(in.size(), sock::kHelloPrefixSize);
  if (in.size() < sock::kHelloPrefixSize) return {};
  auto p = sock::decode_hello_prefix(std::span<const std::uint8_t, sock::kHelloPrefixSize>(in.data(), 8));
  EXPECT_TRUE(p) << p.message();
  if (!p) return {};
  std::uint32_t nips = 0;
  auto h = sock::decode_hello_body(*p, std::span(in.data() + 8, in.size() - 8), &nips);
  EXPECT_TRUE(h) << h.message();
  return h ? *h : sock::Hello{};
}

TEST(SocketIpv6, AnNiOnAnIpv6AddressSpeaksV4AndRefusesTheOthers) {
  SocketParams sp;
  sp.port = kPort;
  sp.accept = AcceptMode::All;
  sp.timeout = 5;
  set_socket_params(sp);
  Config cfg;
  NetConfig nc;
  nc.net = NetId::make(kSockLnd, 0);
  nc.nid = kLocal;
  cfg.nets.push_back(nc);
  auto made = Instance::create(cfg, kPidLustre);
  if (!made && made.code() == -EADDRNOTAVAIL) GTEST_SKIP() << "no IPv6 on this host: " << made.message();
  ASSERT_TRUE(made) << made.message();
  Instance& lnet = **made;
  EXPECT_EQ(lnet.control().ni_info()[1].nid, kLocal);

  sock::Hello h;
  h.version = sock::kProtoV4;
  h.src_nid = *Nid::parse("2001:db8::5@tcp");
  h.dst_nid = kLocal;
  h.src_pid = h.dst_pid = kPidLustre;
  h.src_incarnation = 7;
  h.ctype = sock::ConnType::BulkOut;
  sock::Hello reply = decode(exchange(request(h), sock::kHelloPrefixSize + sock::kHelloV4BodySize));
  EXPECT_EQ(reply.version, sock::kProtoV4);
  EXPECT_EQ(reply.src_nid, kLocal);
  EXPECT_EQ(reply.ctype, sock::ConnType::BulkIn) << "taken, as the inverse type";
  EXPECT_EQ(counter(lnet, "conns_refused_protocol"), 0u);

  // V3 offered on IPv6: answered in V4 with no connection type.
  sock::Hello v3 = h;
  v3.version = sock::kProtoV3;
  v3.src_nid = *Nid::parse("10.0.0.5@tcp");
  v3.dst_nid = Nid::make(NetId::make(kSockLnd, 0), 1);
  reply = decode(exchange(request(v3), sock::kHelloPrefixSize + sock::kHelloV4BodySize));
  EXPECT_EQ(reply.version, sock::kProtoV4);
  EXPECT_EQ(reply.ctype, sock::ConnType::None);
  EXPECT_EQ(counter(lnet, "conns_refused_protocol"), 1u);

  // A V4 HELLO whose NID is classic does not fit an IPv6 connection: hung up on.
  sock::Hello small = h;
  small.src_nid = *Nid::parse("10.0.0.5@tcp");
  EXPECT_TRUE(exchange(request(small), 1).empty()) << "no answer";
  EXPECT_EQ(counter(lnet, "conns_refused_protocol"), 2u);
  set_socket_params(SocketParams{});
}

// An NI given an interface takes its IPv4 address; after `lnet configure --large` (or
// with Config::large_nids, lnetd --large) its IPv6 one, as the kernel enumerates IPv6
// addresses first then. lo holds 127.0.0.1 and ::1.
TEST(SocketIpv6, LnetConfigureLargeMakesAnInterfaceTakeItsIpv6Address) {
  SocketParams sp;
  sp.port = kLargePort;
  sp.accept = AcceptMode::All;
  set_socket_params(sp);
  auto add_lo = [](Instance& lnet, const char* net) {
    dlc::Request r;
    r.command = "net add";
    r.args = {{"net", {net}}, {"if", {"lo"}}};
    return dlc::execute(lnet, r);
  };
  auto nid_of = [](Instance& lnet, NetId net) {
    for (const NiInfo& i : lnet.control().ni_info())
      if (i.nid.net() == net) return i.nid;
    return Nid::any();
  };
  auto made = Instance::create(Config{}, kPidLustre);
  ASSERT_TRUE(made) << made.message();
  Instance& lnet = **made;
  ASSERT_EQ(add_lo(lnet, "tcp1").rc, 0);
  EXPECT_EQ(nid_of(lnet, NetId::make(kSockLnd, 1)), *Nid::parse("127.0.0.1@tcp1"));
  EXPECT_FALSE(lnet.control().large_nids());
  dlc::Request configure;
  configure.command = "lnet configure";
  configure.args = {{"large", {}}};
  ASSERT_EQ(dlc::execute(lnet, configure).rc, 0);
  EXPECT_TRUE(lnet.control().large_nids());
  auto r = add_lo(lnet, "tcp2");
  if (r.rc != 0 && r.text.find("no IPv6") != std::string::npos) GTEST_SKIP() << "no IPv6 on lo: " << r.text;
  ASSERT_EQ(r.rc, 0) << r.text;
  EXPECT_EQ(nid_of(lnet, NetId::make(kSockLnd, 2)), *Nid::parse("::1@tcp2"));
  EXPECT_EQ(nid_of(lnet, NetId::make(kSockLnd, 1)), *Nid::parse("127.0.0.1@tcp1")) << "an NI up stays as it is";
  made->reset();

  Config cfg;  // lnetd --large: the NIs of its configuration come up on IPv6
  cfg.large_nids = true;
  NetConfig nc;
  nc.net = NetId::make(kSockLnd, 3);
  nc.interfaces = {"lo"};
  cfg.nets.push_back(nc);
  auto large = Instance::create(cfg, kPidLustre);
  ASSERT_TRUE(large) << large.message();
  EXPECT_EQ(nid_of(**large, NetId::make(kSockLnd, 3)), *Nid::parse("::1@tcp3"));
  set_socket_params(SocketParams{});
}

}  // namespace
}  // namespace lnet
