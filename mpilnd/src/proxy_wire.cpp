// Codecs of what an application and lnet-proxy say outside LNet (lnet/mpi_proxy.hpp):
// the TABLE, the control messages, the port file and the doorbell's lines.
#include <sys/random.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include <lnet/lnd/byteorder.hpp>
#include <lnet/mpi_proxy.hpp>

namespace lnet::mpi::proxy {

namespace {

Failure bad(const std::string& why) { return Failure{-EPROTO, why}; }

// The words of a line, split at spaces.
std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  while (!line.empty()) {
    auto start = line.find_first_not_of(' ');
    if (start == std::string_view::npos) break;
    line.remove_prefix(start);
    auto end = line.find(' ');
    out.push_back(line.substr(0, end));
    line.remove_prefix(end == std::string_view::npos ? line.size() : end);
  }
  return out;
}

bool to_int(std::string_view s, long lo, long hi, long* out) {
  long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// Printable text only: the file and the lines come from outside.
bool printable(std::string_view s) {
  for (char c : s)
    if (c < 0x20 || c > 0x7e) return false;
  return true;
}

}  // namespace

// Layout: magic u32, version u16, reserved u16, status i32, pid u32, proxies u32,
// nets u32, error length u32, reserved u32; then the proxies' NIDs (u64 each), the
// nets (u32 each), the error text. Little-endian.
std::vector<std::uint8_t> encode(const Table& t) {
  std::size_t np = std::min(t.proxies.size(), kMaxProxies), nn = std::min(t.nets.size(), kMaxNets);
  std::size_t ne = std::min(t.error.size(), kMaxErrorText);
  std::vector<std::uint8_t> out(kTableHdrSize + np * 8 + nn * 4 + ne);
  wire::ByteWriter w(out.data());
  w.u32(kTableMagic).u16(kTableVersion).u16(0).i32(t.status).u32(t.pid);
  w.u32(static_cast<std::uint32_t>(np)).u32(static_cast<std::uint32_t>(nn)).u32(static_cast<std::uint32_t>(ne)).u32(0);
  for (std::size_t i = 0; i < np; ++i) w.u64(t.proxies[i].value());
  for (std::size_t i = 0; i < nn; ++i) w.u32(t.nets[i].value());
  w.bytes(t.error.data(), ne);
  return out;
}

Result<Table> decode_table(std::span<const std::uint8_t> in) {
  if (in.size() < kTableHdrSize)
    return bad("proxy table: " + std::to_string(in.size()) + " bytes, shorter than its header");
  wire::ByteReader r(in.data());
  if (r.u32() != kTableMagic) return bad("proxy table: bad magic");
  if (auto v = r.u16(); v != kTableVersion)
    return bad("proxy table: version " + std::to_string(v) + ", this side speaks " + std::to_string(kTableVersion));
  r.skip(2);
  Table t;
  t.status = r.i32();
  t.pid = r.u32();
  std::uint32_t np = r.u32(), nn = r.u32(), ne = r.u32();
  r.skip(4);
  if (np > kMaxProxies || nn > kMaxNets || ne > kMaxErrorText)
    return bad("proxy table: counts out of range (" + std::to_string(np) + " proxies, " + std::to_string(nn) +
               " nets, " + std::to_string(ne) + " bytes of text)");
  if (in.size() != kTableHdrSize + std::size_t{np} * 8 + std::size_t{nn} * 4 + ne)
    return bad("proxy table: " + std::to_string(in.size()) + " bytes, not what its counts make");
  if (t.status > 0) return bad("proxy table: positive status " + std::to_string(t.status));
  if (t.status == 0 && np == 0) return bad("proxy table: no proxies");
  for (std::uint32_t i = 0; i < np; ++i) t.proxies.emplace_back(r.u64());
  for (std::uint32_t i = 0; i < nn; ++i) t.nets.emplace_back(r.u32());
  t.error.assign(reinterpret_cast<const char*>(r.pos()), ne);
  if (!printable(t.error)) return bad("proxy table: the error text is not printable");
  return t;
}

void encode(Control c, std::uint8_t (&out)[kControlSize]) {
  wire::ByteWriter(out).u32(kControlMagic).u32(static_cast<std::uint32_t>(c));
}

Result<Control> decode_control(std::span<const std::uint8_t> in) {
  if (in.size() != kControlSize) return bad("proxy control: " + std::to_string(in.size()) + " bytes, not 8");
  wire::ByteReader r(in.data());
  if (r.u32() != kControlMagic) return bad("proxy control: bad magic");
  std::uint32_t k = r.u32();
  if (k != static_cast<std::uint32_t>(Control::Heartbeat) && k != static_cast<std::uint32_t>(Control::Bye) &&
      k != static_cast<std::uint32_t>(Control::Hello))
    return bad("proxy control: unknown kind " + std::to_string(k));
  return static_cast<Control>(k);
}

std::string format_port_file(const PortInfo& p) {
  return "lnet-proxy 2\nport " + p.port + "\ndoorbell " + p.doorbell + "\nsecret " + p.secret + "\n";
}

bool secret_form(std::string_view s) {
  return s.size() == kSecretSize && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

Result<std::string> make_secret() {
  unsigned char bytes[kSecretSize / 2];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes))
    return Failure{-errno, std::string("getrandom: ") + std::strerror(errno)};
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  for (unsigned char b : bytes) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Result<PortInfo> parse_port_file(std::string_view text) {
  if (text.size() > 4096) return bad("port file: " + std::to_string(text.size()) + " bytes, too long for one");
  PortInfo pi;
  bool header = false;
  int line_no = 0;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (!printable(line)) return bad("port file line " + std::to_string(line_no) + ": not printable text");
    auto w = words(line);
    if (w.empty()) continue;
    if (!header) {
      if (w.size() != 2 || w[0] != "lnet-proxy") return bad("port file: not written by lnet-proxy");
      if (w[1] != "2") return bad("port file: format " + std::string(w[1]) + ", this side reads 2");
      header = true;
    } else if (w[0] == "port" && w.size() == 2) {
      pi.port = w[1];
    } else if (w[0] == "doorbell" && w.size() == 2) {
      pi.doorbell = w[1];
    } else if (w[0] == "secret" && w.size() == 2) {
      if (!secret_form(w[1])) return bad("port file line " + std::to_string(line_no) + ": a malformed secret");
      pi.secret = w[1];
    } else {
      return bad("port file line " + std::to_string(line_no) + ": unknown: '" + std::string(line) + "'");
    }
  }
  if (!header) return bad("port file: empty");
  if (pi.port.empty()) return bad("port file: no 'port' line");
  if (pi.doorbell.empty()) return bad("port file: no 'doorbell' line");
  if (pi.secret.empty()) return bad("port file: no 'secret' line");
  return pi;
}

Result<PortInfo> read_port_file(const std::string& path) {
  std::ifstream f(path);
  if (!f)
    return Failure{-ENOENT, "cannot read the port file " + path + ": " + std::strerror(errno) +
                                " (is lnet-proxy running? may this user read it?)"};
  std::stringstream text;
  text << f.rdbuf();
  auto pi = parse_port_file(text.str());
  if (!pi) return Failure{pi.code(), path + ": " + pi.message()};
  return pi;
}

Result<std::vector<SpawnTarget>> parse_spawn_list(std::string_view text) {
  std::vector<SpawnTarget> out;
  if (text.empty()) return Failure{-EINVAL, "no proxy targets after 'spawn:' ([HOST:]BRIDGE_PATH,...)"};
  while (true) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    SpawnTarget t;
    auto colon = item.find(':');
    if (colon != std::string_view::npos) {
      t.host = item.substr(0, colon);
      item.remove_prefix(colon + 1);
      if (t.host.empty() ||
          t.host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") !=
              std::string::npos)
        return Failure{-EINVAL, "bad host '" + t.host + "' in the proxy targets"};
    }
    t.bridge = item;
    if (t.bridge.empty() || t.bridge[0] != '/' || !printable(t.bridge) || t.bridge.find(' ') != std::string::npos ||
        t.bridge.size() > 4096)
      return Failure{-EINVAL, "bad bridge path '" + t.bridge + "' in the proxy targets (an absolute path)"};
    out.push_back(std::move(t));
    if (out.size() > kMaxProxies)
      return Failure{-EINVAL, "more than " + std::to_string(kMaxProxies) + " proxy targets"};
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

Result<Knock> parse_knock(std::string_view line) {
  if (line.size() > kMaxLine) return bad("doorbell: a line of " + std::to_string(line.size()) + " bytes");
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (!printable(line)) return bad("doorbell: not printable text");
  auto w = words(line);
  long v = 0;
  if (!w.empty() && w[0] == "KNOCK") {
    if (w.size() >= 2 && w[1] != "2")
      return bad("doorbell: knock version " + std::string(w[1]) + ", this side speaks 2");
    if (w.size() != 4) return bad("doorbell: a knock is 'KNOCK 2 <ranks> <secret>'");
    if (!to_int(w[2], 1, 1 << 24, &v)) return bad("doorbell: bad rank count '" + std::string(w[2]) + "'");
    if (!secret_form(w[3])) return bad("doorbell: a malformed secret");
    return Knock{Knock::Client, static_cast<int>(v), std::string(w[3])};
  }
  if (w.size() == 3 && w[0] == "RANK") {
    if (!to_int(w[1], 1, 1 << 24, &v)) return bad("doorbell: bad rank '" + std::string(w[1]) + "'");
    if (!secret_form(w[2])) return bad("doorbell: a malformed secret");
    return Knock{Knock::Rank, static_cast<int>(v), std::string(w[2])};
  }
  return bad("doorbell: unknown line '" + std::string(line.substr(0, 64)) + "'");
}

Result<Answer> parse_answer(std::string_view line) {
  if (line.size() > kMaxLine) return bad("doorbell: an answer of " + std::to_string(line.size()) + " bytes");
  if (line.empty() || line.back() != '\n') return bad("doorbell: an answer without its newline");
  line.remove_suffix(1);
  if (!printable(line)) return bad("doorbell: an answer that is not printable text");
  if (line == "OK") return Answer{Answer::Ok, {}};
  if (line.starts_with("PORT ")) {
    std::string_view port = line.substr(5);
    if (port.empty() || port.find(' ') != std::string_view::npos)
      return bad("doorbell: a PORT answer without one port name");
    return Answer{Answer::Port, std::string(port)};
  }
  if (line.starts_with("ERROR ") && line.size() > 6) return Answer{Answer::Error, std::string(line.substr(6))};
  return bad("doorbell: unknown answer '" + std::string(line.substr(0, 64)) + "'");
}

std::string format_answer(const Answer& a) {
  switch (a.kind) {
    case Answer::Ok: return "OK\n";
    case Answer::Port: return "PORT " + a.text + "\n";
    case Answer::Error: break;
  }
  std::string why = a.text.empty() ? "refused" : a.text.substr(0, kMaxLine - 7);
  for (char& c : why)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return "ERROR " + why + "\n";
}

Result<RankLine> parse_rank_line(std::string_view line) {
  if (line.size() > kMaxLine) return bad("doorbell: a rank line of " + std::to_string(line.size()) + " bytes");
  if (line.empty() || line.back() != '\n') return bad("doorbell: a rank line without its newline");
  line.remove_suffix(1);
  if (!printable(line)) return bad("doorbell: a rank line that is not printable text");
  auto w = words(line);
  auto serial = [](std::string_view s, std::uint64_t* out) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    return ec == std::errc() && p == s.data() + s.size();
  };
  RankLine l;
  if (w.size() == 1 && (w[0] == "QUIT" || w[0] == "GONE")) {
    l.kind = w[0] == "QUIT" ? RankLine::Quit : RankLine::Gone;
    return l;
  }
  if (w.size() == 2 && (w[0] == "ACCEPT" || w[0] == "BAD")) {
    l.kind = w[0] == "ACCEPT" ? RankLine::Accept : RankLine::Bad;
    if (!serial(w[1], &l.serial)) return bad("doorbell: bad application serial '" + std::string(w[1]) + "'");
    return l;
  }
  if (w.size() == 3 && w[0] == "END") {
    l.kind = RankLine::End;
    if (!serial(w[1], &l.serial)) return bad("doorbell: bad application serial '" + std::string(w[1]) + "'");
    if (w[2] != "0" && w[2] != "1") return bad("doorbell: END with '" + std::string(w[2]) + "', not 1 or 0");
    l.goodbye = w[2] == "1";
    return l;
  }
  return bad("doorbell: unknown rank line '" + std::string(line.substr(0, 64)) + "'");
}

std::string format_rank_line(const RankLine& l) {
  switch (l.kind) {
    case RankLine::Accept: return "ACCEPT " + std::to_string(l.serial) + "\n";
    case RankLine::End: return "END " + std::to_string(l.serial) + (l.goodbye ? " 1\n" : " 0\n");
    case RankLine::Quit: return "QUIT\n";
    case RankLine::Gone: return "GONE\n";
    case RankLine::Bad: break;
  }
  return "BAD " + std::to_string(l.serial) + "\n";
}

std::string format_knock(const Knock& k) {
  return k.kind == Knock::Client ? "KNOCK 2 " + std::to_string(k.value) + " " + k.secret + "\n"
                                 : "RANK " + std::to_string(k.value) + " " + k.secret + "\n";
}

}  // namespace lnet::mpi::proxy
