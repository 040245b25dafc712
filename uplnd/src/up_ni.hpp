// The UP LND's NI: the bridge socket, the proxies connected to it, the application pids
// they registered and the descriptors of the messages the driver holds for them.
//
// Locks: one NI mutex `mu_` guards everything here, socket writes included; it is never
// held while calling the host. Threads: the NI's own thread accepts proxies and reads
// their messages (and calls the host's parse/finalize/notify_peer); the host's threads
// call send() and recv(). Connections are closed and freed by the NI's thread only.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <lnet/lnd/fifo.hpp>
#include <lnet/lnd/lnd.hpp>
#include <lnet/log.hpp>
#include <lnet/mutex.hpp>
#include <lnet/up/bridge.hpp>
#include <lnet/up/region.hpp>
#include <lnet/up/uplnd.hpp>

namespace lnet::up {

struct Conn;

// A bounce buffer of the region: a payload of lnetd's own memory crosses through one.
struct Bounce {
  Bounce* next = nullptr;
  char* data = nullptr;
  std::uint32_t size = 0;
};

// A message the driver holds for a proxy (seed 002 §2.3.1's descriptors). A receive
// descriptor is made when a PARSE arrives and waits (Parsed) for the host's recv(); a
// send descriptor is made by send(). Either is Pending until its RECV or SEND is written
// to the proxy (waiting for a bounce buffer or room in the socket), then Active until
// the proxy's RECV_DONE or SEND_DONE. A receive whose bytes the proxy's MPI may still
// write after its message failed (a RECV_DONE with kDoneKept, or a RECV in hand when its
// proxy went away) is Kept: its message is finalized, its bytes (a bounce buffer, or the
// host's memory kept with LndHost::keep_memory) are lent to no one until the proxy's
// MEM_RELEASE, or until the proxy's process has exited (a Grave).
struct Desc : FifoLink {
  enum class Kind : std::uint8_t { Free, Recv, Send };
  enum class State : std::uint8_t { Parsed, Pending, Active, Kept };
  std::uint32_t index = 0;
  std::uint32_t gen = 1;
  Kind kind = Kind::Free;
  State state = State::Parsed;
  Conn* conn = nullptr;       // null once its proxy went away (a Parsed one waits for recv())
  Pid pid = 0;                // the application
  std::uint64_t cookie = 0;   // the proxy's reference (receives)
  bool rdma = false;          // the PARSE was an optimised GET
  bool inlined = false;       // the PARSE carried the payload (in `data`): no RECV goes out
  LndMessage* msg = nullptr;  // null: a receive whose payload is discarded
  std::uint32_t flags = 0;    // RECV flags
  std::int32_t status = 0;    // a RECV's status (negative: discard)
  // The payload: region bytes from `offset`, in place or in `bounce`.
  std::uint64_t offset = 0;
  std::uint32_t mlen = 0;
  std::uint32_t rlen = 0;
  Bounce* bounce = nullptr;
  std::uintptr_t token = 0;  // Kept in place: the host's memory (LndHost::keep_memory)
  bool filled = false;       // the bounce holds the outgoing payload already
  // A receive through a bounce buffer: where the payload goes once it arrived.
  const iovec* iov = nullptr;
  unsigned niov = 0;
  std::uint32_t iov_offset = 0;
  std::uint32_t data_len = 0;
  std::uint8_t data[kMaxInline];  // an inline payload (not cleared when reused)
};

// An application pid and the proxy connection that registered it.
struct App {
  Pid pid = 0;
  Conn* owner = nullptr;
  std::uint32_t ranks = 0;   // its NIDs on the MPI network are 0..ranks-1
  std::uint64_t serial = 0;  // the order in which this lnetd's proxies registered it
  Fifo<Desc> pending;        // descriptors waiting to go to the proxy, in order
};

struct Conn {
  int fd = -1;
  int pidfd = -1;  // the proxy's process (pidfd_open), to know when it has exited; -1: unknown
  uid_t uid = 0;
  pid_t os_pid = 0;
  std::uint32_t rank = 0;
  bool hello = false;
  bool out_armed = false;  // EPOLLOUT wanted: something waits for room in the socket
  bool broken = false;     // a write failed: close it
  unsigned bad = 0;        // refused messages so far
  std::uint32_t held = 0;  // its receive descriptors (its PARSEs lnetd holds): at most proxy_credits
  std::chrono::steady_clock::time_point accepted;  // the HELLO is due hello_timeout later
  std::set<Pid> pids;
  std::deque<std::vector<std::uint8_t>> backlog;  // replies that did not fit the socket
  std::string name;                               // "proxy rank R (pid P)" for logs
};

// The Kept descriptors of a proxy that went away, held until its process exits (its
// pidfd becomes readable): until then its MPI may still write their bytes.
struct Grave {
  int pidfd = -1;
  std::string name;  // the proxy's, for logs
  std::vector<Desc*> descs;
};

class UpNi {
 public:
  UpNi(NetInterface& ni, Region& region, const UpOptions& opts);
  ~UpNi();
  // Listens on the bridge and starts the NI's thread.
  Status start();
  // Stops the thread and closes every connection, failing what it holds.
  void stop();

  int send(LndMessage& msg);
  int recv(Desc* d, LndMessage* msg, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t mlen,
           std::uint32_t rlen, bool delayed);
  UpStats stats() const;
  // Proxies connected now.
  std::size_t proxies() const;
  void set_nets(std::vector<NetId> nets);

 private:
  // A message to finalize, and/or the host's memory to release (LndHost::release_memory).
  struct Done {
    LndMessage* msg;
    int status;
    HealthStatus health;
    std::uintptr_t token = 0;
  };
  using DoneList = std::vector<Done>;

  void run();
  void accept_ready();
  // A permitted connection joins: watched, counted, the NI's link up.
  void adopt(std::unique_ptr<Conn> c);
  // Closes the connections whose HELLO is overdue and listens again after a pause; the
  // milliseconds until the next of those is due (-1: nothing is).
  int timers();
  // accept() ran out of descriptors or memory: stop listening for a while rather than
  // spin on a listener that stays readable (the NI's thread only).
  void pause_listening();
  bool permitted(int fd, Conn& c, std::string* why) const;
  // Each returns false when it closed the connection (c is gone then).
  bool read_ready(Conn& c);
  bool handle(Conn& c, const Message& m);
  bool on_hello(Conn& c, const Hello& h);
  bool on_pid(Conn& c, const Message& m);
  int fresh_pid_locked(Pid* pid) LNET_REQUIRES(mu_);  // -EAGAIN: every pid in use
  // The application a message for `pid` at `nid` goes to: its own, or for LNet's pid at
  // a rank's NID the first registered that has that rank; nullptr when none.
  App* app_for_locked(Pid pid, Nid nid) LNET_REQUIRES(mu_);
  bool on_parse(Conn& c, const Parse& p);
  bool on_notify(Conn& c, const Notify& n);
  // A PARSE lnetd cannot hold (over the proxy's credits or its descriptors): the proxy
  // discards the payload.
  void drop_parse_locked(Conn& c, const Parse& p) LNET_REQUIRES(mu_);
  bool on_done(Conn& c, DescRef ref, bool is_send, int status, std::uint32_t health, std::uint32_t flags);
  bool on_mem_release(Conn& c, DescRef ref);
  // d failed while its proxy's MPI may still write its bytes: they stay out of use (the
  // host keeps its memory in place) and d becomes Kept. False when the host cannot keep
  // its memory (d is then freed like any other).
  bool keep_locked(Desc& d) LNET_REQUIRES(mu_);
  // A Kept descriptor's bytes are free: its token goes to `done`, d is freed.
  void unkeep_locked(Desc& d, DoneList& done) LNET_REQUIRES(mu_);
  // The proxy's process of `g` has exited: its Kept descriptors are freed (the NI's thread).
  void bury(Grave* g);
  // The grave an epoll event's pointer names, or nullptr (a connection's).
  Grave* grave_of(void* p);
  bool refuse(Conn& c, const std::string& why);
  void close_conn(Conn& c, const char* why);
  void finalize_all(DoneList& done);

  // nullptr when max_descs are in use.
  Desc* new_desc_locked(Desc::Kind kind, Conn* c, Pid pid) LNET_REQUIRES(mu_);
  // The descriptor no longer counts against its proxy's credits (it is freed, or its
  // proxy let its application go).
  void uncount_locked(Desc& d) LNET_REQUIRES(mu_);
  void free_desc_locked(Desc* d) LNET_REQUIRES(mu_);
  Desc* find_desc_locked(DescRef ref, Desc::Kind kind, const Conn& c) LNET_REQUIRES(mu_);
  // Places a payload: in place when [iov, offset, len) is one piece of the region, else a
  // bounce buffer is needed (false).
  bool place_locked(Desc& d, const iovec* iov, unsigned niov, std::uint32_t offset, std::uint32_t len)
      LNET_REQUIRES(mu_);
  // Writes d's RECV or SEND to its proxy; false when it must wait (bounce or socket).
  bool dispatch_locked(Desc& d) LNET_REQUIRES(mu_);
  // Queues d behind its application's pending descriptors, or dispatches it.
  void submit_locked(App& app, Desc& d) LNET_REQUIRES(mu_);
  // Dispatches what waits, in order per application, as far as it can go.
  void flush_locked(Conn& c) LNET_REQUIRES(mu_);
  // 1: written; 0: no room (the caller keeps it); -1: the connection is broken.
  int write_locked(Conn& c, const Message& m) LNET_REQUIRES(mu_);
  void reply_locked(Conn& c, const Message& m) LNET_REQUIRES(mu_);
  void arm_out_locked(Conn& c, bool on) LNET_REQUIRES(mu_);
  Bounce* take_bounce_locked(std::uint32_t len) LNET_REQUIRES(mu_);
  void give_bounce_locked(Bounce* b) LNET_REQUIRES(mu_);
  // Fails the descriptors of `c` (of its application `pid` only, when not 0) and releases
  // its pids (that one); the host's messages go to `done`. With `grave` (c closes, its
  // process may live on), the descriptors whose bytes its MPI may still write go there,
  // Kept; without, they are freed.
  void fail_descs_locked(Conn& c, Pid pid, DoneList& done, Grave* grave = nullptr) LNET_REQUIRES(mu_);

  NetInterface& ni_;
  LndHost& host_;
  Region& region_;
  UpOptions opts_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int stop_fd_ = -1;
  std::thread thread_;
  // The NI's thread only: a listener paused after EMFILE and the like, and until when.
  bool listen_paused_ = false;
  std::chrono::milliseconds listen_pause_{0};
  std::chrono::steady_clock::time_point listen_resume_;

  mutable Mutex mu_;
  std::deque<Desc> descs_ LNET_GUARDED_BY(mu_);  // stable addresses: the host holds Desc*
  std::vector<std::uint32_t> free_descs_ LNET_GUARDED_BY(mu_);
  std::size_t descs_used_ LNET_GUARDED_BY(mu_) = 0;
  std::map<Pid, App> apps_ LNET_GUARDED_BY(mu_);
  std::map<int, std::unique_ptr<Conn>> conns_ LNET_GUARDED_BY(mu_);
  Pid next_pid_ LNET_GUARDED_BY(mu_) = 1;
  std::uint64_t app_serial_ LNET_GUARDED_BY(mu_) = 0;
  Bounce* free_small_ LNET_GUARDED_BY(mu_) = nullptr;
  Bounce* free_large_ LNET_GUARDED_BY(mu_) = nullptr;
  unsigned small_made_ LNET_GUARDED_BY(mu_) = 0;
  unsigned large_made_ LNET_GUARDED_BY(mu_) = 0;
  std::vector<std::unique_ptr<Bounce>> bounces_ LNET_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Grave>> graves_ LNET_GUARDED_BY(mu_);
  std::vector<NetId> nets_ LNET_GUARDED_BY(mu_);
  UpStats stats_ LNET_GUARDED_BY(mu_);                   // the counters (proxies and pids are counted when asked)
  LogLimiter drop_log_{std::chrono::seconds(10)};        // dropped PARSEs: one line per 10 s
  LogLimiter refuse_log_{std::chrono::seconds(10), 20};  // refused connections: 20 lines per 10 s
};

}  // namespace lnet::up
