// lst's user half: the command line, `stat` in rounds, and the output lst users know
// (or CSV / YAML).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <yaml-cpp/yaml.h>

#include <cli/cli.hpp>
#include <selftest/brw.hpp>
#include <selftest/lst.hpp>

namespace po = boost::program_options;

namespace lnet::selftest::lst {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kIdle = -1;  // print(): a query found the batch idle

template <typename T>
T get(const YAML::Node& n, const char* key, T dflt = T()) {
  try {
    return n[key] ? n[key].as<T>() : dflt;
  } catch (const YAML::Exception&) {
    return dflt;
  }
}

std::uint32_t number_or(const dlc::Request& r, const char* name, std::uint32_t dflt) {
  const std::string* v = r.arg(name);
  if (!v) return dflt;
  try {
    long n = std::stol(*v);
    return n < 0 ? dflt : static_cast<std::uint32_t>(n);
  } catch (const std::exception&) {
    return dflt;
  }
}

bool active(const YAML::Node& node) { return get<std::string>(node, "state") == "Active"; }

// ---------------------------------------------------------------- stat

struct Sample {
  FwCounters fw;
  LnetCounters lnet;
};
using Samples = std::map<std::string, std::map<std::string, Sample>>;  // group -> node -> sample

Sample sample_of(const YAML::Node& c) {
  Sample s;
  s.fw.running_ms = get<std::uint32_t>(c, "running_ms");
  s.lnet.send_count = get<std::uint32_t>(c, "send_count");
  s.lnet.recv_count = get<std::uint32_t>(c, "recv_count");
  s.lnet.send_length = get<std::uint64_t>(c, "send_length");
  s.lnet.recv_length = get<std::uint64_t>(c, "recv_length");
  return s;
}

struct StatView {
  bool rate = true, bw = true, recv = true, send = true, avg = true, min = true, max = true, mbs = false;
  enum class Form { Text, Csv, Yaml } form = Form::Text;
};

StatView view_of(const dlc::Request& r) {
  StatView v;
  if (r.flag("bw") != r.flag("rate")) {
    v.bw = r.flag("bw");
    v.rate = r.flag("rate");
  }
  if (r.flag("read") != r.flag("write")) {
    v.recv = r.flag("read");
    v.send = r.flag("write");
  }
  if (r.flag("avg") || r.flag("min") || r.flag("max")) {
    v.avg = r.flag("avg");
    v.min = r.flag("min");
    v.max = r.flag("max");
  }
  v.mbs = r.flag("mbs");
  if (r.flag("csv")) v.form = StatView::Form::Csv;
  if (r.flag("yaml")) v.form = StatView::Form::Yaml;
  return v;
}

void print_row(std::FILE* out, const StatView& v, const char* tag, const Column& c, const char* unit, bool integer) {
  std::fprintf(out, "%s", tag);
  auto one = [&](const char* what, double x) {
    if (integer)
      std::fprintf(out, " %s: %-8.0f %s", what, x, unit);
    else
      std::fprintf(out, " %s: %-8.2f %s", what, x, unit);
  };
  if (v.avg) one("Avg", c.avg);
  if (v.min) one("Min", c.min);
  if (v.max) one("Max", c.max);
  std::fprintf(out, "\n");
}

YAML::Node column_yaml(const Column& c) {
  YAML::Node n;
  n["avg"] = c.avg;
  n["min"] = c.min;
  n["max"] = c.max;
  return n;
}

void print_stat(std::FILE* out, const StatView& v, const std::string& group, const GroupRates& g, std::size_t failed,
                double t, bool header, YAML::Node* yaml, const YAML::Node& raw) {
  const char* unit = v.mbs ? "MB/s" : "MiB/s";
  switch (v.form) {
    case StatView::Form::Text:
      if (v.rate) {
        std::fprintf(out, "[LNet Rates of %s]\n", group.c_str());
        if (v.recv) print_row(out, v, "[R]", g.recv_rate, "RPC/s", true);
        if (v.send) print_row(out, v, "[W]", g.send_rate, "RPC/s", true);
      }
      if (v.bw) {
        std::fprintf(out, "[LNet Bandwidth of %s]\n", group.c_str());
        if (v.recv) print_row(out, v, "[R]", g.recv_bw, unit, false);
        if (v.send) print_row(out, v, "[W]", g.send_bw, unit, false);
      }
      if (failed) std::fprintf(out, "Failed to stat on %zu nodes\n", failed);
      break;
    case StatView::Form::Csv:
      if (header)
        std::fprintf(out,
                     "time_s,group,nodes,failed,recv_rate_avg,recv_rate_min,recv_rate_max,send_rate_avg,send_rate_min,"
                     "send_rate_max,recv_bw_avg,recv_bw_min,recv_bw_max,send_bw_avg,send_bw_min,send_bw_max,bw_unit\n");
      std::fprintf(out, "%.3f,%s,%zu,%zu", t, group.c_str(), g.nodes, failed);
      for (const Column* c : {&g.recv_rate, &g.send_rate, &g.recv_bw, &g.send_bw})
        std::fprintf(out, ",%.2f,%.2f,%.2f", c->avg, c->min, c->max);
      std::fprintf(out, ",%s\n", unit);
      break;
    case StatView::Form::Yaml: {
      YAML::Node n;
      n["name"] = group;
      n["nodes"] = g.nodes;
      n["failed"] = failed;
      n["rate"]["recv"] = column_yaml(g.recv_rate);
      n["rate"]["send"] = column_yaml(g.send_rate);
      n["bandwidth"]["unit"] = unit;
      n["bandwidth"]["recv"] = column_yaml(g.recv_bw);
      n["bandwidth"]["send"] = column_yaml(g.send_bw);
      // Each node's own counters, as they stand (the RPC layer's and the tests' errors).
      YAML::Node nodes(YAML::NodeType::Sequence);
      for (const auto& node : raw) {
        YAML::Node x;
        x["id"] = node["id"];
        x["state"] = node["state"];
        if (const YAML::Node c = node["counters"]) {
          for (const char* k : {"rpcs_sent", "rpcs_rcvd", "rpc_errors", "rpcs_dropped", "rpcs_expired", "brw_errors",
                                "ping_errors", "bulk_get", "bulk_put", "send_count", "recv_count"})
            x[k] = c[k];
        }
        nodes.push_back(x);
      }
      n["node_counters"] = nodes;
      (*yaml)["groups"].push_back(n);
      break;
    }
  }
}

int stat(const dlc::Request& req, const Exec& exec, Io io) {
  StatView v = view_of(req);
  std::uint32_t delay = std::max<std::uint32_t>(1, number_or(req, "delay", 5));
  std::uint32_t count = number_or(req, "count", 0);  // 0: until interrupted
  Samples prev;
  auto start = Clock::now();
  bool header = true;
  for (std::uint32_t round = 0; count == 0 || round <= count; ++round) {
    if (round > 0) std::this_thread::sleep_for(std::chrono::seconds(delay));
    dlc::Response r = exec(req);
    if (r.rc != 0) {
      std::fprintf(io.err, "lst stat: %s", r.text.c_str());
      return 1;
    }
    YAML::Node doc = YAML::Load(r.text);
    double t = std::chrono::duration<double>(Clock::now() - start).count();
    Samples now;
    YAML::Node yaml;
    if (v.form == StatView::Form::Yaml) yaml["time_s"] = t;
    for (const auto& g : doc["groups"]) {
      std::string name = get<std::string>(g, "name");
      std::vector<NodeRates> rates;
      std::size_t failed = 0;
      for (const auto& n : g["nodes"]) {
        std::string id = get<std::string>(n, "id");
        if (get<int>(n, "rc") != 0 || get<std::uint32_t>(n, "status") != 0 || !n["counters"]) {
          ++failed;
          continue;
        }
        Sample s = sample_of(n["counters"]);
        now[name][id] = s;
        auto p = prev.find(name);
        if (p == prev.end()) continue;
        auto q = p->second.find(id);
        if (q == p->second.end()) continue;
        auto nr = node_rates(q->second.fw, q->second.lnet, s.fw, s.lnet, v.mbs ? kMB : kMiB);
        if (nr) rates.push_back(*nr);
      }
      if (round == 0) continue;  // the first round is the baseline
      print_stat(io.out, v, name, group_rates(rates), failed, t, header, &yaml, g["nodes"]);
      header = false;
    }
    if (round > 0 && v.form == StatView::Form::Yaml) {
      YAML::Emitter e;
      e << yaml;
      std::fprintf(io.out, "---\n%s\n", e.c_str());
    }
    std::fflush(io.out);
    prev = std::move(now);
  }
  return 0;
}

// ---------------------------------------------------------------- the other commands

int print_group(std::FILE* out, const YAML::Node& g) {
  std::size_t total = 0, bad = 0;
  for (const auto& n : g["nodes"]) {
    ++total;
    if (!active(n)) {
      ++bad;
      std::fprintf(out, "\t%s: %s\n", get<std::string>(n, "id").c_str(), get<std::string>(n, "state").c_str());
    }
  }
  if (bad) {
    std::fprintf(out, "%zu of %zu nodes of %s are not active (lst update_group %s --refresh tries again)\n", bad, total,
                 get<std::string>(g, "name").c_str(), get<std::string>(g, "name").c_str());
    return 1;
  }
  return 0;
}

int print(const std::string& cmd, const dlc::Request& req, const YAML::Node& doc, Io io) {
  std::FILE* out = io.out;
  if (cmd == "new_session" || cmd == "show_session") {
    const YAML::Node s = doc["session"];
    if (cmd == "new_session")
      std::fprintf(out, "SESSION: %s FEATURES: %x TIMEOUT: %ld FORCE: %s\n", get<std::string>(s, "name").c_str(),
                   get<unsigned>(s, "features"), get<long>(s, "timeout"), get<bool>(s, "force") ? "Yes" : "No");
    else
      std::fprintf(out, "%s ID: %s, KEY: %u FEATURES: %x NODES: %zu\n", get<std::string>(s, "name").c_str(),
                   get<std::string>(s, "id").c_str(), get<unsigned>(s, "key"), get<unsigned>(s, "features"),
                   get<std::size_t>(s, "nodes"));
    return 0;
  }
  if (cmd == "add_group" || cmd == "update_group") return print_group(out, doc["group"]);
  if (cmd == "list_group") {
    bool listing = req.flag("active") || req.flag("busy") || req.flag("down") || req.flag("unknown") || req.flag("all");
    bool named = req.args.count("name") > 0;
    if (!listing && !named) {
      int i = 0;
      for (const auto& g : doc["groups"]) std::fprintf(out, "%d) %s\n", ++i, get<std::string>(g, "name").c_str());
      std::fprintf(out, "Total %d groups\n", i);
      return 0;
    }
    for (const auto& g : doc["groups"]) {
      std::map<std::string, int> count;
      int total = 0, shown = 0;
      if (!listing) std::fprintf(out, "Group [ %s ]\n", get<std::string>(g, "name").c_str());
      for (const auto& n : g["nodes"]) {
        std::string st = get<std::string>(n, "state");
        ++count[st];
        ++total;
        std::string flag = st == "Active" ? "active" : st == "Busy" ? "busy" : st == "Down" ? "down" : "unknown";
        if (listing && (req.flag("all") || req.flag(flag))) {
          std::fprintf(out, "\t%s: %s\n", get<std::string>(n, "id").c_str(), st.c_str());
          ++shown;
        }
      }
      if (listing)
        std::fprintf(out, "Total %d nodes\n", shown);
      else
        std::fprintf(out, "\tACTIVE\tBUSY\tDOWN\tUNKNOWN\tTOTAL\n\t%d\t%d\t%d\t%d\t%d\n", count["Active"],
                     count["Busy"], count["Down"], count["Unknown"], total);
    }
    return 0;
  }
  if (cmd == "run" || cmd == "stop") {
    const YAML::Node b = doc["batch"];
    int bad = 0;
    for (const auto& n : b["nodes"])
      if (get<int>(n, "rc") != 0 || get<std::uint32_t>(n, "status") != 0) {
        ++bad;
        int rc = get<int>(n, "rc");
        std::fprintf(io.err, "\t%s: %s\n", get<std::string>(n, "id").c_str(),
                     rc ? errno_string(rc).c_str() : errno_string(-get<int>(n, "status")).c_str());
      }
    std::string name = get<std::string>(b, "name");
    if (bad) {
      std::fprintf(io.err, "lst %s: %d nodes did not %s %s\n", cmd.c_str(), bad, cmd == "run" ? "run" : "stop",
                   name.c_str());
      return 1;
    }
    std::fprintf(out, cmd == "run" ? "%s is running now\n" : "%s is stopped\n", name.c_str());
    return 0;
  }
  if (cmd == "query") {
    const YAML::Node b = doc["batch"];
    int running = 0, idle = 0, down = 0;
    for (const auto& n : b["nodes"]) {
      bool ok = get<int>(n, "rc") == 0 && get<std::uint32_t>(n, "status") == 0;
      if (!ok)
        ++down;
      else if (get<std::uint32_t>(n, "active") > 0)
        ++running;
      else
        ++idle;
      if (req.flag("all"))
        std::fprintf(out, "\t%s: %s\n", get<std::string>(n, "id").c_str(),
                     !ok                                   ? "no reply"
                     : get<std::uint32_t>(n, "active") > 0 ? "Running"
                                                           : "Idle");
    }
    std::fprintf(out, "Batch is %s: %d running, %d idle, %d not answering\n", running ? "running" : "idle", running,
                 idle, down);
    return running ? 0 : kIdle;
  }
  if (cmd == "list_batch") {
    bool named = req.args.count("name") > 0;
    unsigned only = number_or(req, "test", 0);
    for (const auto& b : doc["batches"]) {
      if (!named) {
        std::fprintf(out, "Batch: %s Tests: %zu\n", get<std::string>(b, "name").c_str(), b["tests"].size());
        continue;
      }
      for (const auto& t : b["tests"]) {
        if (only && get<unsigned>(t, "index") != only) continue;
        std::fprintf(out, "\tTest %u(%s) (loop: %ld, concurrency: %u, distribute: %s, from: %s, to: %s)\n",
                     get<unsigned>(t, "index"), get<std::string>(t, "type").c_str(), get<long>(t, "loop"),
                     get<unsigned>(t, "concurrency"), get<std::string>(t, "distribute").c_str(),
                     get<std::string>(t, "from").c_str(), get<std::string>(t, "to").c_str());
        if (get<std::string>(t, "type") == "brw")
          std::fprintf(out, "\t\t%s size=%u check=%s off=%u\n", get<std::string>(t, "op").c_str(),
                       get<unsigned>(t, "size"), get<std::string>(t, "check").c_str(), get<unsigned>(t, "off"));
        if (only || req.flag("server") || req.flag("active") || req.flag("invalid"))
          for (const auto& n : t[req.flag("server") ? "servers" : "clients"]) {
            bool is_active = active(n);
            if ((req.flag("active") && !is_active) || (req.flag("invalid") && is_active)) continue;
            std::fprintf(out, "\t\t%s: %s\n", get<std::string>(n, "id").c_str(), get<std::string>(n, "state").c_str());
          }
      }
    }
    return 0;
  }
  if (cmd == "ping") {
    int bad = 0;
    for (const auto& g : doc["groups"])
      for (const auto& n : g["nodes"]) {
        bool ok = get<int>(n, "rc") == 0;
        if (!ok || !active(n)) ++bad;
        std::fprintf(out, "\t%s: %s", get<std::string>(n, "id").c_str(), get<std::string>(n, "state").c_str());
        if (ok && !get<std::string>(n, "session").empty())
          std::fprintf(out, " [session: %s]", get<std::string>(n, "session").c_str());
        std::fprintf(out, "\n");
      }
    if (bad) std::fprintf(out, "%d nodes are not active\n", bad);
    return 0;
  }
  if (cmd == "show_error") {
    for (const auto& g : doc["groups"]) {
      int errs = 0;
      for (const auto& n : g["nodes"]) {
        std::string id = get<std::string>(n, "id");
        if (get<int>(n, "rc") != 0 || !n["counters"]) {
          ++errs;
          std::fprintf(out, "\t%s: no reply (%s)\n", id.c_str(), get<std::string>(n, "state").c_str());
          continue;
        }
        const YAML::Node c = n["counters"];
        auto brw = get<std::uint32_t>(c, "brw_errors"), ping = get<std::uint32_t>(c, "ping_errors");
        // --session: the tests' errors of this session only, not the RPC layer's (which
        // count since the node started).
        bool all = !req.flag("session");
        auto rpc = all ? get<std::uint32_t>(c, "rpc_errors") : 0,
             dropped = all ? get<std::uint32_t>(c, "rpcs_dropped") : 0,
             expired = all ? get<std::uint32_t>(c, "rpcs_expired") : 0;
        if (get<std::uint32_t>(n, "status") != 0) {
          ++errs;
          std::fprintf(out, "\t%s: not in this session (%s)\n", id.c_str(), get<std::string>(n, "state").c_str());
          continue;
        }
        if (brw + ping + rpc + dropped + expired == 0) continue;
        ++errs;
        std::fprintf(out, "\t%s: [Session %u brw errors, %u ping errors] [RPC: %u errors, %u dropped, %u expired]\n",
                     id.c_str(), brw, ping, rpc, dropped, expired);
      }
      std::fprintf(out, "Total %d error nodes in %s\n", errs, get<std::string>(g, "name").c_str());
    }
    return 0;
  }
  return 0;  // end_session, del_group, add_batch, add_test: silent on success
}

}  // namespace

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: lst [--socket PATH] COMMAND [options]\n"
               "       lst COMMAND --help | --list-commands | --help\n\n"
               "LNet self-test: a console in lnetd (selftest: enable) drives the test framework of\n"
               "lnetd nodes and lst-node MPI ranks. LST_SESSION must hold a number naming your\n"
               "session (export LST_SESSION=$$). The console is reached on lnetd's control socket:\n"
               "--socket, else $LNET_CTL_SOCKET, else /run/lnet/lnetd.sock.\n\ncommands:\n");
  for (const auto& c : commands()) std::fprintf(out, "  %-14s %s\n", c.name, c.summary);
}

int run(const std::vector<std::string>& argv, const Exec& exec, std::optional<std::uint32_t> key, Io io) {
  if (argv.empty()) {
    usage(io.err);
    return 2;
  }
  const dlc::CommandSpec* spec = find(argv[0]);
  if (!spec) {
    std::fprintf(io.err, "lst: unknown command '%s' (lst --help lists them)\n", argv[0].c_str());
    return 2;
  }
  po::options_description opts(std::string("lst ") + spec->name + " options");
  po::options_description hidden;
  po::positional_options_description pos;
  cli::describe(*spec, opts, hidden, pos);
  opts.add_options()("help", "this help");  // long only: short options are off (--loop -1)
  po::options_description all;
  all.add(opts).add(hidden);
  po::variables_map vm;
  try {
    std::vector<std::string> rest(argv.begin() + 1, argv.end());
    // Negative numbers (--loop -1) are values, not options.
    po::store(po::command_line_parser(rest)
                  .options(all)
                  .positional(pos)
                  .style(po::command_line_style::unix_style ^ po::command_line_style::allow_short)
                  .run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(io.err, "lst %s: %s (lst %s --help)\n", spec->name, e.what(), spec->name);
    return 2;
  }
  if (vm.count("help")) {
    std::ostringstream ss;
    ss << "lst " << spec->name << ": " << spec->summary << "\n\n" << opts << "\n";
    std::fputs(ss.str().c_str(), io.out);
    return 0;
  }
  dlc::Request req;
  req.command = std::string(kPrefix) + spec->name;
  cli::to_args(vm, req);
  if (!key) {
    std::fprintf(io.err, "lst %s: LST_SESSION is not set: export LST_SESSION=$$ (any number names your session)\n",
                 spec->name);
    return 2;
  }
  req.args["key"] = {std::to_string(*key)};
  if (std::string(spec->name) == "stat") return stat(req, exec, io);
  unsigned loops = std::string(spec->name) == "query" ? std::max(1u, number_or(req, "loop", 1)) : 1;
  for (unsigned i = 0; i < loops; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::seconds(std::max(1u, number_or(req, "delay", 5))));
    dlc::Response r = exec(req);
    if (r.rc != 0) {
      std::fprintf(io.err, "lst %s: %s", spec->name, r.text.c_str());
      return 1;
    }
    YAML::Node doc;
    try {
      doc = YAML::Load(r.text);
    } catch (const YAML::Exception& e) {
      std::fprintf(io.err, "lst %s: unreadable answer: %s\n", spec->name, e.what());
      return 1;
    }
    int rc = print(spec->name, req, doc, io);
    if (rc == kIdle) break;  // query --loop: asked until the batch is idle
    if (rc != 0) return rc;
  }
  return 0;
}

}  // namespace lnet::selftest::lst
