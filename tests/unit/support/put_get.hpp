// Test helper: a PUT with an ACK and a GET between two instances, every byte checked,
// for the drivers' tests (socket, o2ib).
#pragma once

#include <sys/uio.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>
#include <lnet/lnet.hpp>

#include "support/event_log.hpp"

namespace lnet::test {

// A PUT with an ACK and a GET of `size` bytes from `from` to `to`, every byte checked;
// `frags` > 1: the target's MD (the sink of the PUT) in that many fragments.
inline void put_get(Instance& from, Instance& to, Nid to_nid, std::size_t size, unsigned portal, unsigned frags = 1) {
  std::vector<char> target(size + 1), src(size + 1), sink(size + 1);
  for (std::size_t i = 0; i < size; ++i) src[i] = static_cast<char>(i * 7 + 3);
  std::vector<iovec> iov;
  for (unsigned i = 0; i < frags; ++i) {
    std::size_t lo = size * i / frags, hi = size * (i + 1) / frags;
    iov.push_back(iovec{target.data() + lo, hi - lo});
  }
  EventLog tlog, ilog;
  auto me = to.me_attach(portal, ProcessId::any(), size, 0, Unlink::Unlink, InsPos::After);
  ASSERT_TRUE(me);
  MdDesc td;
  if (frags > 1) {
    td.iov = iov;
    td.options = kMdIovec;
  } else {
    td.start = target.data();
  }
  td.length = size;
  td.options |= kMdOpPut | kMdOpGet | kMdManageRemote;
  td.handler = tlog.handler();
  auto tmd = to.md_attach(*me, td, Unlink::Retain);
  ASSERT_TRUE(tmd) << tmd.message();
  // The initiator's MD of `buf`: the PUT's source, the GET's sink (two events each).
  auto bind = [&](std::vector<char>& buf) {
    MdDesc d;
    d.start = buf.data();
    d.length = size;
    d.threshold = 2;
    d.handler = ilog.handler();
    return from.md_bind(d, Unlink::Unlink);
  };
  auto smd = bind(src);
  ASSERT_TRUE(smd);
  ASSERT_EQ(from.put(Nid::any(), *smd, AckReq::Ack, ProcessId{to_nid, kPidLustre}, portal, size, 0, 0), 0);
  auto ack = ilog.find(EventType::Ack);
  ASSERT_TRUE(ack) << "no ACK for a " << size << "-byte PUT";
  EXPECT_EQ(ack->mlength, size);
  EXPECT_EQ(std::memcmp(target.data(), src.data(), size), 0) << size;
  auto gmd = bind(sink);
  ASSERT_TRUE(gmd);
  ASSERT_EQ(from.get(Nid::any(), *gmd, ProcessId{to_nid, kPidLustre}, portal, size, 0), 0);
  auto reply = ilog.find(EventType::Reply);
  ASSERT_TRUE(reply) << "no REPLY for a " << size << "-byte GET";
  EXPECT_EQ(reply->status, 0);
  EXPECT_EQ(reply->mlength, size);
  EXPECT_EQ(std::memcmp(sink.data(), src.data(), size), 0) << size;
  // Every MD's last event before the logs go away: the GET's SEND may come after its
  // REPLY (a driver thread finalizes the send once it went), and the target's GET event
  // once its REPLY is sent.
  EXPECT_TRUE(ilog.wait_unlinked(*smd));
  EXPECT_TRUE(ilog.wait_unlinked(*gmd));
  ASSERT_TRUE(tlog.find(EventType::Get));
  EXPECT_EQ(to.md_unlink(*tmd), 0);
  EXPECT_TRUE(tlog.wait_unlinked(*tmd));
}

}  // namespace lnet::test
