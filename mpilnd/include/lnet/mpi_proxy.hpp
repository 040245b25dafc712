// What an application and the parallel proxy (lnet-proxy) say to each other outside
// LNet, shared by both ends: the port file the proxy writes, the knock on its doorbell,
// the table the proxy sends after connecting, and the control messages of the session
// (heartbeats, the goodbye). Formats: docs/design/proxy.md.
//
//   application rank 0                       proxy rank 0
//   reads the port file (or looks the name up)
//   knock ──TCP──────────────────────────▶   rings every proxy rank's doorbell
//        ◀────────────────────────── "OK"   every proxy rank enters MPI_Comm_accept
//   MPI_Comm_connect (all ranks)  ◀──MPI──▶  MPI_Comm_accept (all ranks)
//   HELLO (kTagControl) ─────────────────▶   within the proxy's --timeout, or dropped
//   MPI_Intercomm_merge, low      ◀──MPI──▶  MPI_Intercomm_merge, high
//        ◀──────────── TABLE (kTagTable)    pid, proxy NIDs, nets (or an error)
//   HEARTBEAT … BYE (kTagControl) ───────▶
//   MPI_Comm_disconnect           ◀──MPI──▶  MPI_Comm_disconnect
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <lnet/nid.hpp>
#include <lnet/result.hpp>

namespace lnet::mpi::proxy {

// Tags on the intercommunicator (the merged communicator carries only LNet).
inline constexpr int kTagTable = 17;
inline constexpr int kTagControl = 18;

inline constexpr std::uint32_t kTableMagic = 0x54504e4c;  // "LNPT"
inline constexpr std::uint16_t kTableVersion = 1;
inline constexpr std::size_t kTableHdrSize = 32;
inline constexpr std::size_t kMaxProxies = 4096;
inline constexpr std::size_t kMaxNets = 16;
inline constexpr std::size_t kMaxErrorText = 512;
inline constexpr std::size_t kMaxTable = kTableHdrSize + kMaxProxies * 8 + kMaxNets * 4 + kMaxErrorText;

// Proxy rank 0 -> application rank 0, once, after the merge. status 0: the application
// is `pid` on every proxy rank's lnetd, proxy rank p is `proxies[p]`, and the lnetds
// reach `nets`; else a negative errno and why.
struct Table {
  std::int32_t status = 0;
  Pid pid = 0;
  std::vector<Nid> proxies;
  std::vector<NetId> nets;
  std::string error;
  friend bool operator==(const Table&, const Table&) = default;
};
std::vector<std::uint8_t> encode(const Table& t);
// Checks magic, version, counts against their bounds and the length against what
// arrived; fails with -EPROTO naming the fault.
Result<Table> decode_table(std::span<const std::uint8_t> in);

// Application rank 0 -> proxy rank 0 (kTagControl), 8 bytes: magic, kind. HELLO first,
// right after the connect (or spawn): the proxy merges only with an application that
// said it, within its --timeout, so a client that connects and goes silent cannot hold
// it in MPI_Intercomm_merge.
enum class Control : std::uint32_t { Heartbeat = 1, Bye = 2, Hello = 3 };
inline constexpr std::uint32_t kControlMagic = 0x43504e4c;  // "LNPC"
inline constexpr std::size_t kControlSize = 8;
void encode(Control c, std::uint8_t (&out)[kControlSize]);
Result<Control> decode_control(std::span<const std::uint8_t> in);

// The port file: "lnet-proxy 2\nport <MPI port name>\ndoorbell <IPv4>:<port>\nsecret
// <32 hex digits>\n". The secret is what a knock must say: whoever may read the file
// (mode 0640, lnet-proxy(8)) may use the proxy.
inline constexpr std::size_t kSecretSize = 32;
struct PortInfo {
  std::string port;      // MPI_Open_port's name
  std::string doorbell;  // "<IPv4>:<port>" of proxy rank 0's doorbell
  std::string secret;    // kSecretSize lower-case hex digits
  friend bool operator==(const PortInfo&, const PortInfo&) = default;
};
std::string format_port_file(const PortInfo& p);
Result<PortInfo> parse_port_file(std::string_view text);
// Reads and parses the port file at `path`; a failure names the file.
Result<PortInfo> read_port_file(const std::string& path);

// Mode 2: LNET_PROXY=spawn:<target>[,<target>...], a target being [<host>:]<bridge path>
// (an absolute path; the host as mpirun knows it). One proxy rank is spawned per target.
struct SpawnTarget {
  std::string host;    // empty: wherever MPI places it
  std::string bridge;  // that node's lnetd bridge
  friend bool operator==(const SpawnTarget&, const SpawnTarget&) = default;
};
Result<std::vector<SpawnTarget>> parse_spawn_list(std::string_view text);

// The doorbell: the application sends one line "KNOCK 2 <ranks> <secret>\n"; the proxy answers
// "OK\n" once its ranks are on their way into MPI_Comm_accept (connect to the port of
// the port file), "PORT <port>\n" when a proxy job of its own waits on that port (a
// per-application standing proxy, mode 1b), or "ERROR <why>\n". A proxy rank says
// "RANK <r> <secret>\n" on its own connection to rank 0's doorbell. A knock without the
// secret is refused: the doorbell is TCP, open to every host that reaches the node.
inline constexpr std::size_t kMaxLine = 256;
struct Knock {
  enum Kind { Client, Rank } kind = Client;
  int value = 0;       // the application's rank count, or the proxy rank
  std::string secret;  // as the port file says it
};
// Whether `s` has the secret's form (kSecretSize lower-case hex digits).
bool secret_form(std::string_view s);
// A fresh secret from the kernel's random source.
Result<std::string> make_secret();
// Whether two secrets are equal, in a time that does not depend on where they differ.
bool same_secret(std::string_view a, std::string_view b);
Result<Knock> parse_knock(std::string_view line);
std::string format_knock(const Knock& k);

// The proxy's answer to a knock; also what a dedicated proxy job (mode 1b) tells the
// standing job that spawned it (kTagPort on their intercommunicator): PORT or ERROR.
struct Answer {
  enum Kind { Ok, Port, Error } kind = Ok;
  std::string text;  // Port: the MPI port name; Error: why (printable, one line)
  friend bool operator==(const Answer&, const Answer&) = default;
};
// Refuses what is not one of the three lines (or longer than kMaxLine), naming it.
Result<Answer> parse_answer(std::string_view line);
// An Error's text is cut to fit a line, and its unprintable bytes replaced.
std::string format_answer(const Answer& a);
inline constexpr int kTagPort = 19;

// Between the proxy's own ranks, on each rank's connection to rank 0's doorbell: rank 0
// sends "ACCEPT <serial>\n" (all into MPI_Comm_accept for application `serial`), "END
// <serial> <1|0>\n" (that application said goodbye, or was dropped) and "QUIT\n"; a
// rank sends "GONE\n" (its lnetd went away) and "BAD <serial>\n" (its MPI LND refused
// messages of that application).
struct RankLine {
  enum Kind { Accept, End, Quit, Gone, Bad } kind = Quit;
  std::uint64_t serial = 0;  // Accept, End, Bad
  bool goodbye = false;      // End: the application said goodbye (else it was dropped)
  friend bool operator==(const RankLine&, const RankLine&) = default;
};
// Refuses what is not one of the five lines (or longer than kMaxLine), naming it.
Result<RankLine> parse_rank_line(std::string_view line);
std::string format_rank_line(const RankLine& l);

}  // namespace lnet::mpi::proxy

namespace lnet::mpi::proxy {

// The doorbell's sockets (TCP, one line at a time), with deadlines: nothing here blocks
// past the time it is given.
using Deadline = std::chrono::steady_clock::time_point;
// A listening socket on `ip` (an IPv4 address; "0.0.0.0" for all), any free port; its
// address as "<ip>:<port>" in *addr.
Result<int> listen_doorbell(const std::string& ip, std::string* addr);
// Connects to "<IPv4>:<port>" before `deadline`.
Result<int> dial_doorbell(std::string_view addr, Deadline deadline);
// Writes `line` whole before `deadline`.
Status write_line(int fd, std::string_view line, Deadline deadline);
// Reads one line (up to kMaxLine bytes, the newline included) before `deadline`; reads
// byte by byte, so nothing after the newline is taken from the socket.
Result<std::string> read_line(int fd, Deadline deadline);

}  // namespace lnet::mpi::proxy
