// What lst's arguments mean: node lists (lst::parse_ids, with lst's stricter ranges)
// and add_test's test, its brw parameters and its options.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>

#include <lnet/nid_range.hpp>

#include "lst_commands.hpp"

namespace lnet::selftest::lst {

namespace detail {
namespace {

constexpr std::size_t kMaxIds = 4096;  // nodes one argument may name

Result<std::vector<Nid>> expand(const NidPattern& p) {
  if (!p.net().is_single()) return Failure{-EINVAL, "a node list names one network per NID: " + p.to_string()};
  if (p.is_v6()) return Failure{-EOPNOTSUPP, "not supported yet: IPv6 NIDs in a node list: " + p.to_string()};
  const auto& nr = p.net().numbers().ranges();
  NetId net = NetId::make(p.net().type(), nr.empty() ? 0 : nr[0].lo);
  std::vector<std::vector<std::uint32_t>> parts;
  std::size_t total = 1;
  for (const NumberExpr& e : p.address()) {
    if (e.is_any()) return Failure{-EINVAL, "'*' does not name nodes: " + p.to_string()};
    std::vector<std::uint32_t> vs;
    for (const auto& r : e.ranges())
      for (std::uint64_t v = r.lo; v <= r.hi && vs.size() <= kMaxIds; v += r.step ? r.step : 1)
        vs.push_back(static_cast<std::uint32_t>(v));
    total *= vs.size();
    if (total > kMaxIds) return Failure{-E2BIG, "more than 4096 nodes in " + p.to_string()};
    parts.push_back(std::move(vs));
  }
  std::vector<Nid> out;
  std::vector<std::size_t> at(parts.size(), 0);
  for (std::size_t n = 0; n < total; ++n) {  // the first bracket varies slowest
    std::uint32_t addr = 0;
    if (parts.size() == 4)
      for (std::size_t k = 0; k < 4; ++k) addr = (addr << 8) | (parts[k][at[k]] & 0xff);
    else
      addr = parts[0][at[0]];
    out.push_back(Nid::make(net, addr));
    for (std::size_t k = parts.size(); k-- > 0;) {
      if (++at[k] < parts[k].size()) break;
      at[k] = 0;
    }
  }
  return out;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// One of brw's parameters (size=4k, read, ...) into `t`.
Status brw_param(const std::string& a, TestSpec& t) {
  // As lst: keywords in any case, each with its short form.
  std::string low = lower(a);
  auto eq = low.find('=');
  std::string k = low.substr(0, eq), v = eq == std::string::npos ? "" : low.substr(eq + 1);
  if (low == "read" || low == "r") {
    t.op = BrwOp::Read;
  } else if (low == "write" || low == "w") {
    t.op = BrwOp::Write;
  } else if (low == "skip_rx_copy" || low == "skip-rx-copy") {
    t.check = BrwCheck::Discard;
  } else if (eq != std::string::npos && (k == "size" || k == "s")) {
    std::uint64_t mult = 1;
    std::string num = v;
    if (!num.empty() && num.back() == 'k') mult = 1024, num.pop_back();
    if (!num.empty() && num.back() == 'm') mult = 1 << 20, num.pop_back();
    auto n = number(num, "size", 1, kMaxPayload);
    if (!n || *n * mult > kMaxPayload)
      return Failure{-EINVAL, "bad brw size '" + a.substr(eq + 1) + "' (1 to 1M, with k or m)"};
    t.size = static_cast<std::uint32_t>(*n * mult);
  } else if (eq != std::string::npos && (k == "check" || k == "c")) {
    if (v == "simple")
      t.check = BrwCheck::Simple;
    else if (v == "full")
      t.check = BrwCheck::Full;
    else if (v == "discard")
      t.check = BrwCheck::Discard;
    else
      return Failure{-EINVAL, "bad brw check '" + a.substr(eq + 1) + "' (simple, full or discard)"};
  } else if (eq != std::string::npos && k == "off") {
    auto n = number(v, "off", 0, kPageSize - 8);
    if (!n || *n % 8 != 0)
      return Failure{-EINVAL, "bad brw off '" + a.substr(eq + 1) + "' (a multiple of 8 below 4096)"};
    t.offset = *n;
  } else {
    return Failure{-EINVAL, "unknown brw parameter '" + a +
                                "' (read|r, write|w, size|s=N[k|m], check|c=simple|full|discard, off=N, "
                                "skip_rx_copy)"};
  }
  return {};
}

// add_test's --loop, --concurrency and --distribute into `t`.
Status test_options(const dlc::Request& r, TestSpec& t) {
  if (const std::string* v = r.arg("loop")) {
    if (*v == "-1") {
      t.loop = kLoopForever;
    } else {
      auto n = number(*v, "--loop", 1, 0xFFFFFFFE);
      if (!n) return n.failure();
      t.loop = *n;
    }
  }
  if (const std::string* v = r.arg("concurrency")) {
    auto n = number(*v, "--concurrency", 1, kMaxConcur);
    if (!n) return n.failure();
    t.concurrency = *n;
  }
  if (const std::string* v = r.arg("distribute")) {
    auto colon = v->find(':');
    auto d = number(v->substr(0, colon), "--distribute", 1, 1u << 20);
    auto s = colon == std::string::npos ? Result<std::uint32_t>(Failure{-EINVAL, ""})
                                        : number(v->substr(colon + 1), "--distribute", 1, 1u << 20);
    if (!d || !s) return Failure{-EINVAL, "bad --distribute '" + *v + "' (DIST:SPAN, two positive numbers)"};
    t.dist = *d;
    t.span = *s;
  }
  return {};
}

}  // namespace

Result<TestSpec> test_spec(const dlc::Request& r) {
  TestSpec t;
  static const std::vector<std::string> none;
  auto found = r.args.find("args");
  const auto& args = found == r.args.end() ? none : found->second;
  if (args.empty()) return Failure{-EINVAL, "name the test: ping or brw"};
  std::string test = lower(args[0]);
  if (test == "ping") {
    t.service = Service::Ping;
    if (args.size() > 1) return Failure{-EINVAL, "ping takes no parameter: " + args[1]};
  } else if (test == "brw") {
    t.service = Service::Brw;
    for (std::size_t i = 1; i < args.size(); ++i)
      if (Status s = brw_param(args[i], t); !s) return s.failure();
    // Sizes a kernel node's lnet_selftest takes (lst does not check them; the kernel
    // asserts on the others, and the node panics): a multiple of 8, and the offset
    // within the pages of the size.
    if (t.size % 8 != 0)
      return Failure{-EINVAL, "bad brw size " + std::to_string(t.size) +
                                  ": not a multiple of 8 (a kernel node asserts that it is)"};
    auto pages = [](std::uint64_t n) { return (n + kPageSize - 1) / kPageSize; };
    if (pages(std::uint64_t{t.offset} + t.size) > pages(t.size))
      return Failure{-EINVAL, "bad brw off=" + std::to_string(t.offset) + " with size=" + std::to_string(t.size) +
                                  ": they span " + std::to_string(pages(std::uint64_t{t.offset} + t.size)) +
                                  " pages, the size " + std::to_string(pages(t.size)) +
                                  " (a kernel node asserts that they fit)"};
  } else {
    return Failure{-EINVAL, "unknown test '" + args[0] + "' (ping or brw)"};
  }
  if (Status s = test_options(r, t); !s) return s.failure();
  if (!r.arg("from") || !r.arg("to")) return Failure{-EINVAL, "add_test needs --from GROUP and --to GROUP"};
  t.from = *r.arg("from");
  t.to = *r.arg("to");
  return t;
}

}  // namespace detail

// lst's ranges are stricter than LNet's NID ranges: in "[lo-hi]" (and "[lo-hi/step]") lo
// must be below hi, so "[5-5]" and "[7-3]" are syntax errors, as lst's own expander has it.
namespace {

Status check_ranges(std::string_view text) {
  for (std::size_t open = text.find('['); open != std::string_view::npos; open = text.find('[', open + 1)) {
    std::size_t close = text.find(']', open);
    if (close == std::string_view::npos) return {};  // NidPattern names this one
    std::string_view inside = text.substr(open + 1, close - open - 1);
    while (!inside.empty()) {
      std::size_t comma = inside.find(',');
      std::string_view tok = inside.substr(0, comma);
      inside = comma == std::string_view::npos ? std::string_view() : inside.substr(comma + 1);
      std::size_t dash = tok.find('-');
      if (dash == std::string_view::npos) continue;
      std::uint64_t lo = 0, hi = 0;
      std::string_view hi_text = tok.substr(dash + 1);
      hi_text = hi_text.substr(0, hi_text.find('/'));
      auto [p1, e1] = std::from_chars(tok.data(), tok.data() + dash, lo);
      auto [p2, e2] = std::from_chars(hi_text.data(), hi_text.data() + hi_text.size(), hi);
      if (e1 != std::errc() || e2 != std::errc()) continue;  // NidPattern names this one
      if (lo >= hi)
        return Failure{-EINVAL, "Syntax error in \"" + std::string(text) + "\" (in range '" + std::string(tok) +
                                    "' the low end must be below the high end)"};
    }
  }
  return {};
}

}  // namespace

Result<std::vector<ProcessId>> parse_ids(std::string_view text, const PidDefault& dflt) {
  if (Status s = check_ranges(text); !s) return s.failure();
  std::optional<Pid> pid;
  std::string_view nid = text;
  // A pid prefix: digits (or U and digits) and a '-' before any '.', '[' or '@'.
  auto dash = text.find('-');
  if (dash != std::string_view::npos && dash > 0) {
    std::string_view head = text.substr(0, dash);
    bool user = head[0] == 'U';
    std::string_view digits = user ? head.substr(1) : head;
    if (!digits.empty() && std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      std::uint32_t v = 0;
      auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (ec != std::errc() || p != digits.data() + digits.size() || v > 0x7fffffff)
        return Failure{-EINVAL, "bad pid in '" + std::string(text) + "'"};
      pid = user ? (v | kPidUserFlag) : v;
      nid = text.substr(dash + 1);
    }
  }
  auto pat = NidPattern::parse(nid);
  if (!pat) return Failure{-EINVAL, "bad node '" + std::string(text) + "': " + pat.message()};
  auto nids = detail::expand(*pat);
  if (!nids) return nids.failure();
  std::vector<ProcessId> out;
  // The job's pid for its ranks (addresses below 2^24 on its net); a node's address
  // there is a proxy's or an lnetd's, whose pid is LNet's.
  auto rank_of_job = [&](Nid n) { return dflt.job_net && n.net() == *dflt.job_net && !mpi_node_address(n.addr()); };
  for (Nid n : *nids) out.push_back(ProcessId{n, pid ? *pid : rank_of_job(n) ? dflt.job_pid : kPidLustre});
  return out;
}

}  // namespace lnet::selftest::lst
