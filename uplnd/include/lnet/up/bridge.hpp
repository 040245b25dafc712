// The bridge protocol between a parallel proxy rank and its node's lnetd (the UP LND):
// framed messages over a Unix-domain SOCK_SEQPACKET socket (one message per packet),
// payloads in a shared memory region that lnetd creates and passes to the proxy with the
// WELCOME (SCM_RIGHTS). Every field little-endian; codecs field by field. The protocol,
// message by message: docs/design/bridge.md.
//
//   proxy -> lnetd                          lnetd -> proxy
//   HELLO          version, rank, os pid    WELCOME       NID, pid, region size, nets (+ fd)
//   PID_NEW        a fresh application pid  PID_REPLY     status, pid, NID
//                  (and its job's ranks)
//   PID_REGISTER   a pid rank 0 got (ranks)
//   PID_RELEASE    an application is gone
//   PARSE          an LNet header arrived   RECV          where its payload goes (or comes from)
//                  (a small payload inline: no RECV, no RECV_DONE)
//   RECV_DONE      that payload moved       SEND          an LNet message to transmit
//   SEND_DONE      that message went        ERROR         a refused message, with why
//   NOTIFY         a peer NI down / up
//   MEM_RELEASE    the memory of a RECV_DONE
//                  marked kept is free again
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>

#include <lnet/lnd/header.hpp>
#include <lnet/nid.hpp>
#include <lnet/result.hpp>

namespace lnet::up {

inline constexpr std::uint32_t kBridgeMagic = 0x42554e4c;  // "LNUB"
// 2: PID_NEW and PID_REGISTER carry the application's number of ranks.
// 3: RECV_DONE and SEND_DONE carry flags (kDoneKept); MEM_RELEASE.
inline constexpr std::uint16_t kBridgeVersion = 3;
inline constexpr std::size_t kFrameHdrSize = 16;
inline constexpr std::size_t kMaxNets = 16;           // nets a WELCOME lists
inline constexpr std::size_t kMaxErrorText = 240;     // bytes of an ERROR's text
inline constexpr std::uint32_t kMaxRanks = 1u << 24;  // an application's ranks (its NIDs are below 2^24)
// No message is longer (the largest is a full ERROR).
inline constexpr std::size_t kMaxFrame = 512;

enum class Type : std::uint16_t {
  Hello = 1,
  Welcome = 2,
  PidNew = 3,
  PidRegister = 4,
  PidRelease = 5,
  PidReply = 6,
  Parse = 7,
  Recv = 8,
  RecvDone = 9,
  Send = 10,
  SendDone = 11,
  Notify = 12,
  Error = 13,
  MemRelease = 14,
};
const char* type_name(Type t);

// A descriptor of the UP LND (a message it holds for the proxy): a slot of its table and
// the slot's generation, so a stale or forged reference is refused.
struct DescRef {
  std::uint32_t index = 0;
  std::uint32_t gen = 0;
  friend bool operator==(const DescRef&, const DescRef&) = default;
};

struct Hello {
  std::uint32_t version = kBridgeVersion;
  std::uint32_t rank = 0;    // the proxy's rank in its job (for logs)
  std::uint64_t os_pid = 0;  // the proxy's process id (for logs)
};

struct Welcome {
  Nid nid;                        // the UP NI: <primary IPv4>@mpi<N>
  Pid pid = 0;                    // lnetd's LNet pid (12345)
  std::uint64_t region_size = 0;  // bytes of the shared region whose fd comes with it
  std::uint32_t max_payload = 0;  // largest payload (LNET_MTU)
  std::uint32_t nnets = 0;
  NetId nets[kMaxNets] = {};  // the other nets of that lnetd (what it routes to)
};

// `ranks`: the application's ranks (its NIDs on the MPI network are 0..ranks-1), so that
// a message for LNet's pid at a rank's NID (a kernel peer's discovery ping or push, a
// console's RPC) reaches an application that has that rank.
struct PidNew {
  std::uint64_t cookie = 0;  // echoed in the PID_REPLY
  std::uint32_t ranks = 0;
};
struct PidRegister {
  std::uint64_t cookie = 0;
  Pid pid = 0;
  std::uint32_t ranks = 0;
};
struct PidRelease {
  std::uint64_t cookie = 0;
  Pid pid = 0;
};
struct PidReply {
  std::uint64_t cookie = 0;
  std::int32_t status = 0;  // 0 or a negative errno
  Pid pid = 0;
  Nid nid;  // the UP NI's NID, what the application knows this proxy rank by
};

inline constexpr std::uint32_t kParseRdma = 1;  // an optimised GET: the REPLY's payload goes out via RECV
// The immediate receive: the payload (hdr.payload_length bytes, at most kMaxInline)
// follows the header, the proxy has finished with the message, and no RECV follows.
inline constexpr std::uint32_t kParseInline = 2;
inline constexpr std::size_t kMaxInline = 256;

struct Parse {
  std::uint64_t cookie = 0;  // the proxy's own reference, echoed in the RECV (0 with kParseInline)
  Pid pid = 0;               // the application the message came from
  std::uint32_t flags = 0;   // kParseRdma or kParseInline
  Nid from;                  // the peer NI it came from
  Header hdr;
  std::uint8_t data[kMaxInline] = {};  // kParseInline: the payload
};

inline constexpr std::uint32_t kRecvDelayed = 1;  // lnetd kept the message after parsing it
inline constexpr std::uint32_t kRecvSource = 2;   // the region holds a payload to send (optimised GET)

// Where the payload of a PARSEd message goes: `mlen` bytes of region from `offset`
// (the rest of rlen discarded), or, with kRecvSource, `mlen` bytes there to transmit as
// the REPLY `hdr`. status < 0: lnetd takes no payload (discard it; no RECV_DONE follows).
struct Recv {
  std::uint64_t cookie = 0;
  DescRef desc;
  std::int32_t status = 0;
  std::uint32_t flags = 0;
  std::uint64_t offset = 0;
  std::uint32_t mlen = 0;
  std::uint32_t rlen = 0;
  Header hdr;  // kRecvSource: the REPLY's header
};

// A failed RECV whose region bytes MPI may still write (a receive it matched and could
// not cancel): lnetd fails the message but lends the bytes to no one until the proxy's
// MEM_RELEASE for the descriptor, or until the proxy's process has exited.
inline constexpr std::uint32_t kDoneKept = 1;

struct RecvDone {
  DescRef desc;
  std::int32_t status = 0;   // 0 or a negative errno
  std::uint32_t health = 0;  // lnet::HealthStatus of a failure
  std::uint32_t flags = 0;   // kDoneKept (with a failure only)
};

// An LNet message for application `pid`: `hdr` to `next_hop`, its payload `len` bytes of
// region from `offset`.
struct Send {
  DescRef desc;
  Pid pid = 0;
  ProcessId target;
  Nid next_hop;
  std::uint64_t offset = 0;
  std::uint32_t len = 0;
  Header hdr;
};

struct SendDone {
  DescRef desc;
  std::int32_t status = 0;
  std::uint32_t health = 0;
  std::uint32_t flags = 0;  // none defined: 0
};

// The region bytes of a descriptor whose RECV_DONE said kDoneKept: MPI is done with them.
struct MemRelease {
  DescRef desc;
};

struct Notify {
  Pid pid = 0;
  Nid peer;
  bool alive = false;
};

struct Error {
  std::int32_t code = 0;
  std::string text;
};

using Message = std::variant<Hello, Welcome, PidNew, PidRegister, PidRelease, PidReply, Parse, Recv, RecvDone, Send,
                             SendDone, Notify, Error, MemRelease>;

Type type_of(const Message& m);
// The message's frame: the 16-byte header and its body. Returns the bytes written (at
// most kMaxFrame); `out` must hold kMaxFrame bytes.
std::size_t encode(const Message& m, std::span<std::uint8_t, kMaxFrame> out);
// Checks and decodes one received packet of `in.size()` bytes: magic, version, a known
// type, the frame length equal to what arrived and to the body of that type, header
// fields that decode, counts and text lengths within their bounds. Fails with -EPROTO
// naming the fault.
Result<Message> decode(std::span<const std::uint8_t> in);

// Socket I/O of frames. send_frame sends one frame on a bridge socket, with `fd`
// riding along (SCM_RIGHTS) when it is >= 0 (the WELCOME's region); sendmsg's result.
// receive_frame receives one packet into `buf` and the descriptor that came with it
// (-1: none; the caller owns it); recvmsg's result with MSG_TRUNC, so a packet longer
// than `buf` shows its real length.
long send_frame(int sock, std::span<const std::uint8_t> frame, int fd, int flags);
long receive_frame(int sock, std::span<std::uint8_t> buf, int* fd, int flags);

}  // namespace lnet::up
