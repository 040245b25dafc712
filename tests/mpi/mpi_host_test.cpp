// The MPI LND under a host that is not liblnet's core (GoogleTest in every rank, under
// mpirun): a minimal LndHost that records every parse and finalize and answers PUTs
// and GETs itself, as the proxy's bridge will. It runs the driver through the SPI only
// (lnet::mpi::Group for the collective set-up, lnet::mpi::MpiLnd for the driver): PUTs
// and GETs (plain and optimised) of 0 B to 1 MiB around the ring of ranks, with data
// checks, in the progress model LNET_MPI_PROGRESS names (thread or poll).
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <lnet/lnd/lnd.hpp>
#include <lnet/mpi.hpp>

#include "mpi_test.hpp"

namespace lnet {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kMax = 1 << 20;

char pattern(std::size_t i, std::size_t size, int rank) {
  return static_cast<char>((i * 131 + size * 7 + static_cast<std::size_t>(rank) * 17 + 1) & 0xff);
}

// A message the host made (it owns every LndMessage it hands the driver).
struct HostMsg : LndMessage {
  enum Kind { Put, Get, Reply, Rx } kind = Put;
  std::uint64_t id = 0;
  iovec frag{};
};

class TestHost final : public LndHost {
 public:
  TestHost(std::shared_ptr<mpi::MpiLnd> lnd, Pid pid, bool optimised_gets)
      : lnd_(std::move(lnd)), pid_(pid), optimised_(optimised_gets), inbox_(kMax), source_(kMax) {}

  int start() {
    ni_.host = this;
    ni_.lnd = lnd_.get();
    ni_.pid = pid_;
    ni_.config.net = NetId::make(kMpiLnd, 0);
    return lnd_->startup(ni_);
  }
  void stop() { lnd_->shutdown(ni_); }
  Nid nid() const { return ni_.nid; }
  bool polled() const { return ni_.poll != nullptr; }
  int peer_credits() const { return ni_.config.tunables.peer_credits; }

  // Drives the driver when it asks to be polled (else its thread does) until pred(),
  // which takes the host's lock itself.
  template <class Pred>
  bool wait(Pred pred, std::chrono::milliseconds limit = 30000ms) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
      if (std::chrono::steady_clock::now() >= until) return false;
      if (ni_.poll) {
        if (!ni_.poll(ni_.poll_ctx)) std::this_thread::yield();
      } else {
        std::unique_lock lk(m_);
        cv_.wait_for(lk, 1ms);
      }
    }
    return true;
  }
  // A barrier over the job that keeps the driver going meanwhile.
  void sync() {
    MPI_Request r;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    int done = 0;
    while (!done) {
      if (!ni_.poll || !ni_.poll(ni_.poll_ctx)) std::this_thread::sleep_for(20us);
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    }
  }

  // What this rank serves: GETs read `source`, PUTs land in `inbox`.
  void fill_source(std::size_t size, int rank) {
    for (std::size_t i = 0; i < size; ++i) source_[i] = pattern(i, size, rank);
  }
  const std::vector<char>& inbox() const { return inbox_; }

  // Sends a PUT of `payload` to `peer`; returns its id.
  std::uint64_t put(Nid peer, const std::vector<char>& payload) {
    auto* m = make(HostMsg::Put, peer);
    m->hdr.type = MsgType::Put;
    m->hdr.payload_length = static_cast<std::uint32_t>(payload.size());
    m->hdr.msg.put.ack_wmd = WireHandle::none();
    m->hdr.msg.put.match_bits = payload.size();
    m->frag = iovec{const_cast<char*>(payload.data()), payload.size()};
    m->iov = &m->frag;
    m->niov = 1;
    m->len = static_cast<std::uint32_t>(payload.size());
    EXPECT_EQ(lnd_->send(ni_, *m), 0);
    return m->id;
  }
  // GETs `size` bytes from `peer` into `sink`; returns the GET's id.
  std::uint64_t get(Nid peer, std::vector<char>& sink, std::size_t size) {
    auto* m = make(HostMsg::Get, peer);
    m->hdr.type = MsgType::Get;
    m->hdr.msg.get.return_wmd = WireHandle{1, m->id};
    m->hdr.msg.get.match_bits = size;
    m->hdr.msg.get.sink_length = static_cast<std::uint32_t>(size);
    m->frag = iovec{sink.data(), size};
    m->iov = &m->frag;
    m->niov = 1;
    {
      std::lock_guard g(m_);
      gets_[m->id] = m;
    }
    EXPECT_EQ(lnd_->send(ni_, *m), 0);
    return m->id;
  }
  // Whether message `id` was finalized, and with what.
  bool finalized(std::uint64_t id) {
    std::lock_guard g(m_);
    return done_.count(id) > 0;
  }
  int status(std::uint64_t id) {
    std::lock_guard g(m_);
    return done_.count(id) ? done_[id] : 1;
  }
  // The GET `id` is complete: its REPLY (ours, or the driver's made by create_reply) is in.
  bool reply_in(std::uint64_t get_id) {
    std::lock_guard g(m_);
    return replies_done_.count(get_id) > 0;
  }
  std::uint32_t reply_length(std::uint64_t get_id) {
    std::lock_guard g(m_);
    return reply_len_[get_id];
  }
  std::size_t puts_received() {
    std::lock_guard g(m_);
    return puts_in_;
  }
  std::size_t parses() {
    std::lock_guard g(m_);
    return parses_;
  }

  // ---- LndHost ----
  int parse(NetInterface& ni, const Header& hdr, Nid from, void* priv, bool rdma_req) override {
    {
      std::lock_guard g(m_);
      ++parses_;
    }
    switch (hdr.type) {
      case MsgType::Put: {
        auto* rx = make(HostMsg::Rx, from);
        rx->hdr = hdr;
        std::uint32_t mlen = std::min<std::uint32_t>(hdr.payload_length, static_cast<std::uint32_t>(kMax));
        rx->frag = iovec{inbox_.data(), kMax};
        return lnd_->recv(ni, priv, rx, false, &rx->frag, 1, 0, mlen, hdr.payload_length);
      }
      case MsgType::Get: return answer_get(ni, hdr, from, priv, rdma_req);
      case MsgType::Reply: {
        // The answer to one of our plain GETs: into its sink.
        HostMsg* get;
        {
          std::lock_guard g(m_);
          auto it = gets_.find(hdr.msg.reply.dst_wmd.object_cookie);
          if (it == gets_.end()) return -EPROTO;
          get = it->second;
        }
        auto* rx = make(HostMsg::Rx, from);
        rx->id = get->id | kReplyBit;
        std::uint32_t mlen = std::min(hdr.payload_length, get->hdr.msg.get.sink_length);
        {
          std::lock_guard g(m_);
          reply_len_[get->id] = mlen;
        }
        return lnd_->recv(ni, priv, rx, false, &get->frag, 1, 0, mlen, hdr.payload_length);
      }
      default: return -EPROTO;
    }
  }
  void finalize(LndMessage* lm, int status) override {
    auto* m = static_cast<HostMsg*>(lm);
    std::lock_guard g(m_);
    done_[m->id] = status;
    if (m->id & kReplyBit) replies_done_.insert(m->id & ~kReplyBit);
    if (m->kind == HostMsg::Rx && m->hdr.type == MsgType::Put && status == 0) ++puts_in_;
    owned_.push_back(std::unique_ptr<HostMsg>(m));  // freed with the host
    cv_.notify_all();
  }
  void notify_peer(NetInterface&, Nid, bool) override {}
  LndMessage* create_reply(NetInterface&, LndMessage& lget) override {
    if (!optimised_) return nullptr;
    auto& get = static_cast<HostMsg&>(lget);
    auto* r = make(HostMsg::Reply, get.next_hop);
    r->id = get.id | kReplyBit;
    return r;
  }
  void set_reply_length(LndMessage& lreply, std::uint32_t len) override {
    auto& r = static_cast<HostMsg&>(lreply);
    std::lock_guard g(m_);
    reply_len_[r.id & ~kReplyBit] = len;
  }

 private:
  static constexpr std::uint64_t kReplyBit = 1ULL << 62;

  HostMsg* make(HostMsg::Kind kind, Nid peer) {
    auto* m = new HostMsg;
    m->kind = kind;
    std::lock_guard g(m_);
    m->id = ++next_id_;
    m->hdr.src_nid = ni_.nid;
    m->hdr.dest_nid = peer;
    m->hdr.src_pid = m->hdr.dest_pid = pid_;
    m->target = ProcessId{peer, pid_};
    m->next_hop = peer;
    return m;
  }

  // A GET for our `source`: ready-sent into the initiator's sink (optimised), or
  // answered with a REPLY message of our own.
  int answer_get(NetInterface& ni, const Header& hdr, Nid from, void* priv, bool rdma_req) {
    std::uint32_t n = std::min(hdr.msg.get.sink_length, static_cast<std::uint32_t>(kMax));
    auto* reply = make(HostMsg::Reply, from);
    reply->hdr.type = MsgType::Reply;
    reply->hdr.payload_length = n;
    reply->hdr.msg.reply.dst_wmd = hdr.msg.get.return_wmd;
    reply->frag = iovec{source_.data(), n};
    if (rdma_req) return lnd_->recv(ni, priv, reply, false, &reply->frag, 1, 0, n, n);
    if (int rc = lnd_->recv(ni, priv, nullptr, false, nullptr, 0, 0, 0, 0); rc) return rc;
    reply->iov = &reply->frag;
    reply->niov = 1;
    reply->len = n;
    return lnd_->send(ni, *reply);
  }

  std::shared_ptr<mpi::MpiLnd> lnd_;
  Pid pid_;
  bool optimised_;
  NetInterface ni_;
  std::vector<char> inbox_, source_;
  std::mutex m_;
  std::condition_variable cv_;
  std::uint64_t next_id_ = 0;
  std::map<std::uint64_t, int> done_;
  std::map<std::uint64_t, HostMsg*> gets_;
  std::map<std::uint64_t, std::uint32_t> reply_len_;
  std::set<std::uint64_t> replies_done_;
  std::size_t puts_in_ = 0;
  std::size_t parses_ = 0;
  std::vector<std::unique_ptr<HostMsg>> owned_;
};

// The NIDs of the ranks: r@mpi, or with a table the odd ranks are 10.1.0.<r>@mpi (as
// proxies are among the ranks of an application).
std::vector<Nid> nid_table(int n, bool table) {
  std::vector<Nid> nids;
  for (int r = 0; r < n; ++r) {
    std::uint32_t addr = table && r % 2 ? 0x0a010000u + static_cast<std::uint32_t>(r) : static_cast<std::uint32_t>(r);
    nids.push_back(Nid::make(NetId::make(kMpiLnd, 0), addr));
  }
  return nids;
}

// The ring: rank r PUTs `size` bytes to r + 1 and GETs `size` bytes from it.
void put_get_ring(TestHost& h, mpi::Group& g, const std::vector<Nid>& nids, std::size_t size) {
  SCOPED_TRACE(::testing::Message() << size << " bytes");
  int r = g.rank(), n = g.size();
  Nid next = nids[static_cast<std::size_t>((r + 1) % n)];
  h.fill_source(size, r);
  std::vector<char> payload(size), sink(size + 16, 0x5a);
  for (std::size_t i = 0; i < size; ++i) payload[i] = pattern(i, size, r + 1000);
  std::size_t before = h.puts_received();
  h.sync();
  std::uint64_t put = h.put(next, payload);
  std::uint64_t get = h.get(next, sink, size);
  ASSERT_TRUE(h.wait([&] { return h.finalized(put) && h.finalized(get) && h.reply_in(get); })) << "no completion";
  EXPECT_EQ(h.status(put), 0) << "PUT";
  EXPECT_EQ(h.status(get), 0) << "GET";
  EXPECT_EQ(h.reply_length(get), size);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < size; ++i) bad += sink[i] != pattern(i, size, (r + 1) % n);
  EXPECT_EQ(bad, 0u) << "the GET brought other bytes than the peer's source";
  EXPECT_EQ(sink[size], 0x5a) << "written past the sink";
  // What our predecessor PUT to us.
  ASSERT_TRUE(h.wait([&] { return h.puts_received() > before; })) << "no PUT arrived";
  int prev = (r + n - 1) % n;
  bad = 0;
  for (std::size_t i = 0; i < size; ++i) bad += h.inbox()[i] != pattern(i, size, prev + 1000);
  EXPECT_EQ(bad, 0u) << "the PUT from rank " << prev << " landed other bytes";
  h.sync();
}

void run_ring(bool optimised, bool table = false) {
  auto group = mpi::Group::create(MPI_COMM_WORLD);
  ASSERT_TRUE(group) << group.message();
  auto opts = mpi::Options::from_env();
  ASSERT_TRUE(opts) << opts.message();
  std::vector<Nid> nids = nid_table((*group)->size(), table);
  auto lnd = table ? std::make_shared<mpi::MpiLnd>((*group)->comm(), nids, *opts)
                   : std::make_shared<mpi::MpiLnd>((*group)->comm(), *opts);
  TestHost host(lnd, (*group)->pid(), optimised);
  ASSERT_TRUE((*group)->agree(host.start() == 0 ? Status() : Status::fail(-EIO, "startup")));
  EXPECT_EQ(host.nid(), nids[static_cast<std::size_t>((*group)->rank())]);
  EXPECT_EQ(host.peer_credits(), opts->credits) << "peer_credits left at 0: the driver's credits";
  EXPECT_EQ(host.polled(), !lnd->progress_thread()) << "a driver without a thread asks its host to poll it";
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{100}, std::size_t{opts->short_max},
                           std::size_t{opts->short_max} + 1, std::size_t{65536}, kMax}) {
    put_get_ring(host, **group, nids, size);
  }
  mpi::Stats st = lnd->stats();
  EXPECT_GT(st.immediate, 0u);
  EXPECT_GT(st.bulk, 0u) << "payloads above short_max go as bulk transfers";
  if (optimised) {
    EXPECT_GT(st.rdma_gets, 0u) << "a host with create_reply gets optimised GETs";
  } else {
    EXPECT_EQ(st.rdma_gets, 0u) << "without create_reply GETs are plain";
  }
  EXPECT_GT(host.parses(), 0u);
  host.sync();
  host.stop();
}

TEST(MpiLndUnderAnotherHost, PutsAndPlainGets) { run_ring(false); }
TEST(MpiLndUnderAnotherHost, PutsAndOptimisedGets) { run_ring(true); }
// Ranks named by a NID table (what the proxy and its applications use).
TEST(MpiLndUnderAnotherHost, RanksNamedByANidTable) { run_ring(true, true); }

TEST(MpiLndUnderAnotherHost, ABadNidTableIsRefusedAtStartup) {
  auto group = mpi::Group::create(MPI_COMM_WORLD);
  ASSERT_TRUE(group) << group.message();
  auto opts = mpi::Options::from_env();
  ASSERT_TRUE(opts) << opts.message();
  std::vector<Nid> dup = nid_table((*group)->size(), false);
  dup.back() = dup.front();
  std::vector<Nid> short_table(dup.begin(), dup.end() - 1);
  for (auto* nids : {&dup, &short_table}) {
    TestHost host(std::make_shared<mpi::MpiLnd>((*group)->comm(), *nids, *opts), (*group)->pid(), false);
    EXPECT_EQ(host.start(), -EINVAL);
  }
}

}  // namespace
}  // namespace lnet
