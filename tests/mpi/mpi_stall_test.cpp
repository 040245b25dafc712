// A peer that stalls in the middle of a bulk transfer (issue 52): the receiver gives up
// on it after the LND's timeout, but MPI has matched the receive and will write the rest
// of the payload into the MD when the peer goes on. The transfer fails within the timeout
// all the same, but its MD is not released (its memory the application's again) before
// MPI is done with it.
//
// Two ranks over Open MPI's TCP transport (tests/CMakeLists.txt: mpi.lnd.stall), where a
// synchronous send's data beyond its first fragment moves only while the sender drives
// MPI. Rank 1 (progress: poll) starts a 1 MiB PUT into rank 0, drives progress until its
// chunk is posted, then stops calling MPI until rank 0 says go (a file, not MPI). Rank 0
// (timeout 2 s) times out the transfer: its PUT event comes while rank 1 is stalled, with
// the timeout's status, but its MD is unlinked (the memory the application's again) only
// once rank 1 went on and MPI completed the receive. Under ASan, a receive left to MPI
// after its MD was freed is a heap-use-after-free in readv.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <lnet/lnet.hpp>
#include <lnet/mpi.hpp>

#include "mpi_test.hpp"
#include "support/event_log.hpp"

namespace lnet {
namespace {

using namespace std::chrono_literals;

constexpr unsigned kPortal = 31;
constexpr std::uint64_t kBits = 0x57a1;
constexpr std::size_t kSize = 1u << 20;

// Drives progress until pred() holds or `limit` passed; returns pred().
template <class Pred>
bool drive(mpi::Session& s, Pred pred, std::chrono::seconds limit) {
  for (auto until = std::chrono::steady_clock::now() + limit; !pred() && std::chrono::steady_clock::now() < until;)
    if (!s.lnet().progress()) std::this_thread::sleep_for(1ms);
  return pred();
}

// Rank 1 stalls mid-transfer until rank 0 says go. `resume`: rank 0 says it once the
// transfer failed (the receive cancelled, still waited for); else only once the MD was
// given back, the receive left to MPI after 4 more timeouts (a peer that never comes
// back must not keep the application's memory for ever).
void stall(bool resume) {
  const int rank = test::world_rank();
  bool nothing_stalled = false;  // the MPI moved the payload without the sender
  std::string go;
  {
    char dir[] = "/tmp/lnet-stall-XXXXXX";
    if (rank == 0) {
      ASSERT_NE(mkdtemp(dir), nullptr);
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    go = std::string(dir) + "/go";
  }
  auto o = mpi::Options::from_env();
  ASSERT_TRUE(o) << o.message();
  o->timeout = 2;
  o->progress = rank == 1 ? mpi::ProgressMode::Poll : mpi::ProgressMode::Thread;
  auto s = mpi::Session::start(MPI_COMM_WORLD, Config{}, *o);
  ASSERT_TRUE(s) << s.message();
  Instance& lnet = (*s)->lnet();
  test::EventLog ev;
  auto buf = std::make_unique<std::vector<char>>(kSize, 0);
  MdHandle target{};
  if (rank == 0) {
    auto me = lnet.me_attach(kPortal, ProcessId::any(), kBits, 0, Unlink::Unlink, InsPos::After);
    ASSERT_TRUE(me);
    MdDesc d;
    d.start = buf->data();
    d.length = kSize;
    d.options = kMdOpPut;
    d.threshold = 1;
    d.handler = ev.handler();
    auto md = lnet.md_attach(*me, d, Unlink::Unlink);
    ASSERT_TRUE(md);
    target = *md;
  }
  // The ranks meet (rank 1 driving its progress: it answers rank 0's handshake).
  MPI_Request barrier;
  MPI_Ibarrier(MPI_COMM_WORLD, &barrier);
  int met = 0;
  ASSERT_TRUE(drive(
      **s,
      [&] {
        MPI_Test(&barrier, &met, MPI_STATUS_IGNORE);
        return met != 0;
      },
      60s));
  if (rank == 1) {
    for (std::size_t i = 0; i < kSize; ++i) (*buf)[i] = static_cast<char>(i * 7 + 1);
    MdDesc d;
    d.start = buf->data();
    d.length = kSize;
    d.threshold = 1;
    d.handler = ev.handler();
    auto md = lnet.md_bind(d, Unlink::Unlink);
    ASSERT_TRUE(md);
    ASSERT_EQ(lnet.put(Nid::any(), *md, AckReq::NoAck, (*s)->id(0), kPortal, kBits, 0, 0), 0);
    ASSERT_TRUE(drive(
        **s, [&] { return (*s)->stats().chunks >= 1; }, 60s))
        << "the chunk was never posted";
    // Stalled: no MPI call until rank 0 says go.
    for (auto until = std::chrono::steady_clock::now() + 120s;
         !std::filesystem::exists(go) && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(drive(
        **s, [&] { return ev.count(EventType::Send) >= 1; }, 60s))
        << "the PUT never completed";
  } else {
    auto say_go = [&] {
      std::FILE* f = std::fopen(go.c_str(), "w");
      if (f) std::fclose(f);
    };
    // The transfer fails once the LND's timeout (2 s) passed, while rank 1 is still
    // stalled; its MD is kept from the application (not unlinked) while MPI may write
    // into it.
    auto put = ev.find(EventType::Put, 60000ms);
    nothing_stalled = put && put->status == 0;
    EXPECT_TRUE(put) << "a transfer whose peer stalled did not fail (and rank 1 is still stalled)";
    if (put && !nothing_stalled) {
      EXPECT_EQ(put->status, -ETIMEDOUT);
      EXPECT_FALSE(put->unlinked) << "the MD was given back while MPI could still write into it";
      EXPECT_GE((*s)->stats().timeouts, 1u);
    }
    if (resume) {
      // Rank 1 goes on: MPI completes the cancelled receive, and only then is the MD unlinked.
      if (!nothing_stalled) {
        EXPECT_FALSE(ev.wait_unlinked(target, 0ms));
      }
      say_go();
      EXPECT_TRUE(ev.wait_unlinked(target, 60000ms)) << "the MD was never given back after the peer went on";
      if (!nothing_stalled) {
        EXPECT_EQ((*s)->stats().abandoned, 0u);
      }
      buf.reset();  // the application's memory again: MPI is done with it
    } else {
      // The peer never comes back (until the end): the MD is given back all the same,
      // after 4 more timeouts, its receive left to MPI.
      bool given_back = ev.wait_unlinked(target, 60000ms);
      say_go();
      EXPECT_TRUE(given_back) << "the MD of a receive whose peer never came back is never given back";
      if (!nothing_stalled) {
        EXPECT_EQ((*s)->stats().abandoned, 1u);
      }
      // MPI may still write into the buffer when rank 1 goes on: it stays until the job ends.
      (void)buf.release();
    }
  }
  // Both ranks drive progress to the end (rank 0's thread does its own).
  MPI_Ibarrier(MPI_COMM_WORLD, &barrier);
  met = 0;
  EXPECT_TRUE(drive(
      **s,
      [&] {
        MPI_Test(&barrier, &met, MPI_STATUS_IGNORE);
        return met != 0;
      },
      60s));
  if (rank == 0) std::filesystem::remove_all(std::filesystem::path(go).parent_path());
  if (nothing_stalled) GTEST_SKIP() << "this MPI moved the whole payload without the sender: nothing stalled";
}

TEST(MpiStall, ATransferFailsInTimeButItsMdIsKeptWhileMpiMayWriteIntoIt) { stall(true); }

TEST(MpiStall, AReceiveFromAPeerThatNeverComesBackIsLeftToMpi) { stall(false); }

}  // namespace
}  // namespace lnet
