// Helpers of the socket LND's tests: instances on per-test 127.x.y.z addresses, and raw
// peers that speak the wire by hand.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <lnet/lnd/header.hpp>
#include <lnet/lnet.hpp>

#include "lnd/socket/sock_wire.hpp"
#include "support/event_log.hpp"

namespace lnet {
namespace {

constexpr int kPort = 12988;
constexpr unsigned kPortal = 21;

inline Nid tcp(const char* ip) { return *Nid::parse(std::string(ip) + "@tcp"); }

inline std::unique_ptr<Instance> make(const char* ip, const std::function<void(SocketParams&)>& tweak = {}) {
  SocketParams p;
  p.port = kPort;
  p.accept = AcceptMode::All;
  p.timeout = 5;
  if (tweak) tweak(p);
  set_socket_params(p);
  Config cfg;
  NetConfig nc;
  nc.net = NetId::make(kSockLnd, 0);
  nc.nid = tcp(ip);
  cfg.nets.push_back(nc);
  cfg.ncpts = 2;
  auto r = Instance::create(cfg, kPidLustre);
  EXPECT_TRUE(r) << r.message();
  return r ? std::move(*r) : nullptr;
}

// ctest runs test cases in parallel processes: each gets its own pair of addresses.
inline std::string test_ip(int host) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::size_t h = std::hash<std::string>{}(std::string(info->test_suite_name()) + "." + info->name());
  return "127." + std::to_string(10 + h % 200) + "." + std::to_string((h >> 8) % 250) + "." + std::to_string(host);
}

// A raw peer at `ip_c` connected to the socket NI at `ip_a`: its socket, and the bytes
// that make it a CONTROL connection (acceptor request and HELLO), to be sent first.
inline int raw_peer(const std::string& ip_a, const std::string& ip_c, std::vector<std::uint8_t>& out) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in me{}, to{};
  me.sin_family = to.sin_family = AF_INET;
  inet_pton(AF_INET, ip_c.c_str(), &me.sin_addr);
  inet_pton(AF_INET, ip_a.c_str(), &to.sin_addr);
  to.sin_port = htons(kPort);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me), 0) << std::strerror(errno);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0) << std::strerror(errno);
  out.resize(sock::kConnReqSize);
  sock::encode_connreq(tcp(ip_a.c_str()), std::span<std::uint8_t, sock::kConnReqSize>(out.data(), out.size()));
  sock::Hello h;
  h.src_nid = tcp(ip_c.c_str());
  h.dst_nid = tcp(ip_a.c_str());
  h.src_pid = h.dst_pid = kPidLustre;
  h.src_incarnation = 1;
  h.ctype = sock::ConnType::Control;
  auto hello = sock::encode_hello(h);
  out.insert(out.end(), hello.begin(), hello.end());
  return fd;
}

// Appends a framed PUT (ksock header, LNet header) from `from` to `to` announcing
// `payload` bytes; the payload is the caller's.
inline void add_put(std::vector<std::uint8_t>& out, Nid from, Nid to, std::uint32_t payload) {
  std::uint8_t frame[sock::kMsgHdrSize + kHeaderSize] = {};
  sock::encode_msg_hdr(sock::MsgHdr{}, std::span<std::uint8_t, sock::kMsgHdrSize>(frame, sock::kMsgHdrSize));
  Header put;
  put.type = MsgType::Put;
  put.src_nid = from;
  put.dest_nid = to;
  put.src_pid = put.dest_pid = kPidLustre;
  put.payload_length = payload;
  put.msg.put.ack_wmd = WireHandle::none();
  put.msg.put.ptl_index = kPortal;
  encode_header(put, std::span<std::uint8_t, kHeaderSize>(frame + sock::kMsgHdrSize, kHeaderSize));
  out.insert(out.end(), frame, frame + sizeof frame);
}

// An ME on kPortal (retained) whose MD takes every PUT into `buf`, its events in `log`.
inline void sink_all(Instance& a, test::EventLog& log, std::vector<char>& buf) {
  auto me = a.me_attach(kPortal, ProcessId::any(), 0, 0, Unlink::Retain, InsPos::After);
  ASSERT_TRUE(me);
  MdDesc d;
  d.start = buf.data();
  d.length = buf.size();
  d.options = kMdOpPut | kMdTruncate;
  d.handler = log.handler();
  ASSERT_TRUE(a.md_attach(*me, d, Unlink::Retain));
}

}  // namespace
}  // namespace lnet
