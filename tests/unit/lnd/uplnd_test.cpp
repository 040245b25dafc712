// The UP LND under liblnet's core, with this test as the proxy (the bridge client): pids,
// the Receive and Send paths with their descriptors, payloads in place in the shared
// region when they are router buffers and through a bounce buffer when they are lnetd's
// own, a proxy that goes away, bad messages and uids that may not connect.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <thread>

#include <cstring>
#include <filesystem>

#include <lnet/lnet.hpp>
#include <lnet/up/client.hpp>
#include <lnet/up/uplnd.hpp>

#include "support/event_log.hpp"
#include "support/fabric.hpp"
#include "uplnd_fixture.hpp"

namespace lnet::up {
namespace {

TEST_F(UpLndTest, WelcomeNamesTheNiTheNetsAndTheRegion) {
  start();
  const Welcome& w = client->welcome();
  EXPECT_EQ(w.nid, kUpNid);
  EXPECT_EQ(w.pid, kPidLustre);
  EXPECT_EQ(w.region_size, opts.region_size);
  EXPECT_EQ(client->region().size(), opts.region_size);
  ASSERT_EQ(w.nnets, 1u);
  EXPECT_EQ(w.nets[0], NetId::make(kGniLnd, 0));
  struct stat st {};
  ASSERT_EQ(stat(opts.bridge.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // root only: no group configured
  EXPECT_EQ(up->stats().proxies, 1u);
}

TEST_F(UpLndTest, PidsAreFreshUserPidsOwnedByOneProxy) {
  start();
  Pid a = new_pid(), b = new_pid();
  EXPECT_TRUE(a & kPidUserFlag);
  EXPECT_NE(a, b);
  // Another proxy (another rank of the job) registers what rank 0 got; a third may not.
  auto other = BridgeClient::connect(opts.bridge, 1, 5s).value();
  Pid fresh = kPidUserFlag | 4000;
  other->send(PidRegister{1, fresh, 4}).or_throw();
  auto r = other->receive(5000);
  ASSERT_TRUE(r);
  EXPECT_EQ(std::get<PidReply>(*r).status, 0);
  client->send(PidRegister{2, fresh, 4}).or_throw();
  EXPECT_EQ(std::get<PidReply>(*next(Type::PidReply)).status, -EEXIST);
  client->send(PidRegister{3, kPidLustre, 4}).or_throw();  // not an application pid
  EXPECT_NE(std::get<Error>(*next(Type::Error)).text.find("not an application pid"), std::string::npos);
  EXPECT_EQ(up->stats().pids, 3u);
  other.reset();  // its pid goes with it
  for (int i = 0; i < 500 && up->stats().pids != 2; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(up->stats().pids, 2u);
  client->send(PidRelease{4, a}).or_throw();
  EXPECT_EQ(std::get<PidReply>(*next(Type::PidReply)).status, 0);
  EXPECT_EQ(up->stats().pids, 1u);
}

// The MPI network on a type the kernel names (a site's choice, so that its Lustre servers
// can route to it): the UP LND serves it as it serves mpi, and an application's rank
// there reaches lnetd.
TEST_F(UpLndTest, ServesAnMpiNetworkOfAKernelType) {
  const NetId kfi9 = *NetId::parse("kfi9");
  const Nid up_nid = Nid::make(kfi9, 0x7f000002), rank0 = Nid::make(kfi9, 0);
  up = std::make_shared<UpLnd>(opts);
  Config c;
  NetConfig n;
  n.net = kfi9;
  n.nid = up_nid;
  c.nets.push_back(n);
  lnetd = Instance::create(c, kPidLustre, {up}).value();
  EXPECT_EQ(up_nid.to_string(), "2130706434@kfi9");
  client = BridgeClient::connect(opts.bridge, 0, 5s).value();
  EXPECT_EQ(client->welcome().nid, up_nid);
  client->send(PidNew{11, 4}).or_throw();
  auto r = next(Type::PidReply);
  ASSERT_TRUE(r);
  Pid pid = std::get<PidReply>(*r).pid;
  std::vector<char> buf(4096, 0);
  EventLog log;
  MdHandle md = sink(*lnetd, buf, log);
  Header h = put_header(up_nid, kPidLustre, pid, 100);
  h.src_nid = rank0;
  client->send(Parse{78, pid, 0, rank0, h}).or_throw();
  auto m = next(Type::Recv);
  ASSERT_TRUE(m);
  const Recv& rv = std::get<Recv>(*m);
  std::memset(client->region().at(rv.offset, rv.mlen), 'k', rv.mlen);
  client->send(RecvDone{rv.desc, 0, 0}).or_throw();
  ASSERT_TRUE(log.wait_unlinked(md));
  auto put = log.find(EventType::Put);
  ASSERT_TRUE(put);
  EXPECT_EQ(put->initiator, (ProcessId{rank0, pid}));
  EXPECT_EQ(buf[99], 'k');
  // Its tunables are the mpi type's (the LND timeout is shown, not taken).
  NetConfig timed;
  timed.net = NetId::make(kKfiLnd, 10);
  timed.lnd_tunables.values["timeout"] = 5;
  auto refused = lnetd->control().add_ni(timed);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("not supported yet: an LND timeout on kfi10"), std::string::npos)
      << refused.message();
}

// A PUT from an application to lnetd's own MD: the payload comes through a bounce buffer.
TEST_F(UpLndTest, ReceivePathIntoLnetdsOwnMemoryThroughABounce) {
  start();
  Pid pid = new_pid();
  std::vector<char> buf(8192, 0);
  EventLog log;
  MdHandle md = sink(*lnetd, buf, log);
  auto data = pattern(5000, 'a');
  client->send(Parse{77, pid, 0, kRank0, put_header(kUpNid, kPidLustre, pid, 5000)}).or_throw();
  auto m = next(Type::Recv);
  ASSERT_TRUE(m);
  const Recv& r = std::get<Recv>(*m);
  EXPECT_EQ(r.cookie, 77u);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.mlen, 5000u);
  EXPECT_EQ(r.rlen, 5000u);
  char* at = client->region().at(r.offset, r.mlen);
  ASSERT_NE(at, nullptr);
  std::memcpy(at, data.data(), data.size());
  client->send(RecvDone{r.desc, 0, 0}).or_throw();
  ASSERT_TRUE(log.wait_unlinked(md));
  auto put = log.find(EventType::Put);
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 0);
  EXPECT_EQ(put->mlength, 5000u);
  EXPECT_EQ(put->initiator, (ProcessId{kRank0, pid}));
  EXPECT_EQ(std::memcmp(buf.data(), data.data(), data.size()), 0);
  UpStats s = up->stats();
  EXPECT_EQ(s.parses, 1u);
  EXPECT_EQ(s.copies, 1u);
  EXPECT_EQ(s.in_place, 0u);
  // The same descriptor again is stale: refused.
  client->send(RecvDone{r.desc, 0, 0}).or_throw();
  EXPECT_NE(std::get<Error>(*next(Type::Error)).text.find("not one of this proxy's active ones"), std::string::npos);
}

// The immediate receive: the payload comes in the PARSE; lnetd sends no RECV and wants
// no RECV_DONE.
TEST_F(UpLndTest, InlineParseIsReceivedWithoutARecv) {
  start();
  Pid pid = new_pid();
  std::vector<char> buf(64, 0);
  EventLog log;
  MdHandle md = sink(*lnetd, buf, log);
  Parse p{0, pid, kParseInline, kRank0, put_header(kUpNid, kPidLustre, pid, 12)};
  std::memcpy(p.data, "twelve bytes", 12);
  client->send(p).or_throw();
  ASSERT_TRUE(log.wait_unlinked(md));
  auto put = log.find(EventType::Put);
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 0);
  EXPECT_EQ(put->mlength, 12u);
  EXPECT_EQ(std::string(buf.data(), 12), "twelve bytes");
  // Had a RECV gone out, it would come before this answer.
  client->send(PidNew{5, 4}).or_throw();
  auto m = client->receive(5000);
  ASSERT_TRUE(m);
  EXPECT_EQ(type_of(*m), Type::PidReply);
  UpStats s = up->stats();
  EXPECT_EQ(s.inlined, 1u);
  EXPECT_EQ(s.copies, 0u);
  // One that nothing matches is dropped the same way, with nothing to answer.
  client->send(p).or_throw();
  client->send(PidNew{6, 4}).or_throw();
  m = client->receive(5000);
  ASSERT_TRUE(m);
  EXPECT_EQ(type_of(*m), Type::PidReply);
  EXPECT_EQ(up->stats().inlined, 2u);
}

TEST_F(UpLndTest, SendPathToAnApplication) {
  start();
  Pid pid = new_pid();
  auto data = pattern(3000, 'x');
  EventLog log;
  MdHandle md = source(*lnetd, data, log);
  ASSERT_EQ(lnetd->put(Nid::any(), md, AckReq::NoAck, ProcessId{kRank0, pid}, kPortal, 9, 0, 0), 0);
  auto m = next(Type::Send);
  ASSERT_TRUE(m);
  const Send& s = std::get<Send>(*m);
  EXPECT_EQ(s.pid, pid);
  EXPECT_EQ(s.target, (ProcessId{kRank0, pid}));
  EXPECT_EQ(s.next_hop, kRank0);
  EXPECT_EQ(s.hdr.type, MsgType::Put);
  EXPECT_EQ(s.hdr.src_nid, kUpNid);
  EXPECT_EQ(s.hdr.msg.put.match_bits, 9u);
  ASSERT_EQ(s.len, 3000u);
  char* at = client->region().at(s.offset, s.len);
  ASSERT_NE(at, nullptr);
  EXPECT_EQ(std::memcmp(at, data.data(), data.size()), 0);
  client->send(SendDone{s.desc, 0, 0}).or_throw();
  ASSERT_TRUE(log.wait_unlinked(md));
  EXPECT_EQ(log.find(EventType::Send)->status, 0);
  EXPECT_EQ(up->stats().sends, 1u);
}

TEST_F(UpLndTest, NoProxyOwnsThePidTheSendFails) {
  start();
  auto data = pattern(10, 'x');
  EventLog log;
  MdHandle md = source(*lnetd, data, log);
  (void)lnetd->put(Nid::any(), md, AckReq::NoAck, ProcessId{kRank0, kPidUserFlag | 999}, kPortal, 0, 0, 0);
  ASSERT_TRUE(log.wait_unlinked(md));
  EXPECT_NE(log.find(EventType::Send)->status, 0);
}

// LNet's pid at a rank's NID (what a kernel peer's discovery ping or push is sent to) goes
// to the first application registered that has the rank; one that has not is not found.
// The application answers those as LNet's pid (REPLY, ACK), and may claim it for nothing else.
TEST_F(UpLndTest, LnetsPidAtARanksNidGoesToTheFirstApplicationWithThatRank) {
  start();
  GlobalTunables g = lnetd->control().globals();
  g.discovery = 0;  // the PUTs themselves, no discovery ping before them
  ASSERT_TRUE(lnetd->control().set_globals(g));
  client->send(PidNew{21, 2}).or_throw();
  Pid two = std::get<PidReply>(*next(Type::PidReply)).pid;
  client->send(PidNew{22, 4}).or_throw();
  Pid four = std::get<PidReply>(*next(Type::PidReply)).pid;
  auto data = pattern(64, 'p');
  auto send_to = [&](std::uint32_t rank) {
    EventLog log;
    MdHandle md = source(*lnetd, data, log);
    Nid to = Nid::make(kMpi, rank);
    EXPECT_EQ(lnetd->put(Nid::any(), md, AckReq::NoAck, ProcessId{to, kPidLustre}, kPortal, 0, 0, 0), 0);
    Pid got = 0;
    if (rank < 4) {
      auto m = next(Type::Send);
      if (m) {
        got = std::get<Send>(*m).pid;
        EXPECT_EQ(std::get<Send>(*m).target, (ProcessId{to, kPidLustre}));
        client->send(SendDone{std::get<Send>(*m).desc, 0, 0}).or_throw();
      }
    }
    EXPECT_TRUE(log.wait_unlinked(md));
    if (rank >= 4) {
      EXPECT_NE(log.find(EventType::Send)->status, 0) << "rank " << rank << " is no application's";
    }
    return got;
  };
  EXPECT_EQ(send_to(1), two);
  EXPECT_EQ(send_to(3), four);
  EXPECT_EQ(send_to(5), 0u);
  // The answers: a PUT from LNet's pid is refused, an ACK is taken (lnetd drops this one,
  // which answers nothing of its: the proxy is told to discard it).
  client->send(Parse{2, two, 0, kRank0, put_header(kUpNid, kPidLustre, kPidLustre, 0)}).or_throw();
  std::string why = std::get<Error>(*next(Type::Error)).text;
  EXPECT_NE(why.find("PARSE of a message from pid 12345"), std::string::npos) << why;
  Header ack = put_header(kUpNid, kPidLustre, kPidLustre, 0);
  ack.type = MsgType::Ack;
  ack.msg.ack.dst_wmd = WireHandle::none();
  client->send(Parse{1, two, 0, kRank0, ack}).or_throw();
  ASSERT_TRUE(next(Type::Recv));
  // A registration must say how many ranks the application has.
  client->send(PidNew{23, 0}).or_throw();
  EXPECT_NE(std::get<Error>(*next(Type::Error)).text.find("PID_NEW for 0 ranks"), std::string::npos);
}

// The proxy dies with a message of lnetd's in its hands: it fails, the pid is released.
TEST_F(UpLndTest, AProxyThatGoesAwayFailsWhatItHeldAndFreesItsPids) {
  start();
  Pid pid = new_pid();
  auto data = pattern(100, 'x');
  EventLog log;
  MdHandle md = source(*lnetd, data, log);
  ASSERT_EQ(lnetd->put(Nid::any(), md, AckReq::NoAck, ProcessId{kRank0, pid}, kPortal, 0, 0, 0), 0);
  ASSERT_TRUE(next(Type::Send));
  // And a PARSE whose RECV it never answers.
  std::vector<char> buf(100);
  EventLog rlog;
  MdHandle rmd = sink(*lnetd, buf, rlog);
  client->send(Parse{1, pid, 0, kRank0, put_header(kUpNid, kPidLustre, pid, 100)}).or_throw();
  ASSERT_TRUE(next(Type::Recv));
  client.reset();
  ASSERT_TRUE(log.wait_unlinked(md));
  EXPECT_EQ(log.find(EventType::Send)->status, -ECONNRESET);
  for (int i = 0; i < 500 && up->stats().proxies != 0; ++i) std::this_thread::sleep_for(10ms);
  UpStats s = up->stats();
  EXPECT_EQ(s.proxies, 0u);
  EXPECT_EQ(s.pids, 0u);
  EXPECT_EQ(s.failed, 2u);
  // The PUT it never delivered ends the MD with an error.
  ASSERT_TRUE(rlog.wait_unlinked(rmd));
  EXPECT_EQ(rlog.find(EventType::Put)->status, -ECONNRESET);
  // Its pid is no one's now.
  auto d2 = pattern(10, 'y');
  EventLog log2;
  MdHandle md2 = source(*lnetd, d2, log2);
  (void)lnetd->put(Nid::any(), md2, AckReq::NoAck, ProcessId{kRank0, pid}, kPortal, 0, 0, 0);
  ASSERT_TRUE(log2.wait_unlinked(md2));
  EXPECT_NE(log2.find(EventType::Send)->status, 0);
}

TEST_F(UpLndTest, BadMessagesAreRefusedAndTooManyCloseTheConnection) {
  start();
  Pid pid = new_pid();
  // A PARSE for a pid it did not register, one claiming another source pid, garbage.
  client->send(Parse{1, kPidUserFlag | 555, 0, kRank0, put_header(kUpNid, kPidLustre, kPidUserFlag | 555, 0)})
      .or_throw();
  EXPECT_NE(std::get<Error>(*next(Type::Error)).text.find("did not register"), std::string::npos);
  client->send(Parse{1, pid, 0, kRank0, put_header(kUpNid, kPidLustre, kPidUserFlag | 555, 0)}).or_throw();
  EXPECT_NE(std::get<Error>(*next(Type::Error)).text.find("a message from pid 555"), std::string::npos);
  client->send(Send{}).or_throw();
  EXPECT_NE(std::get<Error>(*next(Type::Error)).text.find("lnetd's to send"), std::string::npos);
  const std::uint8_t junk[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
  for (int i = 0; i < 13; ++i) ASSERT_EQ(::send(client->fd(), junk, sizeof junk, MSG_NOSIGNAL), 17);
  bool closed = false;
  for (int i = 0; i < 20 && !closed; ++i) {
    auto m = client->receive(5000);
    if (!m)
      closed = m.code() == -ECONNRESET;
    else
      EXPECT_EQ(type_of(*m), Type::Error);
  }
  EXPECT_TRUE(closed);
  EXPECT_EQ(up->stats().bad_messages, 16u);
  // lnetd is unaffected: a new proxy is served.
  client = BridgeClient::connect(opts.bridge, 0, 5s).value();
  EXPECT_NE(new_pid(), 0u);
}

TEST_F(UpLndTest, AUidThatIsNeitherRootNorInTheGroupIsRefused) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to try another uid";
  start();
  // Let the directory's and the socket's modes pass: SO_PEERCRED must not.
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  ASSERT_EQ(chmod(opts.bridge.c_str(), 0666), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    int fd = dial_bridge();
    if (fd < 0) _exit(3);
    std::uint8_t hello[kMaxFrame];
    std::size_t n = encode(Hello{}, std::span<std::uint8_t, kMaxFrame>(hello, kMaxFrame));
    (void)!::send(fd, hello, n, MSG_NOSIGNAL);
    std::uint8_t buf[kMaxFrame];
    _exit(::recv(fd, buf, sizeof buf, 0) <= 0 ? 0 : 1);  // closed without a WELCOME
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(up->stats().refused, 1u);
}

// lnetd as a router between an application on mpi and a server on gni: both ways, the
// payload sits in a router buffer of the shared region and crosses the bridge in place.
TEST_F(UpLndTest, RoutedPayloadsCrossTheBridgeWithoutACopy) {
  Fabric::install();
  start(true);
  server = Instance::create(test::fabric_config({4}), kPidLustre).value();
  for (Instance* i : {lnetd.get(), server.get()}) i->control().set_global("alive_router_check_interval", 0).or_throw();
  ASSERT_TRUE(server->control().add_route(RouteConfig{kMpi, gni(3), -1, 0}));
  ASSERT_TRUE(lnetd->control().set_routing(true));
  Pid pid = new_pid();

  // Application -> server.
  std::vector<char> buf(1 << 20, 0);
  EventLog slog;
  MdHandle smd = sink(*server, buf, slog);
  auto data = pattern(300000, 'r');
  client->send(Parse{5, pid, 0, kRank0, put_header(gni(4), kPidLustre, pid, 300000)}).or_throw();
  auto m = next(Type::Recv);
  ASSERT_TRUE(m);
  const Recv& r = std::get<Recv>(*m);
  ASSERT_EQ(r.status, 0);
  ASSERT_EQ(r.mlen, 300000u);
  std::memcpy(client->region().at(r.offset, r.mlen), data.data(), data.size());
  client->send(RecvDone{r.desc, 0, 0}).or_throw();
  ASSERT_TRUE(slog.wait_unlinked(smd));
  EXPECT_EQ(slog.find(EventType::Put)->mlength, 300000u);
  EXPECT_EQ(std::memcmp(buf.data(), data.data(), data.size()), 0);

  // Server -> application.
  auto back = pattern(200000, 'b');
  EventLog blog;
  MdHandle bmd = source(*server, back, blog);
  ASSERT_EQ(server->put(Nid::any(), bmd, AckReq::NoAck, ProcessId{kRank0, pid}, kPortal, 0, 0, 0), 0);
  auto sm = next(Type::Send);
  ASSERT_TRUE(sm);
  const Send& s = std::get<Send>(*sm);
  ASSERT_EQ(s.len, 200000u);
  EXPECT_EQ(s.hdr.src_nid, gni(4));  // forwarded: the header is the server's
  EXPECT_EQ(std::memcmp(client->region().at(s.offset, s.len), back.data(), back.size()), 0);
  client->send(SendDone{s.desc, 0, 0}).or_throw();
  ASSERT_TRUE(blog.wait_unlinked(bmd));

  UpStats st = up->stats();
  EXPECT_EQ(st.in_place, 2u);
  EXPECT_EQ(st.copies, 0u);
}

// A receive the proxy's MPI matched and could not cancel fails with kDoneKept: lnetd
// fails the message at once but lends its router buffer to no one until MEM_RELEASE
// (before, the buffer went to the next message while MPI could still write into it).
TEST_F(UpLndTest, AReceiveItsProxyKeepsIsLentToNoOneUntilReleased) {
  start_router();
  Pid pid = new_pid();
  auto r = routed_recv(pid, 1, 300000);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 0);
  client->send(RecvDone{r->desc, -ETIMEDOUT, static_cast<std::uint32_t>(HealthStatus::LocalError), kDoneKept})
      .or_throw();
  for (int i = 0; i < 500 && up->stats().kept_now != 1; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(up->stats().kept_now, 1u);
  // The next routed PUT gets another buffer, and reaches the server whole.
  std::vector<char> buf(1 << 20, 0);
  EventLog slog;
  MdHandle smd = sink(*server, buf, slog);
  auto r2 = routed_recv(pid, 2, 300000);
  ASSERT_TRUE(r2);
  EXPECT_NE(r2->offset, r->offset) << "a kept buffer was lent to another message";
  auto data = pattern(300000, 'k');
  std::memcpy(client->region().at(r2->offset, r2->mlen), data.data(), data.size());
  client->send(RecvDone{r2->desc, 0, 0}).or_throw();
  ASSERT_TRUE(slog.wait_unlinked(smd));
  EXPECT_EQ(std::memcmp(buf.data(), data.data(), data.size()), 0);
  // Kept is only for a failure into memory the proxy writes.
  client->send(MemRelease{r2->desc}).or_throw();
  EXPECT_NE(std::get<Error>(*next(Type::Error)).text.find("not one whose memory this proxy keeps"), std::string::npos);
  client->send(MemRelease{r->desc}).or_throw();
  for (int i = 0; i < 500 && up->stats().kept_now != 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(up->stats().kept_now, 0u);
  EXPECT_EQ(up->stats().kept, 1u);
  // The buffer is back: one of the next two routed PUTs gets it.
  auto r3 = routed_recv(pid, 3, 300000);
  auto r4 = routed_recv(pid, 4, 300000);
  ASSERT_TRUE(r3 && r4);
  EXPECT_TRUE(r3->offset == r->offset || r4->offset == r->offset);
  // Released once: a second MEM_RELEASE is refused.
  client->send(MemRelease{r->desc}).or_throw();
  EXPECT_TRUE(next(Type::Error));
}

// A proxy that leaves the bridge while its MPI may still write a RECV's bytes (its
// process lives on, in MPI_Finalize or serving others) does not get them reused: they
// are held until its process has exited.
TEST_F(UpLndTest, TheBuffersOfAProxyThatLeftAreHeldUntilItsProcessExits) {
  start_router();
  int to_child[2], from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // a proxy: its own pid, a routed PUT, then it closes the bridge and lives on
    ::close(to_child[1]);
    ::close(from_child[0]);
    int fd = dial_bridge();
    if (fd < 0) _exit(3);
    std::uint8_t f[kMaxFrame];
    auto say = [&](const Message& m) {
      std::size_t n = encode(m, std::span<std::uint8_t, kMaxFrame>(f, kMaxFrame));
      return ::send(fd, f, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
    };
    auto hear = [&]() -> std::optional<Message> {
      ssize_t n = ::recv(fd, f, sizeof f, 0);
      if (n <= 0) return std::nullopt;
      auto m = decode(std::span<const std::uint8_t>(f, static_cast<std::size_t>(n)));
      if (!m) return std::nullopt;
      return *m;
    };
    if (!say(Hello{}) || !hear() || !say(PidNew{1, 4})) _exit(4);
    auto reply = hear();
    if (!reply || type_of(*reply) != Type::PidReply) _exit(5);
    Pid pid = std::get<PidReply>(*reply).pid;
    if (!say(Parse{9, pid, 0, kRank0, put_header(gni(4), kPidLustre, pid, 300000)})) _exit(6);
    auto recv = hear();
    if (!recv || type_of(*recv) != Type::Recv) _exit(7);
    std::uint64_t offset = std::get<Recv>(*recv).offset;
    ::close(fd);
    if (write(from_child[1], &offset, sizeof offset) != sizeof offset) _exit(8);
    char c;
    (void)!read(to_child[0], &c, 1);  // lives until the test lets it go
    _exit(0);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  std::uint64_t offset = 0;
  ASSERT_EQ(read(from_child[0], &offset, sizeof offset), static_cast<ssize_t>(sizeof offset));
  for (int i = 0; i < 500 && up->stats().proxies != 1; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(up->stats().proxies, 1u);  // this test's own
  EXPECT_EQ(up->stats().kept_now, 1u);
  Pid pid = new_pid();
  auto r = routed_recv(pid, 1, 300000);
  ASSERT_TRUE(r);
  EXPECT_NE(r->offset, offset) << "the buffer of a proxy whose process lives was lent to another message";
  ::close(to_child[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (int i = 0; i < 500 && up->stats().kept_now != 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(up->stats().kept_now, 0u);
  ::close(from_child[0]);
  client->send(RecvDone{r->desc, 0, 0}).or_throw();
}

// A router reports an NI that heard nothing for router_ping_timeout + the check interval
// down. The UP NI's link is its proxies: with one attached it stays up however quiet its
// applications are; with none it goes down, and comes up as soon as one attaches.
TEST_F(UpLndTest, TheUpNiIsUpWhileAProxyIsAttachedAndGoesUpWhenOneAttaches) {
  Fabric::install();
  start(true);
  for (const char* k : {"router_ping_timeout", "alive_router_check_interval"})
    lnetd->control().set_global(k, 1).or_throw();
  ASSERT_TRUE(lnetd->control().set_routing(true));
  auto up_ni_up = [&] {
    for (const NiInfo& i : lnetd->control().ni_info())
      if (i.nid == kUpNid) return i.up;
    return false;
  };
  // Quiet for longer than the limit (2 s) with the proxy attached: still up.
  std::this_thread::sleep_for(3500ms);
  EXPECT_TRUE(up_ni_up()) << "an NI with a proxy attached was reported down for its silence";
  client.reset();
  ASSERT_TRUE(test::eventually([&] { return !up_ni_up(); })) << "no proxy and nothing heard: still up";
  client = BridgeClient::connect(opts.bridge, 0, 5s).value();
  ASSERT_TRUE(test::eventually([&] { return up_ni_up(); })) << "a proxy attached and the NI stayed down";
}

}  // namespace
}  // namespace lnet::up
