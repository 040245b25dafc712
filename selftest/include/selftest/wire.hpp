// LNet self-test's RPC messages as they go on the wire (docs/design/selftest-wire.md):
// every request and reply is one 160-byte message — a 24-byte header (magic, version,
// type, two reserved words, session features) and a body — written in the sender's
// byte order; the receiver tells the order by the magic and swaps what it reads.
// Encoding writes our native order; decoding takes either.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <lnet/result.hpp>

namespace lnet::selftest {

inline constexpr std::uint32_t kMsgMagic = 0xeeb0f00d;
inline constexpr std::uint32_t kMsgVersion = 1;
inline constexpr std::size_t kMsgSize = 160;  // every message, whatever its body
inline constexpr std::size_t kHeaderSize = 24;
inline constexpr std::size_t kNameSize = 32;  // session, group and batch names, NUL-terminated

// Request portals (lazy) and the portal of replies and bulk; request match bits are the
// service id, replies and bulk match the rpyid / bulkid the request carried.
inline constexpr unsigned kTestPortal = 50;
inline constexpr unsigned kFrameworkPortal = 51;
inline constexpr unsigned kRdmaPortal = 52;

inline constexpr std::uint32_t kFeatBulkLen = 0x1;  // BRW length and offset in bytes (bulk v1)
inline constexpr std::uint32_t kFeatsMask = kFeatBulkLen;

enum class MsgType : std::uint32_t {
  MksnReq = 0,
  MksnReply,
  RmsnReq,
  RmsnReply,
  BatchReq,
  BatchReply,
  StatReq,
  StatReply,
  TestReq,
  TestReply,
  DebugReq,
  DebugReply,
  BrwReq,
  BrwReply,
  PingReq,
  PingReply,
  JoinReq,
  JoinReply,
};
inline constexpr std::uint32_t kMsgTypeCount = 18;
const char* msg_type_name(MsgType t);  // "MKSN_REQST", ...

// Services; a service id is the match bits of its requests. Ids below 10 are the
// framework's (portal 51), the others test services (portal 50).
enum class Service : std::uint32_t {
  Debug = 0,
  MakeSession = 1,
  RemoveSession = 2,
  Batch = 3,
  Test = 4,
  QueryStat = 5,
  Join = 6,
  Brw = 11,
  Ping = 12,
};
inline constexpr std::uint32_t kFrameworkServiceMax = 10;
inline constexpr std::uint32_t kServiceMax = 13;
MsgType request_type(Service s);
inline MsgType reply_type(MsgType request) { return static_cast<MsgType>(static_cast<std::uint32_t>(request) + 1); }
inline unsigned request_portal(Service s) {
  return static_cast<std::uint32_t>(s) < kFrameworkServiceMax ? kFrameworkPortal : kTestPortal;
}

enum class BatchOp : std::uint32_t { Run = 1, Stop = 2, Query = 3 };
enum class BrwOp : std::uint32_t { Read = 1, Write = 2 };  // read: data flows server -> client
enum class BrwCheck : std::uint32_t { None = 1, Simple = 2, Full = 3, Discard = 4 };

inline constexpr std::uint64_t kBrwMagic = 0xeeb0eeb1eeb2eeb3ULL;
inline constexpr std::uint64_t kBrwPoison = 0xbeefbeefbeefbeefULL;
inline constexpr std::uint32_t kPingTestMagic = 0xbabeface;

// Reply status values are positive errno numbers (Linux's).
inline constexpr std::uint32_t kStatusEperm = 1, kStatusEnoent = 2, kStatusEsrch = 3, kStatusEnomem = 12,
                               kStatusEbusy = 16, kStatusEexist = 17, kStatusEinval = 22, kStatusEproto = 71,
                               kStatusEbadmsg = 74;

// A session: the console's NID (64-bit form) and a millisecond stamp.
struct SessionId {
  std::uint64_t nid = ~0ULL;
  std::int64_t stamp = -1;
  static SessionId invalid() { return {}; }
  bool is_invalid() const { return nid == ~0ULL; }
  friend bool operator==(const SessionId&, const SessionId&) = default;
};
struct BatchId {
  std::uint64_t id = 0;
  friend bool operator==(const BatchId&, const BatchId&) = default;
};

// The counters a STAT reply carries (20 + 36 + 60 bytes on the wire).
struct FwCounters {
  std::uint32_t running_ms = 0, active_batches = 0, zombie_sessions = 0, brw_errors = 0, ping_errors = 0;
  friend bool operator==(const FwCounters&, const FwCounters&) = default;
};
struct RpcCounters {
  std::uint32_t errors = 0, rpcs_sent = 0, rpcs_rcvd = 0, rpcs_dropped = 0, rpcs_expired = 0;
  std::uint64_t bulk_get = 0, bulk_put = 0;
  friend bool operator==(const RpcCounters&, const RpcCounters&) = default;
};
struct LnetCounters {
  std::uint32_t msgs_alloc = 0, msgs_max = 0, errors = 0, send_count = 0, recv_count = 0, route_count = 0,
                drop_count = 0;
  std::uint64_t send_length = 0, recv_length = 0, route_length = 0, drop_length = 0;
  friend bool operator==(const LnetCounters&, const LnetCounters&) = default;
};

// ---- bodies, in the order of MsgType ------------------------------------------------------

struct MksnReq {
  std::uint64_t rpyid = 0;
  SessionId sid;
  std::uint32_t force = 0;
  std::string name;  // at most kNameSize - 1 bytes
  friend bool operator==(const MksnReq&, const MksnReq&) = default;
};
struct MksnReply {
  std::uint32_t status = 0;
  SessionId sid;
  std::uint32_t timeout = 0;
  std::string name;
  friend bool operator==(const MksnReply&, const MksnReply&) = default;
};
struct RmsnReq {
  std::uint64_t rpyid = 0;
  SessionId sid;
  friend bool operator==(const RmsnReq&, const RmsnReq&) = default;
};
struct RmsnReply {
  std::uint32_t status = 0;
  SessionId sid;
  friend bool operator==(const RmsnReply&, const RmsnReply&) = default;
};
struct BatchReq {
  std::uint64_t rpyid = 0;
  SessionId sid;
  BatchId bid;
  std::uint32_t opc = 0;  // BatchOp
  std::uint32_t testidx = 0;
  std::uint32_t arg = 0;  // STOP: non-zero aborts the RPCs in flight
  friend bool operator==(const BatchReq&, const BatchReq&) = default;
};
struct BatchReply {
  std::uint32_t status = 0;
  SessionId sid;
  std::uint32_t active = 0;
  std::uint32_t time = 0;
  friend bool operator==(const BatchReply&, const BatchReply&) = default;
};
struct StatReq {
  std::uint64_t rpyid = 0;
  SessionId sid;
  std::uint32_t type = 0;
  friend bool operator==(const StatReq&, const StatReq&) = default;
};
struct StatReply {
  std::uint32_t status = 0;
  SessionId sid;
  FwCounters fw;
  RpcCounters rpc;
  LnetCounters lnet;
  friend bool operator==(const StatReply&, const StatReply&) = default;
};
// A test's parameters: which form a TEST request carries follows from its service and,
// for BRW, from the session's BULK_LEN feature.
struct PingParams {
  std::uint32_t size = 0, flags = 0;  // carried, never used
  friend bool operator==(const PingParams&, const PingParams&) = default;
};
struct BulkParamsV0 {  // without BULK_LEN: a page count
  std::uint32_t opc = 0, npg = 0, flags = 0;
  friend bool operator==(const BulkParamsV0&, const BulkParamsV0&) = default;
};
struct BulkParamsV1 {  // with BULK_LEN: bytes and the client's offset in its first page
  std::uint16_t opc = 0, flags = 0;
  std::uint32_t len = 0, offset = 0;
  friend bool operator==(const BulkParamsV1&, const BulkParamsV1&) = default;
};
using TestParams = std::variant<PingParams, BulkParamsV0, BulkParamsV1>;
struct TestReq {
  std::uint64_t rpyid = 0;
  std::uint64_t bulkid = 0;  // the destination list (clients), GOT from the console
  SessionId sid;
  BatchId bid;
  std::uint32_t service = 0;  // Service::Brw or Service::Ping
  std::uint32_t loop = 0;     // 0xFFFFFFFF: until stopped
  std::uint32_t concur = 0;
  std::uint8_t is_client = 0;
  std::uint8_t stop_onerr = 0;
  std::uint32_t ndest = 0;
  TestParams params;
  friend bool operator==(const TestReq&, const TestReq&) = default;
};
struct TestReply {
  std::uint32_t status = 0;
  SessionId sid;
  friend bool operator==(const TestReply&, const TestReply&) = default;
};
struct DebugReq {
  std::uint64_t rpyid = 0;
  SessionId sid;
  std::uint32_t flags = 0;
  friend bool operator==(const DebugReq&, const DebugReq&) = default;
};
struct DebugReply {
  std::uint32_t status = 0;
  SessionId sid;
  std::uint32_t timeout = 0;
  std::uint32_t nbatch = 0;
  std::string name;
  friend bool operator==(const DebugReply&, const DebugReply&) = default;
};
struct BrwReq {
  std::uint64_t rpyid = 0;
  std::uint64_t bulkid = 0;
  std::uint32_t rw = 0;  // BrwOp
  std::uint32_t len = 0;
  std::uint32_t flags = 0;  // BrwCheck
  friend bool operator==(const BrwReq&, const BrwReq&) = default;
};
struct BrwReply {
  std::uint32_t status = 0;
  friend bool operator==(const BrwReply&, const BrwReply&) = default;
};
struct PingReq {
  std::uint64_t rpyid = 0;
  std::uint32_t magic = kPingTestMagic;
  std::uint32_t seq = 0;
  std::uint64_t time_sec = 0;
  std::uint64_t time_nsec = 0;
  friend bool operator==(const PingReq&, const PingReq&) = default;
};
struct PingReply {
  std::uint32_t status = 0;
  std::uint32_t magic = kPingTestMagic;
  std::uint32_t seq = 0;
  friend bool operator==(const PingReply&, const PingReply&) = default;
};
struct JoinReq {
  std::uint64_t rpyid = 0;
  SessionId sid;
  std::string group;
  friend bool operator==(const JoinReq&, const JoinReq&) = default;
};
struct JoinReply {
  std::uint32_t status = 0;
  SessionId sid;
  std::uint32_t timeout = 0;
  std::string session;
  friend bool operator==(const JoinReply&, const JoinReply&) = default;
};

// The alternatives are in MsgType order: body.index() is the message type.
using Body = std::variant<MksnReq, MksnReply, RmsnReq, RmsnReply, BatchReq, BatchReply, StatReq, StatReply, TestReq,
                          TestReply, DebugReq, DebugReply, BrwReq, BrwReply, PingReq, PingReply, JoinReq, JoinReply>;

struct Message {
  std::uint32_t version = kMsgVersion;
  std::uint32_t feats = 0;  // session features
  Body body;
  bool swapped = false;  // decoded from the other byte order (the BRW pattern is the writer's)

  MsgType type() const { return static_cast<MsgType>(body.index()); }
};

// The fields many bodies share: the session id (invalid when the body has none) and a
// reply's status (0 when it has none).
SessionId session_of(const Body& b);
std::uint32_t status_of(const Body& b);

// Writes the 160 bytes of `m` in our byte order (unused body bytes zero).
void encode(const Message& m, std::span<std::uint8_t, kMsgSize> out);
std::array<std::uint8_t, kMsgSize> encode(const Message& m);

// Reads a message of either byte order. Fails (-EPROTO, the message naming what is wrong)
// unless it is exactly kMsgSize bytes with a known magic and type and names that are
// NUL-terminated. A TEST request for a service other than brw reads its parameters as
// ping's (the node answers EINVAL for what is not a test service). The version is
// returned as read: the RPC layer answers a request of another version with EPROTO.
Result<Message> decode(std::span<const std::uint8_t> in);

// The id lists a TEST request's bulk carries: 12-byte {nid, pid} entries, 341 to a
// 4 KiB page from its start (4 bytes unused at the end of each page).
inline constexpr std::size_t kPageSize = 4096;
inline constexpr std::size_t kIdSize = 12;
inline constexpr std::size_t kIdsPerPage = kPageSize / kIdSize;  // 341
struct ProcessIdPacked {
  std::uint64_t nid = 0;
  std::uint32_t pid = 0;
  friend bool operator==(const ProcessIdPacked&, const ProcessIdPacked&) = default;
};
// The bytes a list of n ids occupies laid out that way. (The kernel moves only 12 x n
// bytes, which cuts the last ids of lists longer than one page: selftest-wire.md §4.4;
// one page, 341 ids, is the same either way.)
std::size_t id_list_bytes(std::size_t n);
inline constexpr std::uint32_t kMaxNdests = 256 * kIdsPerPage;  // LNET_MAX_IOV pages of ids
inline constexpr std::uint32_t kLoopForever = 0xFFFFFFFF;       // a TEST's loop: until stopped
inline constexpr std::uint32_t kMaxConcur = 1024;
void encode_ids(std::span<const ProcessIdPacked> ids, std::span<std::uint8_t> out);  // out: id_list_bytes
Result<std::vector<ProcessIdPacked>> decode_ids(std::span<const std::uint8_t> in, std::size_t n, bool swapped);

}  // namespace lnet::selftest
