// Memory descriptors and match entries: the handles, the MD options and the description
// an application fills in to expose a buffer (contiguous or an iovec array) to LNet.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include <lnet/nid.hpp>

namespace lnet {

class EventQueue;
struct Event;

// MD option bits (the real LNet values).
inline constexpr unsigned kMdOpPut = 0x1;
inline constexpr unsigned kMdOpGet = 0x2;
inline constexpr unsigned kMdManageRemote = 0x4;
inline constexpr unsigned kMdTruncate = 0x10;
inline constexpr unsigned kMdAckDisable = 0x20;
inline constexpr unsigned kMdIovec = 0x40;
inline constexpr unsigned kMdMaxSize = 0x80;
inline constexpr unsigned kMdKiov = 0x100;  // page fragments: kernel only, refused here
inline constexpr int kMdThreshInf = -1;

enum class Unlink { Retain = 0, Unlink = 1 };
enum class InsPos { Before = 0, After = 1, Local = 2 };
enum class AckReq { Ack = 0, NoAck = 1 };

inline constexpr std::uint64_t kInvalidCookie = ~0ULL;

struct MdHandle {
  std::uint64_t cookie = kInvalidCookie;
  bool is_valid() const { return cookie != kInvalidCookie; }
  friend bool operator==(MdHandle, MdHandle) = default;
};

struct MeHandle {
  std::uint64_t cookie = kInvalidCookie;
  bool is_valid() const { return cookie != kInvalidCookie; }
  friend bool operator==(MeHandle, MeHandle) = default;
};

using EventHandler = std::function<void(const Event&)>;

// What an application describes; LNet copies it when the MD is attached or bound.
struct MdDesc {
  // Contiguous buffer (start, length), or with kMdIovec the fragments in `iov`.
  void* start = nullptr;
  std::size_t length = 0;
  std::span<const iovec> iov;
  // Operations left before the MD is exhausted; kMdThreshInf never exhausts.
  int threshold = kMdThreshInf;
  // With kMdMaxSize: the MD is exhausted once fewer than max_size bytes remain.
  int max_size = 0;
  unsigned options = 0;
  void* user_ptr = nullptr;
  // Events go to the handler (run without LNet locks held; events of one MD are
  // delivered one at a time and in order) and/or to an event queue.
  EventHandler handler;
  std::shared_ptr<EventQueue> eq;
};

}  // namespace lnet
