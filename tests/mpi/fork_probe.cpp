// Can a forked child use its parent's MPI? The evidence behind the decision on the white
// paper's mode 1a (a standing proxy forks a proxy per application): docs/design/proxy.md.
//
// Run with two ranks. Rank 0 forks; the child, without MPI_Init (MPI says a process
// initialises once, and the child is a copy of an initialised one), tries what a forked
// proxy would need, each step bounded: its rank, a message to rank 1, and an MPI port
// (the application would connect to it). Rank 1 waits for the child's message for a
// while. The parent then checks that its own MPI still works (a message each way with
// rank 1). Every step prints one line; the last line is the verdict:
//   verdict: a forked child can use its parent's MPI      (every step worked)
//   verdict: a forked child cannot use its parent's MPI   (some step failed or hung)
// Exit status 0 when the probe ran to its verdict, 1 when the probe itself failed.
#include <mpi.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTagChild = 99, kTagVerdict = 100, kTagPing = 101;
constexpr auto kStep = std::chrono::seconds(5);

// Waits for a request until the deadline: 1 done, 0 not done, -1 an MPI error.
int wait_for(MPI_Request* r, Clock::duration within) {
  auto deadline = Clock::now() + within;
  while (Clock::now() < deadline) {
    int flag = 0;
    if (MPI_Test(r, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) return -1;
    if (flag) return 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return 0;
}

std::string error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  // One line: MPICH's are a stack of them.
  std::string out;
  for (char c : std::string(text, static_cast<std::size_t>(len))) {
    if (c == '\n') {
      if (!out.empty() && out.back() != ' ') out += " | ";
    } else if (c != ' ' || (!out.empty() && out.back() != ' ')) {
      out += c;
    }
  }
  return out;
}

// The child's steps. Its lines go to stdout at once (the parent may have to kill it).
[[noreturn]] void child() {
  auto say = [](const std::string& s) {
    std::printf("child: %s\n", s.c_str());
    std::fflush(stdout);
  };
  int ok = 1;
  int rank = -1;
  int rc = MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  say("MPI_Comm_rank: " + (rc == MPI_SUCCESS ? std::to_string(rank) : error_string(rc)));
  say("sending to rank 1 ...");
  static const char kMsg[16] = "from the child";
  MPI_Request r;
  rc = MPI_Isend(kMsg, sizeof kMsg, MPI_CHAR, 1, kTagChild, MPI_COMM_WORLD, &r);
  if (rc != MPI_SUCCESS) {
    say("MPI_Isend: " + error_string(rc));
    ok = 0;
  } else {
    int w = wait_for(&r, kStep);
    say(std::string("MPI_Isend to rank 1: ") + (w == 1 ? "completed" : w == 0 ? "not completed in 5 s" : "error"));
    ok &= w == 1;
  }
  say("opening a port ...");
  alarm(10);  // MPI_Open_port cannot be bounded otherwise: a hang ends the child
  char port[MPI_MAX_PORT_NAME] = {};
  rc = MPI_Open_port(MPI_INFO_NULL, port);
  alarm(0);
  say(std::string("MPI_Open_port: ") + (rc == MPI_SUCCESS ? std::string("ok (") + port + ")" : error_string(rc)));
  ok &= rc == MPI_SUCCESS;
  std::fflush(stdout);
  _exit(ok ? 0 : 3);  // no MPI_Finalize: the MPI state is the parent's
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "lnet_mpi_fork_probe: run with 2 ranks (got %d)\n", size);
    MPI_Finalize();
    return 1;
  }
  if (rank == 1) {
    // The child's message, if it comes; then the result to rank 0, and the ping.
    char buf[16] = {};
    MPI_Request r;
    MPI_Irecv(buf, sizeof buf, MPI_CHAR, 0, kTagChild, MPI_COMM_WORLD, &r);
    int got = wait_for(&r, kStep + std::chrono::seconds(10));
    if (got != 1) {
      MPI_Cancel(&r);
      MPI_Request_free(&r);
    }
    int verdict = got == 1 && std::strcmp(buf, "from the child") == 0;
    MPI_Send(&verdict, 1, MPI_INT, 0, kTagVerdict, MPI_COMM_WORLD);
    int ping = 0;
    MPI_Recv(&ping, 1, MPI_INT, 0, kTagPing, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&ping, 1, MPI_INT, 0, kTagPing, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
  }
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, static_cast<std::size_t>(len));
  v = v.substr(0, v.find_first_of(",\n"));
  std::printf("fork probe: %s, thread level %d\n", v.c_str(), provided);
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) child();
  // The child gets 25 s in all, then is killed.
  int status = 0;
  auto deadline = Clock::now() + std::chrono::seconds(25);
  pid_t w = 0;
  while ((w = waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  bool child_ok = false;
  if (w == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    std::printf("parent: the child hung: killed after 25 s\n");
  } else if (WIFSIGNALED(status)) {
    std::printf("parent: the child died of signal %d (%s)\n", WTERMSIG(status), strsignal(WTERMSIG(status)));
  } else {
    std::printf("parent: the child exited with status %d\n", WEXITSTATUS(status));
    child_ok = WEXITSTATUS(status) == 0;
  }
  // Rank 1's view, and whether the parent's MPI still works.
  int received = 0, ping = 42, pong = 0;
  MPI_Request r;
  MPI_Irecv(&received, 1, MPI_INT, 1, kTagVerdict, MPI_COMM_WORLD, &r);
  int a = wait_for(&r, std::chrono::seconds(30));
  std::printf("parent: rank 1 %s the child's message\n", a != 1     ? "did not report on"
                                                         : received ? "received"
                                                                    : "did not receive");
  MPI_Send(&ping, 1, MPI_INT, 1, kTagPing, MPI_COMM_WORLD);
  MPI_Irecv(&pong, 1, MPI_INT, 1, kTagPing, MPI_COMM_WORLD, &r);
  int b = wait_for(&r, std::chrono::seconds(30));
  bool parent_ok = a == 1 && b == 1 && pong == ping;
  std::printf("parent: its own MPI afterwards: %s\n", parent_ok ? "works" : "broken");
  bool usable = child_ok && received && parent_ok;
  std::printf("verdict: a forked child %s its parent's MPI\n", usable ? "can use" : "cannot use");
  std::fflush(stdout);
  if (!parent_ok) _exit(0);  // MPI_Finalize could hang on a broken state
  MPI_Finalize();
  return 0;
}
