// The fixture of the UP LND's tests: lnetd (liblnet's core with the UP LND) and this test
// as the proxy (the bridge client), with helpers to register pids and make MDs.
#pragma once

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <lnet/lnet.hpp>
#include <lnet/up/client.hpp>
#include <lnet/up/uplnd.hpp>

#include "support/event_log.hpp"
#include "support/fabric.hpp"

namespace lnet::up {
namespace {

using namespace std::chrono_literals;
using test::EventLog;
using test::Fabric;

constexpr unsigned kPortal = 8;
const NetId kMpi = NetId::make(kMpiLnd, 0);
const Nid kUpNid = Nid::make(kMpi, 0x7f000002);  // 127.0.0.2@mpi
const Nid kRank0 = Nid::make(kMpi, 0);           // 0@mpi: an application rank

[[maybe_unused]] Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }

Header put_header(Nid dst, Pid dst_pid, Pid src_pid, std::uint32_t len) {
  Header h;
  h.dest_nid = dst;
  h.src_nid = kRank0;
  h.dest_pid = dst_pid;
  h.src_pid = src_pid;
  h.type = MsgType::Put;
  h.payload_length = len;
  h.msg.put.ack_wmd = WireHandle::none();
  h.msg.put.ptl_index = kPortal;
  return h;
}

std::vector<char> pattern(std::size_t n, char seed) {
  std::vector<char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<char>(seed + i * 7);
  return v;
}

class UpLndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lnet-up-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
    opts.bridge = dir + "/bridge.sock";
    opts.region_size = 64u << 20;
    opts.bounce_large = 4;
  }
  void TearDown() override {
    client.reset();
    router.reset();
    server.reset();
    lnetd.reset();
    std::filesystem::remove_all(dir);
  }
  // lnetd: the UP NI 127.0.0.2@mpi (and, for routing, gni address 3).
  void start(bool with_gni = false) {
    up = std::make_shared<UpLnd>(opts);
    Config c = with_gni ? test::fabric_config({3}) : Config{};
    NetConfig n;
    n.net = kMpi;
    n.nid = kUpNid;
    c.nets.push_back(n);
    lnetd = Instance::create(c, kPidLustre, {up}).value();
    up->set_nets({NetId::make(kGniLnd, 0)});
    client = BridgeClient::connect(opts.bridge, 0, 5s).value();
  }
  // A raw connection to the bridge, for a forked child acting as a proxy (no allocation,
  // no locks); -1 when it cannot connect.
  int dial_bridge() const {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, opts.bridge.c_str(), sizeof a.sun_path - 1);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
    return fd;
  }
  // lnetd routes between mpi (this test as the proxy) and a server on gni (address 4).
  void start_router() {
    Fabric::install();
    start(true);
    server = Instance::create(test::fabric_config({4}), kPidLustre).value();
    for (Instance* i : {lnetd.get(), server.get()})
      i->control().set_global("alive_router_check_interval", 0).or_throw();
    ASSERT_TRUE(server->control().add_route(RouteConfig{kMpi, gni(3), -1, 0}));
    ASSERT_TRUE(lnetd->control().set_routing(true));
  }
  // A routed PUT of `len` bytes from the application: its RECV (a router buffer in place).
  std::optional<Recv> routed_recv(Pid pid, std::uint64_t cookie, std::uint32_t len) {
    client->send(Parse{cookie, pid, 0, kRank0, put_header(gni(4), kPidLustre, pid, len)}).or_throw();
    auto m = next(Type::Recv);
    if (!m) return std::nullopt;
    return std::get<Recv>(*m);
  }
  std::optional<Message> next(Type want) {
    auto m = client->receive(5000);
    EXPECT_TRUE(m) << "waiting for " << type_name(want) << ": " << m.message();
    if (!m) return std::nullopt;
    EXPECT_EQ(type_of(*m), want) << "got " << type_name(type_of(*m))
                                 << (type_of(*m) == Type::Error ? ": " + std::get<Error>(*m).text : "");
    if (type_of(*m) != want) return std::nullopt;
    return *m;
  }
  Pid new_pid() {
    client->send(PidNew{11, 4}).or_throw();
    auto r = next(Type::PidReply);
    if (!r) return 0;
    const PidReply& p = std::get<PidReply>(*r);
    EXPECT_EQ(p.cookie, 11u);
    EXPECT_EQ(p.status, 0);
    EXPECT_EQ(p.nid, kUpNid);
    return p.pid;
  }
  MdHandle sink(Instance& lnet, std::vector<char>& buf, EventLog& log) {
    auto me = lnet.me_attach(kPortal, ProcessId::any(), 0, ~0ULL, Unlink::Unlink, InsPos::After).value();
    MdDesc d;
    d.start = buf.data();
    d.length = buf.size();
    d.options = kMdOpPut | kMdTruncate;
    d.threshold = 1;
    d.handler = log.handler();
    return lnet.md_attach(me, d, Unlink::Unlink).value();
  }
  MdHandle source(Instance& lnet, std::vector<char>& buf, EventLog& log) {
    MdDesc d;
    d.start = buf.data();
    d.length = buf.size();
    d.threshold = 1;
    d.handler = log.handler();
    return lnet.md_bind(d, Unlink::Unlink).value();
  }

  std::string dir;
  UpOptions opts;
  std::shared_ptr<UpLnd> up;
  std::unique_ptr<Instance> lnetd, router, server;
  std::unique_ptr<BridgeClient> client;
};

}  // namespace
}  // namespace lnet::up
