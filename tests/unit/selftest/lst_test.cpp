// lst's two halves joined in one process over the test fabric: command lines parsed,
// run on a console, printed as lst prints them; node lists; bad arguments refused with
// a message naming them.
#include <gtest/gtest.h>

#include <cstdio>

#include <selftest/framework.hpp>
#include <selftest/lst.hpp>
#include <selftest/services.hpp>

#include "support/fabric.hpp"
#include "test_node.hpp"

namespace lnet::selftest {
namespace {

using namespace std::chrono_literals;

Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }

TEST(LstIds, NodeListsExpandInOrderWithTheirPid) {
  auto ids = lst::parse_ids("10.0.[1-2].[7,9]@tcp1");
  ASSERT_TRUE(ids) << ids.message();
  ASSERT_EQ(ids->size(), 4u);
  EXPECT_EQ((*ids)[0].nid.to_string(), "10.0.1.7@tcp1");
  EXPECT_EQ((*ids)[1].nid.to_string(), "10.0.1.9@tcp1") << "the last bracket varies fastest";
  EXPECT_EQ((*ids)[3].nid.to_string(), "10.0.2.9@tcp1");
  EXPECT_EQ((*ids)[0].pid, kPidLustre);
  auto user = lst::parse_ids("U42-[0-3/2]@gni");
  ASSERT_TRUE(user) << user.message();
  ASSERT_EQ(user->size(), 2u);
  EXPECT_EQ((*user)[1].pid, 42u | kPidUserFlag);
  EXPECT_EQ((*user)[1].nid, gni(2));
  auto pid = lst::parse_ids("777-10.1.1.1@tcp");
  ASSERT_TRUE(pid);
  EXPECT_EQ((*pid)[0].pid, 777u);
  // lst-node's script mode: the job's ranks get its pid, its proxy's lnetd LNet's.
  lst::PidDefault job{NetId::make(kMpiLnd, 0), 7u | kPidUserFlag};
  auto ranks = lst::parse_ids("[0-1]@mpi", job);
  ASSERT_TRUE(ranks) << ranks.message();
  ASSERT_EQ(ranks->size(), 2u);
  EXPECT_EQ((*ranks)[1].pid, 7u | kPidUserFlag);
  auto lnetd = lst::parse_ids("10.0.0.5@mpi", job);
  ASSERT_TRUE(lnetd) << lnetd.message();
  EXPECT_EQ((*lnetd)[0].pid, kPidLustre) << (*lnetd)[0].to_string();
  // The man page's ranges; lst's own rule that a range's low end is below its high end.
  auto odd = lst::parse_ids("192.168.1.[1-253/2]@tcp");
  ASSERT_TRUE(odd) << odd.message();
  EXPECT_EQ(odd->size(), 127u);
  EXPECT_EQ(odd->back().nid.to_string(), "192.168.1.253@tcp");
  auto servers = lst::parse_ids("192.168.10.[8,10,12-16]@tcp");
  ASSERT_TRUE(servers) << servers.message();
  EXPECT_EQ(servers->size(), 7u);
  for (const char* bad : {"*@tcp", "10.0.0.*@tcp", "[1-5000]@gni", "tcp", "10.0.0.1@nonet", "x-10.0.0.1@tcp", "",
                          "[5-5]@gni", "10.0.0.[7-3]@tcp", "10.0.[2-2].1@tcp", "[4-4/2]@gni"}) {
    auto r = lst::parse_ids(bad);
    EXPECT_FALSE(r) << bad;
  }
}

using Node = fixture::TestNode;

class LstRun : public ::testing::Test {
 protected:
  void SetUp() override {
    me = std::make_unique<Node>(1);
    other = std::make_unique<Node>(2);
    console = std::make_unique<Console>(*me->rpc, gni(1));
  }
  void TearDown() override {
    console.reset();
    other.reset();
    me.reset();
  }
  // Runs an lst command line; its output and errors land in out / err.
  int lst(std::vector<std::string> argv, std::optional<std::uint32_t> key = 9) {
    std::FILE* o = std::tmpfile();
    std::FILE* e = std::tmpfile();
    int rc = lst::run(argv, [&](const dlc::Request& r) { return lst::execute(*console, r); }, key, {o, e});
    out = slurp(o);
    err = slurp(e);
    return rc;
  }
  static std::string slurp(std::FILE* f) {
    std::rewind(f);
    std::string s;
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) s.append(buf, n);
    std::fclose(f);
    return s;
  }
  std::unique_ptr<Node> me, other;
  std::unique_ptr<Console> console;
  std::string out, err;
};

TEST_F(LstRun, AScriptAsUsersWriteIt) {
  ASSERT_EQ(lst({"new_session", "--timeout", "100", "demo"}), 0) << err;
  EXPECT_EQ(out, "SESSION: demo FEATURES: 1 TIMEOUT: 100 FORCE: No\n");
  ASSERT_EQ(lst({"add_group", "c", "1@gni"}), 0) << err << out;
  ASSERT_EQ(lst({"add_group", "s", "2@gni"}), 0) << err << out;
  ASSERT_EQ(lst({"add_group", "b", "2@gni"}), 0) << err << out;
  ASSERT_EQ(lst({"list_group"}), 0);
  EXPECT_EQ(out, "1) c\n2) s\n3) b\nTotal 3 groups\n") << "in the order they were made, as lst";
  ASSERT_EQ(lst({"add_batch", "a_batch"}), 0) << err;
  ASSERT_EQ(lst({"list_batch"}), 0);
  EXPECT_EQ(out, "1) batch\n2) a_batch\nTotal 2 batches\n");
  ASSERT_EQ(lst({"add_test", "--loop", "10", "--concurrency", "2", "--from", "c", "--to", "s", "brw", "write",
                 "size=64k", "check=full"}),
            0)
      << err;
  ASSERT_EQ(lst({"add_test", "--loop", "-1", "--from", "c", "--to", "s", "ping"}), 0) << err;
  ASSERT_EQ(lst({"list_batch", "batch"}), 0);
  // As the kernel's lst: the batch's state (176 idle) and nodes, then each test's.
  const std::string table = "\tACTIVE\tBUSY\tDOWN\tUNKNOWN\tTOTAL\nclient\t1\t0\t0\t0\t1\nserver\t1\t0\t0\t0\t1\n";
  EXPECT_EQ(out, "Batch: batch Tests: 2 State: 176\n" + table + "\tTest 1(brw) (loop: 10, concurrency: 2)\n" + table +
                     "\tTest 2(ping) (loop: -1, concurrency: 1)\n" + table);
  ASSERT_EQ(lst({"list_batch", "batch", "--test", "2"}), 0);
  EXPECT_EQ(out, "\tTest 2(ping) (loop: -1, concurrency: 1)\n" + table);
  ASSERT_EQ(lst({"list_batch", "batch", "--test", "1", "--server", "--all"}), 0);
  EXPECT_EQ(out, "\t12345-2@gni: Active\nTotal 1 nodes\n");
  ASSERT_EQ(lst({"list_batch", "batch", "--test", "1", "--invalid"}), 0);
  EXPECT_EQ(out, "Total 0 nodes\n");
  EXPECT_EQ(lst({"list_batch", "batch", "--test", "3"}), 255);
  EXPECT_NE(err.find("Can't find test in current session"), std::string::npos) << err;
  ASSERT_EQ(lst({"run"}), 0) << err;
  EXPECT_EQ(out, "batch is running now\n");
  ASSERT_EQ(lst({"list_batch", "batch"}), 0);
  EXPECT_EQ(out.rfind("Batch: batch Tests: 2 State: 177\n", 0), 0u) << out;
  ASSERT_EQ(lst({"query", "batch"}), 0);
  EXPECT_EQ(out, "batch [0] is running\n");
  ASSERT_EQ(lst({"stat", "--count", "1", "--delay", "1", "c"}), 0) << err;
  EXPECT_NE(out.find("[LNet Rates of c]\n[R] Avg: "), std::string::npos) << out;
  EXPECT_NE(out.find("[LNet Bandwidth of c]\n[R] Avg: "), std::string::npos) << out;
  ASSERT_EQ(lst({"stat", "--count", "1", "--delay", "1", "--bw", "--write", "--avg", "--mbs", "c"}), 0) << err;
  EXPECT_EQ(out.find("Rates"), std::string::npos) << out;
  EXPECT_EQ(out.find("[R]"), std::string::npos) << out;
  EXPECT_NE(out.find("[W] Avg: "), std::string::npos) << out;
  EXPECT_NE(out.find("MB/s \n"), std::string::npos) << "bandwidth rows end with a space, as lst's: " << out;
  EXPECT_EQ(out.find("Min"), std::string::npos) << out;
  // stop returns once no node runs the batch (the ping test loops for ever).
  ASSERT_EQ(lst({"stop", "batch"}), 0);
  EXPECT_EQ(out.substr(out.size() - 17), "Batch is stopped\n") << out;
  ASSERT_EQ(lst({"query", "batch"}), 0);
  EXPECT_EQ(out, "batch [0] is stopped\n");
  ASSERT_EQ(lst({"show_error", "c", "s"}), 0);
  EXPECT_NE(out.find("Total 0 error nodes in c"), std::string::npos) << out;
  ASSERT_EQ(lst({"ping", "--nodes", "2@gni"}), 0);
  EXPECT_NE(out.find("\t12345-2@gni: Active [session: demo id: 1@gni]\n"), std::string::npos) << out;
  ASSERT_EQ(lst({"show_session"}), 0);
  EXPECT_NE(out.find("demo ID: "), std::string::npos) << out;
  EXPECT_NE(out.find("KEY: 9 FEATURES: 1 NODES: 2"), std::string::npos) << out;
  ASSERT_EQ(lst({"end_session"}), 0) << err;
  EXPECT_EQ(out, "") << "lst's end_session says nothing";
  EXPECT_FALSE(other->fw->session());
  ASSERT_EQ(lst({"end_session"}), 0) << "no session to end is no error, as lst";
  EXPECT_EQ(err, "");
}

// lst's exit statuses: 255 for a command that failed, 4 for a usage (printed on the
// standard output), 254 for an add_group that added no node.
TEST_F(LstRun, BadArgumentsAreNamedAndFail) {
  EXPECT_EQ(lst({"new_session", "x"}, std::nullopt), 255);
  EXPECT_NE(err.find("LST_SESSION"), std::string::npos) << err;
  EXPECT_EQ(lst({"no_such_command"}), 255);
  EXPECT_EQ(err, "lst: 'no_such_command' is not a valid command. See 'lst --list-commands'.\n");
  EXPECT_EQ(lst({"list_group"}), 255);
  EXPECT_EQ(err, "No session exists\n");
  ASSERT_EQ(lst({"new_session", "x"}), 0);
  EXPECT_EQ(lst({"new_session", "--bogus"}), 4);
  EXPECT_NE(err.find("bogus"), std::string::npos) << err;
  EXPECT_EQ(out.rfind("Usage: lst new_session [--timeout #] [--force] [SESSION_NAME]\n", 0), 0u) << out;
  EXPECT_EQ(lst({"stat"}), 4);
  EXPECT_EQ(out.rfind("Usage: lst stat [--bw] [--rate]", 0), 0u) << out;
  EXPECT_EQ(lst({"add_batch"}), 4);
  EXPECT_EQ(out, "Usage: lst add_batch NAME\n");
  EXPECT_NE(lst({"new_session", "--timeout", "ten", "y"}), 0);
  EXPECT_NE(err.find("ten"), std::string::npos) << err;
  // The last list is ignored (lst's status is the last list's); the group keeps the first.
  EXPECT_NE(lst({"add_group", "g", "1@gni", "10.0.0.*@tcp"}), 0);
  EXPECT_NE(err.find("Ignore invalid id list 10.0.0.*@tcp"), std::string::npos) << err;
  EXPECT_NE(err.find("'*'"), std::string::npos) << err;
  EXPECT_NE(lst({"add_group", "g", "1@gni"}), 0);
  EXPECT_NE(err.find("group already exists"), std::string::npos) << err;
  // Also what a kernel node would assert on: a size not a multiple of 8, an offset
  // that takes the size over one more page.
  for (auto [arg, named] : std::vector<std::pair<std::string, std::string>>{{"size=2m", "size"},
                                                                            {"check=most", "most"},
                                                                            {"off=3", "off"},
                                                                            {"sideways", "sideways"},
                                                                            {"size=13", "multiple of 8"},
                                                                            {"off=64", "span 2 pages"}}) {
    EXPECT_NE(lst({"add_test", "--from", "g", "--to", "g", "brw", arg}), 0) << arg;
    EXPECT_NE(err.find(named), std::string::npos) << err;
  }
  EXPECT_NE(lst({"add_test", "--concurrency", "2000", "--from", "g", "--to", "g", "ping"}), 0);
  EXPECT_NE(err.find("2000"), std::string::npos) << err;
  EXPECT_NE(lst({"add_test", "--distribute", "1:x", "--from", "g", "--to", "g", "ping"}), 0);
  EXPECT_NE(err.find("1:x"), std::string::npos) << err;
  EXPECT_NE(lst({"add_test", "--from", "g", "--to", "nogroup", "ping"}), 0);
  EXPECT_NE(err.find("nogroup"), std::string::npos) << err;
  EXPECT_NE(lst({"run", "nobatch"}), 0);
  EXPECT_NE(err.find("nobatch"), std::string::npos) << err;
  EXPECT_NE(lst({"update_group", "g", "--clean", "sleepy"}), 0);
  EXPECT_NE(err.find("sleepy"), std::string::npos) << err;
  EXPECT_NE(lst({"list_group"}, 10), 0) << "another key";
  EXPECT_NE(err.find("Unmatched session key or not root"), std::string::npos) << err;
  EXPECT_NE(err.find("LST_SESSION=9"), std::string::npos) << err;
  // show_session tells anyone the key (Lustre's test framework reads it from there).
  ASSERT_EQ(lst({"show_session"}, std::nullopt), 0) << err;
  EXPECT_NE(out.find(", KEY: 9 FEATURES"), std::string::npos) << out;
}

// What Lustre's own scripts and the manual write, as the real lst takes it.
TEST_F(LstRun, WhatLustresScriptsWriteRunsAsIs) {
  // lnet-selftest.sh: --timeo (an abbreviation) and any positive number of seconds.
  ASSERT_EQ(lst({"new_session", "--timeo", "100000", "hh"}), 0) << err;
  EXPECT_NE(out.find("TIMEOUT: 100000"), std::string::npos) << out;
  EXPECT_NE(lst({"new_session", "--force", "--timeout", "0", "hh"}), 0);
  EXPECT_NE(err.find("Invalid timeout value"), std::string::npos) << err;
  ASSERT_EQ(lst({"add_group", "c", "1@gni"}), 0) << err;
  EXPECT_EQ(out, "1@gni are added to session\n");
  ASSERT_EQ(lst({"add_group", "s", "[2-2]@gni", "2@gni"}), 0) << err;
  EXPECT_NE(err.find("Ignore invalid id list [2-2]@gni"), std::string::npos) << "lst's ranges: low below high\n" << err;
  EXPECT_NE(out.find("2@gni are added to session"), std::string::npos) << out;
  // A group no list could be added to is not kept.
  EXPECT_EQ(lst({"add_group", "empty", "[5-5]@gni", "[7-3]@gni"}), 254);
  EXPECT_NE(err.find("No nodes added successfully, deleting group empty"), std::string::npos) << err;
  // Nor one whose only nodes do not answer: each is named with its error.
  EXPECT_NE(lst({"add_group", "gone", "3@gni"}), 0);
  EXPECT_NE(err.find("create session RPC failed on 12345-3@gni: "), std::string::npos) << err;
  EXPECT_NE(err.find("No nodes added successfully, deleting group gone"), std::string::npos) << err;
  ASSERT_EQ(lst({"list_group"}), 0);
  EXPECT_EQ(out, "1) c\n2) s\nTotal 2 groups\n");
  // A missing group ends the list without an error (the smoke test runs under set -e).
  ASSERT_EQ(lst({"list_group", "s", "bad_group", "c"}), 0) << err;
  EXPECT_EQ(out, "\tACTIVE\tBUSY\tDOWN\tUNKNOWN\tTOTAL\n\t1\t0\t0\t0\t1\ts\n");
  EXPECT_EQ(err, "") << "lst says nothing of the missing group";
  ASSERT_EQ(lst({"list_group", "s", "--all"}), 0);
  EXPECT_EQ(out, "Group [ s ]\n\t12345-2@gni: Active\nTotal 1 nodes [ s ]\n");
  // brw keywords in any case, and their short forms.
  for (std::vector<std::string> params : {std::vector<std::string>{"WRITE", "s=4K", "c=simple"},
                                          {"W", "SIZE=1M", "CHECK=Full"},
                                          {"Read", "skip-rx-copy"},
                                          {"r", "Size=4000", "skip_rx_copy", "off=8"}}) {
    std::vector<std::string> argv{"add_test", "--from", "c", "--to", "s", "brw"};
    argv.insert(argv.end(), params.begin(), params.end());
    EXPECT_EQ(lst(argv), 0) << params[0] << ": " << err;
  }
  auto tests = console->batch_tests("batch");
  ASSERT_TRUE(tests) << tests.message();
  ASSERT_EQ(tests->size(), 4u);
  auto brw = [&](std::size_t i) {
    const TestSpec& t = (*tests)[i].spec;
    return std::to_string(static_cast<int>(t.op)) + " " + std::to_string(t.size) + " " +
           std::to_string(static_cast<int>(t.check)) + " " + std::to_string(t.offset);
  };
  auto spec = [](BrwOp op, unsigned size, BrwCheck c, unsigned off) {
    return std::to_string(static_cast<int>(op)) + " " + std::to_string(size) + " " +
           std::to_string(static_cast<int>(c)) + " " + std::to_string(off);
  };
  EXPECT_EQ(brw(0), spec(BrwOp::Write, 4096, BrwCheck::Simple, 0));
  EXPECT_EQ(brw(1), spec(BrwOp::Write, 1 << 20, BrwCheck::Full, 0));
  EXPECT_EQ(brw(2), spec(BrwOp::Read, 4096, BrwCheck::Discard, 0));
  EXPECT_EQ(brw(3), spec(BrwOp::Read, 4000, BrwCheck::Discard, 8));
  // The manual's ping: node lists right after the command.
  ASSERT_EQ(lst({"ping", "[1-2]@gni"}), 0) << err;
  EXPECT_NE(out.find("12345-1@gni: Active"), std::string::npos) << out;
  EXPECT_NE(out.find("12345-2@gni: Active"), std::string::npos) << out;
  // stat refuses a zero delay or timeout instead of printing for ever.
  for (const char* opt : {"--delay", "--timeout"}) {
    EXPECT_NE(lst({"stat", opt, "0", "c"}), 0) << opt;
    EXPECT_EQ(err, "Invalid timeout or delay value\n") << opt;
  }
  ASSERT_EQ(lst({"end_session"}), 0) << err;
  EXPECT_EQ(out, "");
  EXPECT_NE(lst({"show_session"}), 0);
  EXPECT_NE(err.find("No session exists"), std::string::npos) << err;
}

}  // namespace
}  // namespace lnet::selftest
