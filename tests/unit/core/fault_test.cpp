// Fault injection (lnet-facts §10): rules as text, what they match, how often they fire,
// and their effect through real instances on the test fabric: drops on receive (a GET
// dropped ends with its REPLY timing out), health errors on send (resent on the other
// rail), delays on receive; the commands and YAML; LNET_FAULT.
#include <gtest/gtest.h>

#include <cstdlib>

#include <lnet/dlc.hpp>
#include <lnet/lnet.hpp>

#include "core/core.hpp"
#include "support/event_log.hpp"
#include "support/fabric.hpp"

namespace lnet {
namespace {

using test::Fabric;

Nid gni(std::uint32_t a) { return Nid::make(NetId::make(kGniLnd, 0), a); }

Result<FaultRule> rule(bool delay, std::vector<std::pair<std::string, std::string>> fields) {
  return FaultRule::from_fields(delay, fields);
}

TEST(FaultRuleText, FieldsAreCheckedAndNameTheirValue) {
  auto both = rule(false, {{"rate", "2"}, {"interval", "3"}});
  ASSERT_FALSE(both);
  EXPECT_NE(both.message().find("exactly one of rate and interval"), std::string::npos) << both.message();
  EXPECT_FALSE(rule(false, {{"source", "*"}})) << "neither rate nor interval";
  auto h = rule(false, {{"rate", "1"}, {"health_error", "local_dropped,bogus"}});
  ASSERT_FALSE(h);
  EXPECT_NE(h.message().find("health_error 'bogus'"), std::string::npos) << h.message();
  auto m = rule(false, {{"rate", "1"}, {"message", "HELLO"}});
  ASSERT_FALSE(m);
  EXPECT_NE(m.message().find("message 'HELLO'"), std::string::npos) << m.message();
  auto p = rule(false, {{"rate", "1"}, {"portal", "4"}, {"message", "ACK"}});
  ASSERT_FALSE(p);
  EXPECT_NE(p.message().find("portal filter only applies to PUT and GET"), std::string::npos) << p.message();
  auto n = rule(false, {{"rate", "1"}, {"source", "1.2.3@tcp"}});
  ASSERT_FALSE(n);
  EXPECT_NE(n.message().find("source '1.2.3@tcp'"), std::string::npos) << n.message();
  EXPECT_FALSE(rule(false, {{"rate", "1"}, {"bogus", "1"}}));
  EXPECT_FALSE(rule(false, {{"rate", "x"}}));
  EXPECT_FALSE(rule(false, {{"rate", "1"}, {"latency", "2"}})) << "latency is for delay rules";
  EXPECT_FALSE(rule(true, {{"rate", "1"}})) << "a delay rule needs a latency";
  EXPECT_FALSE(rule(true, {{"rate", "1"}, {"latency", "1"}, {"drop_all", "1"}}));
  EXPECT_FALSE(rule(false, {{"rate", "1"}, {"random", "1"}})) << "random goes with interval";
  EXPECT_TRUE(rule(false, {{"drop_all", "1"}})) << "drop_all needs no rate";
}

TEST(FaultRuleText, RoundTripsThroughItsFields) {
  auto r = rule(false, {{"source", "*@gni"},
                        {"dest", "5@gni"},
                        {"interval", "7"},
                        {"portal", "4,9"},
                        {"message", "put"},
                        {"message", "GET"},
                        {"health_error", "remote_dropped"},
                        {"random", "1"}});
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->portals, (1ULL << 4) | (1ULL << 9));
  EXPECT_EQ(r->messages, 0x6u);
  EXPECT_EQ(r->health_errors, 1u << static_cast<unsigned>(HealthStatus::RemoteDropped));
  auto back = FaultRule::from_fields(false, r->to_fields());
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(*back, *r);
  auto any = rule(false, {{"rate", "1"}, {"health_error", "random"}});
  ASSERT_TRUE(any);
  EXPECT_EQ(any->health_errors, kFaultAnyHealthError);
}

TEST(FaultRuleText, TheEnvironmentList) {
  auto l = FaultRule::parse_list("drop source=*,dest=1@gni,rate=1,message=PUT,GET; delay dest=2@gni latency=2 rate=3;");
  ASSERT_TRUE(l) << l.message();
  ASSERT_EQ(l->size(), 2u);
  EXPECT_FALSE((*l)[0].delay);
  EXPECT_EQ((*l)[0].dest, gni(1));
  EXPECT_EQ((*l)[0].messages, 0x6u);
  EXPECT_TRUE((*l)[1].delay);
  EXPECT_EQ((*l)[1].latency, 2u);
  auto bad = FaultRule::parse_list("drop rate=1; lose dest=1@gni");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("starts with drop or delay"), std::string::npos) << bad.message();
  ASSERT_EQ(setenv("LNET_FAULT", "drop dest=3@gni rate=1", 1), 0);
  auto cfg = Config::from_env();
  ASSERT_TRUE(cfg) << cfg.message();
  ASSERT_EQ(cfg->faults.size(), 1u);
  ASSERT_EQ(setenv("LNET_FAULT", "drop dest=3@gni", 1), 0);
  auto refused = Config::from_env();
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("LNET_FAULT"), std::string::npos) << refused.message();
  unsetenv("LNET_FAULT");
}

TEST(FaultRuleMatch, NidsPortalsAndTypes) {
  FaultRule r = *rule(false, {{"source", "*@gni"}, {"dest", "2@gni"}, {"rate", "1"}, {"portal", "7"}});
  EXPECT_TRUE(r.matches(gni(9), gni(2), gni(2), MsgType::Put, 7));
  EXPECT_TRUE(r.matches(gni(9), gni(2), gni(2), MsgType::Get, 7));
  EXPECT_FALSE(r.matches(gni(9), gni(2), gni(2), MsgType::Put, 8)) << "another portal";
  EXPECT_FALSE(r.matches(gni(9), gni(2), gni(2), MsgType::Ack, 64)) << "a portal filter leaves ACKs alone";
  EXPECT_FALSE(r.matches(gni(9), gni(3), gni(3), MsgType::Put, 7)) << "another destination";
  EXPECT_FALSE(r.matches(Nid::make(NetId::make(kSockLnd, 0), 9), gni(2), gni(2), MsgType::Put, 7))
      << "*@gni is gni only";
  FaultRule acks = *rule(false, {{"rate", "1"}, {"message", "ACK"}, {"local_nid", "5@gni"}});
  EXPECT_TRUE(acks.matches(gni(1), gni(2), gni(5), MsgType::Ack, 64));
  EXPECT_FALSE(acks.matches(gni(1), gni(2), gni(6), MsgType::Ack, 64)) << "another local NI";
  EXPECT_FALSE(acks.matches(gni(1), gni(2), gni(5), MsgType::Put, 1));
}

class Faults : public ::testing::Test {
 protected:
  void SetUp() override {
    a = Instance::create(test::fabric_config({51, 61}), kPidLustre).value();
    b = Instance::create(test::fabric_config({52, 62}), kPidLustre).value();
    ASSERT_TRUE(a->control().add_peer(PeerConfig{gni(52), true, {gni(62)}}));
    auto me = b->me_attach(kPortal, ProcessId::any(), 0, ~0ULL, Unlink::Retain, InsPos::After);
    MdDesc d;
    d.start = target;
    d.length = sizeof target;
    d.options = kMdOpPut | kMdOpGet | kMdManageRemote;
    d.handler = blog.handler();
    ASSERT_TRUE(b->md_attach(*me, d, Unlink::Retain));
    Fabric::instance().clear_sent();
  }
  void TearDown() override {
    // B first: what its delay rules still hold points into A's messages (the test fabric
    // passes them between the instances).
    b.reset();
    a.reset();
  }
  MdHandle bind(int threshold) {
    MdDesc d;
    d.start = buf;
    d.length = sizeof buf;
    d.threshold = threshold;
    d.handler = alog.handler();
    return a->md_bind(d, Unlink::Unlink).value();
  }
  static constexpr unsigned kPortal = 12;
  std::unique_ptr<Instance> a, b;
  char target[32] = "target";
  char buf[32] = {};
  test::EventLog alog, blog;
};

TEST_F(Faults, APeerThatDropsEveryGetLeavesTheReplyToTimeOut) {
  ASSERT_TRUE(b->control().add_fault(*rule(false, {{"message", "GET"}, {"rate", "1"}})));
  ASSERT_TRUE(a->control().set_global("retry_count", 0));
  ASSERT_TRUE(a->control().set_global("transaction_timeout", 1));
  MdHandle md = bind(2);
  ASSERT_EQ(a->get(Nid::any(), md, ProcessId{gni(52), kPidLustre}, kPortal, 0, 0), 0);
  auto ev = alog.find(EventType::Unlink);  // no REPLY in time: the MD is unlinked
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->status, 0);
  EXPECT_EQ(alog.count(EventType::Reply), 0u);
  EXPECT_EQ(alog.all(EventType::Send)[0].status, 0) << "the GET itself went";
  auto rules = b->control().faults(false);
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0].fired, 1u);
  EXPECT_EQ(rules[0].get, 1u);
  EXPECT_EQ(blog.count(EventType::Get), 0u);
  // PUTs pass the rule.
  MdHandle put = bind(1);
  ASSERT_EQ(a->put(Nid::any(), put, AckReq::NoAck, ProcessId{gni(52), kPidLustre}, kPortal, 0, 0, 0), 0);
  EXPECT_EQ(blog.wait(EventType::Put, 1), 1u);
}

TEST_F(Faults, ARateDropsOneInEveryWindow) {
  ASSERT_TRUE(b->control().add_fault(*rule(false, {{"message", "PUT"}, {"rate", "4"}})));
  for (int i = 0; i < 40; ++i) {
    MdHandle md = bind(1);
    ASSERT_EQ(a->put(Nid::any(), md, AckReq::NoAck, ProcessId{gni(52), kPidLustre}, kPortal, 0, 0, 0), 0);
  }
  EXPECT_EQ(blog.wait(EventType::Put, 30), 30u);
  auto r = b->control().faults(false)[0];
  EXPECT_EQ(r.count, 40u);
  EXPECT_EQ(r.fired, 10u);
  EXPECT_EQ(b->control().counters().drop_count, 10u);
  b->control().reset_faults(false);
  EXPECT_EQ(b->control().faults(false)[0].count, 0u);
}

TEST_F(Faults, AHealthErrorFailsTheSendAndItIsResentOnTheOtherRail) {
  ASSERT_TRUE(a->control().add_fault(
      *rule(false, {{"local_nid", "51@gni"}, {"rate", "1"}, {"health_error", "local_dropped"}})));
  for (int i = 0; i < 4; ++i) {
    MdHandle md = bind(1);
    ASSERT_EQ(a->put(Nid::any(), md, AckReq::NoAck, ProcessId{gni(52), kPidLustre}, kPortal, 0, 0, 0), 0);
  }
  EXPECT_EQ(blog.wait(EventType::Put, 4), 4u) << "every PUT arrived";
  for (const Event& e : alog.all(EventType::Send)) EXPECT_EQ(e.status, 0);
  auto r = a->control().faults(false)[0];
  EXPECT_GE(r.fired, 1u);
  Counters c = a->control().counters();
  EXPECT_EQ(c.local_dropped_count, r.fired);
  EXPECT_EQ(c.successful_resends, r.fired);
  EXPECT_LT(core::Core::of(*a).state().find_ni(gni(51))->health.load(), 1000);
  // Such a rule does not drop on receive.
  EXPECT_EQ(a->control().faults(false)[0].put, r.fired);
}

TEST_F(Faults, ADelayRuleHoldsMessagesForItsLatency) {
  ASSERT_TRUE(b->control().add_fault(*rule(true, {{"message", "PUT"}, {"rate", "1"}, {"latency", "1"}})));
  MdHandle md = bind(1);
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(a->put(Nid::any(), md, AckReq::NoAck, ProcessId{gni(52), kPidLustre}, kPortal, 0, 0, 0), 0);
  ASSERT_EQ(blog.wait(EventType::Put, 1), 1u);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_STREQ(target, "") << "the PUT's payload (empty buf) landed";
  auto r = b->control().faults(true)[0];
  EXPECT_EQ(r.fired, 1u);
  EXPECT_EQ(r.put, 1u);
  EXPECT_EQ(b->control().del_faults(true, Nid::any(), Nid::any()), 1);
  EXPECT_TRUE(b->control().faults(true).empty());
}

TEST_F(Faults, ADelayedMessageAtShutdownIsDiscarded) {
  ASSERT_TRUE(b->control().add_fault(*rule(true, {{"rate", "1"}, {"latency", "100"}})));
  MdHandle md = bind(1);
  ASSERT_EQ(a->put(Nid::any(), md, AckReq::NoAck, ProcessId{gni(52), kPidLustre}, kPortal, 0, 0, 0), 0);
  EXPECT_EQ(b->control().faults(true)[0].fired, 1u);
  b.reset();  // returns at once: the held PUT is discarded, not waited for
  EXPECT_EQ(blog.count(EventType::Put), 0u);
  EXPECT_EQ(alog.wait(EventType::Send, 1), 1u) << "the sender's side completes";
}

TEST_F(Faults, CommandsAndYaml) {
  auto run = [&](const std::string& cmd, std::map<std::string, std::vector<std::string>> args = {},
                 std::string body = {}) {
    dlc::Request r;
    r.command = cmd;
    r.args = std::move(args);
    r.body = std::move(body);
    return dlc::execute(*a, r);
  };
  auto add =
      run("fault drop add", {{"source", {"*"}}, {"dest", {"52@gni"}}, {"rate", {"3"}}, {"message", {"PUT,GET"}}});
  ASSERT_EQ(add.rc, 0) << add.text;
  auto show = run("fault drop show");
  EXPECT_EQ(show.text,
            "drop:\n    - source: \"*\"\n      dest: 52@gni\n      local_nid: \"*\"\n      rate: 3\n"
            "      message:\n        - PUT\n        - GET\n      random: 0\n      drop_all: 0\n"
            "      statistics:\n          count: 0\n          put: 0\n          ack: 0\n          get: 0\n"
            "          reply: 0\n          dropped: 0\n")
      << show.text;
  auto bad = run("fault drop add", {{"rate", {"3"}}, {"interval", {"2"}}});
  EXPECT_EQ(bad.rc, -EINVAL);
  EXPECT_NE(bad.text.find("exactly one of rate and interval"), std::string::npos) << bad.text;
  auto bad_h = run("fault drop add", {{"rate", {"1"}}, {"health_error", {"oops"}}});
  EXPECT_EQ(bad_h.rc, -EINVAL);
  EXPECT_NE(bad_h.text.find("health_error 'oops'"), std::string::npos) << bad_h.text;
  EXPECT_EQ(a->control().faults(false).size(), 1u) << "nothing added by refused commands";
  auto delay = run("fault delay add", {{"dest", {"52@gni"}}, {"interval", {"5"}}, {"latency", {"2"}}});
  ASSERT_EQ(delay.rc, 0) << delay.text;
  // Export and import carry them.
  std::string yaml = dlc::config_to_yaml(dlc::export_config(*a), true);
  EXPECT_NE(yaml.find("fault:\n    drop:\n"), std::string::npos) << yaml;
  auto parsed = dlc::parse_config(yaml);
  ASSERT_TRUE(parsed) << parsed.message();
  ASSERT_EQ(parsed->faults.size(), 2u);
  EXPECT_EQ(parsed->faults[0], a->control().faults(false)[0].rule);
  EXPECT_EQ(parsed->faults[1], a->control().faults(true)[0].rule);
  auto bad_yaml =
      dlc::parse_config("fault:\n    drop:\n        - dest: 1@gni\n          rate: 1\n          interval: 2\n");
  ASSERT_FALSE(bad_yaml);
  EXPECT_NE(bad_yaml.message().find("(line 3)"), std::string::npos) << bad_yaml.message();
  EXPECT_EQ(run("fault drop del").rc, -EINVAL) << "del needs a selection";
  EXPECT_EQ(run("fault drop del", {{"dest", {"99@gni"}}}).rc, -ENOENT);
  EXPECT_EQ(run("fault drop del", {{"all", {}}}).rc, 0);
  EXPECT_EQ(run("fault delay del", {{"dest", {"52@gni"}}}).rc, 0);
  EXPECT_TRUE(a->control().faults(false).empty());
  EXPECT_TRUE(a->control().faults(true).empty());
}

}  // namespace
}  // namespace lnet
