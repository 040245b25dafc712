// The UP LND against a proxy that means harm, or is merely greedy (issue 52): the shared
// region cannot be resized under lnetd, a proxy's messages and pids are bounded, it
// speaks only for its applications' ranks, and a connection that never says HELLO, or
// one too many, is closed. Each test fails without the limit it checks.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <thread>

#include <cerrno>
#include <cstring>

#include "uplnd_fixture.hpp"

namespace lnet::up {
namespace {

class UpLndHostile : public UpLndTest {};

// A connection to the bridge that sends nothing (not even a HELLO).
int raw_connect(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether lnetd closed `fd` within 10 s (a read sees end of file).
bool closed_by_lnetd(int fd) {
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::uint8_t buf[kMaxFrame];
  return ::recv(fd, buf, sizeof buf, 0) == 0;
}

// A proxy that tries to shrink or grow the region (so that lnetd's next copy into it
// dies of SIGBUS) is refused by the kernel: the region is sealed. lnetd goes on.
TEST_F(UpLndHostile, TheRegionCannotBeResizedByAProxy) {
  start();
  int fd = client->region().fd();
  errno = 0;
  EXPECT_NE(ftruncate(fd, 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate(fd, static_cast<off_t>(opts.region_size) * 2), 0);
  EXPECT_EQ(errno, EPERM);
  // A PUT into lnetd's own memory crosses a bounce buffer of the region: lnetd copies it.
  Pid pid = new_pid();
  std::vector<char> buf(8192, 0);
  EventLog log;
  MdHandle md = sink(*lnetd, buf, log);
  client->send(Parse{77, pid, 0, kRank0, put_header(kUpNid, kPidLustre, pid, 5000)}).or_throw();
  auto m = next(Type::Recv);
  ASSERT_TRUE(m);
  const Recv& r = std::get<Recv>(*m);
  std::memset(client->region().at(r.offset, r.mlen), 's', r.mlen);
  client->send(RecvDone{r.desc, 0, 0}).or_throw();
  ASSERT_TRUE(log.wait_unlinked(md));
  EXPECT_EQ(buf[4999], 's');
}

// A proxy's PARSEs beyond its credits are dropped (the proxy is told to discard the
// payload; an inline one is simply not taken), counted, and taken again once lnetd
// holds fewer.
TEST_F(UpLndHostile, ParsesBeyondAProxysCreditsAreDropped) {
  opts.proxy_credits = 4;
  start();
  Pid pid = new_pid();
  std::vector<char> buf(65536, 0);
  EventLog log;
  auto me = lnetd->me_attach(kPortal, ProcessId::any(), 0, ~0ULL, Unlink::Retain, InsPos::After).value();
  MdDesc d;
  d.start = buf.data();
  d.length = buf.size();
  d.options = kMdOpPut | kMdTruncate;
  d.handler = log.handler();
  ASSERT_TRUE(lnetd->md_attach(me, d, Unlink::Retain));
  auto parse = [&](std::uint64_t cookie) {
    client->send(Parse{cookie, pid, 0, kRank0, put_header(kUpNid, kPidLustre, pid, 1000)}).or_throw();
    auto m = next(Type::Recv);
    EXPECT_TRUE(m);
    return m ? std::get<Recv>(*m) : Recv{};
  };
  std::vector<Recv> held;
  for (std::uint64_t c = 1; c <= 4; ++c) {
    held.push_back(parse(c));
    EXPECT_EQ(held.back().status, 0);
  }
  Recv dropped = parse(5);
  EXPECT_EQ(dropped.cookie, 5u);
  EXPECT_EQ(dropped.status, -ENOBUFS);
  // An inline PARSE over the credits: nothing comes back for it; the next RECV is 6's.
  Parse in{0, pid, kParseInline, kRank0, put_header(kUpNid, kPidLustre, pid, 10)};
  client->send(in).or_throw();
  Recv six = parse(6);
  EXPECT_EQ(six.cookie, 6u);
  EXPECT_EQ(six.status, -ENOBUFS);
  EXPECT_EQ(up->stats().dropped, 3u);
  // One finished: one more is taken.
  client->send(RecvDone{held[0].desc, 0, 0}).or_throw();
  Recv seven = parse(7);
  EXPECT_EQ(seven.cookie, 7u);
  EXPECT_EQ(seven.status, 0);
  EXPECT_EQ(up->stats().dropped, 3u);
}

// lnetd's descriptors in all are bounded too: a message to an application that would
// need one more fails at once.
TEST_F(UpLndHostile, MessagesBeyondLnetdsDescriptorsFail) {
  opts.max_descs = 2;
  start();
  Pid pid = new_pid();
  std::vector<char> buf(65536, 0);
  EventLog rlog;
  MdHandle rmd = sink(*lnetd, buf, rlog);
  (void)rmd;
  client->send(Parse{1, pid, 0, kRank0, put_header(kUpNid, kPidLustre, pid, 1000)}).or_throw();
  ASSERT_EQ(std::get<Recv>(*next(Type::Recv)).status, 0);
  auto data = pattern(100, 'x');
  EventLog log;
  MdHandle one = source(*lnetd, data, log);
  ASSERT_EQ(lnetd->put(Nid::any(), one, AckReq::NoAck, ProcessId{kRank0, pid}, kPortal, 0, 0, 0), 0);
  ASSERT_TRUE(next(Type::Send));  // the second descriptor
  EventLog log2;
  MdHandle two = source(*lnetd, data, log2);
  (void)lnetd->put(Nid::any(), two, AckReq::NoAck, ProcessId{kRank0, pid}, kPortal, 0, 0, 0);
  ASSERT_TRUE(log2.wait_unlinked(two));
  EXPECT_NE(log2.find(EventType::Send)->status, 0);  // the driver said -ENOMEM
}

// A proxy may hold so many application pids and no more: beyond, PID_NEW and
// PID_REGISTER are answered -ENOSPC (not refused: the proxy did nothing wrong).
TEST_F(UpLndHostile, PidsBeyondTheLimitAreAnsweredENOSPC) {
  opts.proxy_pids = 2;
  start();
  EXPECT_NE(new_pid(), 0u);
  EXPECT_NE(new_pid(), 0u);
  client->send(PidNew{12, 4}).or_throw();
  EXPECT_EQ(std::get<PidReply>(*next(Type::PidReply)).status, -ENOSPC);
  client->send(PidRegister{13, kPidUserFlag | 4000, 4}).or_throw();
  EXPECT_EQ(std::get<PidReply>(*next(Type::PidReply)).status, -ENOSPC);
  EXPECT_EQ(up->stats().pids, 2u);
  EXPECT_EQ(up->stats().bad_messages, 0u);
}

// A proxy speaks for its applications' ranks only: a PARSE whose sender is not one, or
// whose header names another source, and a NOTIFY about another node, are refused.
TEST_F(UpLndHostile, AProxyCannotSpeakForOtherNodes) {
  start();
  Pid pid = new_pid();  // 4 ranks: 0..3@mpi
  const Nid rank7 = Nid::make(kMpi, 7), node = Nid::make(kMpi, 0x0a000005);
  client->send(Parse{1, pid, 0, rank7, put_header(kUpNid, kPidLustre, pid, 0)}).or_throw();
  std::string why = std::get<Error>(*next(Type::Error)).text;
  EXPECT_NE(why.find("PARSE from 7@mpi, not a rank of pid"), std::string::npos) << why;
  Header forged = put_header(kUpNid, kPidLustre, pid, 0);
  forged.src_nid = node;
  client->send(Parse{2, pid, 0, kRank0, forged}).or_throw();
  why = std::get<Error>(*next(Type::Error)).text;
  EXPECT_NE(why.find("PARSE of a message from 10.0.0.5@mpi sent by 0@mpi"), std::string::npos) << why;
  client->send(Notify{pid, node, false}).or_throw();
  why = std::get<Error>(*next(Type::Error)).text;
  EXPECT_NE(why.find("NOTIFY for 10.0.0.5@mpi, not a rank of pid"), std::string::npos) << why;
  client->send(Notify{pid, rank7, false}).or_throw();
  EXPECT_TRUE(next(Type::Error));
  // Its own rank: taken (no answer); the next message's answer is the next thing read.
  client->send(Notify{pid, Nid::make(kMpi, 3), false}).or_throw();
  client->send(PidNew{14, 1}).or_throw();
  EXPECT_TRUE(next(Type::PidReply));
  EXPECT_EQ(up->stats().bad_messages, 4u);
}

// A connection that never says HELLO is closed when its time is up, and counted.
TEST_F(UpLndHostile, AConnectionWithoutAHelloIsClosed) {
  opts.hello_timeout = 200ms;
  start();
  int fd = raw_connect(opts.bridge);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(closed_by_lnetd(fd));
  ::close(fd);
  EXPECT_EQ(up->stats().hello_timeouts, 1u);
  EXPECT_NE(new_pid(), 0u);  // the proxy that did say HELLO is served
}

// Connections beyond max_proxies are closed at once and counted; a place that frees
// is taken again.
TEST_F(UpLndHostile, ConnectionsBeyondTheLimitAreClosed) {
  opts.max_proxies = 2;
  start();  // one
  int second = raw_connect(opts.bridge);
  ASSERT_GE(second, 0);
  int third = raw_connect(opts.bridge);
  ASSERT_GE(third, 0);
  EXPECT_TRUE(closed_by_lnetd(third));
  ::close(third);
  EXPECT_EQ(up->stats().over_limit, 1u);
  ::close(second);
  for (int i = 0; i < 500 && up->stats().proxies != 1; ++i) std::this_thread::sleep_for(10ms);
  auto other = BridgeClient::connect(opts.bridge, 1, 5s);
  EXPECT_TRUE(other) << other.message();
}

}  // namespace
}  // namespace lnet::up
