// What an application and lnet-proxy say outside LNet: the TABLE's golden bytes and
// round trip, the control messages, the port file and the doorbell's lines, and every
// malformed one refused naming its fault.
#include <gtest/gtest.h>

#include <cstring>

#include <lnet/mpi_proxy.hpp>

namespace lnet::mpi::proxy {
namespace {

Table table() {
  Table t;
  t.pid = 0x80000007;
  t.proxies = {*Nid::parse("127.0.0.2@mpi"), *Nid::parse("127.0.0.3@mpi")};
  t.nets = {*NetId::parse("tcp"), *NetId::parse("o2ib1")};
  return t;
}

std::string refused(const std::vector<std::uint8_t>& bytes) {
  auto t = decode_table(bytes);
  EXPECT_FALSE(t);
  if (t) return "accepted";
  EXPECT_EQ(t.code(), -EPROTO);
  return t.message();
}

TEST(ProxyTable, GoldenBytes) {
  auto b = encode(table());
  const std::vector<std::uint8_t> want = {
      0x4c, 0x4e, 0x50, 0x54, 0x01, 0x00, 0x00, 0x00,  // magic "LNPT", version 1, reserved
      0x00, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x80,  // status 0, pid
      0x02, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,  // 2 proxies, 2 nets
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // no error text, reserved
      0x02, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x40, 0x00,  // 127.0.0.2@mpi (type 64, net 0)
      0x03, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x40, 0x00,  // 127.0.0.3@mpi
      0x00, 0x00, 0x02, 0x00,                          // tcp
      0x01, 0x00, 0x05, 0x00,                          // o2ib1
  };
  EXPECT_EQ(b, want);
  auto t = decode_table(b);
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ(*t, table());
}

TEST(ProxyTable, AnErrorRoundTrips) {
  Table t{-EEXIST, 0, {}, {}, "proxy rank 1 could not take the pid"};
  auto back = decode_table(encode(t));
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(*back, t);
}

TEST(ProxyTable, MalformedOnesAreRefused) {
  auto good = encode(table());
  EXPECT_NE(refused({good.begin(), good.begin() + 20}).find("shorter than its header"), std::string::npos);
  auto b = good;
  b[0] ^= 1;
  EXPECT_NE(refused(b).find("bad magic"), std::string::npos);
  b = good;
  b[4] = 2;
  EXPECT_NE(refused(b).find("version 2"), std::string::npos);
  b = good;
  b[16] = 0xff, b[17] = 0xff;  // 65535 proxies
  EXPECT_NE(refused(b).find("out of range"), std::string::npos);
  b = good;
  b.push_back(0);
  EXPECT_NE(refused(b).find("not what its counts make"), std::string::npos);
  b = good;
  b.pop_back();
  EXPECT_NE(refused(b).find("not what its counts make"), std::string::npos);
  b = good;
  b[16] = 0;  // status 0 and no proxies
  b.erase(b.begin() + 32, b.begin() + 48);
  EXPECT_NE(refused(b).find("no proxies"), std::string::npos);
  b = good;
  b[8] = 5;  // a positive status
  EXPECT_NE(refused(b).find("positive status"), std::string::npos);
  auto e = encode(Table{-EIO, 0, {}, {}, "x"});
  e.back() = '\n';
  EXPECT_NE(refused(e).find("not printable"), std::string::npos);
}

TEST(ProxyControl, RoundTripsAndRefusesGarbage) {
  std::uint8_t b[kControlSize];
  encode(Control::Bye, b);
  const std::uint8_t want[kControlSize] = {0x4c, 0x4e, 0x50, 0x43, 2, 0, 0, 0};
  EXPECT_EQ(std::memcmp(b, want, kControlSize), 0);
  auto c = decode_control(b);
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, Control::Bye);
  EXPECT_FALSE(decode_control(std::span<const std::uint8_t>(b, 4)));
  for (Control k : {Control::Heartbeat, Control::Hello}) {
    encode(k, b);
    ASSERT_TRUE(decode_control(b));
    EXPECT_EQ(*decode_control(b), k);
  }
  b[4] = 9;
  EXPECT_NE(decode_control(b).message().find("unknown kind 9"), std::string::npos);
  b[0] = 0;
  EXPECT_NE(decode_control(b).message().find("bad magic"), std::string::npos);
}

const std::string kSecret = "0123456789abcdef0123456789abcdef";

TEST(ProxyPortFile, RoundTripsAndRefusesWhatIsNotOne) {
  PortInfo p{"772407297.0:1644153624", "127.0.0.2:39605", kSecret};
  std::string text = format_port_file(p);
  EXPECT_EQ(text, "lnet-proxy 2\nport 772407297.0:1644153624\ndoorbell 127.0.0.2:39605\nsecret " + kSecret + "\n");
  auto back = parse_port_file(text);
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(*back, p);
  EXPECT_NE(parse_port_file("").message().find("empty"), std::string::npos);
  EXPECT_NE(parse_port_file("hello\n").message().find("not written by lnet-proxy"), std::string::npos);
  EXPECT_NE(parse_port_file("lnet-proxy 1\n").message().find("format 1, this side reads 2"), std::string::npos);
  EXPECT_NE(parse_port_file("lnet-proxy 2\ndoorbell 1.2.3.4:5\n").message().find("no 'port' line"), std::string::npos);
  EXPECT_NE(parse_port_file("lnet-proxy 2\nport x\n").message().find("no 'doorbell' line"), std::string::npos);
  EXPECT_NE(parse_port_file("lnet-proxy 2\nport x\ndoorbell 1.2.3.4:5\n").message().find("no 'secret' line"),
            std::string::npos);
  EXPECT_NE(parse_port_file("lnet-proxy 2\nport x\nsecret XYZ\n").message().find("malformed secret"),
            std::string::npos);
  EXPECT_NE(parse_port_file("lnet-proxy 2\nport x\ncolour blue\n").message().find("line 3: unknown"),
            std::string::npos);
  EXPECT_NE(parse_port_file(std::string("lnet-proxy 2\nport \x01\n")).message().find("not printable"),
            std::string::npos);
  EXPECT_FALSE(parse_port_file(std::string(5000, 'x')));
}

TEST(ProxyDoorbell, Secrets) {
  auto a = make_secret(), b = make_secret();
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(secret_form(*a));
  EXPECT_NE(*a, *b);
  EXPECT_TRUE(same_secret(*a, *a));
  EXPECT_FALSE(same_secret(*a, *b));
  EXPECT_FALSE(same_secret(*a, a->substr(1)));
  EXPECT_FALSE(secret_form("0123456789ABCDEF0123456789ABCDEF"));
}

TEST(ProxyDoorbell, KnockLines) {
  auto k = parse_knock(format_knock({Knock::Client, 4, kSecret}));
  ASSERT_TRUE(k) << k.message();
  EXPECT_EQ(k->kind, Knock::Client);
  EXPECT_EQ(k->value, 4);
  EXPECT_EQ(k->secret, kSecret);
  k = parse_knock(format_knock({Knock::Rank, 3, kSecret}));
  ASSERT_TRUE(k);
  EXPECT_EQ(k->kind, Knock::Rank);
  EXPECT_EQ(k->value, 3);
  EXPECT_EQ(k->secret, kSecret);
  EXPECT_NE(parse_knock("KNOCK 1 4\n").message().find("version 1, this side speaks 2"), std::string::npos);
  EXPECT_NE(parse_knock("KNOCK 2 4\n").message().find("KNOCK 2 <ranks> <secret>"), std::string::npos);
  EXPECT_NE(parse_knock("KNOCK 2 4 xyz\n").message().find("malformed secret"), std::string::npos);
  EXPECT_NE(parse_knock("KNOCK 2 0 " + kSecret + "\n").message().find("bad rank count"), std::string::npos);
  EXPECT_NE(parse_knock("KNOCK 2 4x " + kSecret + "\n").message().find("bad rank count"), std::string::npos);
  EXPECT_NE(parse_knock("RANK 0 " + kSecret + "\n").message().find("bad rank"), std::string::npos);
  EXPECT_NE(parse_knock("GET / HTTP/1.0\n").message().find("unknown line"), std::string::npos);
  EXPECT_NE(parse_knock(std::string("KNOCK\x7f 1 1\n")).message().find("not printable"), std::string::npos);
  EXPECT_FALSE(parse_knock(std::string(300, 'K')));
}

TEST(ProxyDoorbell, Answers) {
  for (const Answer& a : {Answer{Answer::Ok, ""}, Answer{Answer::Port, "557121537.0:2393957742"},
                          Answer{Answer::Error, "no lnetd behind rank 1"}}) {
    auto back = parse_answer(format_answer(a));
    ASSERT_TRUE(back) << back.message();
    EXPECT_EQ(*back, a);
  }
  // Whatever an error says, its line parses: cut to fit, unprintable bytes replaced.
  auto e = parse_answer(format_answer({Answer::Error, std::string(1000, 'x') + "\n\x01"}));
  ASSERT_TRUE(e) << e.message();
  EXPECT_EQ(e->kind, Answer::Error);
  EXPECT_EQ(format_answer({Answer::Error, "a\nb"}), "ERROR a?b\n");
  EXPECT_NE(parse_answer("OK").message().find("without its newline"), std::string::npos);
  EXPECT_NE(parse_answer("PORT \n").message().find("without one port name"), std::string::npos);
  EXPECT_NE(parse_answer("PORT a b\n").message().find("without one port name"), std::string::npos);
  EXPECT_NE(parse_answer("ERROR \n").message().find("unknown answer"), std::string::npos);
  EXPECT_NE(parse_answer("HTTP/1.0 200 OK\n").message().find("unknown answer"), std::string::npos);
  EXPECT_NE(parse_answer(std::string("PORT \x02\n")).message().find("not printable"), std::string::npos);
  EXPECT_NE(parse_answer("PORT " + std::string(300, 'p') + "\n").message().find("bytes"), std::string::npos);
}

// The lines between the proxy's ranks, in golden text, and what is refused.
TEST(ProxyDoorbell, RankLines) {
  const std::pair<RankLine, const char*> golden[] = {
      {{RankLine::Accept, 7, false}, "ACCEPT 7\n"},
      {{RankLine::End, 7, true}, "END 7 1\n"},
      {{RankLine::End, 18446744073709551615ULL, false}, "END 18446744073709551615 0\n"},
      {{RankLine::Quit, 0, false}, "QUIT\n"},
      {{RankLine::Gone, 0, false}, "GONE\n"},
      {{RankLine::Bad, 3, false}, "BAD 3\n"}};
  for (const auto& [l, text] : golden) {
    EXPECT_EQ(format_rank_line(l), text);
    auto back = parse_rank_line(text);
    ASSERT_TRUE(back) << text << ": " << back.message();
    EXPECT_EQ(*back, l) << text;
  }
  EXPECT_NE(parse_rank_line("QUIT").message().find("without its newline"), std::string::npos);
  EXPECT_NE(parse_rank_line("ACCEPT\n").message().find("unknown rank line"), std::string::npos);
  EXPECT_NE(parse_rank_line("ACCEPT -1\n").message().find("bad application serial"), std::string::npos);
  EXPECT_NE(parse_rank_line("ACCEPT 18446744073709551616\n").message().find("bad application serial"),
            std::string::npos);
  EXPECT_NE(parse_rank_line("END 4 2\n").message().find("not 1 or 0"), std::string::npos);
  EXPECT_NE(parse_rank_line("END 4\n").message().find("unknown rank line"), std::string::npos);
  EXPECT_NE(parse_rank_line("QUIT now\n").message().find("unknown rank line"), std::string::npos);
  EXPECT_NE(parse_rank_line(std::string("BAD 1\x01\n")).message().find("not printable"), std::string::npos);
  EXPECT_NE(parse_rank_line(std::string(300, 'Q') + "\n").message().find("bytes"), std::string::npos);
}

TEST(ProxySpawn, TargetLists) {
  auto t = parse_spawn_list("/run/lnet/bridge.sock");
  ASSERT_TRUE(t) << t.message();
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0], (SpawnTarget{"", "/run/lnet/bridge.sock"}));
  t = parse_spawn_list("oss1:/run/lnet/bridge.sock,oss2.example.org:/tmp/b");
  ASSERT_TRUE(t) << t.message();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[1], (SpawnTarget{"oss2.example.org", "/tmp/b"}));
  EXPECT_NE(parse_spawn_list("").message().find("no proxy targets"), std::string::npos);
  EXPECT_NE(parse_spawn_list("relative/path").message().find("bad bridge path"), std::string::npos);
  EXPECT_NE(parse_spawn_list("/a,").message().find("bad bridge path ''"), std::string::npos);
  EXPECT_NE(parse_spawn_list(":/a").message().find("bad host ''"), std::string::npos);
  EXPECT_NE(parse_spawn_list("o$s:/a").message().find("bad host 'o$s'"), std::string::npos);
  EXPECT_NE(parse_spawn_list("h:/a b").message().find("bad bridge path"), std::string::npos);
}

}  // namespace
}  // namespace lnet::mpi::proxy
