// lst-node: the userspace self-test node of an MPI job. Every rank brings LNet up over
// the MPI LND (and through the parallel proxy when LNET_PROXY is set) and serves the
// test framework and the ping and brw services until the console that made its session
// ends it. With --script FILE, rank 0 is the console itself and runs the lst commands
// of FILE against the ranks (and whatever nodes the script names), printing what lst
// prints: self-test without any daemon.
//   mpirun -n N lst-node [--script FILE] [--session-timeout S] [--rpc-timeout S]
#include <mpi.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <lnet/lnet.hpp>
#include <lnet/mpi.hpp>
#include <selftest/console.hpp>
#include <selftest/framework.hpp>
#include <selftest/lst.hpp>
#include <selftest/services.hpp>

using namespace lnet;

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: mpirun -n N lst-node [--script FILE | --join GROUP --console NID] [--session-timeout S]\n"
               "                           [--rpc-timeout S]\n"
               "  Every rank serves LNet self-test (the framework, ping and brw) on <rank>@mpi with the\n"
               "  job's pid, until the console that made its session ends it (or a signal).\n"
               "  --script FILE       rank 0 is the console: runs FILE's lst commands (one per line,\n"
               "                      '#' comments, an optional leading 'lst') and prints their output;\n"
               "                      node lists without a pid mean the job's pid; @RANKS@ stands for\n"
               "                      every rank but 0 ([1-N]@mpi), @ALL@ for every rank\n"
               "  --join GROUP        every rank asks the console at --console NID (an lnetd's, pid 12345)\n"
               "                      to add it to GROUP of its session (made if new)\n"
               "  --session-timeout S the node's session ends S seconds after the console's last RPC\n"
               "                      (default 100; 0: never)\n"
               "  --rpc-timeout S     test RPCs without a reply fail after S seconds (default 64)\n"
               "  With LNET_PROXY the ranks also reach the nets behind the proxy (lnet-proxy(8)).\n");
}

struct Args {
  std::string script, join, console;
  unsigned session_timeout = 100, rpc_timeout = 64;
};

int parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--help" || s == "-h") {
      usage(stdout);
      return 0;
    }
    if ((s == "--script" || s == "--join" || s == "--console" || s == "--session-timeout" || s == "--rpc-timeout") &&
        i + 1 < argc) {
      std::string v = argv[++i];
      if (s == "--script" || s == "--join" || s == "--console") {
        (s == "--script" ? a.script : s == "--join" ? a.join : a.console) = v;
        continue;
      }
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 0 || n > 86400) {
        std::fprintf(stderr, "lst-node: bad value '%s' for %s (0..86400 seconds)\n", v.c_str(), s.c_str());
        return 2;
      }
      (s == "--session-timeout" ? a.session_timeout : a.rpc_timeout) = static_cast<unsigned>(n);
      continue;
    }
    std::fprintf(stderr, "lst-node: unknown argument '%s' (--help)\n", s.c_str());
    return 2;
  }
  if (a.join.empty() != a.console.empty()) {
    std::fprintf(stderr, "lst-node: --join GROUP and --console NID go together\n");
    return 2;
  }
  if (!a.join.empty() && !a.script.empty()) {
    std::fprintf(stderr, "lst-node: --script makes rank 0 the console: it cannot --join another\n");
    return 2;
  }
  if (!a.console.empty() && !Nid::parse(a.console)) {
    std::fprintf(stderr, "lst-node: bad --console NID '%s'\n", a.console.c_str());
    return 2;
  }
  return -1;
}

// The words of a script line: blanks separate, quotes group, '#' starts a comment.
std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool in = false;
  char quote = 0;
  for (char c : line) {
    if (quote) {
      if (c == quote)
        quote = 0;
      else
        cur += c;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      in = true;
    } else if (c == '#') {
      break;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      if (in) out.push_back(cur);
      cur.clear();
      in = false;
    } else {
      cur += c;
      in = true;
    }
  }
  if (in) out.push_back(cur);
  return out;
}

// Runs the script on rank 0's console; the exit status.
int run_script(const std::string& path, selftest::Console& console, mpi::Session& s) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "lst-node: cannot read %s: %s\n", path.c_str(), std::strerror(errno));
    return 1;
  }
  std::string net = s.nid(0).net().to_string();
  std::string ranks = s.size() > 1 ? "[1-" + std::to_string(s.size() - 1) + "]@" + net : "";
  std::string all = "[0-" + std::to_string(s.size() - 1) + "]@" + net;
  selftest::lst::PidDefault dflt{s.nid(0).net(), s.pid()};
  auto exec = [&](const dlc::Request& r) {
    dlc::Request req = r;
    for (auto* key : {"args", "nodes", "remove"}) {
      auto it = req.args.find(key);
      if (it == req.args.end()) continue;
      for (auto& w : it->second) {
        if (w == "@RANKS@") w = ranks;
        if (w == "@ALL@") w = all;
      }
    }
    return selftest::lst::execute(console, req, dflt);
  };
  std::string line;
  int lineno = 0, rc = 0;
  bool ended = false;
  while (rc == 0 && std::getline(in, line)) {
    ++lineno;
    auto w = words_of(line);
    if (!w.empty() && w[0] == "lst") w.erase(w.begin());
    if (w.empty()) continue;
    std::string shown;
    for (const auto& x : w) shown += " " + x;
    std::printf("lst%s\n", shown.c_str());
    std::fflush(stdout);
    rc = selftest::lst::run(w, exec, 1);
    if (rc != 0) std::fprintf(stderr, "lst-node: %s:%d failed: lst%s\n", path.c_str(), lineno, shown.c_str());
    ended = w[0] == "end_session" ? rc == 0 : w[0] == "new_session" ? false : ended;
    std::fflush(stdout);
  }
  if (!ended) (void)console.end_session(1);  // the ranks stop serving once it has ended
  return rc;
}

// LNet up over MPI with the MPI LND's progress thread; null (and why printed) if not.
std::unique_ptr<mpi::Session> bring_up(int provided) {
  auto started = mpi::Session::start(MPI_COMM_WORLD);
  if (!started) {
    std::fprintf(stderr, "lst-node: cannot bring LNet up over MPI: %s\n", started.message().c_str());
    return nullptr;
  }
  std::unique_ptr<mpi::Session> s = std::move(*started);
  if (!s->progress_thread()) {
    // The framework sends from its own threads: the MPI LND must progress by itself.
    std::fprintf(stderr,
                 "lst-node: needs the MPI LND's progress thread (MPI_THREAD_MULTIPLE, LNET_MPI_PROGRESS=auto or "
                 "thread); this MPI gave thread level %d\n",
                 provided);
    return nullptr;
  }
  return s;
}

int start_serving(selftest::Framework& fw, selftest::TestServices& services, int rank) {
  if (Status st = fw.start(); !st) {
    std::fprintf(stderr, "lst-node: rank %d cannot serve the framework: %s\n", rank, st.message().c_str());
    return 1;
  }
  if (Status st = services.start(); !st) {
    std::fprintf(stderr, "lst-node: rank %d cannot serve the test services: %s\n", rank, st.message().c_str());
    return 1;
  }
  return 0;
}

// --script: rank 0 serves JOIN and runs the script as the console; the script's status.
int run_console(const Args& args, selftest::Console& console, mpi::Session& s) {
  if (Status st = console.serve_join(); !st) {
    std::fprintf(stderr, "lst-node: cannot serve JOIN: %s\n", st.message().c_str());
    return 1;
  }
  return run_script(args.script, console, s);
}

// --join: this rank asks the console to add it to the group.
int join(const Args& args, selftest::Framework& fw, int rank) {
  ProcessId at{*Nid::parse(args.console), kPidLustre};
  if (Status st = fw.join(at, args.join); !st) {
    std::fprintf(stderr, "lst-node: rank %d: %s\n", rank, st.message().c_str());
    return 1;
  }
  if (rank == 0) {
    std::printf("lst-node: joined group %s of session '%s' at %s\n", args.join.c_str(), fw.session()->name.c_str(),
                args.console.c_str());
    std::fflush(stdout);
  }
  return 0;
}

// Every rank's status, the worst of them (a collective on MPI_COMM_WORLD, which the
// session has duplicated: this one is the tool's own).
int worst_of(int rc) {
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

// --script on the other ranks: they serve until rank 0's script is done, which rank 0
// says by starting a broadcast (its value unused; nonblocking: the ranks keep serving
// while it waits). A script that fails before its session reaches a rank ends it too.
void serve_until_script_done(int rank) {
  int done = 0;
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Ibcast(&done, 1, MPI_INT, 0, MPI_COMM_WORLD, &r);
  for (int flag = 0; MPI_Test(&r, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag && !g_stop.load();)
    std::this_thread::sleep_for(std::chrono::milliseconds(rank == 0 ? 1 : 50));
}

// The rank serves self-test (rank 0 of --script runs the script too); its exit status.
int serve(const Args& args, mpi::Session& s) {
  int rank = s.rank();
  selftest::RpcNode rpc(s.lnet(), std::chrono::seconds(args.rpc_timeout ? args.rpc_timeout : 1u << 30));
  selftest::Framework fw(rpc, std::chrono::seconds(args.session_timeout));
  selftest::TestServices services(rpc);
  // Every rank serves before any console speaks to it: a request that reaches a rank
  // whose services are not up yet is dropped, and its session would never start there.
  int rc = worst_of(start_serving(fw, services, rank));
  if (rank == 0 && rc == 0) {
    std::string first = s.id(0).to_string(), last = s.id(s.size() - 1).to_string();
    std::printf("lst-node: %d ranks serve self-test, %s .. %s%s\n", s.size(), first.c_str(), last.c_str(),
                s.proxies().empty() ? "" : " (and through the proxy)");
    std::fflush(stdout);
  }
  if (rc != 0) return rc;
  if (!args.script.empty()) {
    if (rank == 0) {
      selftest::Console console(rpc, s.nid(0));
      rc = run_console(args, console, s);
    }
    serve_until_script_done(rank);
    return rc;
  }
  if (!args.join.empty()) rc = join(args, fw, rank);
  // Serve until a session has come and gone (or a signal), counted by the framework.
  while (rc == 0 && !g_stop.load()) {
    if (fw.sessions_ended() > 0 && !fw.session()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (int rc = parse(argc, argv, args); rc >= 0) return rc;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  std::unique_ptr<mpi::Session> s = bring_up(provided);
  if (!s) {
    MPI_Finalize();
    return 1;
  }
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  int rc = serve(args, *s);
  // Collective: every rank keeps serving LNet until all arrive.
  s.reset();
  int worst = worst_of(rc);
  MPI_Finalize();
  return worst;
}
