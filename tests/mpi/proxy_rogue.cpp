// Parties to the proxy protocol that misbehave, for tests/integration/proxy_dpm.sh: each
// does what a real client or proxy does up to one step, then stops there for good.
//
//   proxy_rogue fake-proxy PORT_FILE    (one rank) opens an MPI port, writes the port file,
//       answers every knock "OK" and never enters MPI_Comm_accept: a client that
//       believes it must not hang in MPI_Comm_connect.
//   proxy_rogue connect-only PORT_FILE  (any ranks) knocks on a real proxy, connects to
//       its port, then never says HELLO and never merges: the proxy must drop it and
//       go on serving the others.
//   proxy_rogue garbage                 (any ranks, LNET_PROXY set) joins the proxy as a
//       real client does (heartbeats included), then sends each proxy rank a message the
//       MPI LND cannot decode: the proxy must drop this application alone.
//   proxy_rogue claim-pid PID           the same, but a well-formed IMMEDIATE PUT whose
//       LNet header claims pid PID (another application's), to the last proxy rank only.
//
// Each prints one line when it reached its step ("fake proxy: ready", "connected:
// silent", "garbage: sent") and then waits to be killed. Needs Open MPI and ompi-server's URI.
#include <mpi.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <lnet/mpi.hpp>
#include <lnet/mpi_proxy.hpp>

#include <lnet/lnd/header.hpp>

#include "mpi_wire.hpp"
#include "proxy_client.hpp"

namespace {

namespace mp = lnet::mpi::proxy;
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "proxy_rogue: %s\n", why.c_str());
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::_Exit(2);
}

int fake_proxy(const std::string& port_file) {
  char port[MPI_MAX_PORT_NAME + 1] = {};
  if (MPI_Open_port(MPI_INFO_NULL, port) != MPI_SUCCESS) die("MPI_Open_port failed");
  std::string bell;
  auto listen_fd = mp::listen_doorbell("127.0.0.1", &bell);
  if (!listen_fd) die(listen_fd.message());
  {
    std::ofstream f(port_file + ".tmp");
    f << mp::format_port_file({port, bell, *mp::make_secret()});
  }
  if (std::rename((port_file + ".tmp").c_str(), port_file.c_str()) != 0) die("cannot write " + port_file);
  std::printf("fake proxy: ready\n");
  std::fflush(stdout);
  std::vector<int> kept;  // the knocks stay open: the client sees a live proxy
  for (;;) {
    int fd = ::accept(*listen_fd, nullptr, nullptr);
    if (fd < 0) continue;
    auto line = mp::read_line(fd, Clock::now() + std::chrono::seconds(10));
    if (line && mp::parse_knock(*line))
      (void)mp::write_line(fd, mp::format_answer({mp::Answer::Ok, ""}), Clock::now() + std::chrono::seconds(10));
    std::printf("fake proxy: answered a knock OK, will not accept\n");
    std::fflush(stdout);
    kept.push_back(fd);
  }
}

int connect_only(const std::string& port_file) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<char> port(MPI_MAX_PORT_NAME + 1, '\0');
  int bell = -1;
  if (rank == 0) {
    std::ifstream f(port_file);
    std::stringstream text;
    text << f.rdbuf();
    auto pi = mp::parse_port_file(text.str());
    if (!pi) die(port_file + ": " + pi.message());
    auto deadline = Clock::now() + std::chrono::seconds(30);
    auto fd = mp::dial_doorbell(pi->doorbell, deadline);
    if (!fd) die(fd.message());
    bell = *fd;
    if (auto s = mp::write_line(bell, mp::format_knock({mp::Knock::Client, size, pi->secret}), deadline); !s)
      die(s.message());
    auto line = mp::read_line(bell, deadline);
    if (!line) die(line.message());
    auto answer = mp::parse_answer(*line);
    if (!answer || answer->kind != mp::Answer::Ok) die("the proxy answered " + *line);
    std::strncpy(port.data(), pi->port.c_str(), MPI_MAX_PORT_NAME);
  }
  MPI_Bcast(port.data(), MPI_MAX_PORT_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_Comm inter;
  if (MPI_Comm_connect(port.data(), MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter) != MPI_SUCCESS)
    die("MPI_Comm_connect failed");
  if (bell >= 0) ::close(bell);
  if (rank == 0) {
    std::printf("connected: silent\n");
    std::fflush(stdout);
  }
  for (;;) ::pause();
}

// Joins the proxy; sends proxy rank p (0.. among the proxy's ranks) what make(p, link) gives.
template <typename Make>
int join_and_send(const char* what, Make make, bool all_proxies) {
  auto opts = lnet::mpi::Options::from_env();
  if (!opts) die(opts.message());
  auto group = lnet::mpi::Group::create(MPI_COMM_WORLD);
  if (!group) die(group.message());
  auto link = lnet::mpi::ProxyLink::open(**group, *opts);
  if (!link) die(link.message());
  (*link)->start_heartbeat();
  int size = (*group)->size(), all = 0;
  MPI_Comm merged = (*link)->merged();
  MPI_Comm_size(merged, &all);
  // Tag 0 is the MPI LND's short-message pool.
  if ((*group)->rank() == 0) {
    // One message to each proxy rank, or to the last one only (not rank 0, which
    // learns of it from that rank).
    int n = all_proxies ? all - size : 1;
    for (int p = all_proxies ? 0 : all - size - 1; p < all - size; ++p) {
      std::vector<std::uint8_t> bytes = make(p, **link);
      MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, size + p, 0, merged);
    }
    std::printf("%s: sent to %d proxy rank(s)\n", what, n);
    std::fflush(stdout);
  }
  for (;;) ::pause();
}

int garbage() {
  return join_and_send(
      "garbage", [](int, const lnet::mpi::ProxyLink&) { return std::vector<std::uint8_t>(64, 0xa5); }, true);
}

int claim_pid(lnet::Pid pid) {
  return join_and_send(
      "claim-pid",
      [pid](int p, const lnet::mpi::ProxyLink& link) {
        constexpr std::size_t kPayload = 8;
        lnet::Header h;
        h.dest_nid = link.table().proxies[static_cast<std::size_t>(p)];
        h.src_nid = lnet::Nid::make(h.dest_nid.net(), 0);
        h.dest_pid = 12345;
        h.src_pid = pid;  // not this application's
        h.type = lnet::MsgType::Put;
        h.payload_length = kPayload;
        h.msg.put.ptl_index = 40;
        std::vector<std::uint8_t> out(lnet::mpi::kMsgHdrSize + lnet::kHeaderSize + kPayload, 0x5a);
        lnet::mpi::MsgHdr m;
        m.kind = lnet::mpi::MsgKind::Immediate;
        m.nob = static_cast<std::uint32_t>(out.size());
        m.stamp = 1;
        lnet::mpi::encode_msg_hdr(m,
                                  std::span<std::uint8_t, lnet::mpi::kMsgHdrSize>(out.data(), lnet::mpi::kMsgHdrSize));
        lnet::encode_header(
            h, std::span<std::uint8_t, lnet::kHeaderSize>(out.data() + lnet::mpi::kMsgHdrSize, lnet::kHeaderSize));
        return out;
      },
      false);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  std::string mode = argc >= 2 ? argv[1] : "";
  if (mode == "fake-proxy" && argc == 3) return fake_proxy(argv[2]);
  if (mode == "connect-only" && argc == 3) return connect_only(argv[2]);
  if (mode == "garbage" && argc == 2) return garbage();
  if (mode == "claim-pid" && argc == 3) return claim_pid(static_cast<lnet::Pid>(std::stoul(argv[2])));
  std::fprintf(stderr, "usage: proxy_rogue fake-proxy|connect-only PORT_FILE | garbage | claim-pid PID\n");
  MPI_Finalize();
  return 2;
}
