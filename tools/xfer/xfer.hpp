// lnet-xfer: a server that exposes a buffer on a portal for PUT and GET, and a client that
// pings it, PUTs to it and GETs from it with sizes, counts, data checks and rates
// (docs/man/lnet-xfer.1.md). Each run is its own liblnet instance with its own NIs, as an
// application node is.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <lnet/dlc.hpp>
#include <lnet/lnet.hpp>

namespace lnet::xfer {

inline constexpr unsigned kDefaultPortal = 40;
inline constexpr std::size_t kDefaultBuffer = 2 << 20;

struct Args {
  std::string mode;            // serve, ping, put, get, check, stream
  std::vector<Nid> nids;       // local NIs (none: LNET_NETWORKS / LNET_IP2NETS)
  std::optional<Nid> peer;     // the server
  std::vector<Nid> peer_nids;  // its other NIDs (one multi-rail peer)
  std::vector<std::pair<NetId, Nid>> routes;
  Pid pid = kPidLustre;  // the server's pid (serve: ours)
  unsigned portal = kDefaultPortal;
  std::uint64_t bits = 0;
  std::uint32_t offset = 0;  // where in the server's buffer the transfers go
  std::vector<std::uint32_t> sizes;
  unsigned count = 0;  // per size (ping: pings)
  unsigned depth = 1;  // operations in flight
  bool check = false;
  int timeout = 0;  // seconds an operation may take (0: LNet's deadline decides)
  std::size_t buffer = kDefaultBuffer;
  std::string stop_file, rule_file;
  int seconds = 300;
  bool help = false, version = false;  // --help, --version: nothing else is read
};

// The command line (argv[0] the program): the arguments with the mode's defaults, or a
// failure naming the bad option or value (-EINVAL).
Result<Args> parse_args(int argc, const char* const* argv);
std::string usage();  // --help's text

using Clock = std::chrono::steady_clock;

// How one PUT (with ACK) or GET ended: its ACK's or REPLY's status and length, or the
// failure of the message (a failed SEND) or -ETIMEDOUT when LNet unlinked the MD because
// no response came (transaction_timeout) or the tool gave up (--timeout).
struct Outcome {
  int status = 0;
  std::uint32_t mlength = 0;
  Nid sender;  // the local NI the request left from
};

// One operation's MD and its events; the handler keeps it alive, so a late event is
// harmless. done() once the MD's last event (unlinked) came: after it LNet no longer
// touches the buffer.
class Op {
 public:
  // Starts a PUT with ACK (put) or a GET of `len` bytes at `buf`; returns 0 or -errno (no
  // event will come then). `notify`, if set, runs (on an LNet thread) when it is done.
  static int start(Instance& lnet, std::shared_ptr<Op>& out, bool put, void* buf, std::uint32_t len, ProcessId target,
                   const Args& a, std::uint32_t offset, std::uint64_t bits, std::function<void()> notify = {});
  // Waits until done or `deadline`; past it, unlinks the MD (the operation fails with
  // -ETIMEDOUT) and waits for its last event. False: LNet never ended it (a bug).
  bool wait(Instance& lnet, Clock::time_point deadline);
  bool done() const;
  Outcome outcome() const;

 private:
  struct State;
  std::shared_ptr<State> st_;
  MdHandle md_;
};

// The deadline of an operation started now: --timeout, else LNet's own plus a margin (an
// operation still not ended then means LNet broke its deadline).
Clock::time_point op_deadline(Instance& lnet, const Args& a);
// Blocking: one operation, ended. Exits with status 3 if LNet never ends it.
Outcome run_op(Instance& lnet, bool put, void* buf, std::uint32_t len, ProcessId target, const Args& a,
               std::uint32_t offset, std::uint64_t bits);
// Fills `len` bytes at `buf` with the data pattern `seed` names.
void fill(char* buf, std::uint32_t len, std::uint64_t seed);
// The first byte of `buf` that differs from pattern `seed`, or -1.
long differs(const char* buf, std::uint32_t len, std::uint64_t seed);
std::string describe(int status);  // "-110 (Connection timed out)"

int serve(Instance& lnet, const Args& a);
int ping(Instance& lnet, const Args& a);
int transfer(Instance& lnet, const Args& a);  // put and get
int check(Instance& lnet, const Args& a);
int stream(Instance& lnet, const Args& a);

}  // namespace lnet::xfer
