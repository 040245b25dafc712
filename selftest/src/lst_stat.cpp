// lst stat: the nodes' counters asked in rounds, each round's rates per group printed
// as lst prints them (or as CSV / YAML).
#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include <yaml-cpp/yaml.h>

#include <selftest/brw.hpp>

#include "lst_user.hpp"

namespace lnet::selftest::lst::user {
namespace {

using Clock = std::chrono::steady_clock;

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
  std::fprintf(out, integer ? "\n" : " \n");  // (lst ends its bandwidth rows with a space)
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
      if (failed) std::fprintf(out, "Failed to stat on %zu nodes\n", failed);
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

}  // namespace

int run_stat(const dlc::Request& req, const Exec& exec, Io io) {
  StatView v = view_of(req);
  std::uint32_t delay = std::max<std::uint32_t>(1, number_or(req, "delay", 5));
  // --count N: N rounds printed after the baseline; without it (or -1), until interrupted.
  long count = -1;
  if (const std::string* c = req.arg("count")) count = std::stol(*c);  // (checked by run())
  Samples prev;
  auto start = Clock::now();
  bool header = true;
  for (long round = 0; count < 0 || round <= count; ++round) {
    if (round > 0) std::this_thread::sleep_for(std::chrono::seconds(delay));
    dlc::Response r = exec(req);
    if (r.rc != 0) {
      return print_failure(io, "stat", r);
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
      std::fflush(io.out);  // each block whole, whatever stdout is (a file, a pipe) and however lst ends
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

}  // namespace lnet::selftest::lst::user
